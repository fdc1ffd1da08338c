// The FGD packing protocol ("workload inflation", Weng et al., ATC'23 §6):
// take every pod of a trace file, add uniformly drawn copies (seeded) until
// the total GPU request would pass `inflate` x the cluster's GPUs, shuffle,
// and schedule the pods one by one through the real scheduler (one pass,
// nothing leaves). After each 1% of cluster GPU capacity has arrived, record
// the GPU allocation ratio.
//
// With PackConfig::lookahead the scheduler is also told what arrives next
// (the protocol's pod order is known in advance), and pods it holds wait in
// a queue beside the stream instead of failing at once.
//
// Runs are independent; RunPackSweep spreads them over threads (each run
// owns its ClusterState, Scheduler, plugins and generators, so nothing is
// shared but the read-only inputs).
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/node.h"
#include "sched/framework/cluster_state.h"
#include "sched/framework/profile.h"
#include "sched/pack/frag.h"
#include "trace/openb.h"

namespace tessera::sim::pack {

inline constexpr int kMaxArrivalPct = 130;

struct PackTrace {
  std::string name;  // e.g. "default" for openb_pod_list_default.csv
  std::vector<trace::OpenbPod> pods;
};

// Where the idle GPU share lies at the end of a run, in GPUs. Each healthy
// GPU's free share goes to the first class that explains it, judged against
// every pod shape of the trace file:
//   fraction  no shape's per-GPU share (and GPU count) fits it: leftovers
//             of shared GPUs too small for any pod;
//   cpu       shapes fit its share but none fits the node's free CPU (nor,
//             with memory enforced, its memory): stranded by CPU;
//   memory    shapes fit share and CPU but not the node's free memory
//             (not with PackConfig::enforce_memory off);
//   model     shapes fit share, CPU and memory but none may use the GPU's
//             model (gpu_spec constraints);
//   partial   the leftover of a partly used GPU that some shape would fit
//             outright, e.g. the 190 milli beside an 810-milli pod, which
//             only the trace's few pods of 190 milli or less can use;
//   whole     a free GPU some shape would fit outright.
// partial and whole idle only because no fitting pod arrived after them.
struct IdleGpus {
  double fraction = 0, cpu = 0, memory = 0, model = 0, partial = 0, whole = 0;
  double total() const { return fraction + cpu + memory + model + partial + whole; }
};

// A pod shape with the memory the breakdown needs (0: not checked).
struct IdleShape {
  sched::pack::PodShape shape;
  int64_t memory_mib = 0;
};

// Adds node `st`'s idle GPU share to `out`, classified as above.
void ClassifyIdle(const sched::NodeState& st, const std::vector<IdleShape>& shapes, IdleGpus* out);

struct PackRunResult {
  std::string trace;
  std::string policy;
  uint64_t seed = 0;
  // alloc_pct[k]: allocated GPU milli / cluster GPU milli * 100 once k% of
  // the cluster's GPU capacity has arrived (the last value carries forward).
  std::array<double, kMaxArrivalPct + 1> alloc_pct{};
  int64_t pods = 0;             // pods scheduled (after inflation)
  int64_t failed = 0;           // pods that did not fit (held ones included)
  int64_t held = 0;             // pods the look-ahead held at least once
  int64_t held_failed = 0;      // of those, pods that never got a GPU
  double arrived_pct = 0;       // GPU request that arrived, % of capacity
  double unallocated_gpus = 0;  // at the end
  double fragmented_gpus = 0;   // at the end, FGD's definition (frag.h)
  IdleGpus idle;                // at the end: why the unallocated GPUs idle
  double wall_s = 0;
};

struct PackConfig {
  // Canonical policy names (sched::pack::PackProfile) or names of `profiles`.
  std::vector<std::string> policies;
  // Profiles run as policies under their own names (`--profile FILE`), with
  // every plugin a server can run (sched/pack/plugin_set.h). One that runs
  // pack-observe learns its typical pods from the pods as they arrive, as
  // the server does; the others are given the trace's, as FGD's protocol is.
  std::vector<sched::Profile> profiles;
  std::vector<uint64_t> seeds;
  double inflate = 1.3;
  int threads = 0;  // 0: hardware concurrency
  // Fit pod memory as well as CPU and GPU. A real scheduler must, and so did
  // the FGD authors' runs (their kube-scheduler kept NodeResourcesFit, which
  // checks memory): with it every baseline lands closer to the published
  // means (docs/sim-pack.md). false drops memory requests, as the FGD
  // simulator's own pod resource (CPU and GPU only) does.
  bool enforce_memory = true;
  // Look-ahead (sched/pack/lookahead.h): before each pod, policies that
  // use it (tessera) learn the pods arriving next, as many as ask this
  // share of the cluster's GPU capacity (0.5: the next half-cluster of
  // demand; kLookaheadAll: the rest of the stream). 0: none, the FGD
  // protocol as published. Held pods are tried again whenever the forecast
  // stops holding them, and after the last arrival.
  double lookahead = 0;
};

inline constexpr double kLookaheadAll = std::numeric_limits<double>::infinity();

// One run. `nodes` are the cluster; `trace.pods` the workload.
absl::StatusOr<PackRunResult> RunPack(const std::vector<model::Node>& nodes, const PackTrace& trace,
                                      const std::string& policy, uint64_t seed,
                                      const PackConfig& cfg);

// Every (trace, policy, seed), in that order, on `cfg.threads` threads.
absl::StatusOr<std::vector<PackRunResult>> RunPackSweep(const std::vector<model::Node>& nodes,
                                                        const std::vector<PackTrace>& traces,
                                                        const PackConfig& cfg);

// "0" (none), "50" (percent of capacity) or "all" -> PackConfig::lookahead;
// InvalidArgument naming --lookahead otherwise.
absl::StatusOr<double> ParseLookahead(absl::string_view s);

// "42-51" or "42,43,50" -> seeds; InvalidArgument naming --seeds otherwise.
absl::StatusOr<std::vector<uint64_t>> ParseSeeds(absl::string_view s);

}  // namespace tessera::sim::pack
