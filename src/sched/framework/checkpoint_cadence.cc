#include "sched/framework/checkpoint_cadence.h"

#include <algorithm>
#include <cmath>

namespace tessera::sched {

double YoungDalyIntervalSeconds(double cost_s, double gpu_mtbf_s, int64_t gpus) {
  if (!(cost_s > 0) || !(gpu_mtbf_s > 0) || gpus <= 0 || !std::isfinite(cost_s) ||
      !std::isfinite(gpu_mtbf_s)) {
    return 0;
  }
  const double set_mtbf = gpu_mtbf_s / static_cast<double>(gpus);
  if (cost_s >= set_mtbf / 2) return set_mtbf;
  return std::sqrt(2 * cost_s * set_mtbf);
}

int64_t CheckpointIntervalSeconds(double cost_s, double gpu_mtbf_s, int64_t gpus) {
  const double t = YoungDalyIntervalSeconds(cost_s, gpu_mtbf_s, gpus);
  if (!(t > 0)) return 0;
  // Past int64 range only for absurd MTBFs; cap well inside it.
  return std::max<int64_t>(1, std::llround(std::min(t, 1e15)));
}

double GpuMtbfSeconds(int64_t failures, double gpu_seconds, double fallback_s) {
  if (failures < kMinObservedGpuFailures || !(gpu_seconds > 0) || !std::isfinite(gpu_seconds)) {
    return fallback_s;
  }
  return gpu_seconds / static_cast<double>(failures);
}

}  // namespace tessera::sched
