// Work: a job of one or more member groups, scheduled as a gang.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "model/node_affinity.h"
#include "model/resources.h"
#include "model/taint.h"

namespace tessera::model {

// Levels of the cluster topology, smallest first.
enum class TopologyLevel : uint8_t { kNone = 0, kNode = 1, kRack = 2, kBlock = 3 };
absl::string_view TopologyLevelName(TopologyLevel l);
bool ParseTopologyLevel(absl::string_view s, TopologyLevel* out);

enum class PlacementPreference : uint8_t { kPack, kSpread };

// Keep the whole gang inside one domain of `level`. Required: never place it
// otherwise. Preferred: try to, else place it anywhere (closest first).
struct TopologyConstraint {
  TopologyLevel level = TopologyLevel::kNone;
  bool required = false;
};

// `count` identical members (pods).
struct MemberGroup {
  std::string name;
  int32_t count = 1;
  ResourceRequest resources;
};

struct GangPolicy {
  // Members that must be placed together for the job to start; 0 means all.
  int32_t min_member = 0;
  // How long a gang may wait for placement before it is failed (0: forever).
  absl::Duration timeout = absl::ZeroDuration();
  // An elastic job (TrainingJob spec.elastic): admitted by its queue's quota
  // for min_member members, keeps as many placed members as the quota admits,
  // is charged what it holds, and may be resized while it runs
  // (sched::QueueManager::Resize / Grow). Other gangs are admitted and
  // charged for all their members.
  bool elastic = false;
  // An elastic gang starts with at most this many members (0: as many as fit).
  // An InferenceService with spec.slo starts at max(1, replicas.min) and its
  // autoscaler grows it (controller/autoscaler.h).
  int32_t start_members = 0;
  bool over_start(int32_t members) const { return start_members > 0 && members > start_members; }
};

// The name a member goes by in a job's status, where node agents report it
// (status.members[].member, status.replicaMetrics) and the controller reads it:
// "<group>-<ordinal>", e.g. "worker-3".
inline std::string MemberKey(absl::string_view group, int64_t member) {
  return absl::StrCat(group, "-", member);
}

struct Job {
  std::string name;  // unique within namespace
  std::string ns = "default";
  std::string queue = "default";
  int32_t priority = 0;
  std::vector<MemberGroup> groups;
  GangPolicy gang;
  std::vector<std::string> gpu_models;  // one-of; empty: any model
  PlacementPreference placement = PlacementPreference::kPack;
  TopologyConstraint topology;
  std::map<std::string, std::string> node_selector;
  // Required node affinity (ORed terms; empty: no rule), as a Kubernetes Pod states it.
  std::vector<NodeSelectorTerm> node_affinity;
  std::vector<Toleration> tolerations;
  absl::Time creation_time = absl::UnixEpoch();

  // "ns/name": the key used across the scheduler.
  std::string key() const { return ns + "/" + name; }
  int32_t total_members() const;
  int32_t effective_min_member() const;  // min_member, or all members when 0
  int64_t total_gpu_milli() const;
};

// Validates a job. `known_models`, when non-null, is the set of GPU models in
// the fleet; a constraint naming another model is rejected. Messages name the
// field ("spec.groups[1].count: must be > 0").
absl::Status ValidateJob(const Job& j, const absl::flat_hash_set<std::string>* known_models);

}  // namespace tessera::model
