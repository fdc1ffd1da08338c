// Internal to src/controller: the controller's per-object records and the
// JSON helpers its .cc files share. Not part of the module's interface.
#pragma once

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "api/conditions.h"
#include "api/json_fields.h"
#include "controller/autoscaler.h"
#include "controller/scheduling_controller.h"
#include "controller/store_layout.h"
#include "model/job.h"
#include "sched/framework/cluster_state.h"
#include "sched/queue/wait_reason.h"

namespace tessera::controller {

// A stored victim's preemption in flight: status.preemption, written with
// the PreemptionPending condition True (docs/api.md).
struct InflightPreemption {
  std::string preemptor;  // scheduler key
  absl::Time deadline;
  std::vector<sched::MemberPlacement> dropping;  // a shrink's members (group, member set)
  bool exited = false;                           // every member had exited
};

struct SchedulingController::JobRec {
  std::string key;  // store key
  std::string kind;
  std::string ns;
  std::string name;
  std::shared_ptr<const model::Job> job;  // null: not schedulable (invalid or blocked)
  std::string spec_dump;
  std::string phase;
  int64_t revision = 0;  // last revision of the object this controller has accounted for
  int64_t generation = 0;
  int64_t attempts = 0;
  bool bound = false;
  bool blocked = false;     // waits for a PriorityClass
  bool in_qm = false;       // pending or running in the QueueManager
  std::string queue_error;  // why the QueueManager did not take it
  absl::Time queued_since;
  std::string last_message;
  // The job's last WaitReason while it waits (a Warning Event when it turns Unschedulable).
  sched::WaitReason wait_class = sched::WaitReason::kNotTried;
  absl::Duration max_runtime = absl::ZeroDuration();  // spec.maxRuntimeSeconds; 0: none
  int64_t max_restarts = 0;                           // spec.maxRestarts
  bool checkpoints = false;  // spec.checkpoint set: it checkpoints when signalled
  absl::Time bound_since = absl::InfinitePast();  // the current binding's scheduledTime
  absl::Time last_resize = absl::InfinitePast();  // binding or last shrink / grow

  // Set when the job was restored after a controller restart as a victim of
  // a preemption in flight; handed to QueueManager::RestoreVictim once every
  // restored and pending job is in the QueueManager (FlushSubmissions).
  std::optional<InflightPreemption> inflight_preemption;
  // The newest Ready Checkpoint seen while the job was bound but not yet in
  // the QueueManager (a controller's start): Restore passes it on.
  absl::Time restored_checkpoint = absl::InfinitePast();
  // An InferenceService with spec.slo (inference_autoscale.cc): its SLO and
  // bounds, its autoscaler (history for the scale-down window), its replicas'
  // latest readings by "<group>-<member>" with the node that sent them, and
  // the status.desiredReplicas last written (-1: none).
  std::optional<ServiceSlo> slo;
  std::unique_ptr<Autoscaler> autoscaler;
  std::map<std::string, std::pair<std::string, ReplicaReading>> readings;
  int64_t desired_written = -1;

  // spec.elastic.minReplicas, from the decoded job's gang policy (JobFromObject
  // puts it there); 0 when the job is not elastic or did not decode.
  int32_t elastic_min() const { return job && job->gang.elastic ? job->gang.min_member : 0; }
};

struct SchedulingController::NodeRec {
  std::string name;
  sched::NodeId id = sched::kNoNode;
  int64_t revision = 0;
  std::string spec_dump;  // spec without `unschedulable`, plus labels
  bool ready = true;
  bool cordoned = false;
  std::string heartbeat;
  absl::Time last_seen;
  absl::Time not_ready_since;
  bool evicted = false;
  uint32_t unhealthy = 0;
  std::string pool;  // spec.pool, else the `pool` label; for metrics
  // For GPUPools (pools_lineage.cc): metadata.labels, the GPU type, and what a pool did to the
  // node (kPoolCordonAnnotation: "cordon" or "drain"; "" none) and whether it has the drain taint.
  std::map<std::string, std::string> labels;
  std::string gpu_type;
  std::string pool_cordon;
  bool drain_taint = false;
};

// A Node's annotation saying that a GPUPool cordoned ("cordon") or drained ("drain") it, so that
// the pool's end undoes exactly that (pools_lineage.cc); "+unschedulable" appended when the node
// was cordoned by hand before (it stays cordoned).
inline constexpr char kPoolCordonAnnotation[] = "tessera.dev/pool-cordon";
// The taint `tessera drain` puts on a node (cli/node_commands.cc), NoExecute: evicts its gangs.
inline constexpr char kDrainTaintKey[] = "tessera.dev/drain";
inline constexpr char kGpuPoolsPrefix[] = "/registry/gpupools/";
inline constexpr char kModelVersionsPrefix[] = "/registry/modelversions/";

namespace internal {

inline bool Terminal(absl::string_view phase) { return phase == "Succeeded" || phase == "Failed"; }

inline bool BoundPhase(absl::string_view phase) {
  return phase == "Scheduled" || phase == "Running" || phase == "Deploying" || phase == "Ready" ||
         phase == "Degraded";
}

// The API module's lenient readers (api/json_fields.h).
inline std::string Str(const Json& o, const char* key, const std::string& def = "") {
  return api::StrOr(o, key, def);
}
using api::IntOr;

// A node's pool: spec.pool, else metadata.labels.pool, else "".
inline std::string PoolOf(const Json& node) {
  auto spec = node.find("spec");
  if (spec != node.end() && spec->is_object()) {
    std::string p = Str(*spec, "pool");
    if (!p.empty()) return p;
  }
  auto meta = node.find("metadata");
  if (meta == node.end() || !meta->is_object()) return "";
  auto labels = meta->find("labels");
  return labels != meta->end() && labels->is_object() ? Str(*labels, "pool") : "";
}

inline Json& StatusOf(Json& obj) {
  if (!obj.contains("status") || !obj["status"].is_object()) obj["status"] = Json::object();
  return obj["status"];
}

inline const Json& StatusOf(const Json& obj) {
  static const Json* const kEmpty = new Json(Json::object());
  auto it = obj.find("status");
  return it != obj.end() && it->is_object() ? *it : *kEmpty;
}

using api::SetCondition;

// The condition a job phase sets: (type, status).
inline std::pair<std::string, std::string> PhaseCondition(absl::string_view phase) {
  // Queued (Admitted in stores written before the rename): in its queue.
  if (phase == "Queued" || phase == "Admitted") return {"Admitted", "True"};
  if (BoundPhase(phase)) return {"Scheduled", "True"};
  if (phase == "Succeeded") return {"Succeeded", "True"};
  if (phase == "Failed") return {"Failed", "True"};
  return {"Scheduled", "False"};
}

// True when status.conditions has `type` with status "True".
inline bool ConditionTrue(const Json& status, absl::string_view type) {
  auto conds = status.find("conditions");
  if (conds == status.end() || !conds->is_array()) return false;
  for (const Json& c : *conds) {
    if (c.is_object() && Str(c, "type") == type) return Str(c, "status") == "True";
  }
  return false;
}

// Jobs that grow (elastic, autoscaled) in this order: higher priority first,
// then by store key (deterministic).
template <typename Rec>  // SchedulingController::JobRec, private to its members
bool GrowsFirst(const Rec* a, const Rec* b) {
  if (a->job->priority != b->job->priority) return a->job->priority > b->job->priority;
  return a->key < b->key;
}

// The members of `after` (a grown placement) that `before` did not hold.
inline std::vector<sched::MemberPlacement> AddedMembers(const sched::Placement& before,
                                                        const sched::Placement& after) {
  std::vector<sched::MemberPlacement> added;
  for (const sched::MemberPlacement& m : after.members) {
    const bool held = std::any_of(before.members.begin(), before.members.end(),
                                  [&](const sched::MemberPlacement& o) {
                                    return o.group == m.group && o.member == m.member;
                                  });
    if (!held) added.push_back(m);
  }
  return added;
}

// A preemption victim's PreemptionPending condition ends (it was preempted,
// shrunk, or bound again): status.preemption, which exists only while the
// condition is True, goes with it.
// The names of the nodes `p` places members on, sorted, each once.
inline std::vector<std::string> NodeNames(const sched::Placement& p,
                                          const sched::ClusterState& cs) {
  std::vector<std::string> nodes;
  for (const sched::MemberPlacement& m : p.members) nodes.push_back(cs.node(m.node).name);
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  return nodes;
}

// Adds `nodes` to status.logNodes (the nodes that ran members of the job, where their logs
// are), each once, keeping the newest 64.
inline void NoteLogNodes(Json& status, const std::vector<std::string>& nodes) {
  Json list = status.contains("logNodes") && status["logNodes"].is_array() ? status["logNodes"]
                                                                           : Json::array();
  for (const std::string& n : nodes) {
    auto at = std::find(list.begin(), list.end(), Json(n));
    if (at != list.end()) list.erase(at);
    list.push_back(n);
  }
  while (list.size() > 64) list.erase(list.begin());
  status["logNodes"] = std::move(list);
}

inline void EndPreemption(Json& status, const std::string& reason, const std::string& message,
                          absl::Time now) {
  SetCondition(status, "PreemptionPending", "False", reason, message, now);
  status.erase("preemption");
}

inline std::string SpecDumpOfNode(const Json& obj) {
  Json spec = obj.contains("spec") ? obj["spec"] : Json::object();
  if (spec.is_object()) spec.erase("unschedulable");
  Json labels = obj["metadata"].contains("labels") ? obj["metadata"]["labels"] : Json();
  return spec.dump() + "|" + labels.dump();
}

}  // namespace internal
}  // namespace tessera::controller
