// Builds regular synthetic clusters (benchmarks, tests, simulator).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/node.h"

namespace tessera::model {

enum class GpuLayout : uint8_t { kNvSwitch, kNvLinkPairs, kNvLinkQuads, kPcieSwitchPairs };
bool ParseGpuLayout(absl::string_view s, GpuLayout* out);

struct SyntheticClusterSpec {
  int nodes = 16;
  int gpus_per_node = 8;
  int nodes_per_rack = 32;
  int racks_per_block = 8;
  std::string gpu_model = "H100";
  int64_t gpu_memory_mib = 81559;
  GpuLayout layout = GpuLayout::kNvSwitch;
  int64_t cpu_milli = 224000;
  int64_t memory_mib = int64_t{2048} * 1024;
  std::string name_prefix = "n";
};

// Nodes named <prefix>00000.., racks "r000".., blocks "b00"..; GPU UUIDs are
// deterministic ("GPU-<node>-<index>").
absl::StatusOr<std::vector<Node>> BuildSyntheticCluster(const SyntheticClusterSpec& spec);

NodeTopology MakeTopology(GpuLayout layout, int gpus);

}  // namespace tessera::model
