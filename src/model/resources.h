// Resources a job member (pod) asks for, as a plain value.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tessera::model {

// One GPU is 1000 milli-GPU. A member with gpus == 1 and gpu_milli < 1000
// shares one physical GPU with others (fractional GPU).
inline constexpr int32_t kMilliPerGpu = 1000;

// Countable resources besides GPUs, CPU and memory, by name, sorted by name with each name once,
// in whole units: Kubernetes' extended resources (a MIG profile such as
// "nvidia.com/mig-1g.10gb", "rdma/ib"), which a node offers a number of and a member takes some
// of. Empty for almost every member and node, so it costs nothing where it is not used.
using ScalarResources = std::vector<std::pair<std::string, int64_t>>;

// The amount of `name` in `s` (0 when absent).
int64_t ScalarAmount(const ScalarResources& s, const std::string& name);

// What one member asks for. Plain value; copy freely.
struct ResourceRequest {
  // Number of GPUs. With gpu_milli < 1000 this must be 1 (a share of one GPU).
  int32_t gpus = 0;
  // Share of each GPU in milli-GPU, 1..1000.
  int32_t gpu_milli = kMilliPerGpu;
  // Minimum memory of each GPU it may use, in MiB (0: any). A size
  // constraint ("needs an 80 GB GPU"), not a shared counter.
  int64_t gpu_memory_mib = 0;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  ScalarResources scalars;  // sorted by name, amounts > 0

  bool fractional() const { return gpus == 1 && gpu_milli < kMilliPerGpu; }
  // GPU demand in milli-GPU (gpus * gpu_milli).
  int64_t total_gpu_milli() const { return int64_t{gpus} * gpu_milli; }
  friend bool operator==(const ResourceRequest&, const ResourceRequest&) = default;
};

// Checks ranges and combinations. `field` prefixes every message
// ("spec.groups[0].resources"), so the user sees which field is wrong.
absl::Status ValidateRequest(const ResourceRequest& r, absl::string_view field);

}  // namespace tessera::model
