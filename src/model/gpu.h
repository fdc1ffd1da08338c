// A physical GPU as the scheduler sees it.
#pragma once

#include <cstdint>
#include <string>

namespace tessera::model {

enum class GpuHealth : uint8_t { kHealthy, kUnhealthy };

struct Gpu {
  int32_t index = 0;       // 0-based position in its node
  std::string uuid;        // "GPU-..." as NVML reports it
  std::string model;       // e.g. "H100", "A100", "V100M32"
  int64_t memory_mib = 0;  // total framebuffer memory
  GpuHealth health = GpuHealth::kHealthy;
  bool mig_capable = false;
  int32_t numa_node = 0;
};

}  // namespace tessera::model
