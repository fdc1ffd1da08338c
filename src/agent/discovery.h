// Discover: one pass over a GpuBackend collecting every GPU's identity, metrics and the
// topology matrix. This is what `tessera gpus` prints and what the node agent reports.
// A GPU whose metrics cannot be read still appears, with `metrics_error` set.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/gpu_backend.h"
#include "agent/gpu_info.h"
#include "agent/topology.h"

namespace tessera::agent {

struct GpuSnapshot {
  GpuInfo info;
  GpuMetrics metrics;
  // Empty when identity and metrics were read. A GPU that cannot be queried at all (lost)
  // keeps its index here with only `info.index` (and `info.uuid` when known) set.
  std::string error;
};

struct NodeSnapshot {
  std::string backend;
  std::string driver_version;
  std::string cuda_driver_version;
  std::vector<GpuSnapshot> gpus;
  TopologyMatrix topology;
};

// The backend must be initialized. Fails only when the device count cannot be read.
absl::StatusOr<NodeSnapshot> Discover(GpuBackend& backend);

}  // namespace tessera::agent
