#include "operator/inference_plan.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/conditions.h"
#include "operator/json_fields.h"

namespace tessera::op {

using api::SetCondition;
namespace {

int ReplicaIndex(const Json& pod) { return static_cast<int>(IntLabel(pod, kReplicaLabel, -1)); }

std::string PodNameOf(const std::string& service, const std::string& mv, int i) {
  return absl::StrCat(service, "-", mv, "-", i);
}

Json ReplicaPod(const Json& svc, const Json& mv, int i, const GangOptions& opts) {
  const Json& spec = Sub(svc, "spec");
  const std::string name = StrOr(Meta(svc), "name");
  const std::string version = StrOr(spec, "modelVersion");
  Json env = Json::array({EnvVar("TESSERA_SERVICE", name), EnvVar("TESSERA_MODEL_VERSION", version),
                          EnvVar("TESSERA_REPLICA", absl::StrCat(i))});
  if (std::string path = StrOr(Sub(mv, "spec"), "artifactPath"); !path.empty()) {
    env.push_back(EnvVar("TESSERA_MODEL_PATH", path));
  }
  env.push_back({{"name", "TESSERA_POD_NAME"},
                 {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}});
  Json resources = Json::object();
  if (int64_t g = IntOr(spec, "gpusPerReplica", 0); g > 0) {
    resources["limits"]["nvidia.com/gpu"] = absl::StrCat(g);
  }
  if (const Json& r = Sub(spec, "resources"); !r.empty()) {
    if (const Json& cpu = Field(r, "cpu"); cpu.is_number()) {
      resources["requests"]["cpu"] = absl::StrCat(cpu.get<double>());
    }
    if (const Json& mem = Field(r, "memoryGiB"); mem.is_number()) {
      resources["requests"]["memory"] =
          absl::StrCat(static_cast<int64_t>(std::ceil(mem.get<double>() * 1024)), "Mi");
    }
  }
  Json container = {
      {"name", "server"},
      {"image", StrOr(spec, "image")},
      {"env", std::move(env)},
      {"resources", std::move(resources)},
      {"ports",
       Json::array({{{"name", "http"}, {"containerPort", kServingPort}, {"protocol", "TCP"}}})}};
  if (const Json& cmd = Field(spec, "command"); cmd.is_array() && !cmd.empty()) {
    container["command"] = cmd;
  }
  Json pod_spec = {{"schedulerName", opts.scheduler_name},
                   {"restartPolicy", "Always"},
                   {"containers", Json::array({std::move(container)})}};
  Json selector =
      Field(spec, "nodeSelector").is_object() ? Field(spec, "nodeSelector") : Json::object();
  if (std::string t = StrOr(spec, "gpuType"); !t.empty()) selector["nvidia.com/gpu.product"] = t;
  if (!selector.empty()) pod_spec["nodeSelector"] = std::move(selector);
  if (const Json& t = Field(spec, "tolerations"); t.is_array() && !t.empty()) {
    pod_spec["tolerations"] = t;
  }
  if (std::string pc = StrOr(spec, "priorityClassName"); !pc.empty()) {
    pod_spec["priorityClassName"] = pc;
  }
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", PodNameOf(name, version, i)},
            {"namespace", StrOr(Meta(svc), "namespace", "default")},
            {"labels",
             {{kServiceLabel, name},
              {kModelVersionLabel, version},
              {kReplicaLabel, absl::StrCat(i)},
              {"tessera.dev/queue", StrOr(spec, "queue", "default")}}},
            // Replicas prefer the emptiest nodes, so one node's loss takes few of them.
            {"annotations", {{"tessera.dev/placement", "Spread"}}},
            {"ownerReferences", Json::array({ControllerReference(svc, "InferenceService")})}}},
          {"spec", std::move(pod_spec)}};
}

Json ServiceObject(const Json& svc) {
  const std::string name = StrOr(Meta(svc), "name");
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata",
           {{"name", ServiceName(name)},
            {"namespace", StrOr(Meta(svc), "namespace", "default")},
            {"labels", {{kServiceLabel, name}}},
            {"ownerReferences", Json::array({ControllerReference(svc, "InferenceService")})}}},
          {"spec",
           {{"selector", {{kServiceLabel, name}}},
            {"ports", Json::array({{{"name", "http"},
                                    {"port", kServingPort},
                                    {"targetPort", kServingPort},
                                    {"protocol", "TCP"}}})}}}};
}

}  // namespace

bool PodReady(const Json& pod) {
  if (Deleting(pod)) return false;
  for (const Json& c : Field(Sub(pod, "status"), "conditions")) {
    if (StrOr(c, "type") == "Ready") return StrOr(c, "status") == "True";
  }
  return false;
}

InferencePlan PlanInferenceService(const InferenceInputs& in, const GangOptions& opts) {
  InferencePlan plan;
  const Json& svc = *in.service;
  const Json& spec = Sub(svc, "spec");
  const Json& old_status = Field(svc, "status");
  Json st = old_status.is_object() ? old_status : Json::object();
  const std::string name = StrOr(Meta(svc), "name");
  const std::string version = StrOr(spec, "modelVersion");
  const int desired = std::max(0, in.desired);
  st["observedGeneration"] = IntOr(Meta(svc), "generation", 0);

  std::vector<const Json*> cur, old;
  for (const Json* p : in.pods) {
    if (Deleting(*p)) continue;
    (Label(*p, kModelVersionLabel) == version ? cur : old).push_back(p);
  }
  auto ready = [](const std::vector<const Json*>& ps) {
    return static_cast<int>(
        std::count_if(ps.begin(), ps.end(), [](const Json* p) { return PodReady(*p); }));
  };
  auto finish = [&](const std::string& phase, const std::string& reason,
                    const std::string& msg) -> InferencePlan {
    const int cur_ready = ready(cur), old_ready = ready(old);
    st["phase"] = phase;
    st["reason"] = reason;
    st["message"] = msg.substr(0, 4096);
    st["replicas"] = static_cast<int>(cur.size() + old.size());
    st["readyReplicas"] = cur_ready + old_ready;
    st["updatedReplicas"] = static_cast<int>(cur.size());
    st["desiredReplicas"] = desired;
    if (old.empty() && cur_ready >= std::min(desired, 1) && in.model_version != nullptr) {
      st["modelVersion"] = version;
    }
    SetCondition(st, "Ready", cur_ready + old_ready >= std::max(1, desired) ? "True" : "False",
                 reason, msg, in.now);
    if (st != old_status) plan.status = std::move(st);
    return std::move(plan);
  };

  std::vector<std::string> problems;
  if (StrOr(spec, "image").empty()) {
    problems.push_back("spec.image: required on Kubernetes (the container image of each replica)");
  }
  if (IntOr(spec, "gpuMilli", 0) > 0) {
    problems.push_back(
        "spec.gpuMilli: fractional GPUs are not offered on Kubernetes (nvidia.com/gpu counts "
        "whole GPUs)");
  }
  if (!problems.empty()) {
    const std::string msg = absl::StrJoin(problems, "; ");
    SetCondition(st, "Admitted", "False", "InvalidSpec", msg, in.now);
    return finish(cur.empty() && old.empty() ? "Pending" : "Degraded", "InvalidSpec", msg);
  }
  const std::string queue = StrOr(spec, "queue", "default");
  if (!in.queue_known) {
    const std::string msg =
        absl::StrCat("queue \"", queue, "\" does not exist (a tessera.dev Queue); waiting for it");
    SetCondition(st, "Admitted", "False", "QueueNotFound", msg, in.now);
    return finish("Pending", "QueueNotFound", msg);
  }
  SetCondition(st, "Admitted", "True", "Admitted", absl::StrCat("queue ", queue), in.now);
  if (in.model_version == nullptr) {
    const std::string msg = absl::StrCat("modelversion \"", version,
                                         "\" does not exist; the replicas already serving stay");
    SetCondition(st, "ModelVersionAvailable", "False", "ModelVersionNotFound", msg, in.now);
    return finish(cur.empty() && old.empty() ? "Pending" : "Degraded", "ModelVersionNotFound", msg);
  }
  SetCondition(st, "ModelVersionAvailable", "True", "Found", "modelversion " + version, in.now);
  if (!in.service_object_exists) plan.create_service = ServiceObject(svc);

  std::map<int, const Json*> by_index;
  for (const Json* p : cur) by_index[ReplicaIndex(*p)] = p;
  auto create_lowest_missing = [&]() {
    for (int i = 0;; ++i) {
      if (by_index.count(i) == 0) {
        Json pod = ReplicaPod(svc, *in.model_version, i, opts);
        by_index[i] = nullptr;
        plan.create_pods.push_back(std::move(pod));
        return;
      }
    }
  };

  if (old.empty()) {
    // 3. Scale the one version to `desired`.
    for (int i = 0; i < desired; ++i) {
      if (by_index.count(i) == 0) {
        plan.create_pods.push_back(ReplicaPod(svc, *in.model_version, i, opts));
      }
    }
    for (const auto& [i, p] : by_index) {
      if (i >= desired || i < 0) plan.delete_pods.push_back(NameOf(*p));
    }
    if (StrOr(st, "rollingTo") == version) {
      plan.events.push_back(
          {"Normal", "RolledOut", "Rolling", absl::StrCat("every replica serves ", version)});
      st.erase("rollingTo");
    }
    const int r = ready(cur);
    const std::string msg = absl::StrCat(r, " of ", desired, " replicas Ready (", version, ")",
                                         in.scale_reason.empty() ? "" : "; " + in.scale_reason);
    SetCondition(st, "Progressing", "False", "Complete", msg, in.now);
    if (cur.empty() && plan.create_pods.empty()) return finish("Pending", "NoReplicas", msg);
    return finish(r >= desired && desired > 0 ? "Ready" : "Deploying",
                  r >= desired ? "Ready" : "Deploying", msg);
  }

  // 4. Rolling from older versions: surge 1, never fewer than `desired` Ready.
  const std::string from = Label(*old.front(), kModelVersionLabel);
  if (cur.empty() && StrOr(st, "rollingTo") != version) {
    plan.events.push_back(
        {"Normal", "RollingUpdate", "Rolling",
         absl::StrCat("rolling from ", from, " to ", version, " one replica at a time")});
  }
  st["rollingTo"] = version;
  int total = static_cast<int>(cur.size() + old.size());
  for (const Json* p : old) {
    if (!PodReady(*p)) {
      plan.delete_pods.push_back(NameOf(*p));
      --total;
    }
  }
  const int old_ready = ready(old);
  const int cur_ready = ready(cur);
  const bool cur_settled = cur_ready == static_cast<int>(cur.size());
  if (static_cast<int>(cur.size()) < desired && total < desired + 1 && cur_settled) {
    create_lowest_missing();
  }
  // Old Ready replicas beyond what keeps `desired` Ready go, the highest index first.
  std::vector<const Json*> old_ready_pods;
  for (const Json* p : old) {
    if (PodReady(*p)) old_ready_pods.push_back(p);
  }
  std::sort(old_ready_pods.begin(), old_ready_pods.end(),
            [](const Json* a, const Json* b) { return ReplicaIndex(*a) > ReplicaIndex(*b); });
  int removable = cur_ready + old_ready - desired;
  for (const Json* p : old_ready_pods) {
    if (removable <= 0) break;
    plan.delete_pods.push_back(NameOf(*p));
    --removable;
  }
  const std::string msg =
      absl::StrCat("rolling from ", from, " to ", version, ": ", cur_ready, " of ", desired,
                   " new replicas Ready, ", old_ready, " old Ready");
  SetCondition(st, "Progressing", "True", "RollingUpdate", msg, in.now);
  return finish("Deploying", "RollingUpdate", msg);
}

}  // namespace tessera::op
