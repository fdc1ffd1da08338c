// Node, PriorityClass, Lease, Event, PodDisruptionBudget, Binding and Eviction codecs (codec.h).
#include "kube/codec.h"
#include "kube/field_reader.h"

namespace tessera::kube {

using internal::FieldReader;
using internal::SetOrErase;

namespace {

const Json& Section(FieldReader& r, const Json& j, const char* key) {
  static const Json kEmpty = Json::object();
  const Json* s = r.Object(j, key, "");
  return s ? *s : kEmpty;
}

std::optional<int32_t> OptInt32(FieldReader& r, const Json& obj, const char* key,
                                const std::string& path) {
  std::optional<int64_t> v = r.OptInt(obj, key, path);
  if (!v) return std::nullopt;
  return static_cast<int32_t>(*v);
}

std::optional<IntOrString> ReadIntOrString(FieldReader& r, const Json& obj, const char* key,
                                           const std::string& path) {
  if (!obj.is_object() || !obj.contains(key) || obj[key].is_null()) return std::nullopt;
  const Json& v = obj[key];
  IntOrString out;
  if (v.is_number_integer()) {
    out.int_value = v.get<int32_t>();
  } else if (v.is_string()) {
    out.is_string = true;
    out.str_value = v.get<std::string>();
  } else {
    r.Error(FieldReader::Join(path, key), "must be an integer or a string");
    return std::nullopt;
  }
  return out;
}

Json EncodeIntOrString(const IntOrString& v) {
  return v.is_string ? Json(v.str_value) : Json(v.int_value);
}

ObjectReference ReadRef(FieldReader& r, const Json& o, const std::string& p) {
  ObjectReference ref;
  ref.api_version = r.Str(o, "apiVersion", p);
  ref.kind = r.Str(o, "kind", p);
  ref.ns = r.Str(o, "namespace", p);
  ref.name = r.Str(o, "name", p);
  ref.uid = r.Str(o, "uid", p);
  ref.resource_version = r.Str(o, "resourceVersion", p);
  ref.field_path = r.Str(o, "fieldPath", p);
  return ref;
}

Json EncodeRef(const ObjectReference& ref) {
  Json o = Json::object();
  SetOrErase(o, "apiVersion", ref.api_version, ref.api_version.empty());
  SetOrErase(o, "kind", ref.kind, ref.kind.empty());
  SetOrErase(o, "namespace", ref.ns, ref.ns.empty());
  SetOrErase(o, "name", ref.name, ref.name.empty());
  SetOrErase(o, "uid", ref.uid, ref.uid.empty());
  SetOrErase(o, "resourceVersion", ref.resource_version, ref.resource_version.empty());
  SetOrErase(o, "fieldPath", ref.field_path, ref.field_path.empty());
  return o;
}

}  // namespace

// --- Node --------------------------------------------------------------------------------------

absl::StatusOr<Node> DecodeNode(const Json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("Node: not a JSON object");
  FieldReader r(internal::Describe("Node", j));
  Node n;
  internal::ReadMeta(r, j, n.metadata);
  const Json& spec = Section(r, j, "spec");
  n.unschedulable = r.Bool(spec, "unschedulable", "spec");
  if (const Json* taints = r.Array(spec, "taints", "spec")) {
    for (size_t i = 0; i < taints->size(); ++i) {
      const std::string p = FieldReader::Index("spec.taints", i);
      Taint t;
      t.key = r.Str((*taints)[i], "key", p);
      t.value = r.Str((*taints)[i], "value", p);
      t.effect = r.Str((*taints)[i], "effect", p);
      n.taints.push_back(std::move(t));
    }
  }
  const Json& status = Section(r, j, "status");
  n.capacity = r.Resources(status, "capacity", "status");
  n.allocatable = r.Resources(status, "allocatable", "status");
  if (const Json* conds = r.Array(status, "conditions", "status")) {
    for (size_t i = 0; i < conds->size(); ++i) {
      const std::string p = FieldReader::Index("status.conditions", i);
      NodeCondition c;
      c.type = r.Str((*conds)[i], "type", p);
      c.status = r.Str((*conds)[i], "status", p);
      c.reason = r.Str((*conds)[i], "reason", p);
      c.message = r.Str((*conds)[i], "message", p);
      n.conditions.push_back(std::move(c));
    }
  }
  if (!r.ok()) return r.Finish();
  n.raw = j;
  return n;
}

Json EncodeNode(const Node& n) {
  Json j = internal::StartEncode(n.raw, "v1", "Node", n.metadata);
  Json spec = j.value("spec", Json::object());
  SetOrErase(spec, "unschedulable", true, !n.unschedulable);
  Json taints = Json::array();
  for (const Taint& t : n.taints) {
    Json e = {{"key", t.key}, {"effect", t.effect}};
    if (!t.value.empty()) e["value"] = t.value;
    // timeAdded of an existing taint is kept.
    if (spec.contains("taints") && spec["taints"].is_array()) {
      for (const Json& old : spec["taints"]) {
        if (old.value("key", "") == t.key && old.value("effect", "") == t.effect &&
            old.contains("timeAdded")) {
          e["timeAdded"] = old["timeAdded"];
        }
      }
    }
    taints.push_back(std::move(e));
  }
  SetOrErase(spec, "taints", taints, taints.empty());
  j["spec"] = spec;
  Json status = j.value("status", Json::object());
  SetOrErase(status, "capacity", internal::EncodeResources(n.capacity), n.capacity.empty());
  SetOrErase(status, "allocatable", internal::EncodeResources(n.allocatable),
             n.allocatable.empty());
  // Conditions are the kubelet's; a condition this struct lists replaces the raw one of its type.
  Json conds = Json::array();
  for (const NodeCondition& c : n.conditions) {
    Json e = Json::object();
    if (status.contains("conditions") && status["conditions"].is_array()) {
      for (const Json& old : status["conditions"]) {
        if (old.value("type", "") == c.type) e = old;
      }
    }
    e["type"] = c.type;
    e["status"] = c.status;
    SetOrErase(e, "reason", c.reason, c.reason.empty());
    SetOrErase(e, "message", c.message, c.message.empty());
    conds.push_back(std::move(e));
  }
  SetOrErase(status, "conditions", conds, conds.empty());
  SetOrErase(j, "status", status, status.empty());
  return j;
}

// --- PriorityClass -----------------------------------------------------------------------------

absl::StatusOr<PriorityClass> DecodePriorityClass(const Json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("PriorityClass: not a JSON object");
  FieldReader r(internal::Describe("PriorityClass", j));
  PriorityClass pc;
  internal::ReadMeta(r, j, pc.metadata);
  pc.value = static_cast<int32_t>(r.Int(j, "value", ""));
  pc.global_default = r.Bool(j, "globalDefault", "");
  pc.description = r.Str(j, "description", "");
  pc.preemption_policy = r.Str(j, "preemptionPolicy", "");
  if (!r.ok()) return r.Finish();
  pc.raw = j;
  return pc;
}

Json EncodePriorityClass(const PriorityClass& pc) {
  Json j = internal::StartEncode(pc.raw, "scheduling.k8s.io/v1", "PriorityClass", pc.metadata);
  j["value"] = pc.value;
  SetOrErase(j, "globalDefault", true, !pc.global_default);
  SetOrErase(j, "description", pc.description, pc.description.empty());
  SetOrErase(j, "preemptionPolicy", pc.preemption_policy, pc.preemption_policy.empty());
  return j;
}

// --- Lease -------------------------------------------------------------------------------------

absl::StatusOr<Lease> DecodeLease(const Json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("Lease: not a JSON object");
  FieldReader r(internal::Describe("Lease", j));
  Lease l;
  internal::ReadMeta(r, j, l.metadata);
  const Json& spec = Section(r, j, "spec");
  l.holder_identity = r.OptStr(spec, "holderIdentity", "spec");
  l.lease_duration_seconds = OptInt32(r, spec, "leaseDurationSeconds", "spec");
  l.acquire_time = r.OptStr(spec, "acquireTime", "spec");
  l.renew_time = r.OptStr(spec, "renewTime", "spec");
  l.lease_transitions = OptInt32(r, spec, "leaseTransitions", "spec");
  if (!r.ok()) return r.Finish();
  l.raw = j;
  return l;
}

Json EncodeLease(const Lease& l) {
  Json j = internal::StartEncode(l.raw, "coordination.k8s.io/v1", "Lease", l.metadata);
  Json spec = j.value("spec", Json::object());
  SetOrErase(spec, "holderIdentity", l.holder_identity.value_or(""), !l.holder_identity);
  SetOrErase(spec, "leaseDurationSeconds", l.lease_duration_seconds.value_or(0),
             !l.lease_duration_seconds);
  SetOrErase(spec, "acquireTime", l.acquire_time.value_or(""), !l.acquire_time);
  SetOrErase(spec, "renewTime", l.renew_time.value_or(""), !l.renew_time);
  SetOrErase(spec, "leaseTransitions", l.lease_transitions.value_or(0), !l.lease_transitions);
  j["spec"] = spec;
  return j;
}

// --- events.k8s.io/v1 Event --------------------------------------------------------------------

absl::StatusOr<Event> DecodeEvent(const Json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("Event: not a JSON object");
  FieldReader r(internal::Describe("Event", j));
  Event e;
  internal::ReadMeta(r, j, e.metadata);
  e.event_time = r.Str(j, "eventTime", "");
  e.reporting_controller = r.Str(j, "reportingController", "");
  e.reporting_instance = r.Str(j, "reportingInstance", "");
  e.action = r.Str(j, "action", "");
  e.reason = r.Str(j, "reason", "");
  e.type = r.Str(j, "type", "");
  e.note = r.Str(j, "note", "");
  if (const Json* reg = r.Object(j, "regarding", "")) e.regarding = ReadRef(r, *reg, "regarding");
  if (const Json* rel = r.Object(j, "related", "")) e.related = ReadRef(r, *rel, "related");
  if (!r.ok()) return r.Finish();
  e.raw = j;
  return e;
}

Json EncodeEvent(const Event& e) {
  Json j = internal::StartEncode(e.raw, "events.k8s.io/v1", "Event", e.metadata);
  j["eventTime"] = e.event_time;
  SetOrErase(j, "reportingController", e.reporting_controller, e.reporting_controller.empty());
  SetOrErase(j, "reportingInstance", e.reporting_instance, e.reporting_instance.empty());
  SetOrErase(j, "action", e.action, e.action.empty());
  SetOrErase(j, "reason", e.reason, e.reason.empty());
  SetOrErase(j, "type", e.type, e.type.empty());
  SetOrErase(j, "note", e.note, e.note.empty());
  j["regarding"] = EncodeRef(e.regarding);
  SetOrErase(j, "related", e.related ? EncodeRef(*e.related) : Json(), !e.related);
  return j;
}

// --- policy/v1 PodDisruptionBudget -------------------------------------------------------------

absl::StatusOr<PodDisruptionBudget> DecodePodDisruptionBudget(const Json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("PodDisruptionBudget: not a JSON object");
  FieldReader r(internal::Describe("PodDisruptionBudget", j));
  PodDisruptionBudget pdb;
  internal::ReadMeta(r, j, pdb.metadata);
  const Json& spec = Section(r, j, "spec");
  pdb.min_available = ReadIntOrString(r, spec, "minAvailable", "spec");
  pdb.max_unavailable = ReadIntOrString(r, spec, "maxUnavailable", "spec");
  if (const Json* sel = r.Object(spec, "selector", "spec")) {
    LabelSelector ls;
    ls.match_labels = r.StrMap(*sel, "matchLabels", "spec.selector");
    if (const Json* exprs = r.Array(*sel, "matchExpressions", "spec.selector")) {
      for (size_t i = 0; i < exprs->size(); ++i) {
        const std::string p = FieldReader::Index("spec.selector.matchExpressions", i);
        LabelSelectorRequirement q;
        q.key = r.Str((*exprs)[i], "key", p);
        q.op = r.Str((*exprs)[i], "operator", p);
        q.values = r.StrList((*exprs)[i], "values", p);
        ls.match_expressions.push_back(std::move(q));
      }
    }
    pdb.selector = std::move(ls);
  }
  const Json& status = Section(r, j, "status");
  pdb.observed_generation = r.Int(status, "observedGeneration", "status");
  pdb.disruptions_allowed = static_cast<int32_t>(r.Int(status, "disruptionsAllowed", "status"));
  pdb.current_healthy = static_cast<int32_t>(r.Int(status, "currentHealthy", "status"));
  pdb.desired_healthy = static_cast<int32_t>(r.Int(status, "desiredHealthy", "status"));
  pdb.expected_pods = static_cast<int32_t>(r.Int(status, "expectedPods", "status"));
  if (!r.ok()) return r.Finish();
  pdb.raw = j;
  return pdb;
}

Json EncodePodDisruptionBudget(const PodDisruptionBudget& pdb) {
  Json j = internal::StartEncode(pdb.raw, "policy/v1", "PodDisruptionBudget", pdb.metadata);
  Json spec = j.value("spec", Json::object());
  SetOrErase(spec, "minAvailable",
             pdb.min_available ? EncodeIntOrString(*pdb.min_available) : Json(),
             !pdb.min_available);
  SetOrErase(spec, "maxUnavailable",
             pdb.max_unavailable ? EncodeIntOrString(*pdb.max_unavailable) : Json(),
             !pdb.max_unavailable);
  if (pdb.selector) {
    Json sel = Json::object();
    SetOrErase(sel, "matchLabels", internal::EncodeStrMap(pdb.selector->match_labels),
               pdb.selector->match_labels.empty());
    Json exprs = Json::array();
    for (const LabelSelectorRequirement& q : pdb.selector->match_expressions) {
      Json e = {{"key", q.key}, {"operator", q.op}};
      if (!q.values.empty()) e["values"] = q.values;
      exprs.push_back(std::move(e));
    }
    SetOrErase(sel, "matchExpressions", exprs, exprs.empty());
    spec["selector"] = sel;
  } else {
    spec.erase("selector");
  }
  j["spec"] = spec;
  // status is the disruption controller's: left as decoded.
  return j;
}

// --- request bodies ----------------------------------------------------------------------------

Json EncodeBinding(const Binding& b) {
  Json meta = {{"name", b.pod_name}, {"namespace", b.ns}};
  if (!b.pod_uid.empty()) meta["uid"] = b.pod_uid;
  if (!b.annotations.empty()) meta["annotations"] = b.annotations;
  return {{"apiVersion", "v1"},
          {"kind", "Binding"},
          {"metadata", meta},
          {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", b.node}}}};
}

Json EncodeEviction(const Eviction& e) {
  Json j = {{"apiVersion", "policy/v1"},
            {"kind", "Eviction"},
            {"metadata", {{"name", e.pod_name}, {"namespace", e.ns}}}};
  Json opts = Json::object();
  if (e.grace_period_seconds) opts["gracePeriodSeconds"] = *e.grace_period_seconds;
  if (!e.pod_uid.empty()) opts["preconditions"] = {{"uid", e.pod_uid}};
  if (!opts.empty()) {
    opts["apiVersion"] = "v1";
    opts["kind"] = "DeleteOptions";
    j["deleteOptions"] = opts;
  }
  return j;
}

}  // namespace tessera::kube
