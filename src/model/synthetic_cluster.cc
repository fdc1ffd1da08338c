#include "model/synthetic_cluster.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tessera::model {

bool ParseGpuLayout(absl::string_view s, GpuLayout* out) {
  if (s == "nvswitch")
    *out = GpuLayout::kNvSwitch;
  else if (s == "nvlink-pairs")
    *out = GpuLayout::kNvLinkPairs;
  else if (s == "nvlink-quads")
    *out = GpuLayout::kNvLinkQuads;
  else if (s == "pcie")
    *out = GpuLayout::kPcieSwitchPairs;
  else
    return false;
  return true;
}

NodeTopology MakeTopology(GpuLayout layout, int gpus) {
  switch (layout) {
    case GpuLayout::kNvSwitch:
      return NodeTopology::NvSwitch(gpus);
    case GpuLayout::kNvLinkPairs:
      return NodeTopology::NvLinkGroups(gpus, 2);
    case GpuLayout::kNvLinkQuads:
      return NodeTopology::NvLinkGroups(gpus, 4);
    case GpuLayout::kPcieSwitchPairs:
      return NodeTopology::PcieSwitchPairs(gpus);
  }
  return NodeTopology::NvSwitch(gpus);
}

absl::StatusOr<std::vector<Node>> BuildSyntheticCluster(const SyntheticClusterSpec& spec) {
  if (spec.nodes <= 0) return absl::InvalidArgumentError("nodes: must be > 0");
  if (spec.gpus_per_node < 0 || spec.gpus_per_node > kMaxGpusPerNode) {
    return absl::InvalidArgumentError(
        absl::StrCat("gpus-per-node: must be in 0..", kMaxGpusPerNode));
  }
  if (spec.nodes_per_rack <= 0) return absl::InvalidArgumentError("nodes-per-rack: must be > 0");
  if (spec.racks_per_block <= 0) return absl::InvalidArgumentError("racks-per-block: must be > 0");
  NodeTopology topo = MakeTopology(spec.layout, spec.gpus_per_node);
  std::vector<Node> nodes;
  nodes.reserve(spec.nodes);
  for (int i = 0; i < spec.nodes; ++i) {
    Node n;
    n.name = absl::StrFormat("%s%05d", spec.name_prefix, i);
    int rack = i / spec.nodes_per_rack;
    n.rack = absl::StrFormat("r%03d", rack);
    n.block = absl::StrFormat("b%02d", rack / spec.racks_per_block);
    n.cpu_milli = spec.cpu_milli;
    n.memory_mib = spec.memory_mib;
    n.topology = topo;
    n.gpus.resize(spec.gpus_per_node);
    for (int g = 0; g < spec.gpus_per_node; ++g) {
      Gpu& gpu = n.gpus[g];
      gpu.index = g;
      gpu.uuid = absl::StrCat("GPU-", n.name, "-", g);
      gpu.model = spec.gpu_model;
      gpu.memory_mib = spec.gpu_memory_mib;
      gpu.numa_node = g * 2 / std::max(1, spec.gpus_per_node);
    }
    nodes.push_back(std::move(n));
  }
  return nodes;
}

}  // namespace tessera::model
