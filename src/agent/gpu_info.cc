#include "agent/gpu_info.h"

#include <utility>

namespace tessera::agent {

std::vector<std::string> ThrottleReasonNames(uint64_t reasons) {
  static constexpr std::pair<uint64_t, const char*> kNames[] = {
      {kThrottleGpuIdle, "GpuIdle"},
      {kThrottleApplicationsClocksSetting, "ApplicationsClocksSetting"},
      {kThrottleSwPowerCap, "SwPowerCap"},
      {kThrottleHwSlowdown, "HwSlowdown"},
      {kThrottleSyncBoost, "SyncBoost"},
      {kThrottleSwThermalSlowdown, "SwThermalSlowdown"},
      {kThrottleHwThermalSlowdown, "HwThermalSlowdown"},
      {kThrottleHwPowerBrakeSlowdown, "HwPowerBrakeSlowdown"},
      {kThrottleDisplayClockSetting, "DisplayClockSetting"},
  };
  std::vector<std::string> names;
  uint64_t known = 0;
  for (const auto& [bit, name] : kNames) {
    known |= bit;
    if (reasons & bit) names.emplace_back(name);
  }
  if (reasons & ~known) names.emplace_back("Other");
  return names;
}

std::string_view GpuEventKindName(GpuEventKind kind) {
  switch (kind) {
    case GpuEventKind::kXid:
      return "xid";
    case GpuEventKind::kEccDoubleBit:
      return "ecc_dbe";
    case GpuEventKind::kGpuLost:
      return "gpu_lost";
    case GpuEventKind::kEventWaitFailed:
      return "event_wait_failed";
    case GpuEventKind::kGpuReset:
      return "gpu_reset";
  }
  return "unknown";
}

}  // namespace tessera::agent
