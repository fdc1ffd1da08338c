// Reads a regular cluster description (a model::SyntheticClusterSpec) from YAML,
// for the simulator and benchmarks:
//
//   nodes: 3125
//   gpusPerNode: 8
//   nodesPerRack: 32
//   racksPerBlock: 8
//   gpuModel: H100
//   gpuMemoryMiB: 81559
//   layout: nvswitch        # nvswitch | nvlink-pairs | nvlink-quads | pcie
//   cpuMilli: 224000
//   memoryMiB: 2097152
//
// Every key is optional (the spec's defaults apply); unknown keys and bad
// values are errors naming the field ("cluster.gpusPerNode: must be in 1..16").
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/synthetic_cluster.h"

namespace tessera::config {

absl::StatusOr<model::SyntheticClusterSpec> ParseClusterYaml(absl::string_view text);
absl::StatusOr<model::SyntheticClusterSpec> LoadClusterFile(const std::string& path);

}  // namespace tessera::config
