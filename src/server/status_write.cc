#include "server/status_write.h"

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "api/member_status.h"
#include "model/job.h"

namespace tessera::server {
namespace {

using Json = nlohmann::json;

int64_t IntOr(const Json& obj, const char* key, int64_t def) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_number_integer() ? it->get<int64_t>() : def;
}

std::string StrOr(const Json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// A placed member: its node and the generation it was bound at.
bool IsTerminalPhase(const std::string& phase) { return phase == "Succeeded" || phase == "Failed"; }

// A job ended through the API (body.phase is Succeeded or Failed): Failed is a cancellation,
// said with who did it (`tessera history` shows it).
void EndByHand(Json& st, const Principal& who, const Json& body) {
  const std::string phase = StrOr(body, "phase");
  const std::string note = body.contains("message") && body["message"].is_string()
                               ? body["message"].get<std::string>()
                               : "";
  st["phase"] = phase;
  if (phase == "Failed") {
    st["reason"] = "Cancelled";
    st["message"] = absl::StrCat("cancelled by ", who.user.empty() ? "admin" : who.user,
                                 note.empty() ? "" : ": ", note);
  } else {
    st["reason"] = phase;
    if (!note.empty()) st["message"] = note;
  }
}

struct Placed {
  std::string node;
  int64_t generation = 0;
};

std::map<std::string, Placed> PlacedMembers(const Json& status) {
  std::map<std::string, Placed> out;
  auto placement = status.find("placement");
  if (placement == status.end() || !placement->is_array()) return out;
  const int64_t job_gen = IntOr(status, "generation", 0);
  for (const Json& m : *placement) {
    if (!m.is_object()) continue;
    out[model::MemberKey(StrOr(m, "group"), IntOr(m, "member", 0))] =
        Placed{StrOr(m, "node"), IntOr(m, "generation", job_gen)};
  }
  return out;
}

void MergeJobStatus(const api::KindInfo& kind, const Principal& who, const Json& body,
                    absl::Time now, StatusWriteResult& r) {
  Json& st = r.status;
  const bool node = who.role == Principal::Role::kNode;
  if (who.role == Principal::Role::kUser) {
    // A user may cancel its own job (phase Failed, as `tessera cancel` writes it, Slurm's
    // scancel); anything else it sends must be what is stored (a GET result PUT back).
    for (auto it = body.begin(); it != body.end(); ++it) {
      if (it.key() == "phase" || it.key() == "message") continue;
      if (!st.contains(it.key()) || st[it.key()] != *it) {
        r.forbidden.push_back({absl::StrCat("status.", it.key()),
                               "is written by the control plane; a user may only cancel its job "
                               "(status.phase: Failed)"});
      }
    }
    if (!r.forbidden.empty()) return;
    const std::string phase = StrOr(body, "phase");
    if (phase.empty() || phase == StrOr(st, "phase")) return;
    if (phase != "Failed" || IsTerminalPhase(StrOr(st, "phase"))) {
      r.forbidden.push_back(
          {"status.phase",
           absl::StrCat("a user may only cancel a job that has not finished (phase Failed, not \"",
                        phase, "\"); the controller owns every other phase")});
      return;
    }
    EndByHand(st, who, body);
    return;
  }
  const std::map<std::string, Placed> placed = PlacedMembers(st);
  const int64_t job_gen = IntOr(st, "generation", 0);

  // Members.
  std::vector<api::MemberStatus> members = api::MembersOf(st);
  std::set<std::string> accepted;  // members this write reports on, at the current generation
  if (auto in = body.find("members"); in != body.end() && in->is_array()) {
    for (size_t i = 0; i < in->size(); ++i) {
      const std::string field = absl::StrCat("status.members[", i, "]");
      absl::StatusOr<api::MemberStatus> m = api::MemberStatusFromJson((*in)[i]);
      if (!m.ok()) {
        r.invalid.push_back({field, std::string(m.status().message())});
        continue;
      }
      auto p = placed.find(m->member);
      const int64_t current = p != placed.end() ? p->second.generation : job_gen;
      if (m->generation < current) continue;  // a superseded binding: nothing to say now
      if (m->generation > current) {
        r.invalid.push_back({field + ".generation",
                             absl::StrCat("member \"", m->member, "\" is bound at generation ",
                                          current, ", not ", m->generation)});
        continue;
      }
      if (p == placed.end()) {
        (node ? r.forbidden : r.invalid)
            .push_back(
                {field + ".member",
                 absl::StrCat("\"", m->member, "\" is not a member of the job's placement")});
        continue;
      }
      if (node && p->second.node != who.node) {
        r.forbidden.push_back(
            {field + ".member",
             absl::StrCat("member \"", m->member, "\" is not bound to node \"", who.node, "\"")});
        continue;
      }
      m->node = p->second.node;
      if (m->time == absl::InfinitePast()) m->time = now;
      accepted.insert(m->member);
      bool replaced = false;
      for (api::MemberStatus& old : members) {
        if (old.member != m->member) continue;
        // The same report again (an agent retrying) keeps its first time.
        api::MemberStatus same = *m;
        same.time = old.time;
        if (!(same == old)) {
          old = *m;
        }
        replaced = true;
      }
      if (!replaced) members.push_back(*std::move(m));
    }
  }
  // Prune members no longer placed (an elastic shrink, a new placement elsewhere) while the job
  // is placed; a finished job keeps its last reports.
  if (!placed.empty()) {
    std::erase_if(members, [&](const api::MemberStatus& m) { return !placed.contains(m.member); });
  }

  // Replica metrics go with their member.
  if (kind.kind == "InferenceService") {
    Json metrics = st.contains("replicaMetrics") && st["replicaMetrics"].is_object()
                       ? st["replicaMetrics"]
                       : Json::object();
    if (auto in = body.find("replicaMetrics"); in != body.end() && in->is_object()) {
      for (auto it = in->begin(); it != in->end(); ++it) {
        const std::string field =
            absl::StrCat("status.replicaMetrics[", Json(it.key()).dump(), "]");
        auto p = placed.find(it.key());
        if (p == placed.end()) {
          (node ? r.forbidden : r.invalid)
              .push_back({field, "is not a member of the service's placement"});
          continue;
        }
        if (node && p->second.node != who.node) {
          r.forbidden.push_back({field, absl::StrCat("is not bound to node \"", who.node, "\"")});
          continue;
        }
        const api::MemberStatus* m = api::FindMember(members, it.key());
        if (IntOr(it.value(), "generation", p->second.generation) < p->second.generation) continue;
        if (m != nullptr && m->generation == p->second.generation &&
            m->state != api::MemberState::kRunning) {
          continue;  // a replica that stopped has no reading
        }
        Json reading = it.value();
        reading["node"] = p->second.node;
        metrics[it.key()] = std::move(reading);
      }
    }
    for (const api::MemberStatus& m : members) {
      if (m.state != api::MemberState::kRunning && accepted.contains(m.member)) {
        metrics.erase(m.member);
      }
    }
    for (auto it = metrics.begin(); it != metrics.end();) {
      if (!placed.empty() && !placed.contains(it.key())) {
        it = metrics.erase(it);
      } else {
        ++it;
      }
    }
    if (metrics.empty()) {
      st.erase("replicaMetrics");
    } else {
      st["replicaMetrics"] = std::move(metrics);
    }
  }
  if (members.empty()) {
    st.erase("members");
  } else {
    Json list = Json::array();
    for (const api::MemberStatus& m : members) list.push_back(api::ToJson(m));
    st["members"] = std::move(list);
  }

  // An operator may end a job by hand; the controller does the rest (unbinds it, an Event).
  if (who.role == Principal::Role::kAdmin) {
    const std::string phase = StrOr(body, "phase");
    if (!phase.empty() && phase != StrOr(st, "phase")) {
      if (phase != "Succeeded" && phase != "Failed") {
        r.forbidden.push_back(
            {"status.phase", absl::StrCat("only Succeeded or Failed may be set through the API; "
                                          "the controller owns every other phase (it would make \"",
                                          phase, "\")")});
      } else {
        EndByHand(st, who, body);
      }
    }
  }
}

void MergeNodeStatus(const Json& body, StatusWriteResult& r) {
  for (const char* key : {"gpus", "lastHeartbeatTime"}) {
    if (auto it = body.find(key); it != body.end() && !it->is_null()) r.status[key] = *it;
  }
}

}  // namespace

std::string AuthorizeStatusWrite(const Principal& who, const api::KindInfo& kind,
                                 const std::string& name_space, const std::string& name) {
  switch (who.role) {
    case Principal::Role::kAdmin:
      return "";
    case Principal::Role::kUser:
      if (kind.kind == "Checkpoint" || kind.kind == "ModelVersion" || api::IsJobKind(kind)) {
        if (name_space != who.name_space) {
          return absl::StrCat("namespace \"", name_space, "\" belongs to another tenant");
        }
        return "";
      }
      return absl::StrCat("the status of ", kind.plural,
                          " is written by the control plane; users change the spec");
    case Principal::Role::kNode:
      if (api::IsJobKind(kind)) return "";  // member-level checks in MergeStatusWrite
      if (kind.kind == "Node" && name == who.node) return "";
      return absl::StrCat("node \"", who.node,
                          "\" may only write its own Node's status and its members' reports");
  }
  return "unknown role";
}

StatusWriteResult MergeStatusWrite(const api::KindInfo& kind, const Principal& who,
                                   const Json& stored_status, const Json& body_status,
                                   absl::Time now) {
  StatusWriteResult r;
  r.status = stored_status.is_object() ? stored_status : Json::object();
  const Json body = body_status.is_object() ? body_status : Json::object();
  if (api::IsJobKind(kind)) {
    MergeJobStatus(kind, who, body, now, r);
  } else if (kind.kind == "Node") {
    MergeNodeStatus(body, r);
  } else {
    // Checkpoint, ModelVersion (users and admins) and the rest (admins): the status as sent,
    // with a phase always present.
    r.status = body;
    if (!r.status.contains("phase") && stored_status.is_object() &&
        stored_status.contains("phase")) {
      r.status["phase"] = stored_status["phase"];
    }
  }
  r.changed = r.status != stored_status;
  return r;
}

}  // namespace tessera::server
