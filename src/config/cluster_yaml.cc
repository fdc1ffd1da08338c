#include "config/cluster_yaml.h"

#include <fstream>
#include <sstream>

#include "common/status_macros.h"
#include "config/yaml_fields.h"

namespace tessera::config {
namespace {

absl::Status ReadBoundedInt(const YAML::Node& root, const char* key, int64_t lo, int64_t hi,
                            int64_t* out) {
  if (!root[key]) return absl::OkStatus();
  std::string path = absl::StrCat("cluster.", key);
  RETURN_IF_ERROR(ReadInt(root[key], path, out));
  if (*out < lo || *out > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": must be in ", lo, "..", hi, ", got ", *out));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<model::SyntheticClusterSpec> ParseClusterYaml(absl::string_view text) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("cluster: invalid YAML: ", e.what()));
  }
  RETURN_IF_ERROR(CheckKeys(root,
                            {"nodes", "gpusPerNode", "nodesPerRack", "racksPerBlock", "gpuModel",
                             "gpuMemoryMiB", "layout", "cpuMilli", "memoryMiB"},
                            "cluster"));
  model::SyntheticClusterSpec spec;
  int64_t v = spec.nodes;
  RETURN_IF_ERROR(ReadBoundedInt(root, "nodes", 1, 10'000'000, &v));
  spec.nodes = static_cast<int>(v);
  v = spec.gpus_per_node;
  RETURN_IF_ERROR(ReadBoundedInt(root, "gpusPerNode", 0, model::kMaxGpusPerNode, &v));
  spec.gpus_per_node = static_cast<int>(v);
  v = spec.nodes_per_rack;
  RETURN_IF_ERROR(ReadBoundedInt(root, "nodesPerRack", 1, 1'000'000, &v));
  spec.nodes_per_rack = static_cast<int>(v);
  v = spec.racks_per_block;
  RETURN_IF_ERROR(ReadBoundedInt(root, "racksPerBlock", 1, 1'000'000, &v));
  spec.racks_per_block = static_cast<int>(v);
  RETURN_IF_ERROR(ReadBoundedInt(root, "gpuMemoryMiB", 0, int64_t{1} << 40, &spec.gpu_memory_mib));
  RETURN_IF_ERROR(ReadBoundedInt(root, "cpuMilli", 0, int64_t{1} << 40, &spec.cpu_milli));
  RETURN_IF_ERROR(ReadBoundedInt(root, "memoryMiB", 0, int64_t{1} << 40, &spec.memory_mib));
  if (root["gpuModel"]) {
    RETURN_IF_ERROR(ReadString(root["gpuModel"], "cluster.gpuModel", &spec.gpu_model));
    if (spec.gpu_model.empty())
      return absl::InvalidArgumentError("cluster.gpuModel: must not be empty");
  }
  if (root["layout"]) {
    std::string layout;
    RETURN_IF_ERROR(ReadString(root["layout"], "cluster.layout", &layout));
    if (!model::ParseGpuLayout(layout, &spec.layout)) {
      return absl::InvalidArgumentError(
          absl::StrCat("cluster.layout: unknown \"", layout,
                       "\"; expected nvswitch, nvlink-pairs, nvlink-quads or pcie"));
    }
  }
  return spec;
}

absl::StatusOr<model::SyntheticClusterSpec> LoadClusterFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cluster file ", path, ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  auto spec = ParseClusterYaml(ss.str());
  if (!spec.ok()) {
    return absl::Status(spec.status().code(), absl::StrCat(path, ": ", spec.status().message()));
  }
  return spec;
}

}  // namespace tessera::config
