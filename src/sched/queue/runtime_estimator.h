// RuntimeEstimator: runtime estimates for backfill learned from the jobs that
// completed, for jobs that give none (no time limit).
//
// Algorithm: completed runs are kept per key, the last `window` of each, at
// three levels: (queue, namespace, size class), (queue, size class) and
// (queue); the size class is ceil(log2(GPUs)), so a 4,096-GPU gang is not
// judged by 1-GPU jobs. Estimate() answers from the most specific level with
// at least `min_samples` runs: the `quantile` of its runs times `margin`
// (EASY backfill is only as good as its estimates: a low one lets backfill
// delay a reservation, a high one wastes the hole), at least one minute.
// With no level that full, no estimate: the caller's default applies.
//
// Deterministic, no clock, no I/O. Not thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace tessera::sched {

class RuntimeEstimator {
 public:
  struct Options {
    int32_t window = 64;
    int32_t min_samples = 5;
    double quantile = 0.8;
    double margin = 1.2;
  };
  RuntimeEstimator() = default;
  explicit RuntimeEstimator(Options o) : opt_(o) {}

  // A run of a job of `gpus` GPUs in `queue` / `ns` that completed after `runtime`.
  void Observe(absl::string_view queue, absl::string_view ns, int64_t gpus, absl::Duration runtime);
  std::optional<absl::Duration> Estimate(absl::string_view queue, absl::string_view ns,
                                         int64_t gpus) const;

 private:
  using Key = std::tuple<std::string, std::string, int32_t>;  // "" / -1: any
  static int32_t SizeClass(int64_t gpus);
  std::optional<absl::Duration> From(const Key& k) const;
  Options opt_;
  absl::flat_hash_map<Key, std::deque<absl::Duration>> runs_;
};

}  // namespace tessera::sched
