#include "sched/pack/policies.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "sched/pack/lookahead.h"
#include "sched/pack/tessera_score.h"
#include "sched/plugins/gpu_set.h"

namespace tessera::sched::pack {

PackContext::PackContext(std::vector<TypicalPod> typical, std::mt19937_64* rng) : rng_(rng) {
  SetTypical(std::move(typical));
}

void PackContext::Observe(absl::string_view key, const std::vector<PodShape>& members) {
  if (!seen_jobs_.emplace(key).second) return;
  // Bounded: the set only avoids counting retries of jobs that wait; forgetting it now and then
  // at worst counts a long-waiting job twice.
  if (seen_jobs_.size() > 8 * kLearnWindow) seen_jobs_.clear();
  for (const PodShape& m : members) {
    window_.push_back(m);
    if (window_.size() > kLearnWindow) window_.pop_front();
    ++observed_;
  }
  // Relearn after 1, 2, 4, ... 64 members, then every 64: a fresh server
  // follows its first jobs quickly, a busy one pays O(window) rarely.
  if (observed_ >= next_relearn_ && !window_.empty()) {
    next_relearn_ = observed_ + std::min<int64_t>(kRelearnEvery, observed_);
    SetTypical(TypicalPods(std::vector<PodShape>(window_.begin(), window_.end())));
  }
}

void PackContext::SetTypical(std::vector<TypicalPod> typical) {
  typical_ = std::move(typical);
  memo_.clear();
  double cpu = 0, gpu = 0;
  for (const TypicalPod& t : typical_) {
    if (t.shape.gpus == 0) continue;
    cpu += t.p * static_cast<double>(t.shape.cpu_milli);
    gpu += t.p * static_cast<double>(t.shape.total_gpu_milli());
  }
  cpu_per_gpu_milli_ = gpu > 0 ? cpu / gpu : 0;
  double whole_cpu = 0, whole_gpus = 0;
  for (const TypicalPod& t : typical_) {
    if (t.shape.gpus == 0 || t.shape.gpu_milli < model::kMilliPerGpu) continue;
    whole_cpu += t.p * static_cast<double>(t.shape.cpu_milli);
    whole_gpus += t.p * t.shape.gpus;
  }
  whole_cpu_per_gpu_ = whole_gpus > 0 ? whole_cpu / whole_gpus : 0;
}

double PackContext::ShareFitting(int32_t milli) const {
  double one = 0, fit = 0;
  for (const TypicalPod& t : typical_) {
    if (t.shape.gpus != 1) continue;
    one += t.p;
    if (t.shape.gpu_milli <= milli) fit += t.p;
  }
  return one > 0 ? fit / one : 0;
}

double PackContext::Frag(const NodeFree& n) {
  std::array<int16_t, model::kMaxGpusPerNode> sorted = n.free;
  std::sort(sorted.begin(), sorted.begin() + n.num_gpus, std::greater<>());
  Key k{};
  k.w[0] = static_cast<uint64_t>(n.cpu_free);
  k.w[1] = static_cast<uint64_t>(static_cast<uint16_t>(n.model)) |
           (static_cast<uint64_t>(n.num_gpus) << 16);
  for (int g = 0; g < n.num_gpus; ++g) {
    k.w[2 + g / 6] |= static_cast<uint64_t>(sorted[g] & 0x3ff) << (10 * (g % 6));
  }
  auto it = memo_.find(k);
  if (it != memo_.end()) return it->second;
  double f = NodeFragmentation(n, typical_);
  memo_.emplace(k, f);
  return f;
}

PodShape ShapeOf(const JobContext& ctx, const model::MemberGroup& g) {
  PodShape s;
  s.cpu_milli = g.resources.cpu_milli;
  s.gpus = g.resources.gpus;
  s.gpu_milli = s.gpus > 0 ? g.resources.gpu_milli : 0;
  if (!ctx.any_model) {
    for (ModelId m : ctx.allowed_models) {
      if (m >= 0 && m < 64) s.model_mask |= uint64_t{1} << m;
    }
  }
  return s;
}

NodeFree Take(const NodeFree& n, const PodShape& s, int gpu,
              absl::InlinedVector<int8_t, 8>* chosen) {
  NodeFree out = n;
  out.cpu_free -= s.cpu_milli;
  if (s.gpus == 0) return out;
  if (gpu >= 0) {
    out.free[gpu] = static_cast<int16_t>(out.free[gpu] - s.gpu_milli);
    if (chosen) chosen->push_back(static_cast<int8_t>(gpu));
    return out;
  }
  int need = s.gpus;
  for (int g = 0; g < n.num_gpus && need > 0; ++g) {
    if (out.free[g] == model::kMilliPerGpu) {
      out.free[g] = static_cast<int16_t>(out.free[g] - s.gpu_milli);
      if (chosen) chosen->push_back(static_cast<int8_t>(g));
      --need;
    }
  }
  return out;
}

namespace {

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

bool Shared(const PodShape& s) { return s.gpus == 1 && s.gpu_milli < model::kMilliPerGpu; }

}  // namespace

int64_t FgdScore(PackContext& ctx, const NodeFree& n, const PodShape& s, int gpu) {
  double before = ctx.Frag(n);
  double after = ctx.Frag(Take(n, s, gpu));
  return static_cast<int64_t>(Sigmoid((before - after) / 1000.0) * kMaxNodeScore);
}

namespace {

// Best fit among GPUs with enough free share: least free, lowest index.
int BestFitGpu(const NodeFree& n, int milli) {
  int best = -1;
  for (int g = 0; g < n.num_gpus; ++g) {
    if (n.free[g] >= milli && (best < 0 || n.free[g] < n.free[best])) best = g;
  }
  return best;
}

// FGD's GPU for a shared pod: the highest FgdScore, lowest index on ties.
int FgdGpu(PackContext& ctx, const NodeFree& n, const PodShape& s, int64_t* score) {
  int best = -1;
  int64_t best_score = -1;
  for (int g = 0; g < n.num_gpus; ++g) {
    if (n.free[g] < s.gpu_milli) continue;
    // GPUs with equal free share give equal scores: evaluate the first only.
    bool seen = false;
    for (int h = 0; h < g && !seen; ++h) seen = n.free[h] == n.free[g];
    if (seen) continue;
    int64_t sc = FgdScore(ctx, n, s, g);
    if (sc > best_score) {
      best_score = sc;
      best = g;
    }
  }
  if (score) *score = best_score;
  return best;
}

class PackScore : public Plugin, public ScorePlugin {
 public:
  PackScore(std::string name, std::shared_ptr<PackContext> ctx)
      : name_(std::move(name)), ctx_(std::move(ctx)) {}
  absl::string_view Name() const override { return name_; }

 protected:
  std::string name_;
  std::shared_ptr<PackContext> ctx_;
};

class RandomScore : public PackScore {
 public:
  using PackScore::PackScore;
  int64_t Score(CycleState&, const JobContext&, const model::MemberGroup&,
                const NodeView&) override {
    return 0;  // the runner's seeded random tie-break picks uniformly
  }
};

class DotProdScore : public PackScore {
 public:
  using PackScore::PackScore;
  int64_t Score(CycleState&, const JobContext& ctx, const model::MemberGroup& g,
                const NodeView& v) override {
    PodShape s = ShapeOf(ctx, g);
    NodeFree n = FromState(v.state);
    if (n.cpu_free < s.cpu_milli) return 0;
    double dot = (static_cast<double>(n.cpu_free) / kMaxSpecCpu) *
                     (static_cast<double>(s.cpu_milli) / kMaxSpecCpu) +
                 (static_cast<double>(n.total_free()) / kMaxSpecGpu) *
                     (static_cast<double>(s.total_gpu_milli()) / kMaxSpecGpu);
    return static_cast<int64_t>(kMaxNodeScore * (1.0 - dot / 2.0));
  }
};

class GpuClusteringScore : public PackScore {
 public:
  using PackScore::PackScore;
  int64_t Score(CycleState&, const JobContext&, const model::MemberGroup& g,
                const NodeView& v) override {
    absl::InlinedVector<GpuGrant, 8> shape_grants;
    const model::ResourceRequest& r = g.resources;
    if (r.gpus == 0) return 0;
    for (int i = 0; i < r.gpus; ++i) {
      shape_grants.push_back(GpuGrant{static_cast<int8_t>(i), static_cast<int16_t>(r.gpu_milli)});
    }
    const int tag = GpuShapeOf(shape_grants);
    const uint8_t mask = v.state.shape_mask();
    const int64_t left = FromState(v.state).total_free();
    const int64_t base = kMaxNodeScore / 4 * (8000 - left) / 8000;
    if ((mask >> tag) & 1u) {
      return base + (mask == (1u << tag) ? kMaxNodeScore * 3 / 4 : kMaxNodeScore * 2 / 4);
    }
    return base + (mask == 0 ? kMaxNodeScore / 4 : 0);
  }
};

class GpuPackingScore : public PackScore {
 public:
  using PackScore::PackScore;
  int64_t Score(CycleState&, const JobContext& ctx, const model::MemberGroup& g,
                const NodeView& v) override {
    PodShape s = ShapeOf(ctx, g);
    if (s.gpus == 0) return 0;
    NodeFree n = FromState(v.state);
    int fully_free = 0;
    for (int i = 0; i < n.num_gpus; ++i) fully_free += n.free[i] == model::kMilliPerGpu;
    if (fully_free == n.num_gpus) {
      return std::max<int64_t>(kMaxNodeScore / 3 - fully_free, fully_free);
    }
    // GPUs by free share ascending (stable), taken while they fit.
    std::array<int, model::kMaxGpusPerNode> order{};
    for (int i = 0; i < n.num_gpus; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.begin() + n.num_gpus,
                     [&](int a, int b) { return n.free[a] < n.free[b]; });
    int need = s.gpus;
    int fully_used = 0;
    int64_t free_ratio = 0;
    for (int k = 0; k < n.num_gpus && need > 0; ++k) {
      int i = order[k];
      if (s.gpu_milli <= n.free[i]) {
        --need;
        fully_used += n.free[i] == model::kMilliPerGpu;
        free_ratio += n.free[i] * 100 / model::kMilliPerGpu;
      }
    }
    if (need != 0) return 0;
    if (fully_used > 0) return std::max<int64_t>(kMaxNodeScore / 2 - fully_used, kMaxNodeScore / 3);
    return std::max<int64_t>(kMaxNodeScore - free_ratio / 10, kMaxNodeScore / 2);
  }
};

class BestFitScore : public PackScore {
 public:
  using PackScore::PackScore;
  int64_t Score(CycleState&, const JobContext& ctx, const model::MemberGroup& g,
                const NodeView& v) override {
    PodShape s = ShapeOf(ctx, g);
    NodeFree n = FromState(v.state);
    double sc = (static_cast<double>(n.cpu_free - s.cpu_milli) / kMaxSpecCpu) * 0.5 +
                (static_cast<double>(n.total_free() - s.total_gpu_milli()) / kMaxSpecGpu) * 0.5;
    return std::clamp<int64_t>(static_cast<int64_t>((1.0 - sc) * kMaxNodeScore), 0, kMaxNodeScore);
  }
  void Normalize(const JobContext&, absl::Span<int64_t> scores) override {
    if (scores.empty()) return;
    auto [lo, hi] = std::minmax_element(scores.begin(), scores.end());
    int64_t low = *lo, range = *hi - *lo;
    for (int64_t& s : scores) s = range == 0 ? 0 : (s - low) * kMaxNodeScore / range;
  }
};

class FgdScorePlugin : public PackScore {
 public:
  using PackScore::PackScore;
  int64_t Score(CycleState&, const JobContext& ctx, const model::MemberGroup& g,
                const NodeView& v) override {
    PodShape s = ShapeOf(ctx, g);
    NodeFree n = FromState(v.state);
    if (Shared(s)) {
      int64_t sc = 0;
      FgdGpu(*ctx_, n, s, &sc);
      return std::max<int64_t>(sc, 0);
    }
    return FgdScore(*ctx_, n, s, -1);
  }
};

// GPU choosers. Whole-GPU members take free GPUs in index order.
class PackChooser : public Plugin, public GpuChooserPlugin {
 public:
  enum class Mode { kBestFit, kRandom, kFgd, kTessera };
  PackChooser(std::string name, Mode mode, std::shared_ptr<PackContext> ctx)
      : name_(std::move(name)), mode_(mode), ctx_(std::move(ctx)) {}
  absl::string_view Name() const override { return name_; }

  bool ChooseGpus(const JobContext& ctx, const model::MemberGroup& g, const NodeView& v,
                  absl::InlinedVector<GpuGrant, 8>* out) override {
    PodShape s = ShapeOf(ctx, g);
    NodeFree n = FromState(v.state);
    if (Shared(s)) {
      int gpu = -1;
      switch (mode_) {
        case Mode::kBestFit:
          gpu = BestFitGpu(n, s.gpu_milli);
          break;
        case Mode::kRandom: {
          // Uniform among the GPUs that fit (reservoir sampling).
          int seen = 0;
          for (int i = 0; i < n.num_gpus; ++i) {
            if (n.free[i] < s.gpu_milli) continue;
            ++seen;
            if (gpu < 0 || (ctx_->rng() != nullptr &&
                            std::uniform_int_distribution<int>(0, seen - 1)(*ctx_->rng()) == 0)) {
              gpu = i;
            }
          }
          break;
        }
        case Mode::kFgd:
          gpu = FgdGpu(*ctx_, n, s, nullptr);
          break;
        case Mode::kTessera:
          gpu = TesseraGpu(*ctx_, n, s);
          break;
      }
      if (gpu < 0) return false;
      out->push_back(GpuGrant{static_cast<int8_t>(gpu), static_cast<int16_t>(s.gpu_milli)});
      return true;
    }
    if (s.gpus == 0) return true;  // CPU only
    // Whole GPUs: which free GPUs a member takes leaves the same multiset of
    // free shares, so no policy here can tell the choices apart; take the
    // best-connected set (gpu_set.h), as the default chooser does, so a
    // packing profile keeps a multi-GPU member inside one NVLink island.
    GpuSetChoice c;
    if (!ChooseWholeGpus(v.node.topology, v.state, s.gpus, &c)) return false;
    for (int8_t i : c.gpus) out->push_back(GpuGrant{i, static_cast<int16_t>(s.gpu_milli)});
    return true;
  }

 private:
  std::string name_;
  Mode mode_;
  std::shared_ptr<PackContext> ctx_;
};

struct PolicySpec {
  const char* name;
  const char* score;
  const char* chooser;
  const char* permit = nullptr;
};
constexpr PolicySpec kPolicies[] = {
    {"random", "pack-random", "pack-gpu-random"},
    {"dotprod", "pack-dotprod", "pack-gpu-best"},
    {"gpu-clustering", "pack-gpu-clustering", "pack-gpu-best"},
    {"gpu-packing", "pack-gpu-packing", "pack-gpu-best"},
    {"best-fit", "pack-best-fit", "pack-gpu-best"},
    {"fgd", "pack-fgd", "pack-gpu-fgd"},
    {"tessera", "pack-tessera", "pack-gpu-tessera", kLookaheadPlugin},
};

// pack-observe: every job's members' shapes, the first time the job is tried, teach the context
// the workload's typical pods (PackContext::Observe). Never rejects anything.
class ObservePlugin : public Plugin, public PreFilterPlugin {
 public:
  ObservePlugin(std::string name, std::shared_ptr<PackContext> ctx)
      : name_(std::move(name)), ctx_(std::move(ctx)) {}
  absl::string_view Name() const override { return name_; }
  PluginStatus PreFilter(CycleState&, const JobContext& ctx, PreFilterResult*) override {
    shapes_.clear();
    for (const model::MemberGroup& g : ctx.job->groups) {
      const PodShape s = ShapeOf(ctx, g);
      for (int32_t i = 0; i < g.count; ++i) shapes_.push_back(s);
    }
    ctx_->Observe(ctx.job->key(), shapes_);
    return PluginStatus::Success();
  }

 private:
  std::string name_;
  std::shared_ptr<PackContext> ctx_;
  std::vector<PodShape> shapes_;
};

// Builds a pack plugin of type T (score or permit) sharing `ctx`.
template <typename T>
PluginFactory PackFactory(std::string name, std::shared_ptr<PackContext> ctx) {
  return [name = std::move(name),
          ctx = std::move(ctx)](const PluginArgs&) -> absl::StatusOr<std::unique_ptr<Plugin>> {
    return std::unique_ptr<Plugin>(new T(name, ctx));
  };
}

PluginFactory ChooserFactory(std::string name, PackChooser::Mode mode,
                             std::shared_ptr<PackContext> ctx) {
  return [name = std::move(name), mode,
          ctx = std::move(ctx)](const PluginArgs&) -> absl::StatusOr<std::unique_ptr<Plugin>> {
    return std::unique_ptr<Plugin>(new PackChooser(name, mode, ctx));
  };
}

}  // namespace

absl::Status RegisterPackPlugins(PluginRegistry* r, const std::shared_ptr<PackContext>& ctx) {
  auto reg = [&](const char* name, PluginFactory f) -> absl::Status {
    return r->Register(name, std::move(f));
  };
  absl::Status s;
  s.Update(reg("pack-random", PackFactory<RandomScore>("pack-random", ctx)));
  s.Update(reg("pack-dotprod", PackFactory<DotProdScore>("pack-dotprod", ctx)));
  s.Update(reg("pack-gpu-clustering", PackFactory<GpuClusteringScore>("pack-gpu-clustering", ctx)));
  s.Update(reg("pack-gpu-packing", PackFactory<GpuPackingScore>("pack-gpu-packing", ctx)));
  s.Update(reg("pack-best-fit", PackFactory<BestFitScore>("pack-best-fit", ctx)));
  s.Update(reg("pack-fgd", PackFactory<FgdScorePlugin>("pack-fgd", ctx)));
  s.Update(reg("pack-tessera", PackFactory<TesseraScore>("pack-tessera", ctx)));
  s.Update(reg(kLookaheadPlugin, PackFactory<LookaheadPermit>(kLookaheadPlugin, ctx)));
  s.Update(reg(kObservePlugin, PackFactory<ObservePlugin>(kObservePlugin, ctx)));
  s.Update(reg("pack-gpu-best", ChooserFactory("pack-gpu-best", PackChooser::Mode::kBestFit, ctx)));
  s.Update(
      reg("pack-gpu-random", ChooserFactory("pack-gpu-random", PackChooser::Mode::kRandom, ctx)));
  s.Update(reg("pack-gpu-fgd", ChooserFactory("pack-gpu-fgd", PackChooser::Mode::kFgd, ctx)));
  s.Update(reg("pack-gpu-tessera",
               ChooserFactory("pack-gpu-tessera", PackChooser::Mode::kTessera, ctx)));
  return s;
}

const std::vector<std::string>& PackPolicyNames() {
  static const std::vector<std::string>* const kNames = [] {
    auto* v = new std::vector<std::string>();
    for (const PolicySpec& p : kPolicies) v->push_back(p.name);
    return v;
  }();
  return *kNames;
}

absl::StatusOr<std::string> CanonicalPolicy(absl::string_view name) {
  std::string want = absl::StrReplaceAll(absl::AsciiStrToLower(name), {{"-", ""}, {"_", ""}});
  for (const PolicySpec& p : kPolicies) {
    if (absl::StrReplaceAll(p.name, {{"-", ""}}) == want) return std::string(p.name);
  }
  return absl::InvalidArgumentError(absl::StrCat("--policy: unknown policy \"", name,
                                                 "\"; choose from ",
                                                 absl::StrJoin(PackPolicyNames(), ", ")));
}

absl::StatusOr<Profile> PackProfile(absl::string_view policy) {
  for (const PolicySpec& p : kPolicies) {
    if (policy != p.name) continue;
    Profile prof;
    prof.name = p.name;
    prof.gpu_chooser = p.chooser;
    prof.plugins = {{.name = "resource-fit"}, {.name = p.score}};
    if (p.permit != nullptr) prof.plugins.push_back({.name = p.permit});
    prof.nodes_to_score = 0;
    prof.dedupe_equivalent_nodes = true;
    // The FGD simulator breaks ties by a node order it shuffles per seed
    // (callers shuffle node insertion to match); random draws its node.
    prof.tie_break = std::string(p.name) == "random" ? Profile::TieBreak::kRandom
                                                     : Profile::TieBreak::kLowestNodeId;
    return prof;
  }
  return CanonicalPolicy(policy).status().ok()
             ? absl::InvalidArgumentError(absl::StrCat("policy \"", policy, "\" is not canonical"))
             : CanonicalPolicy(policy).status();
}

}  // namespace tessera::sched::pack
