// Profile: which plugins a scheduler runs, in what order, with what weights.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "sched/framework/registry.h"

namespace tessera::sched {

struct PluginConfig {
  std::string name;
  int32_t weight = 1;  // Score weight, 1..100 (ignored for non-Score plugins)
  PluginArgs args;
};

struct Profile {
  std::string name = "default";
  std::string queue_sort = "priority";
  std::string gpu_chooser = "nvlink-aware";
  // Every other plugin; each runs at the extension points it implements, in
  // this order.
  std::vector<PluginConfig> plugins;
  // Feasible nodes to score per member before picking the best (0: all).
  // Candidates come from the capacity index in best-fit (pack) or emptiest
  // (spread) order, so a small number keeps placement quality and speed.
  int32_t nodes_to_score = 8;
  // With nodes_to_score == 0: evaluate Filter and Score once per equivalence
  // class of nodes (ClusterState::class_infos) instead of once per node.
  // Only for profiles whose Filter/Score plugins read nothing but the node's
  // spec and NodeState (not its id); the runner falls back to per-node
  // evaluation inside topology domains and for the second member of a gang.
  bool dedupe_equivalent_nodes = false;
  // How the runner picks among nodes with the best total score.
  enum class TieBreak : uint8_t {
    kFirstCandidate,  // first in candidate order (capacity-index order)
    kRandom,          // uniformly at random, with the generator given to
                      // Scheduler::SetRandom (first candidate without one)
    kLowestNodeId,    // the node added to the ClusterState first: a fixed
                      // node order, so ties keep filling the same nodes
  };
  TieBreak tie_break = TieBreak::kFirstCandidate;
  // Topology domains (racks, blocks) tried per gang before giving up.
  int32_t max_domains = 4;

  // resource-fit, node-selector, taint-toleration, gang, topology (weight 2),
  // pack-spread (weight 1); priority queue sort; nvlink-aware GPU chooser.
  static Profile Default();
};

// Checks names against `registry`, weights, duplicates and limits; messages
// name the field ("profile.plugins[2].weight: must be in 1..100, got 0").
absl::Status ValidateProfile(const Profile& p, const PluginRegistry& registry);

}  // namespace tessera::sched
