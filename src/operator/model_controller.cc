// The ModelVersion controller: keeps a ModelVersion's lineage status (api/model_lineage.h: the
// Checkpoint, job and step it comes from, the InferenceServices serving it) and, while it is
// served, the finalizer tessera.dev/served, so that a delete that gets past the admission check
// (the operator's webhook down, or not installed) leaves the object in place until no service
// uses it. The refusal itself, with api::ServedDeletionMessage, is the webhook's
// (admission_webhook.h).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "api/model_lineage.h"
#include "common/status_macros.h"
#include "kube/api_error.h"
#include "kube/resource.h"
#include "operator/operator_internal.h"

namespace tessera::op::internal {

std::vector<std::string> ServingServices(Env& env, const std::string& ns, const std::string& name) {
  const std::vector<kube::ObjectPtr> objs =
      ByIndex(*env.caches.inference, kModelIndex, ns + "/" + name);
  std::vector<const Json*> services;
  services.reserve(objs.size());
  for (const auto& o : objs) services.push_back(o.get());
  return api::ServingInferenceServices(name, services);
}

absl::Status ReconcileModelVersion(Env& env, const std::string& ns, const std::string& name) {
  kube::ObjectPtr mv = env.caches.models->store().Get(ns + "/" + name);
  if (!mv) return absl::OkStatus();
  const std::vector<std::string> served = ServingServices(env, ns, name);

  // The finalizer follows whether it is served (a merge patch replaces the whole list, so it is
  // conditioned on the resourceVersion read).
  std::vector<std::string> finalizers;
  for (const Json& f : Field(Meta(*mv), "finalizers")) {
    if (f.is_string()) finalizers.push_back(f.get<std::string>());
  }
  const bool has =
      std::find(finalizers.begin(), finalizers.end(), kServedFinalizer) != finalizers.end();
  if (has != !served.empty()) {
    if (served.empty()) {
      std::erase(finalizers, std::string(kServedFinalizer));
    } else {
      finalizers.emplace_back(kServedFinalizer);
    }
    Json patch = {
        {"metadata",
         {{"finalizers", finalizers}, {"resourceVersion", StrOr(Meta(*mv), "resourceVersion")}}}};
    absl::StatusOr<Json> w = env.client.MergePatch(kube::ModelVersionsResource(), ns, name, patch);
    if (!w.ok()) return kube::IsApiNotFound(w.status()) ? absl::OkStatus() : w.status();
    return absl::OkStatus();  // the change comes back through the informer: reconciled again
  }
  if (Deleting(*mv)) return absl::OkStatus();

  kube::ObjectPtr cp;
  if (std::string c = StrOr(Sub(*mv, "spec"), "checkpoint"); !c.empty()) {
    cp = env.caches.checkpoints->store().Get(ns + "/" + c);
  }
  const Json lineage = api::ModelVersionStatus(*mv, cp.get(), served);
  Json st = Sub(*mv, "status");
  const Json before = st;
  for (auto it = lineage.begin(); it != lineage.end(); ++it) st[it.key()] = it.value();
  if (!lineage.contains("checkpoint")) st.erase("checkpoint");
  if (st == before) return absl::OkStatus();
  return WriteStatus(env, kube::ModelVersionsResource(), *mv, st);
}

}  // namespace tessera::op::internal
