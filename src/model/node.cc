#include "model/node.h"

#include "absl/strings/str_cat.h"

namespace tessera::model {

const std::string& Node::gpu_model() const {
  static const std::string kNone;  // immutable; not mutable global state
  return gpus.empty() ? kNone : gpus.front().model;
}

absl::Status ValidateNode(const Node& n) {
  auto bad = [&](absl::string_view field, absl::string_view msg) {
    return absl::InvalidArgumentError(absl::StrCat("node ", n.name, ": ", field, ": ", msg));
  };
  if (n.name.empty()) return absl::InvalidArgumentError("node.name: must not be empty");
  if (n.gpus.size() > static_cast<size_t>(kMaxGpusPerNode)) {
    return bad("gpus",
               absl::StrCat("at most ", kMaxGpusPerNode, " GPUs per node, got ", n.gpus.size()));
  }
  if (n.topology.num_gpus() != static_cast<int>(n.gpus.size())) {
    return bad("topology", absl::StrCat("describes ", n.topology.num_gpus(), " GPUs, node has ",
                                        n.gpus.size()));
  }
  for (size_t i = 0; i < n.gpus.size(); ++i) {
    const Gpu& g = n.gpus[i];
    if (g.index != static_cast<int32_t>(i)) {
      return bad(absl::StrCat("gpus[", i, "].index"), absl::StrCat("must be ", i));
    }
    if (g.model.empty()) return bad(absl::StrCat("gpus[", i, "].model"), "must not be empty");
    if (g.model != n.gpus.front().model) {
      return bad(absl::StrCat("gpus[", i, "].model"),
                 absl::StrCat("all GPUs of a node must be one model; ", g.model, " vs ",
                              n.gpus.front().model));
    }
    if (g.memory_mib < 0) return bad(absl::StrCat("gpus[", i, "].memoryMiB"), "must be >= 0");
  }
  if (n.cpu_milli < 0) return bad("cpuMilli", "must be >= 0");
  if (n.memory_mib < 0) return bad("memoryMiB", "must be >= 0");
  for (size_t i = 0; i < n.scalars.size(); ++i) {
    if (n.scalars[i].first.empty() || n.scalars[i].second < 0) {
      return bad(absl::StrCat("scalars[", i, "]"), "needs a name and an amount >= 0");
    }
    if (i > 0 && n.scalars[i - 1].first >= n.scalars[i].first) {
      return bad(absl::StrCat("scalars[", i, "]"), "must be sorted by name, each name once");
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera::model
