#include "config/profile_yaml.h"

#include <fstream>
#include <sstream>

#include "common/status_macros.h"
#include "config/yaml_fields.h"

namespace tessera::config {

absl::StatusOr<sched::Profile> ParseProfileYaml(absl::string_view text,
                                                const sched::PluginRegistry& registry) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("profile: invalid YAML: ", e.what()));
  }
  RETURN_IF_ERROR(CheckKeys(root,
                            {"name", "queueSort", "gpuChooser", "nodesToScore", "maxDomains",
                             "tieBreak", "dedupeEquivalentNodes", "plugins"},
                            "profile"));
  sched::Profile p;
  p.plugins.clear();
  if (root["name"]) RETURN_IF_ERROR(ReadString(root["name"], "profile.name", &p.name));
  if (root["queueSort"]) {
    RETURN_IF_ERROR(ReadString(root["queueSort"], "profile.queueSort", &p.queue_sort));
  }
  if (root["gpuChooser"]) {
    RETURN_IF_ERROR(ReadString(root["gpuChooser"], "profile.gpuChooser", &p.gpu_chooser));
  }
  int64_t v;
  if (root["nodesToScore"]) {
    RETURN_IF_ERROR(ReadInt(root["nodesToScore"], "profile.nodesToScore", &v));
    p.nodes_to_score = static_cast<int32_t>(v);
  }
  if (root["maxDomains"]) {
    RETURN_IF_ERROR(ReadInt(root["maxDomains"], "profile.maxDomains", &v));
    p.max_domains = static_cast<int32_t>(v);
  }
  if (root["tieBreak"]) {
    std::string tb;
    RETURN_IF_ERROR(ReadString(root["tieBreak"], "profile.tieBreak", &tb));
    if (tb == "firstCandidate") {
      p.tie_break = sched::Profile::TieBreak::kFirstCandidate;
    } else if (tb == "random") {
      p.tie_break = sched::Profile::TieBreak::kRandom;
    } else if (tb == "lowestNodeId") {
      p.tie_break = sched::Profile::TieBreak::kLowestNodeId;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "profile.tieBreak: expected firstCandidate, random or lowestNodeId, got \"", tb, "\""));
    }
  }
  if (root["dedupeEquivalentNodes"]) {
    RETURN_IF_ERROR(ReadBool(root["dedupeEquivalentNodes"], "profile.dedupeEquivalentNodes",
                             &p.dedupe_equivalent_nodes));
  }
  if (p.dedupe_equivalent_nodes && p.nodes_to_score != 0) {
    return absl::InvalidArgumentError(
        "profile.dedupeEquivalentNodes: needs nodesToScore: 0 (every class of nodes scored)");
  }
  const YAML::Node plugins = root["plugins"];
  if (!plugins || !plugins.IsSequence()) {
    return absl::InvalidArgumentError("profile.plugins: expected a list of plugins");
  }
  for (size_t i = 0; i < plugins.size(); ++i) {
    std::string path = absl::StrCat("profile.plugins[", i, "]");
    const YAML::Node n = plugins[i];
    RETURN_IF_ERROR(CheckKeys(n, {"name", "weight", "args"}, path));
    sched::PluginConfig c;
    if (!n["name"]) return absl::InvalidArgumentError(absl::StrCat(path, ".name: required"));
    RETURN_IF_ERROR(ReadString(n["name"], absl::StrCat(path, ".name"), &c.name));
    if (n["weight"]) {
      RETURN_IF_ERROR(ReadInt(n["weight"], absl::StrCat(path, ".weight"), &v));
      if (v < 1 || v > 100) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ".weight: must be in 1..100, got ", v));
      }
      c.weight = static_cast<int32_t>(v);
    }
    if (n["args"]) {
      if (!n["args"].IsMap()) {
        return absl::InvalidArgumentError(absl::StrCat(path, ".args: expected a mapping"));
      }
      for (const auto& kv : n["args"]) {
        std::string key = kv.first.as<std::string>();
        std::string val;
        RETURN_IF_ERROR(ReadString(kv.second, absl::StrCat(path, ".args.", key), &val));
        c.args[key] = val;
      }
    }
    p.plugins.push_back(std::move(c));
  }
  RETURN_IF_ERROR(sched::ValidateProfile(p, registry));
  // Building each plugin checks its arguments too.
  for (size_t i = 0; i < p.plugins.size(); ++i) {
    auto made = registry.Create(p.plugins[i].name, p.plugins[i].args);
    if (!made.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("profile.plugins[", i, "].args: ", made.status().message()));
    }
  }
  return p;
}

absl::StatusOr<sched::Profile> LoadProfileFile(const std::string& path,
                                               const sched::PluginRegistry& registry) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("profile file ", path, ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  auto p = ParseProfileYaml(ss.str(), registry);
  if (!p.ok()) {
    return absl::Status(p.status().code(), absl::StrCat(path, ": ", p.status().message()));
  }
  return p;
}

}  // namespace tessera::config
