// The FGD packing protocol ("workload inflation", Weng et al., ATC'23 §6):
// take every pod of a trace file, add uniformly drawn copies (seeded) until
// the total GPU request would pass `inflate` x the cluster's GPUs, shuffle,
// and schedule the pods one by one through the real scheduler (one pass,
// nothing leaves). After each 1% of cluster GPU capacity has arrived, record
// the GPU allocation ratio.
//
// Runs are independent; RunPackSweep spreads them over threads (each run
// owns its ClusterState, Scheduler, plugins and generators, so nothing is
// shared but the read-only inputs).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/node.h"
#include "trace/openb.h"

namespace tessera::sim::pack {

inline constexpr int kMaxArrivalPct = 130;

struct PackTrace {
  std::string name;  // e.g. "default" for openb_pod_list_default.csv
  std::vector<trace::OpenbPod> pods;
};

struct PackRunResult {
  std::string trace;
  std::string policy;
  uint64_t seed = 0;
  // alloc_pct[k]: allocated GPU milli / cluster GPU milli * 100 once k% of
  // the cluster's GPU capacity has arrived (the last value carries forward).
  std::array<double, kMaxArrivalPct + 1> alloc_pct{};
  int64_t pods = 0;             // pods scheduled (after inflation)
  int64_t failed = 0;           // pods that did not fit
  double arrived_pct = 0;       // GPU request that arrived, % of capacity
  double unallocated_gpus = 0;  // at the end
  double fragmented_gpus = 0;   // at the end, FGD's definition (frag.h)
  double wall_s = 0;
};

struct PackConfig {
  std::vector<std::string> policies;  // canonical names
  std::vector<uint64_t> seeds;
  double inflate = 1.3;
  int threads = 0;  // 0: hardware concurrency
  // The FGD simulator matches pods to nodes on CPU and GPU only (its pod
  // resource has no memory), so memory requests are dropped unless asked.
  bool enforce_memory = false;
};

// One run. `nodes` are the cluster; `trace.pods` the workload.
absl::StatusOr<PackRunResult> RunPack(const std::vector<model::Node>& nodes, const PackTrace& trace,
                                      const std::string& policy, uint64_t seed,
                                      const PackConfig& cfg);

// Every (trace, policy, seed), in that order, on `cfg.threads` threads.
absl::StatusOr<std::vector<PackRunResult>> RunPackSweep(const std::vector<model::Node>& nodes,
                                                        const std::vector<PackTrace>& traces,
                                                        const PackConfig& cfg);

// "42-51" or "42,43,50" -> seeds; InvalidArgument naming --seeds otherwise.
absl::StatusOr<std::vector<uint64_t>> ParseSeeds(absl::string_view s);

}  // namespace tessera::sim::pack
