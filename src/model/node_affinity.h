// Required node affinity: Kubernetes' nodeSelectorTerms (ORed terms of ANDed requirements) as the
// scheduler evaluates them against a node's labels and name. Plain values; no I/O.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace tessera::model {

struct NodeSelectorRequirement {
  enum class Op : uint8_t { kIn, kNotIn, kExists, kDoesNotExist, kGt, kLt };
  std::string key;
  Op op = Op::kIn;
  std::vector<std::string> values;
  // A matchFields requirement: `key` names a node field (only "metadata.name" exists), not a label.
  bool field = false;
  friend bool operator==(const NodeSelectorRequirement&, const NodeSelectorRequirement&) = default;
};

// Every requirement holds. An empty term matches no node (as in Kubernetes).
struct NodeSelectorTerm {
  std::vector<NodeSelectorRequirement> requirements;
  friend bool operator==(const NodeSelectorTerm&, const NodeSelectorTerm&) = default;
};

// "In", "NotIn", ... as the Kubernetes API spells them; false for anything else.
bool ParseNodeSelectorOp(const std::string& s, NodeSelectorRequirement::Op* out);

// True when the node matches at least one term (no terms: every node matches).
bool MatchesNodeAffinity(const std::vector<NodeSelectorTerm>& terms, const std::string& node_name,
                         const std::map<std::string, std::string>& labels);

// Kubernetes' rules, each break named ("<field>[1].requirements[0].values: ..."): In/NotIn need
// values, Exists/DoesNotExist none, Gt/Lt exactly one integer; a field requirement only on
// metadata.name with In or NotIn.
absl::Status ValidateNodeAffinity(const std::vector<NodeSelectorTerm>& terms,
                                  const std::string& field);

}  // namespace tessera::model
