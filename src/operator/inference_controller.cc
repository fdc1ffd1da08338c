// The InferenceService controller: the replica count from the service's autoscaler (the
// standalone controller's policy, controller/autoscaler.h, fed by the replicas' reports on their
// Pods), then the plan (inference_plan.h) carried out as the TrainingJob's is: status first,
// then deletes, then creates. A service with an SLO is reconciled again every 15 s, so that a
// scale-down whose stabilization window has passed happens without a new report.
#include "absl/strings/str_cat.h"
#include "api/store_layout.h"
#include "common/status_macros.h"
#include "kube/resource.h"
#include "operator/inference_plan.h"
#include "operator/operator_internal.h"

namespace tessera::op::internal {
namespace {

constexpr absl::Duration kAutoscalePeriod = absl::Seconds(15);

}  // namespace

absl::Status InferenceController::Reconcile(const std::string& ns, const std::string& name) {
  const std::string key = ns + "/" + name;
  kube::ObjectPtr svc = env_.caches.inference->store().Get(key);
  if (!svc || Deleting(*svc)) {
    absl::MutexLock l(&mu_);
    scalers_.erase(key);
    return absl::OkStatus();
  }
  const Json& spec = Sub(*svc, "spec");
  const Json& old_status = Sub(*svc, "status");
  const std::vector<kube::ObjectPtr> pods = ByIndex(*env_.caches.replicas, kServiceIndex, key);
  const absl::Time now = env_.clock.Now();

  InferenceInputs in;
  in.service = svc.get();
  for (const auto& p : pods) in.pods.push_back(p.get());
  in.service_object_exists =
      env_.caches.services->store().Get(ns + "/" + ServiceName(name)) != nullptr;
  kube::ObjectPtr mv = env_.caches.models->store().Get(ns + "/" + StrOr(spec, "modelVersion"));
  in.model_version = mv && !Deleting(*mv) ? mv.get() : nullptr;
  const std::string queue = StrOr(spec, "queue", "default");
  in.queue_known = !env_.caches.queues || queue == "default" ||
                   env_.caches.queues->store().Get(queue) != nullptr;
  in.now = now;

  // The replica count: the autoscaler's with an SLO, else replicas.max (what the standalone
  // scheduler places for a service without one).
  Json svc_for_plan = *svc;
  std::optional<EventNote> scaled;
  if (const std::optional<controller::ServiceSlo> slo = controller::ServiceSloOf(spec)) {
    const auto current =
        static_cast<int32_t>(IntOr(old_status, "desiredReplicas", slo->min_replicas));
    std::vector<controller::ReplicaReading> readings;
    for (const auto& p : pods) {
      if (Deleting(*p) || !PodReady(*p)) continue;
      const std::string text = Annotation(*p, kReplicaMetricsAnnotation);
      if (text.empty()) continue;
      const Json entry = Json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (std::optional<controller::ReplicaReading> r = controller::ReplicaReadingOf(entry)) {
        readings.push_back(*r);
      }
    }
    absl::Time since = absl::InfinitePast();
    if (std::string t = StrOr(old_status, "lastScaleTime"); !t.empty()) {
      (void)api::ParseTimestamp(t, &since);
    }
    controller::ScaleDecision d;
    {
      absl::MutexLock l(&mu_);
      std::unique_ptr<controller::Autoscaler>& a = scalers_[key];
      if (!a) a = std::make_unique<controller::Autoscaler>();
      d = a->Recommend(*slo, current, readings, now, since);
    }
    in.desired = d.desired;
    in.scale_reason = d.reason;
    if (d.desired != current) {
      svc_for_plan["status"]["lastScaleTime"] = Timestamp(now);
      scaled = EventNote{"Normal", d.desired > current ? "ScaledUp" : "ScaledDown", "Scaling",
                         absl::StrCat("replicas ", current, " -> ", d.desired, ": ", d.reason)};
    }
    env_.requeue_after("InferenceService/" + key, kAutoscalePeriod);
  } else {
    in.desired = static_cast<int>(IntOr(Sub(spec, "replicas"), "max", 1));
  }
  in.service = &svc_for_plan;
  InferencePlan plan = PlanInferenceService(in, env_.opts.gang);
  if (scaled) plan.events.push_back(*scaled);

  if (plan.status) {
    RETURN_IF_ERROR(WriteStatus(env_, kube::InferenceServicesResource(), *svc, *plan.status));
  }
  const kube::ObjectReference ref = kube::ReferenceTo(*svc);
  for (const EventNote& e : plan.events) env_.events.Post(ref, e.type, e.reason, e.action, e.note);
  for (const ObjectName& p : plan.delete_pods) {
    RETURN_IF_ERROR(DeleteObject(env_, kube::PodsResource(), ns, p.name, p.uid));
    ++env_.counters.pods_deleted;
  }
  if (plan.create_service) {
    RETURN_IF_ERROR(CreateIfAbsent(env_, kube::ServicesResource(), ns, *plan.create_service));
  }
  const std::optional<std::vector<std::string>> confined =
      plan.create_pods.empty() ? std::nullopt : QueueNodes(env_, queue);
  for (Json p : plan.create_pods) {
    if (confined) ConfineToNodes(p, *confined);
    RETURN_IF_ERROR(CreateIfAbsent(env_, kube::PodsResource(), ns, p));
    ++env_.counters.pods_created;
  }
  return absl::OkStatus();
}

}  // namespace tessera::op::internal
