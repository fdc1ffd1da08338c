// Reads a scheduler Profile from YAML.
//
//   name: default
//   queueSort: priority
//   gpuChooser: nvlink-aware
//   nodesToScore: 8        # 0: score every feasible node
//   maxDomains: 4
//   tieBreak: firstCandidate  # or lowestNodeId (fixed node order), random
//   dedupeEquivalentNodes: false  # with nodesToScore 0: one Filter/Score per
//                                 # equivalence class of nodes
//   plugins:
//     - name: resource-fit
//     - name: topology
//       weight: 2
//       args: {key: value}
//
// Unknown keys, wrong types and unknown plugins are errors that name the field
// ("profile.plugins[1].weight: expected an integer"). Nothing is applied on
// error: the caller keeps its previous profile.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sched/framework/profile.h"
#include "sched/framework/registry.h"

namespace tessera::config {

absl::StatusOr<sched::Profile> ParseProfileYaml(absl::string_view text,
                                                const sched::PluginRegistry& registry);
absl::StatusOr<sched::Profile> LoadProfileFile(const std::string& path,
                                               const sched::PluginRegistry& registry);

}  // namespace tessera::config
