// The TrainingJob controller: reads the job's children from the caches, plans
// (training_plan.h) and carries the plan out: the status first (conditioned on the job's
// resourceVersion), then deletes, then creates. Also records the checkpoints members report on
// their Pods, and marks the gang's Pods with the newest one's time for the scheduler.
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "api/checkpoints.h"
#include "common/status_macros.h"
#include "kube/api_error.h"
#include "kube/resource.h"
#include "operator/operator_internal.h"
#include "operator/training_plan.h"

namespace tessera::op::internal {
namespace {

constexpr char kLastCheckpointAnnotation[] = "tessera.dev/last-checkpoint";

// Checkpoints that members report on their Pods become Ready Checkpoint objects
// "{job}-step-{step}", owned by the job (created, then status Ready: the status subresource
// drops a status sent on create).
absl::Status RecordCheckpoints(Env& env, const Json& job, const std::vector<kube::ObjectPtr>& pods,
                               const std::vector<kube::ObjectPtr>& cps) {
  const std::string ns = StrOr(Meta(job), "namespace");
  const std::string name = StrOr(Meta(job), "name");
  for (const kube::ObjectPtr& p : pods) {
    const std::string step_text = Annotation(*p, kCheckpointStepAnnotation);
    int64_t step = 0;
    if (step_text.empty() || !absl::SimpleAtoi(step_text, &step) || step < 0) continue;
    const std::string cp_name = absl::StrCat(name, "-step-", step);
    bool ready = false;
    for (const kube::ObjectPtr& c : cps) {
      if (StrOr(Meta(*c), "name") == cp_name) ready = StrOr(Sub(*c, "status"), "phase") == "Ready";
    }
    if (ready) continue;
    Json cp = {
        {"apiVersion", "tessera.dev/v1"},
        {"kind", "Checkpoint"},
        {"metadata",
         {{"name", cp_name},
          {"namespace", ns},
          {"labels", {{kJobLabel, name}}},
          {"ownerReferences", Json::array({ControllerReference(job, "TrainingJob")})}}},
        {"spec",
         {{"jobName", name}, {"step", step}, {"path", Annotation(*p, kCheckpointPathAnnotation)}}}};
    absl::StatusOr<Json> created = env.client.Create(kube::CheckpointsResource(), ns, cp);
    if (!created.ok() && kube::IsApiAlreadyExists(created.status())) {
      created = env.client.Get(kube::CheckpointsResource(), ns, cp_name);
    }
    if (!created.ok()) return created.status();
    RETURN_IF_ERROR(WriteStatus(env, kube::CheckpointsResource(), *created,
                                {{"phase", "Ready"},
                                 {"reportedBy", StrOr(Meta(*p), "name")},
                                 {"message", "reported by the member on its Pod"}}));
    ++env.counters.checkpoints_recorded;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ReconcileTrainingJob(Env& env, const std::string& ns, const std::string& name) {
  const std::string key = ns + "/" + name;
  kube::ObjectPtr job = env.caches.jobs->store().Get(key);
  if (!job || Deleting(*job)) return absl::OkStatus();
  const std::vector<kube::ObjectPtr> pods = ByIndex(*env.caches.pods, kJobIndex, key);
  const std::vector<kube::ObjectPtr> groups = ByIndex(*env.caches.groups, kJobIndex, key);
  const std::vector<kube::ObjectPtr> cps = ByIndex(*env.caches.checkpoints, kJobIndex, key);
  RETURN_IF_ERROR(RecordCheckpoints(env, *job, pods, cps));

  TrainingInputs in;
  in.job = job.get();
  for (const auto& p : pods) in.pods.push_back(p.get());
  for (const auto& g : groups) in.pod_groups.push_back(g.get());
  in.service_exists = env.caches.services->store().Get(ns + "/" + ServiceName(name)) != nullptr;
  std::vector<const Json*> cp_objs;
  cp_objs.reserve(cps.size());
  for (const auto& c : cps) cp_objs.push_back(c.get());
  in.newest_checkpoint = api::NewestReadyCheckpoint(name, cp_objs);
  std::string newest_created;
  for (const auto& c : cps) {
    if (in.newest_checkpoint && StrOr(Meta(*c), "name") == in.newest_checkpoint->name) {
      newest_created = StrOr(Meta(*c), "creationTimestamp");
    }
  }
  const std::string queue = StrOr(Sub(*job, "spec"), "queue", "default");
  in.queue_known =
      !env.caches.queues || queue == "default" || env.caches.queues->store().Get(queue) != nullptr;
  in.now = env.clock.Now();
  const TrainingPlan plan = PlanTrainingJob(in, env.opts.gang);

  // The status first: the decision (a new generation, say) is recorded before it is acted on,
  // and only if nobody changed the job since it was read.
  if (plan.status)
    RETURN_IF_ERROR(WriteStatus(env, kube::TrainingJobsResource(), *job, *plan.status));
  const kube::ObjectReference ref = kube::ReferenceTo(*job);
  for (const EventNote& e : plan.events) env.events.Post(ref, e.type, e.reason, e.action, e.note);
  for (const ObjectName& p : plan.delete_pods) {
    RETURN_IF_ERROR(DeleteObject(env, kube::PodsResource(), ns, p.name, p.uid));
    ++env.counters.pods_deleted;
  }
  for (const ObjectName& g : plan.delete_pod_groups) {
    RETURN_IF_ERROR(DeleteObject(env, kube::CoschedulingPodGroupsResource(), ns, g.name, g.uid));
  }
  if (plan.create_service) {
    RETURN_IF_ERROR(CreateIfAbsent(env, kube::ServicesResource(), ns, *plan.create_service));
  }
  if (plan.create_pod_group) {
    RETURN_IF_ERROR(
        CreateIfAbsent(env, kube::CoschedulingPodGroupsResource(), ns, *plan.create_pod_group));
  }
  // A queue some GPUPools name runs only on their Nodes.
  const std::optional<std::vector<std::string>> confined =
      plan.create_pods.empty() ? std::nullopt : QueueNodes(env, queue);
  for (Json p : plan.create_pods) {
    if (confined) ConfineToNodes(p, *confined);
    RETURN_IF_ERROR(CreateIfAbsent(env, kube::PodsResource(), ns, p));
    ++env.counters.pods_created;
  }
  // Retention (spec.checkpoint.keep): older Checkpoints go, but not one a ModelVersion names.
  for (const std::string& c :
       api::CheckpointsBeyondRetention(name, cp_objs, api::CheckpointKeep(Sub(*job, "spec")))) {
    if (!ByIndex(*env.caches.models, kCheckpointIndex, absl::StrCat(ns, "/", c)).empty()) continue;
    RETURN_IF_ERROR(DeleteObject(env, kube::CheckpointsResource(), ns, c, ""));
    env.events.Post(ref, "Normal", "CheckpointPruned", "Pruning",
                    absl::StrCat("checkpoint ", c, " deleted (spec.checkpoint.keep ",
                                 api::CheckpointKeep(Sub(*job, "spec")), ")"));
  }
  // The gang's Pods tell the scheduler's preemption how recent their checkpoint is.
  if (newest_created.empty()) return absl::OkStatus();
  for (const kube::ObjectPtr& p : pods) {
    const std::string phase = StrOr(Sub(*p, "status"), "phase");
    if (phase == "Succeeded" || phase == "Failed" || Deleting(*p) ||
        Annotation(*p, kLastCheckpointAnnotation) == newest_created) {
      continue;
    }
    absl::StatusOr<Json> w = env.client.MergePatch(
        kube::PodsResource(), ns, StrOr(Meta(*p), "name"),
        {{"metadata", {{"annotations", {{kLastCheckpointAnnotation, newest_created}}}}}});
    if (!w.ok() && !kube::IsApiNotFound(w.status())) return w.status();
  }
  return absl::OkStatus();
}

}  // namespace tessera::op::internal
