// Synthetic workload generator for replays at any scale.
//
// Arrivals are a Poisson process (`jobs` jobs over `span_s`). Each job draws
// its gang size from a discrete mix (e.g. 1:0.6,8:0.2,64:0.1,512:0.08,4096:0.02),
// its duration from a log-normal (median, sigma) truncated to [min, max], its
// queue from a Zipf-like mix over `queues` queues (queue i has weight
// 1/(i+1)^queue_skew), a high priority with probability
// `high_priority_fraction`, and the given checkpoint interval and restart
// overhead. Checkpoint intervals may instead vary per job (`checkpoint_mix`,
// drawn from a second stream so the rest of the workload is the same with or
// without it). Deterministic for a seed: the generator owns its generators.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sim/replay/workload.h"

namespace tessera::sim::replay {

struct SyntheticWorkloadSpec {
  int64_t jobs = 10000;
  double span_s = 7 * 86400.0;
  std::vector<std::pair<int32_t, double>> size_mix = {
      {1, 0.55}, {2, 0.1}, {4, 0.1}, {8, 0.13}, {64, 0.08}, {512, 0.035}, {4096, 0.005}};
  double duration_median_s = 3600;
  double duration_sigma = 1.2;
  double duration_min_s = 60;
  double duration_max_s = 3 * 86400.0;
  int32_t queues = 4;
  double queue_skew = 1.0;
  double high_priority_fraction = 0.1;
  int32_t high_priority = 100;
  double checkpoint_s = 1800;
  // Per-job checkpoint interval (seconds, 0: never) : weight; replaces
  // checkpoint_s when not empty.
  std::vector<std::pair<double, double>> checkpoint_mix;
  double restart_s = 300;
  uint64_t seed = 1;
};

// Parses "1:0.6,8:0.3,64:0.1" (weights need not sum to 1).
absl::StatusOr<std::vector<std::pair<int32_t, double>>> ParseSizeMix(absl::string_view s);

absl::StatusOr<Workload> GenerateSyntheticWorkload(const SyntheticWorkloadSpec& spec);

}  // namespace tessera::sim::replay
