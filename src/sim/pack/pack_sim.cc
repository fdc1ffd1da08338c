#include "sim/pack/pack_sim.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <set>
#include <thread>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "sched/framework/cluster_state.h"
#include "sched/framework/scheduler.h"
#include "sched/pack/frag.h"
#include "sched/pack/lookahead.h"
#include "sched/pack/plugin_set.h"
#include "sched/pack/policies.h"

namespace tessera::sim::pack {

namespace sp = ::tessera::sched::pack;

void ClassifyIdle(const sched::NodeState& st, const std::vector<IdleShape>& shapes, IdleGpus* out) {
  for (int g = 0; g < st.num_gpus; ++g) {
    const int free = st.healthy(g) ? st.free_milli[g] : 0;
    if (free <= 0) continue;
    // 0 fraction, 1 cpu, 2 memory, 3 model, 4 fits (partial or whole): the best any shape reaches.
    int level = 0;
    for (const IdleShape& is : shapes) {
      const sched::pack::PodShape& s = is.shape;
      if (s.gpus == 0 || s.gpu_milli > free) continue;
      int enough = 0;
      for (int h = 0; h < st.num_gpus; ++h) {
        enough += st.healthy(h) && st.free_milli[h] >= s.gpu_milli;
      }
      if (enough < s.gpus) continue;
      const bool cpu = st.cpu_free >= s.cpu_milli;
      const bool mem = is.memory_mib == 0 || st.memory_free >= is.memory_mib;
      const bool model = s.AllowsModel(st.model);
      level = std::max(level, !cpu ? 1 : !mem ? 2 : !model ? 3 : 4);
      if (level == 4) break;
    }
    const double gpus = static_cast<double>(free) / model::kMilliPerGpu;
    double* open = free == model::kMilliPerGpu ? &out->whole : &out->partial;
    double* bucket[] = {&out->fraction, &out->cpu, &out->memory, &out->model, open};
    *bucket[level] += gpus;
  }
}

absl::StatusOr<PackRunResult> RunPack(const std::vector<model::Node>& nodes, const PackTrace& trace,
                                      const std::string& policy, uint64_t seed,
                                      const PackConfig& cfg) {
  const double inflate = cfg.inflate;
  auto t0 = std::chrono::steady_clock::now();
  PackRunResult res;
  res.trace = trace.name;
  res.policy = policy;
  res.seed = seed;

  // The FGD simulator prefixes node names with a seeded permutation, so its
  // tie-break order differs per seed: add the nodes in a seeded order.
  sched::ClusterState cs;
  std::vector<size_t> node_order(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) node_order[i] = i;
  std::mt19937_64 node_rng(seed * 0x2545f4914f6cdd1dULL + 1);
  std::shuffle(node_order.begin(), node_order.end(), node_rng);
  for (size_t ni : node_order) {
    const model::Node& n = nodes[ni];
    auto id = cs.AddNode(n);
    if (!id.ok()) return id.status();
  }
  const int64_t cap = cs.total_gpus() * model::kMilliPerGpu;
  if (cap <= 0) return absl::InvalidArgumentError("--nodes: the cluster has no GPUs");
  if (trace.pods.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--pods: ", trace.name, " has no pods"));
  }

  // Inflation: uniform copies while the GPU request stays within the target
  // (the FGD simulator's tuneUpPods, which compares the per-GPU share).
  std::mt19937_64 rng(seed);
  std::vector<int32_t> order(trace.pods.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  int64_t total = 0;
  for (const trace::OpenbPod& p : trace.pods) total += int64_t{p.num_gpu} * p.gpu_milli;
  const double target = inflate * static_cast<double>(cap);
  std::uniform_int_distribution<size_t> pick(0, trace.pods.size() - 1);
  while (static_cast<double>(total) < target) {
    size_t i = pick(rng);
    const trace::OpenbPod& p = trace.pods[i];
    if (static_cast<double>(total + p.gpu_milli) > target) break;
    total += int64_t{p.num_gpu} * p.gpu_milli;
    order.push_back(static_cast<int32_t>(i));
  }
  std::shuffle(order.begin(), order.end(), rng);

  // FGD's typical pods come from the trace file as given.
  auto shape_of = [&](const trace::OpenbPod& p) {
    sp::PodShape s;
    s.cpu_milli = p.cpu_milli;
    s.gpus = p.num_gpu;
    s.gpu_milli = p.num_gpu > 0 ? p.gpu_milli : 0;
    for (const std::string& m : trace::SplitGpuSpec(p.gpu_spec)) {
      sched::ModelId id = cs.FindModel(m);
      if (id >= 0 && id < 64) s.model_mask |= uint64_t{1} << id;
    }
    if (!p.gpu_spec.empty() && s.model_mask == 0) s.model_mask = ~uint64_t{0} << 63;
    return s;
  };
  std::vector<sp::PodShape> shapes;
  shapes.reserve(trace.pods.size());
  for (const trace::OpenbPod& p : trace.pods) shapes.push_back(shape_of(p));

  const sched::Profile* custom = nullptr;
  for (const sched::Profile& p : cfg.profiles) {
    if (p.name == policy) custom = &p;
  }
  const bool learn = custom != nullptr && sp::ProfileUses(*custom, sp::kObservePlugin);
  sp::PluginSet plugins(seed ^ 0x9e3779b97f4a7c15ULL,
                        learn ? std::vector<sp::TypicalPod>{} : sp::TypicalPods(shapes));
  sp::PackContext* ctx = &plugins.context();
  absl::StatusOr<sched::Profile> profile =
      custom != nullptr ? absl::StatusOr<sched::Profile>(*custom) : sp::PackProfile(policy);
  if (!profile.ok()) return profile.status();
  auto scheduler = sched::Scheduler::Create(*profile, plugins.Registry(), &cs);
  if (!scheduler.ok()) return scheduler.status();
  (*scheduler)->SetRandom(&plugins.rng());

  int64_t arrived = 0;
  int next_k = 0;
  auto record = [&]() {
    double alloc = static_cast<double>(cs.allocated_milli()) * 100.0 / static_cast<double>(cap);
    while (next_k <= kMaxArrivalPct &&
           static_cast<double>(arrived) * 100.0 >= static_cast<double>(next_k) * cap) {
      res.alloc_pct[next_k++] = alloc;
    }
  };
  record();
  // One job per trace pod, renamed per arrival (copies need unique keys);
  // reusing them keeps allocation off the per-pod path.
  std::vector<model::Job> jobs;
  jobs.reserve(trace.pods.size());
  for (const trace::OpenbPod& p : trace.pods) {
    jobs.push_back(trace::ToJob(p, p.name));
    if (!cfg.enforce_memory) jobs.back().groups[0].resources.memory_mib = 0;
  }
  // The look-ahead's forecast after arrival k sums the pods k+1.. whose GPU
  // request, added up, stays within the window (prefix sums over the order).
  const bool lookahead = cfg.lookahead > 0;
  std::vector<int64_t> gpu_sum, whole_sum, cpu_sum;
  if (lookahead) {
    gpu_sum.assign(order.size() + 1, 0);
    whole_sum.assign(order.size() + 1, 0);
    cpu_sum.assign(order.size() + 1, 0);
    for (size_t k = 0; k < order.size(); ++k) {
      const trace::OpenbPod& p = trace.pods[order[k]];
      const int64_t gpu = int64_t{p.num_gpu} * p.gpu_milli;
      gpu_sum[k + 1] = gpu_sum[k] + gpu;
      whole_sum[k + 1] = whole_sum[k] + (p.gpu_milli >= model::kMilliPerGpu ? gpu : 0);
      cpu_sum[k + 1] = cpu_sum[k] + p.cpu_milli;
    }
  }
  auto forecast_after = [&](size_t k) {
    sp::ArrivalForecast f;
    size_t end = order.size();
    if (cfg.lookahead != kLookaheadAll) {
      const double limit =
          static_cast<double>(gpu_sum[k + 1]) + cfg.lookahead * static_cast<double>(cap);
      end = static_cast<size_t>(
                std::upper_bound(gpu_sum.begin() + static_cast<ptrdiff_t>(k + 1), gpu_sum.end(),
                                 limit,
                                 [](double v, int64_t s) { return v < static_cast<double>(s); }) -
                gpu_sum.begin()) -
            1;
    }
    f.whole_gpu_milli = whole_sum[end] - whole_sum[k + 1];
    f.cpu_milli = cpu_sum[end] - cpu_sum[k + 1];
    return f;
  };
  auto schedule = [&](size_t k) {
    const trace::OpenbPod& p = trace.pods[order[k]];
    model::Job& job = jobs[order[k]];
    job.name.assign(p.name);
    absl::StrAppend(&job.name, "#", k);
    return (*scheduler)->Schedule(job);
  };
  auto held_by_lookahead = [](const sched::ScheduleResult& r) {
    return !r.placed() && r.plugin == sp::kLookaheadPlugin;
  };
  // Held pods in arrival order. Retried while the forecast lets shared pods
  // through; the first one held again ends the round (the rest would be too).
  std::vector<size_t> held;
  auto retry_held = [&]() {
    if (held.empty() || sp::HoldsSharedGpus(*ctx->forecast(), cs)) return;
    size_t i = 0;
    for (; i < held.size(); ++i) {
      sched::ScheduleResult r = schedule(held[i]);
      if (held_by_lookahead(r)) break;
      if (!r.placed()) ++res.failed, ++res.held_failed;
    }
    held.erase(held.begin(), held.begin() + static_cast<ptrdiff_t>(i));
  };
  for (size_t k = 0; k < order.size(); ++k) {
    const trace::OpenbPod& p = trace.pods[order[k]];
    arrived += int64_t{p.num_gpu} * p.gpu_milli;
    if (lookahead) ctx->set_forecast(forecast_after(k));
    sched::ScheduleResult r = schedule(k);
    if (held_by_lookahead(r)) {
      held.push_back(k);
      ++res.held;
    } else if (!r.placed()) {
      ++res.failed;
    }
    if (lookahead) retry_held();
    record();
  }
  // Nothing more arrives: the forecast is empty and every held pod is tried.
  if (lookahead) {
    ctx->set_forecast(sp::ArrivalForecast{});
    retry_held();
    if (!held.empty()) return absl::InternalError("look-ahead held pods with nothing arriving");
  }
  double final_alloc = static_cast<double>(cs.allocated_milli()) * 100.0 / static_cast<double>(cap);
  while (next_k <= kMaxArrivalPct) res.alloc_pct[next_k++] = final_alloc;
  res.pods = static_cast<int64_t>(order.size());
  res.arrived_pct = static_cast<double>(arrived) * 100.0 / static_cast<double>(cap);
  res.unallocated_gpus = static_cast<double>(cap - cs.allocated_milli()) / model::kMilliPerGpu;
  double frag = 0;
  for (sched::NodeId id = 0; id < cs.num_node_slots(); ++id) {
    frag += ctx->Frag(sp::FromState(cs.state(id)));
  }
  res.fragmented_gpus = frag / model::kMilliPerGpu;
  std::vector<IdleShape> idle_shapes;
  {
    std::set<std::tuple<int64_t, int32_t, int32_t, uint64_t, int64_t>> seen;
    for (size_t i = 0; i < shapes.size(); ++i) {
      const sp::PodShape& s = shapes[i];
      const int64_t mem = cfg.enforce_memory ? trace.pods[i].memory_mib : 0;
      if (seen.insert({s.cpu_milli, s.gpu_milli, s.gpus, s.model_mask, mem}).second) {
        idle_shapes.push_back({s, mem});
      }
    }
  }
  for (sched::NodeId id = 0; id < cs.num_node_slots(); ++id) {
    if (cs.state(id).indexed()) ClassifyIdle(cs.state(id), idle_shapes, &res.idle);
  }
  res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

absl::StatusOr<std::vector<PackRunResult>> RunPackSweep(const std::vector<model::Node>& nodes,
                                                        const std::vector<PackTrace>& traces,
                                                        const PackConfig& cfg) {
  struct Task {
    const PackTrace* trace;
    const std::string* policy;
    uint64_t seed;
  };
  std::vector<Task> tasks;
  for (const PackTrace& t : traces) {
    for (const std::string& p : cfg.policies) {
      for (uint64_t s : cfg.seeds) tasks.push_back({&t, &p, s});
    }
  }
  std::vector<absl::StatusOr<PackRunResult>> out(tasks.size(),
                                                 absl::UnknownError("run did not finish"));
  std::atomic<size_t> next{0};
  auto worker = [&]() {
    for (size_t i = next++; i < tasks.size(); i = next++) {
      out[i] = RunPack(nodes, *tasks[i].trace, *tasks[i].policy, tasks[i].seed, cfg);
    }
  };
  int threads = cfg.threads > 0
                    ? cfg.threads
                    : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  threads = std::min<int>(threads, static_cast<int>(std::max<size_t>(1, tasks.size())));
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  std::vector<PackRunResult> results;
  results.reserve(out.size());
  for (auto& r : out) {
    if (!r.ok()) return r.status();
    results.push_back(std::move(*r));
  }
  return results;
}

absl::StatusOr<double> ParseLookahead(absl::string_view s) {
  if (s == "all") return kLookaheadAll;
  double pct = 0;
  if (!absl::SimpleAtod(s, &pct) || !(pct >= 0 && pct <= 1000)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--lookahead: expected a percentage of cluster capacity (0..1000) or \"all\", got \"", s,
        "\""));
  }
  return pct / 100.0;
}

absl::StatusOr<std::vector<uint64_t>> ParseSeeds(absl::string_view s) {
  std::vector<uint64_t> out;
  for (absl::string_view part : absl::StrSplit(s, ',', absl::SkipEmpty())) {
    std::vector<absl::string_view> ab = absl::StrSplit(part, absl::MaxSplits('-', 1));
    uint64_t a = 0, b = 0;
    if (!absl::SimpleAtoi(ab[0], &a) || (ab.size() == 2 && !absl::SimpleAtoi(ab[1], &b))) {
      return absl::InvalidArgumentError(
          absl::StrCat("--seeds: expected \"42-51\" or \"42,43\", got \"", s, "\""));
    }
    if (ab.size() == 1) b = a;
    if (b < a || b - a > 100000) {
      return absl::InvalidArgumentError(absl::StrCat("--seeds: bad range \"", part, "\""));
    }
    for (uint64_t x = a; x <= b; ++x) out.push_back(x);
  }
  if (out.empty()) return absl::InvalidArgumentError("--seeds: no seeds given");
  return out;
}

}  // namespace tessera::sim::pack
