// Gang object codecs (gang_objects.h).
#include "absl/status/statusor.h"
#include "kube/field_reader.h"
#include "kube/gang_objects.h"

namespace tessera::kube {

using internal::FieldReader;
using internal::SetOrErase;

namespace {

const Json& Section(FieldReader& r, const Json& j, const char* key, const std::string& path) {
  static const Json kEmpty = Json::object();
  const Json* s = r.Object(j, key, path);
  return s ? *s : kEmpty;
}

std::optional<int32_t> OptInt32(FieldReader& r, const Json& obj, const char* key,
                                const std::string& path) {
  std::optional<int64_t> v = r.OptInt(obj, key, path);
  if (!v) return std::nullopt;
  return static_cast<int32_t>(*v);
}

GroupPolicy ReadPolicy(FieldReader& r, const Json& holder, const std::string& path) {
  GroupPolicy p;
  const std::string pp = FieldReader::Join(path, "schedulingPolicy");
  const Json* pol = r.Object(holder, "schedulingPolicy", path);
  if (pol == nullptr) {
    r.Error(pp, "required: basic or gang");
    return p;
  }
  const auto present = [pol](const char* k) { return pol->contains(k) && !(*pol)[k].is_null(); };
  p.basic = present("basic");
  const bool gang = present("gang");
  if (p.basic == gang) r.Error(pp, "exactly one of basic and gang");
  if (const Json* g = r.Object(*pol, "gang", pp)) {
    p.gang_min_count = OptInt32(r, *g, "minCount", pp + ".gang");
    if (!p.gang_min_count || *p.gang_min_count < 1) {
      r.Error(pp + ".gang.minCount", "must be at least 1");
    }
  }
  return p;
}

Json EncodePolicy(const GroupPolicy& p, Json pol) {
  if (!pol.is_object()) pol = Json::object();
  if (p.gang_min_count) {
    pol.erase("basic");
    Json gang = pol.value("gang", Json::object());
    gang["minCount"] = *p.gang_min_count;
    pol["gang"] = gang;
  } else if (p.basic) {
    pol.erase("gang");
    pol["basic"] = pol.value("basic", Json::object());
  }
  return pol;
}

std::vector<std::string> ReadTopology(FieldReader& r, const Json& holder, const std::string& path) {
  std::vector<std::string> keys;
  const std::string cp = FieldReader::Join(path, "schedulingConstraints");
  const Json* cons = r.Object(holder, "schedulingConstraints", path);
  if (cons == nullptr) return keys;
  if (const Json* topo = r.Array(*cons, "topology", cp)) {
    for (size_t i = 0; i < topo->size(); ++i) {
      keys.push_back(r.Str((*topo)[i], "key", FieldReader::Index(cp + ".topology", i)));
    }
  }
  return keys;
}

void WriteTopology(const std::vector<std::string>& keys, Json& holder) {
  if (keys.empty()) {
    if (holder.contains("schedulingConstraints")) holder["schedulingConstraints"].erase("topology");
    if (holder.contains("schedulingConstraints") && holder["schedulingConstraints"].empty()) {
      holder.erase("schedulingConstraints");
    }
    return;
  }
  Json topo = Json::array();
  for (const std::string& k : keys) topo.push_back({{"key", k}});
  holder["schedulingConstraints"]["topology"] = topo;
}

}  // namespace

absl::StatusOr<PodGroup> DecodePodGroup(const Json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("PodGroup: not a JSON object");
  FieldReader r(internal::Describe("PodGroup", j));
  PodGroup g;
  internal::ReadMeta(r, j, g.metadata);
  const Json& spec = Section(r, j, "spec", "");
  if (const Json* ref = r.Object(spec, "workloadRef", "spec")) {
    g.workload_name = r.OptStr(*ref, "workloadName", "spec.workloadRef");
    g.template_name = r.OptStr(*ref, "templateName", "spec.workloadRef");
  }
  g.policy = ReadPolicy(r, spec, "spec");
  g.topology_keys = ReadTopology(r, spec, "spec");
  g.priority_class_name = r.Str(spec, "priorityClassName", "spec");
  g.preemption_policy = r.Str(spec, "preemptionPolicy", "spec");
  g.priority = OptInt32(r, spec, "priority", "spec");
  const Json& status = Section(r, j, "status", "");
  if (const Json* conds = r.Array(status, "conditions", "status")) {
    for (size_t i = 0; i < conds->size(); ++i) {
      const std::string p = FieldReader::Index("status.conditions", i);
      const Json& c = (*conds)[i];
      Condition cond;
      cond.type = r.Str(c, "type", p);
      cond.status = r.Str(c, "status", p);
      cond.reason = r.Str(c, "reason", p);
      cond.message = r.Str(c, "message", p);
      cond.last_transition_time = r.Str(c, "lastTransitionTime", p);
      cond.observed_generation = r.Int(c, "observedGeneration", p);
      g.conditions.push_back(std::move(cond));
    }
  }
  if (!r.ok()) return r.Finish();
  g.raw = j;
  return g;
}

Json EncodePodGroup(const PodGroup& g) {
  Json j = internal::StartEncode(g.raw, "scheduling.k8s.io/v1alpha3", "PodGroup", g.metadata);
  Json spec = j.value("spec", Json::object());
  if (g.workload_name || g.template_name) {
    spec["workloadRef"] = {{"workloadName", g.workload_name.value_or("")},
                           {"templateName", g.template_name.value_or("")}};
  } else {
    spec.erase("workloadRef");
  }
  spec["schedulingPolicy"] = EncodePolicy(g.policy, spec.value("schedulingPolicy", Json()));
  WriteTopology(g.topology_keys, spec);
  SetOrErase(spec, "priorityClassName", g.priority_class_name, g.priority_class_name.empty());
  SetOrErase(spec, "preemptionPolicy", g.preemption_policy, g.preemption_policy.empty());
  SetOrErase(spec, "priority", g.priority.value_or(0), !g.priority);
  j["spec"] = spec;
  Json status = j.value("status", Json::object());
  Json conds = Json::array();
  for (const Condition& c : g.conditions) {
    // metav1.Condition requires reason, message and lastTransitionTime.
    Json e = {{"type", c.type},
              {"status", c.status},
              {"reason", c.reason},
              {"message", c.message},
              {"lastTransitionTime", c.last_transition_time}};
    if (c.observed_generation != 0) e["observedGeneration"] = c.observed_generation;
    conds.push_back(std::move(e));
  }
  SetOrErase(status, "conditions", conds, conds.empty());
  SetOrErase(j, "status", status, status.empty());
  return j;
}

absl::StatusOr<Workload> DecodeWorkload(const Json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("Workload: not a JSON object");
  FieldReader r(internal::Describe("Workload", j));
  Workload w;
  internal::ReadMeta(r, j, w.metadata);
  const Json& spec = Section(r, j, "spec", "");
  if (const Json* ref = r.Object(spec, "controllerRef", "spec")) {
    w.controller_api_group = r.OptStr(*ref, "apiGroup", "spec.controllerRef");
    w.controller_kind = r.OptStr(*ref, "kind", "spec.controllerRef");
    w.controller_name = r.OptStr(*ref, "name", "spec.controllerRef");
  }
  if (const Json* ts = r.Array(spec, "podGroupTemplates", "spec")) {
    for (size_t i = 0; i < ts->size(); ++i) {
      const std::string p = FieldReader::Index("spec.podGroupTemplates", i);
      const Json& t = (*ts)[i];
      PodGroupTemplate pt;
      pt.name = r.Str(t, "name", p);
      pt.policy = ReadPolicy(r, t, p);
      pt.topology_keys = ReadTopology(r, t, p);
      pt.priority_class_name = r.Str(t, "priorityClassName", p);
      pt.priority = OptInt32(r, t, "priority", p);
      w.pod_group_templates.push_back(std::move(pt));
    }
  }
  if (!r.ok()) return r.Finish();
  w.raw = j;
  return w;
}

Json EncodeWorkload(const Workload& w) {
  Json j = internal::StartEncode(w.raw, "scheduling.k8s.io/v1alpha3", "Workload", w.metadata);
  Json spec = j.value("spec", Json::object());
  if (w.controller_kind || w.controller_name) {
    Json ref = {{"kind", w.controller_kind.value_or("")}, {"name", w.controller_name.value_or("")}};
    if (w.controller_api_group) ref["apiGroup"] = *w.controller_api_group;
    spec["controllerRef"] = ref;
  } else {
    spec.erase("controllerRef");
  }
  const Json old = spec.value("podGroupTemplates", Json::array());
  Json ts = Json::array();
  for (const PodGroupTemplate& t : w.pod_group_templates) {
    Json e = Json::object();
    for (const Json& o : old) {
      if (o.is_object() && o.value("name", "") == t.name) e = o;
    }
    e["name"] = t.name;
    e["schedulingPolicy"] = EncodePolicy(t.policy, e.value("schedulingPolicy", Json()));
    WriteTopology(t.topology_keys, e);
    SetOrErase(e, "priorityClassName", t.priority_class_name, t.priority_class_name.empty());
    SetOrErase(e, "priority", t.priority.value_or(0), !t.priority);
    ts.push_back(std::move(e));
  }
  spec["podGroupTemplates"] = ts;
  j["spec"] = spec;
  return j;
}

absl::StatusOr<CoschedulingPodGroup> DecodeCoschedulingPodGroup(const Json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("PodGroup: not a JSON object");
  FieldReader r(internal::Describe("PodGroup", j));
  CoschedulingPodGroup g;
  internal::ReadMeta(r, j, g.metadata);
  const Json& spec = Section(r, j, "spec", "");
  g.min_member = static_cast<int32_t>(r.Int(spec, "minMember", "spec"));
  if (g.min_member < 1) r.Error("spec.minMember", "must be at least 1");
  g.min_resources = r.Resources(spec, "minResources", "spec");
  g.schedule_timeout_seconds = OptInt32(r, spec, "scheduleTimeoutSeconds", "spec");
  if (g.schedule_timeout_seconds && *g.schedule_timeout_seconds < 0) {
    r.Error("spec.scheduleTimeoutSeconds", "must not be negative");
  }
  const Json& status = Section(r, j, "status", "");
  g.phase = r.Str(status, "phase", "status");
  g.occupied_by = r.Str(status, "occupiedBy", "status");
  g.schedule_start_time = r.Str(status, "scheduleStartTime", "status");
  g.running = static_cast<int32_t>(r.Int(status, "running", "status"));
  g.succeeded = static_cast<int32_t>(r.Int(status, "succeeded", "status"));
  g.failed = static_cast<int32_t>(r.Int(status, "failed", "status"));
  if (!r.ok()) return r.Finish();
  g.raw = j;
  return g;
}

Json EncodeCoschedulingPodGroup(const CoschedulingPodGroup& g) {
  Json j = internal::StartEncode(g.raw, "scheduling.x-k8s.io/v1alpha1", "PodGroup", g.metadata);
  Json spec = j.value("spec", Json::object());
  spec["minMember"] = g.min_member;
  SetOrErase(spec, "minResources", internal::EncodeResources(g.min_resources),
             g.min_resources.empty());
  SetOrErase(spec, "scheduleTimeoutSeconds", g.schedule_timeout_seconds.value_or(0),
             !g.schedule_timeout_seconds);
  j["spec"] = spec;
  Json status = j.value("status", Json::object());
  SetOrErase(status, "phase", g.phase, g.phase.empty());
  SetOrErase(status, "occupiedBy", g.occupied_by, g.occupied_by.empty());
  SetOrErase(status, "scheduleStartTime", g.schedule_start_time, g.schedule_start_time.empty());
  SetOrErase(status, "running", g.running, g.running == 0);
  SetOrErase(status, "succeeded", g.succeeded, g.succeeded == 0);
  SetOrErase(status, "failed", g.failed, g.failed == 0);
  SetOrErase(j, "status", status, status.empty());
  return j;
}

}  // namespace tessera::kube
