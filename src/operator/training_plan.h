// PlanTrainingJob: what `tessera operator` does next for one TrainingJob, as a pure function of
// the job and what the API shows of its children (level-triggered: the same inputs give the same
// plan, so a plan may be computed again after any event, by any replica).
//
// Algorithm (status.generation G is the gang's incarnation; its children carry G in their names):
//  1. A finished job (Succeeded, Failed) only has its still-running members deleted (Failed).
//  2. A job that cannot run on Kubernetes (KubeSpecProblems), or whose queue does not exist,
//     waits: phase Pending, condition Admitted=False naming the field or the queue; nothing is
//     created. spec.suspend deletes the gang (phase Suspended); resuming starts a new generation.
//  3. Pods of another generation are deleted, as are PodGroups of other generations.
//  4. A member of generation G that failed (phase Failed, not evicted) restarts the whole gang:
//     while status.restarts < spec.maxRestarts, generation G+1 with restarts+1 and resumeFrom the
//     newest Ready Checkpoint (an Event names the member, its exit code and reason); else the job
//     is Failed (condition Failed with the member, exit code and reason). A member evicted or lost
//     once the gang was placed (preemption, a node drained) starts generation G+1 too, without
//     counting a restart. A change of the member set (spec.groups counts) of a non-elastic job
//     starts G+1 (reason Resized); an elastic job's members are added or removed in place.
//  5. Otherwise the generation's PodGroup, headless Service and missing Pods are created, and the
//     phase follows the members: Queued (created, not all bound), Scheduled (bound), Running (at
//     least the gang's minimum running), Succeeded (every member succeeded).
// The executor writes the status first (conditioned on the job's resourceVersion), then deletes,
// then creates: a replica that takes over mid-way finds the generation already decided and
// creates exactly the Pods it names (deterministic names: never two Pods for one member).
// Pure; thread-compatible.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "operator/training_gang.h"

namespace tessera::op {

struct TrainingInputs {
  const Json* job = nullptr;
  // Pods and scheduler-plugins PodGroups labelled tessera.dev/trainingjob=NAME in its namespace.
  std::vector<const Json*> pods, pod_groups;
  bool service_exists = false;
  // The newest Ready Checkpoint of the job (spec.jobName), if any.
  std::optional<ResumePoint> newest_checkpoint;
  // spec.queue (absent: "default") names a Queue that exists, or the queue check is off.
  bool queue_known = true;
  absl::Time now;
};

struct ObjectName {
  std::string name, uid;
};
// metadata.name and metadata.uid of `obj`.
inline ObjectName NameOf(const Json& obj) {
  return {StrOr(Meta(obj), "name"), StrOr(Meta(obj), "uid")};
}

struct EventNote {
  std::string type, reason, action, note;
};

struct TrainingPlan {
  std::optional<Json> status;  // the status to write, when it changes
  std::vector<ObjectName> delete_pods, delete_pod_groups;
  std::optional<Json> create_service, create_pod_group;
  std::vector<Json> create_pods;
  std::vector<EventNote> events;
};

TrainingPlan PlanTrainingJob(const TrainingInputs& in, const GangOptions& opts);

}  // namespace tessera::op
