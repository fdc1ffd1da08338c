#include "sim/replay/policy.h"

#include <limits>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tessera::sim::replay {
namespace {

class FactsSort : public sched::Plugin, public sched::QueueSortPlugin {
 public:
  explicit FactsSort(const JobFactsSource* facts) : facts_(facts) {}

 protected:
  const JobFactsSource* facts_;
};

class FifoSort final : public FactsSort {
 public:
  static constexpr absl::string_view kName = "sim-fifo";
  using FactsSort::FactsSort;
  absl::string_view Name() const override { return kName; }
  bool Less(const model::Job& a, const model::Job& b) const override {
    const JobFacts& fa = facts_->Facts(a);
    const JobFacts& fb = facts_->Facts(b);
    if (fa.submit_s != fb.submit_s) return fa.submit_s < fb.submit_s;
    return fa.index < fb.index;
  }
};

class SjfSort final : public FactsSort {
 public:
  static constexpr absl::string_view kName = "sim-sjf";
  using FactsSort::FactsSort;
  absl::string_view Name() const override { return kName; }
  bool Less(const model::Job& a, const model::Job& b) const override {
    const JobFacts& fa = facts_->Facts(a);
    const JobFacts& fb = facts_->Facts(b);
    if (fa.duration_s != fb.duration_s) return fa.duration_s < fb.duration_s;
    if (fa.submit_s != fb.submit_s) return fa.submit_s < fb.submit_s;
    return fa.index < fb.index;
  }
};

class LasSort final : public FactsSort {
 public:
  static constexpr absl::string_view kName = "sim-las";
  using FactsSort::FactsSort;
  absl::string_view Name() const override { return kName; }
  bool Less(const model::Job& a, const model::Job& b) const override {
    const JobFacts& fa = facts_->Facts(a);
    const JobFacts& fb = facts_->Facts(b);
    if (fa.band != fb.band) return fa.band < fb.band;
    if (fa.submit_s != fb.submit_s) return fa.submit_s < fb.submit_s;
    return fa.index < fb.index;
  }
};

template <typename T>
sched::PluginFactory FactsFactory(const JobFactsSource* facts) {
  return [facts](const sched::PluginArgs& args) -> absl::StatusOr<std::unique_ptr<sched::Plugin>> {
    if (!args.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("plugin ", T::kName, " takes no arguments"));
    }
    return std::unique_ptr<sched::Plugin>(new T(facts));
  };
}

PolicySpec WithSort(std::string name, std::string sort, bool backfill, std::string description) {
  PolicySpec p;
  p.name = std::move(name);
  p.description = std::move(description);
  p.profile = sched::Profile::Default();
  p.profile.name = p.name;
  p.profile.queue_sort = std::move(sort);
  p.backfill = backfill;
  return p;
}

}  // namespace

int64_t SimJobIndex(absl::string_view name) {
  if (name.size() < 2 || name[0] != 'j') return -1;
  int64_t v = 0;
  for (size_t i = 1; i < name.size(); ++i) {
    char c = name[i];
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

std::string SimJobName(int64_t index) { return absl::StrCat("j", index); }

int32_t LasConfig::Band(double attained_gpu_s) const {
  int32_t b = 0;
  while (b < static_cast<int32_t>(thresholds_gpu_s.size()) &&
         attained_gpu_s >= thresholds_gpu_s[b]) {
    ++b;
  }
  return b;
}

double LasConfig::BandEnd(int32_t band) const {
  if (band < static_cast<int32_t>(thresholds_gpu_s.size())) return thresholds_gpu_s[band];
  return std::numeric_limits<double>::infinity();
}

absl::Status RegisterSimQueueSorts(const JobFactsSource* facts, sched::PluginRegistry* registry) {
  if (auto s = registry->Register(FifoSort::kName, FactsFactory<FifoSort>(facts)); !s.ok())
    return s;
  if (auto s = registry->Register(SjfSort::kName, FactsFactory<SjfSort>(facts)); !s.ok()) return s;
  return registry->Register(LasSort::kName, FactsFactory<LasSort>(facts));
}

PolicyRegistry PolicyRegistry::Builtin() {
  PolicyRegistry r;
  (void)r.Register(WithSort("fifo", "sim-fifo", /*backfill=*/false,
                            "first come first served, strict (a blocked head waits)"));
  PolicySpec sjf = WithSort("sjf", "sim-sjf", /*backfill=*/true,
                            "shortest job first with oracle durations, backfill (6 h guard)");
  sjf.reserve_after_s = 6 * 3600.0;
  (void)r.Register(std::move(sjf));
  PolicySpec las = WithSort("las", "sim-las", /*backfill=*/true,
                            "Tiresias-like discretized 2D-LAS with preemption of worse bands");
  las.preempt_lower_bands = true;
  las.uses_las_bands = true;
  (void)r.Register(std::move(las));
  PolicySpec def = WithSort("default", "priority", /*backfill=*/true,
                            "the server's default profile (priority queue sort), greedy backfill");
  (void)r.Register(std::move(def));
  PolicySpec queues =
      WithSort("queues", "priority", /*backfill=*/true,
               "the server's QueueManager: quotas, fair share, priority-class preemption, "
               "EASY backfill");
  queues.queue_manager = true;
  (void)r.Register(std::move(queues));
  return r;
}

absl::Status PolicyRegistry::Register(PolicySpec spec) {
  if (spec.name.empty()) return absl::InvalidArgumentError("policy.name: must not be empty");
  std::string name = spec.name;
  if (!specs_.emplace(name, std::move(spec)).second) {
    return absl::AlreadyExistsError(absl::StrCat("policy \"", name, "\" is already registered"));
  }
  return absl::OkStatus();
}

absl::StatusOr<PolicySpec> PolicyRegistry::Lookup(absl::string_view name) const {
  auto it = specs_.find(name);
  if (it == specs_.end()) {
    return absl::NotFoundError(absl::StrCat("--policies: unknown policy \"", name,
                                            "\"; known: ", absl::StrJoin(Names(), ", ")));
  }
  return it->second;
}

std::vector<std::string> PolicyRegistry::Names() const {
  std::vector<std::string> out;
  for (const auto& [n, s] : specs_) out.push_back(n);
  return out;
}

}  // namespace tessera::sim::replay
