// The phases a bound job's members' reports call for (member_phase.h), written by the
// controller: status is the control plane's, so agents report members and the controller alone
// moves the job Scheduled -> Running -> Succeeded | Failed, or a service through Deploying,
// Ready and Degraded, each in one store transaction with its Event. A finished job is unbound in
// the same write (the store never shows its GPUs bound to a finished job), then released in
// memory.
#include "absl/strings/str_cat.h"
#include "controller/controller_internal.h"
#include "controller/member_phase.h"
#include "controller/scheduling_controller.h"

namespace tessera::controller {

using namespace internal;  // NOLINT: the module's own helpers

void SchedulingController::ApplyMemberReports(JobRec& rec, const Json& obj) {
  if (!rec.bound || !rec.job || !BoundPhase(rec.phase)) return;
  const Json& st = StatusOf(obj);
  if (IntOr(st, "generation", 0) != rec.generation) return;  // not the binding we know
  const int64_t restarts_left = rec.max_restarts - IntOr(st, "restarts", 0);
  const MemberVerdict v = JudgeMembers(rec.kind, rec.phase, st, restarts_left);
  if (v.phase == rec.phase) return;
  const absl::Time now = clock_.Now();
  Change why;
  if (v.phase == "Failed") {
    why = {"Failed",
           absl::StrCat("job failed: ", DescribeFailure(*v.failure)),
           true,
           true,
           {{"member", v.failure->member}, {"exit_code", v.failure->code}}};
  } else if (v.phase == "Succeeded") {
    why = {"Succeeded", "every member completed"};
  } else if (v.phase == "Running") {
    why = {"Started", "every member reported running"};
  } else if (v.phase == "Ready") {
    why = {"Ready", "every replica is serving"};
  } else if (v.phase == "Degraded") {
    why = {"Degraded", "a replica is down; its node agent starts it again", true};
  } else {
    why = {v.phase, "replicas are starting", false, false};
  }
  const bool finished = Terminal(v.phase);
  absl::StatusOr<int64_t> w = UpdateBinding(
      rec,
      [&](Json& s) {
        s["phase"] = v.phase;
        s["message"] = why.message.substr(0, 4096);
        auto [type, value] = PhaseCondition(v.phase);
        SetCondition(s, type, value, why.reason, why.message, now);
        if (finished) {
          s.erase("placement");
          s.erase("replicas");
        }
        return true;
      },
      why);
  if (!w.ok()) {
    if (!absl::IsCancelled(w.status())) {
      options_.log.Warn("member-reported phase not written",
                        {{"job", rec.name},
                         {"namespace", rec.ns},
                         {"phase", v.phase},
                         {"error", std::string(w.status().message())}});
    }
    return;
  }
  rec.last_message = why.message;
  if (finished) ReleaseMemory(rec);  // the store first, then memory
  rec.phase = v.phase;
}

}  // namespace tessera::controller
