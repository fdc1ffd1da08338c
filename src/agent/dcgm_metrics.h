// Renders GPU readings in Prometheus' text exposition format with dcgm-exporter's metric names
// and labels, so that dashboards and alerts written for NVIDIA's dcgm-exporter work unchanged.
//
// Each metric family gets "# HELP" and "# TYPE" lines, then one sample per GPU:
//   DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-...",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",
//                        Hostname="node-1",tessera_namespace="team-a",tessera_job="train-42"} 41
// `tessera_namespace` and `tessera_job` appear only for a GPU that has a workload (not `job`:
// Prometheus sets `job` on every target and would rename ours to `exported_job`). A reading the
// backend could not take is left out (no sample), never reported as 0; a GPU that could not be
// queried at all has no samples. Label values are escaped per the format (\\, \", \n). Pure
// function of its inputs; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "agent/discovery.h"

namespace tessera::agent {

// The workload a GPU is allocated to.
struct WorkloadLabels {
  std::string namespace_name;
  std::string job;
};

struct DcgmRenderOptions {
  std::string hostname;
  absl::flat_hash_map<std::string, WorkloadLabels> workloads;  // by GPU UUID
  absl::flat_hash_map<std::string, uint64_t> last_xid;         // by GPU UUID; 0 when none
};

std::string RenderDcgmMetrics(const std::vector<GpuSnapshot>& gpus,
                              const DcgmRenderOptions& options);

// Escapes a label value: backslash, double quote and newline.
std::string EscapeLabelValue(std::string_view value);

}  // namespace tessera::agent
