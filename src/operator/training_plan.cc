#include "operator/training_plan.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/conditions.h"
#include "operator/json_fields.h"

namespace tessera::op {

using api::SetCondition;
namespace {

int64_t Generation(const Json& obj) { return IntLabel(obj, kGenerationLabel, -1); }
bool ConditionTrue(const Json& status, const char* type) {
  for (const Json& c : Field(status, "conditions")) {
    if (StrOr(c, "type") == type && StrOr(c, "status") == "True") return true;
  }
  return false;
}

// What a failed member's container says about its end.
struct Exit {
  int64_t code = -1;
  std::string reason, message;
};
Exit ExitOf(const Json& pod) {
  Exit e;
  const Json& st = Field(pod, "status");
  for (const Json& cs : Field(st, "containerStatuses")) {
    const Json& t = Field(Field(cs, "state"), "terminated");
    if (!t.is_object()) continue;
    e.code = IntOr(t, "exitCode", -1);
    e.reason = StrOr(t, "reason");
    e.message = StrOr(t, "message");
    if (e.code != 0) break;
  }
  if (e.reason.empty()) e.reason = StrOr(st, "reason");
  if (e.message.empty()) e.message = StrOr(st, "message");
  return e;
}

// Evicted or being removed by someone else: the gang lost the member through no fault of its own.
bool Disrupted(const Json& pod) {
  const Json& st = Field(pod, "status");
  if (ConditionTrue(st, "DisruptionTarget")) return true;
  const std::string reason = StrOr(st, "reason");
  if (StrOr(st, "phase") == "Failed" && (reason == "Evicted" || reason == "Preempting")) {
    return true;
  }
  return Deleting(pod);
}

bool Terminal(const std::string& phase) { return phase == "Succeeded" || phase == "Failed"; }

std::optional<ResumePoint> ResumeOf(const Json& status) {
  const Json& r = Field(status, "resumeFrom");
  if (!r.is_object()) return std::nullopt;
  return ResumePoint{StrOr(r, "checkpoint"), IntOr(r, "step", 0), StrOr(r, "path")};
}

// Starts generation `gen` in `st`: the generation, the resume point, the member count.
void StartGeneration(Json& st, int64_t gen, const std::optional<ResumePoint>& resume,
                     int replicas) {
  st["generation"] = gen;
  st["replicas"] = replicas;
  if (resume) {
    st["resumeFrom"] = api::ResumePointJson(*resume);
  } else {
    st.erase("resumeFrom");
  }
}

void DeleteAll(const std::vector<const Json*>& objs, std::vector<ObjectName>* out,
               bool running_only = false) {
  for (const Json* o : objs) {
    if (Deleting(*o)) continue;
    if (running_only && Terminal(StrOr(Field(*o, "status"), "phase"))) continue;
    out->push_back(NameOf(*o));
  }
}

}  // namespace

TrainingPlan PlanTrainingJob(const TrainingInputs& in, const GangOptions& opts) {
  TrainingPlan plan;
  const Json& job = *in.job;
  const Json& spec = Field(job, "spec");
  const Json& old_status = Field(job, "status");
  Json st = old_status.is_object() ? old_status : Json::object();
  const std::string name = StrOr(Field(job, "metadata"), "name");
  const std::string phase = StrOr(st, "phase");
  const int64_t gen = IntOr(st, "generation", 0);
  const std::vector<Member> members = MembersOf(spec);
  const auto world = static_cast<int>(members.size());
  st["observedGeneration"] = IntOr(Field(job, "metadata"), "generation", 0);

  auto finish = [&]() -> TrainingPlan {
    if (st != old_status) plan.status = std::move(st);
    return std::move(plan);
  };
  auto set_phase = [&](const std::string& p, const std::string& reason, const std::string& msg) {
    st["phase"] = p;
    st["reason"] = reason;
    st["message"] = msg.substr(0, 4096);
  };

  std::vector<const Json*> current, stale;
  for (const Json* p : in.pods) (Generation(*p) == gen ? current : stale).push_back(p);

  // 1. Finished.
  if (Terminal(phase)) {
    if (phase == "Failed") DeleteAll(current, &plan.delete_pods, /*running_only=*/true);
    DeleteAll(stale, &plan.delete_pods, true);
    return finish();
  }
  // 2. Cannot run, suspended, or no queue.
  if (std::vector<std::string> problems = KubeSpecProblems(spec); !problems.empty()) {
    const std::string msg = absl::StrJoin(problems, "; ");
    set_phase("Pending", "InvalidSpec", msg);
    SetCondition(st, "Admitted", "False", "InvalidSpec", msg, in.now);
    return finish();
  }
  if (Field(spec, "suspend").is_boolean() && Field(spec, "suspend").get<bool>()) {
    DeleteAll(in.pods, &plan.delete_pods);
    DeleteAll(in.pod_groups, &plan.delete_pod_groups);
    if (phase != "Suspended") {
      set_phase("Suspended", "Suspended", "spec.suspend is true: the gang's Pods are deleted");
      SetCondition(st, "Suspended", "True", "Suspended", "spec.suspend is true", in.now);
      SetCondition(st, "Running", "False", "Suspended", "spec.suspend is true", in.now);
      plan.events.push_back({"Normal", "Suspended", "Suspending", "deleting the gang's Pods"});
    }
    return finish();
  }
  const std::string queue = StrOr(spec, "queue", "default");
  if (!in.queue_known) {
    const std::string msg =
        absl::StrCat("queue \"", queue, "\" does not exist (a tessera.dev Queue); waiting for it");
    set_phase("Pending", "QueueNotFound", msg);
    SetCondition(st, "Admitted", "False", "QueueNotFound", msg, in.now);
    return finish();
  }
  if (int64_t interval = CheckpointInterval(spec, opts);
      interval > 0 && !Field(Field(spec, "checkpoint"), "intervalSeconds").is_number()) {
    st["checkpointIntervalSeconds"] = interval;  // chosen by Tessera (Young/Daly)
  }
  if (!st.contains("generation")) {
    StartGeneration(st, 0, in.newest_checkpoint, world);
    set_phase("Queued", "Admitted", absl::StrCat("admitted to queue ", queue));
  }
  SetCondition(st, "Admitted", "True", "Admitted", absl::StrCat("queue ", queue), in.now);
  if (phase == "Suspended") {  // resumed
    StartGeneration(st, gen + 1, in.newest_checkpoint, world);
    SetCondition(st, "Suspended", "False", "Resumed", "spec.suspend is false", in.now);
    set_phase("Queued", "Resumed", absl::StrCat("resumed as generation ", gen + 1));
    plan.events.push_back(
        {"Normal", "Resumed", "Resuming", absl::StrCat("starting generation ", gen + 1)});
    DeleteAll(in.pods, &plan.delete_pods);
    DeleteAll(in.pod_groups, &plan.delete_pod_groups);
    return finish();
  }

  // 3. Other generations' children go.
  DeleteAll(stale, &plan.delete_pods);
  bool group_exists = false;
  for (const Json* g : in.pod_groups) {
    if (Generation(*g) == gen && !Deleting(*g)) {
      group_exists = true;
    } else if (Generation(*g) != gen && !Deleting(*g)) {
      plan.delete_pod_groups.push_back(NameOf(*g));
    }
  }

  // 4. Failures, disruptions, resizes.
  std::map<std::string, const Json*> by_name;
  for (const Json* p : current) by_name[StrOr(Field(*p, "metadata"), "name")] = p;
  std::set<std::string> desired;
  for (const Member& m : members) desired.insert(PodName(name, gen, m));
  const Member* failed = nullptr;
  const Json* failed_pod = nullptr;
  bool disrupted = false;
  int running = 0, succeeded = 0, bound = 0, missing = 0;
  for (const Member& m : members) {
    auto it = by_name.find(PodName(name, gen, m));
    if (it == by_name.end()) {
      ++missing;
      continue;
    }
    const Json& pod = *it->second;
    const std::string pp = StrOr(Field(pod, "status"), "phase");
    if (Disrupted(pod)) {
      disrupted = true;
    } else if (pp == "Failed") {
      if (failed == nullptr) {
        failed = &m;
        failed_pod = &pod;
      }
    } else if (pp == "Succeeded") {
      ++succeeded;
    } else if (pp == "Running") {
      ++running;
    }
    if (!StrOr(Field(pod, "spec"), "nodeName").empty()) ++bound;
  }
  // Members the gang was placed with and lost (deleted by someone else) count as disrupted.
  const bool was_placed = phase == "Scheduled" || phase == "Running";
  if (was_placed && missing > 0 && !Field(spec, "elastic").is_object()) disrupted = true;
  const bool elastic = Field(spec, "elastic").is_object();
  const int64_t gen_replicas = IntOr(st, "replicas", world);
  const bool resized = !elastic && gen_replicas != world && !current.empty();

  auto next_generation = [&](const std::string& reason, const std::string& msg) {
    StartGeneration(st, gen + 1, in.newest_checkpoint, world);
    std::string full = absl::StrCat(msg, "; starting generation ", gen + 1);
    if (in.newest_checkpoint) {
      absl::StrAppend(&full, " from checkpoint ", in.newest_checkpoint->name, " (step ",
                      in.newest_checkpoint->step, ")");
    }
    set_phase("Queued", reason, full);
    SetCondition(st, "Running", "False", reason, full, in.now);
    plan.events.push_back(
        {reason == "Restarting" ? "Warning" : "Normal", reason, "Restarting", full});
    DeleteAll(current, &plan.delete_pods);
    for (const Json* g : in.pod_groups) {
      if (Generation(*g) == gen && !Deleting(*g)) plan.delete_pod_groups.push_back(NameOf(*g));
    }
  };

  if (failed != nullptr) {
    const Exit e = ExitOf(*failed_pod);
    const std::string what = absl::StrCat(
        "member ", failed->group, "-", failed->index, " (rank ", failed->rank, ", pod ",
        StrOr(Field(*failed_pod, "metadata"), "name"), ") exited with code ", e.code,
        e.reason.empty() ? "" : " (" + e.reason + ")", e.message.empty() ? "" : ": " + e.message);
    const int64_t restarts = IntOr(st, "restarts", 0);
    const int64_t max_restarts = IntOr(spec, "maxRestarts", 0);
    if (restarts < max_restarts) {
      st["restarts"] = restarts + 1;
      st["lastRestartTime"] = Timestamp(in.now);
      next_generation("Restarting",
                      absl::StrCat(what, "; restart ", restarts + 1, " of ", max_restarts));
      return finish();
    }
    const std::string msg = max_restarts > 0
                                ? absl::StrCat(what, "; no restarts left (", max_restarts, " used)")
                                : what;
    set_phase("Failed", "MemberFailed", msg);
    st["completionTime"] = Timestamp(in.now);
    Json failure = {{"member", absl::StrCat(failed->group, "-", failed->index)},
                    {"rank", failed->rank},
                    {"exitCode", e.code},
                    {"reason", e.reason}};
    st["failure"] = std::move(failure);
    SetCondition(st, "Failed", "True", "MemberFailed", msg, in.now);
    SetCondition(st, "Running", "False", "MemberFailed", msg, in.now);
    plan.events.push_back({"Warning", "Failed", "Failing", msg});
    DeleteAll(current, &plan.delete_pods, /*running_only=*/true);
    return finish();
  }
  if (resized) {
    next_generation("Resized",
                    absl::StrCat("the job now has ", world, " members (was ", gen_replicas, ")"));
    return finish();
  }
  if (disrupted) {
    next_generation("Preempted", "a member was evicted or lost after the gang was placed");
    return finish();
  }
  if (elastic) {
    st["replicas"] = world;
    for (const Json* p : current) {  // members beyond the new size
      if (desired.count(StrOr(Field(*p, "metadata"), "name")) == 0 && !Deleting(*p)) {
        plan.delete_pods.push_back(NameOf(*p));
      }
    }
  }

  // 5. Create what is missing; the phase follows the members.
  if (!in.service_exists) plan.create_service = DesiredService(job);
  if (!group_exists) plan.create_pod_group = DesiredPodGroup(job, gen);
  const std::optional<ResumePoint> resume = ResumeOf(st);
  for (const Member& m : members) {
    if (by_name.count(PodName(name, gen, m)) == 0) {
      plan.create_pods.push_back(DesiredPod(job, gen, m, world, resume, opts));
    }
  }
  const int min_members = MinMembers(spec, world);
  if (world > 0 && succeeded == world) {
    set_phase("Succeeded", "Completed", "every member succeeded");
    if (!st.contains("completionTime")) st["completionTime"] = Timestamp(in.now);
    SetCondition(st, "Running", "False", "Completed", "every member succeeded", in.now);
    SetCondition(st, "Succeeded", "True", "Completed", "every member succeeded", in.now);
    plan.events.push_back({"Normal", "Completed", "Completing", "every member succeeded"});
  } else if (running + succeeded >= min_members && running > 0) {
    if (phase != "Running") {
      set_phase("Running", "Running",
                absl::StrCat(running, " of ", world, " members running (generation ", gen, ")"));
    }
    if (!st.contains("startTime")) st["startTime"] = Timestamp(in.now);
    SetCondition(st, "Running", "True", "Running", absl::StrCat("generation ", gen), in.now);
  } else if (bound >= min_members && missing == 0) {
    if (phase != "Scheduled") {
      set_phase("Scheduled", "Scheduled", absl::StrCat("members bound (generation ", gen, ")"));
    }
  } else if (phase != "Queued") {
    set_phase("Queued", "Queued", absl::StrCat("waiting for the scheduler (generation ", gen, ")"));
  }
  return finish();
}

}  // namespace tessera::op
