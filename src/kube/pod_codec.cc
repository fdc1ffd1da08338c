// Pod codec (codec.h).
#include "kube/codec.h"
#include "kube/field_reader.h"

namespace tessera::kube {

using internal::FieldReader;
using internal::SetOrErase;

namespace {

std::vector<Container> ReadContainers(FieldReader& r, const Json& spec, const char* key) {
  std::vector<Container> out;
  const Json* list = r.Array(spec, key, "spec");
  if (list == nullptr) return out;
  const std::string base = FieldReader::Join("spec", key);
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string p = FieldReader::Index(base, i);
    const Json& c = (*list)[i];
    Container out_c;
    out_c.name = r.Str(c, "name", p);
    out_c.image = r.Str(c, "image", p);
    if (const Json* res = r.Object(c, "resources", p)) {
      out_c.resources.requests = r.Resources(*res, "requests", p + ".resources");
      out_c.resources.limits = r.Resources(*res, "limits", p + ".resources");
    }
    out.push_back(std::move(out_c));
  }
  return out;
}

std::vector<NodeSelectorRequirement> ReadRequirements(FieldReader& r, const Json& term,
                                                      const char* key, const std::string& path) {
  std::vector<NodeSelectorRequirement> out;
  const Json* list = r.Array(term, key, path);
  if (list == nullptr) return out;
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string p = FieldReader::Index(FieldReader::Join(path, key), i);
    NodeSelectorRequirement req;
    req.key = r.Str((*list)[i], "key", p);
    req.op = r.Str((*list)[i], "operator", p);
    req.values = r.StrList((*list)[i], "values", p);
    out.push_back(std::move(req));
  }
  return out;
}

NodeSelectorTerm ReadTerm(FieldReader& r, const Json& term, const std::string& path) {
  NodeSelectorTerm t;
  t.match_expressions = ReadRequirements(r, term, "matchExpressions", path);
  t.match_fields = ReadRequirements(r, term, "matchFields", path);
  return t;
}

std::optional<NodeAffinity> ReadNodeAffinity(FieldReader& r, const Json& spec) {
  const Json* aff = r.Object(spec, "affinity", "spec");
  if (aff == nullptr) return std::nullopt;
  const std::string p = "spec.affinity.nodeAffinity";
  const Json* na = r.Object(*aff, "nodeAffinity", "spec.affinity");
  if (na == nullptr) return std::nullopt;
  NodeAffinity out;
  const std::string rp = p + ".requiredDuringSchedulingIgnoredDuringExecution";
  if (const Json* req = r.Object(*na, "requiredDuringSchedulingIgnoredDuringExecution", p)) {
    out.required_terms.emplace();
    if (const Json* terms = r.Array(*req, "nodeSelectorTerms", rp)) {
      for (size_t i = 0; i < terms->size(); ++i) {
        out.required_terms->push_back(
            ReadTerm(r, (*terms)[i], FieldReader::Index(rp + ".nodeSelectorTerms", i)));
      }
    }
  }
  const char* kPref = "preferredDuringSchedulingIgnoredDuringExecution";
  if (const Json* pref = r.Array(*na, kPref, p)) {
    for (size_t i = 0; i < pref->size(); ++i) {
      const std::string pp = FieldReader::Index(FieldReader::Join(p, kPref), i);
      PreferredSchedulingTerm t;
      t.weight = static_cast<int32_t>(r.Int((*pref)[i], "weight", pp));
      if (const Json* term = r.Object((*pref)[i], "preference", pp)) {
        t.preference = ReadTerm(r, *term, pp + ".preference");
      }
      out.preferred.push_back(std::move(t));
    }
  }
  return out;
}

Json EncodeRequirements(const std::vector<NodeSelectorRequirement>& reqs) {
  Json out = Json::array();
  for (const NodeSelectorRequirement& q : reqs) {
    Json e = {{"key", q.key}, {"operator", q.op}};
    if (!q.values.empty()) e["values"] = q.values;
    out.push_back(std::move(e));
  }
  return out;
}

Json EncodeTerm(const NodeSelectorTerm& t) {
  Json out = Json::object();
  SetOrErase(out, "matchExpressions", EncodeRequirements(t.match_expressions),
             t.match_expressions.empty());
  SetOrErase(out, "matchFields", EncodeRequirements(t.match_fields), t.match_fields.empty());
  return out;
}

// Overlays `cs` on the raw container list (matched by name, so fields such as command or ports
// of an existing container survive).
Json EncodeContainers(const std::vector<Container>& cs, const Json& raw) {
  Json out = Json::array();
  for (const Container& c : cs) {
    Json e = Json::object();
    if (raw.is_array()) {
      for (const Json& rc : raw) {
        if (rc.is_object() && rc.value("name", "") == c.name) e = rc;
      }
    }
    e["name"] = c.name;
    SetOrErase(e, "image", c.image, c.image.empty());
    Json res =
        e.contains("resources") && e["resources"].is_object() ? e["resources"] : Json::object();
    SetOrErase(res, "requests", internal::EncodeResources(c.resources.requests),
               c.resources.requests.empty());
    SetOrErase(res, "limits", internal::EncodeResources(c.resources.limits),
               c.resources.limits.empty());
    SetOrErase(e, "resources", res, res.empty());
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace

absl::StatusOr<Pod> DecodePod(const Json& j) {
  FieldReader r(internal::Describe("Pod", j));
  Pod p;
  if (!j.is_object()) return absl::InvalidArgumentError("Pod: not a JSON object");
  internal::ReadMeta(r, j, p.metadata);
  static const Json kEmpty = Json::object();
  const Json* spec = r.Object(j, "spec", "");
  const Json& s = spec ? *spec : kEmpty;
  PodSpec& ps = p.spec;
  ps.scheduler_name = r.Str(s, "schedulerName", "spec");
  ps.node_name = r.Str(s, "nodeName", "spec");
  ps.containers = ReadContainers(r, s, "containers");
  ps.init_containers = ReadContainers(r, s, "initContainers");
  ps.node_selector = r.StrMap(s, "nodeSelector", "spec");
  ps.node_affinity = ReadNodeAffinity(r, s);
  if (const Json* tols = r.Array(s, "tolerations", "spec")) {
    for (size_t i = 0; i < tols->size(); ++i) {
      const std::string tp = FieldReader::Index("spec.tolerations", i);
      const Json& t = (*tols)[i];
      Toleration tol;
      tol.key = r.Str(t, "key", tp);
      tol.op = r.Str(t, "operator", tp);
      tol.value = r.Str(t, "value", tp);
      tol.effect = r.Str(t, "effect", tp);
      tol.toleration_seconds = r.OptInt(t, "tolerationSeconds", tp);
      ps.tolerations.push_back(std::move(tol));
    }
  }
  if (std::optional<int64_t> prio = r.OptInt(s, "priority", "spec")) {
    ps.priority = static_cast<int32_t>(*prio);
  }
  ps.priority_class_name = r.Str(s, "priorityClassName", "spec");
  ps.preemption_policy = r.Str(s, "preemptionPolicy", "spec");
  if (const Json* gates = r.Array(s, "schedulingGates", "spec")) {
    for (size_t i = 0; i < gates->size(); ++i) {
      ps.scheduling_gates.push_back(
          r.Str((*gates)[i], "name", FieldReader::Index("spec.schedulingGates", i)));
    }
  }
  if (const Json* claims = r.Array(s, "resourceClaims", "spec")) {
    for (size_t i = 0; i < claims->size(); ++i) {
      const std::string cp = FieldReader::Index("spec.resourceClaims", i);
      PodResourceClaim c;
      c.name = r.Str((*claims)[i], "name", cp);
      c.resource_claim_name = r.OptStr((*claims)[i], "resourceClaimName", cp);
      c.resource_claim_template_name = r.OptStr((*claims)[i], "resourceClaimTemplateName", cp);
      ps.resource_claims.push_back(std::move(c));
    }
  }
  if (const Json* group = r.Object(s, "schedulingGroup", "spec")) {
    ps.pod_group_name = r.OptStr(*group, "podGroupName", "spec.schedulingGroup");
  }
  ps.termination_grace_period_seconds = r.OptInt(s, "terminationGracePeriodSeconds", "spec");
  ps.overhead = r.Resources(s, "overhead", "spec");
  if (const Json* st = r.Object(j, "status", "")) {
    p.status.phase = r.Str(*st, "phase", "status");
    p.status.nominated_node_name = r.Str(*st, "nominatedNodeName", "status");
    if (const Json* conds = r.Array(*st, "conditions", "status")) {
      for (size_t i = 0; i < conds->size(); ++i) {
        const std::string cp = FieldReader::Index("status.conditions", i);
        const Json& c = (*conds)[i];
        PodCondition pc;
        pc.type = r.Str(c, "type", cp);
        pc.status = r.Str(c, "status", cp);
        pc.reason = r.Str(c, "reason", cp);
        pc.message = r.Str(c, "message", cp);
        pc.last_transition_time = r.Str(c, "lastTransitionTime", cp);
        p.status.conditions.push_back(std::move(pc));
      }
    }
  }
  if (!r.ok()) return r.Finish();
  p.raw = j;
  return p;
}

Json EncodePod(const Pod& p) {
  Json j = internal::StartEncode(p.raw, "v1", "Pod", p.metadata);
  Json& s = j["spec"];
  if (!s.is_object()) s = Json::object();
  const PodSpec& ps = p.spec;
  SetOrErase(s, "schedulerName", ps.scheduler_name, ps.scheduler_name.empty());
  SetOrErase(s, "nodeName", ps.node_name, ps.node_name.empty());
  s["containers"] = EncodeContainers(ps.containers, s.value("containers", Json::array()));
  SetOrErase(s, "initContainers",
             EncodeContainers(ps.init_containers, s.value("initContainers", Json::array())),
             ps.init_containers.empty());
  SetOrErase(s, "nodeSelector", internal::EncodeStrMap(ps.node_selector), ps.node_selector.empty());
  {
    Json aff = s.value("affinity", Json::object());
    if (ps.node_affinity.has_value()) {
      Json na = Json::object();
      if (ps.node_affinity->required_terms.has_value()) {
        Json terms = Json::array();
        for (const NodeSelectorTerm& t : *ps.node_affinity->required_terms) {
          terms.push_back(EncodeTerm(t));
        }
        na["requiredDuringSchedulingIgnoredDuringExecution"] = {{"nodeSelectorTerms", terms}};
      }
      Json pref = Json::array();
      for (const PreferredSchedulingTerm& t : ps.node_affinity->preferred) {
        pref.push_back({{"weight", t.weight}, {"preference", EncodeTerm(t.preference)}});
      }
      SetOrErase(na, "preferredDuringSchedulingIgnoredDuringExecution", pref, pref.empty());
      aff["nodeAffinity"] = std::move(na);
    } else if (aff.is_object()) {
      aff.erase("nodeAffinity");
    }
    SetOrErase(s, "affinity", aff, !aff.is_object() || aff.empty());
  }
  Json tols = Json::array();
  for (const Toleration& t : ps.tolerations) {
    Json e = Json::object();
    SetOrErase(e, "key", t.key, t.key.empty());
    SetOrErase(e, "operator", t.op, t.op.empty());
    SetOrErase(e, "value", t.value, t.value.empty());
    SetOrErase(e, "effect", t.effect, t.effect.empty());
    if (t.toleration_seconds) e["tolerationSeconds"] = *t.toleration_seconds;
    tols.push_back(std::move(e));
  }
  SetOrErase(s, "tolerations", tols, tols.empty());
  SetOrErase(s, "priority", ps.priority.value_or(0), !ps.priority.has_value());
  SetOrErase(s, "priorityClassName", ps.priority_class_name, ps.priority_class_name.empty());
  SetOrErase(s, "preemptionPolicy", ps.preemption_policy, ps.preemption_policy.empty());
  Json gates = Json::array();
  for (const std::string& g : ps.scheduling_gates) gates.push_back({{"name", g}});
  SetOrErase(s, "schedulingGates", gates, gates.empty());
  Json claims = Json::array();
  for (const PodResourceClaim& c : ps.resource_claims) {
    Json e = {{"name", c.name}};
    if (c.resource_claim_name) e["resourceClaimName"] = *c.resource_claim_name;
    if (c.resource_claim_template_name) {
      e["resourceClaimTemplateName"] = *c.resource_claim_template_name;
    }
    claims.push_back(std::move(e));
  }
  SetOrErase(s, "resourceClaims", claims, claims.empty());
  SetOrErase(s, "schedulingGroup", Json{{"podGroupName", ps.pod_group_name.value_or("")}},
             !ps.pod_group_name.has_value());
  SetOrErase(s, "terminationGracePeriodSeconds", ps.termination_grace_period_seconds.value_or(0),
             !ps.termination_grace_period_seconds.has_value());
  SetOrErase(s, "overhead", internal::EncodeResources(ps.overhead), ps.overhead.empty());
  Json st = j.value("status", Json::object());
  SetOrErase(st, "phase", p.status.phase, p.status.phase.empty());
  SetOrErase(st, "nominatedNodeName", p.status.nominated_node_name,
             p.status.nominated_node_name.empty());
  Json conds = Json::array();
  for (const PodCondition& c : p.status.conditions) {
    Json e = {{"type", c.type}, {"status", c.status}};
    SetOrErase(e, "reason", c.reason, c.reason.empty());
    SetOrErase(e, "message", c.message, c.message.empty());
    SetOrErase(e, "lastTransitionTime", c.last_transition_time, c.last_transition_time.empty());
    conds.push_back(std::move(e));
  }
  SetOrErase(st, "conditions", conds, conds.empty());
  SetOrErase(j, "status", st, st.empty());
  return j;
}

}  // namespace tessera::kube
