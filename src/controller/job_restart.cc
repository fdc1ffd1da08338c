// Restart in place (spec.maxRestarts): when a member of a bound gang exits with
// an error, the whole gang restarts from its last checkpoint on the GPUs it
// holds, as Volcano's `PodFailed -> RestartJob` policy or JobSet's
// failurePolicy.maxRestarts do, instead of the job failing outright. A crashed
// rank leaves its peers blocked in collectives, so restarting one member alone
// would not help; requeueing would give the GPUs away for nothing, since the
// hardware is healthy (a lost node or unhealthy GPU takes the NodeLost path).
//
// Protocol: the node agents record every member's exit in status.members[]
// (state Failed, exitCode, reason; api/member_status.h), and while restarts are
// left the controller does not derive Failed from it (member_phase.h). It sees
// the report (OnJobPut) and writes, in one
// transaction with an Event `Restarting`: the same placement restamped with
// generation G+1, status.restarts + 1, lastRestartTime, resumeFrom (the newest
// Ready Checkpoint) and phase Scheduled. Agents stop the old generation's
// members and start every member again at G+1. Memory is unchanged: the job
// keeps its GPUs and its place in the QueueManager. Once restarts are used up
// the job is Failed (OnJobPut, with the member's exit and stderr in the Event).
#include "absl/strings/str_cat.h"
#include "controller/controller_internal.h"
#include "controller/member_phase.h"
#include "controller/scheduling_controller.h"

namespace tessera::controller {

using namespace internal;  // NOLINT: the module's own helpers

void SchedulingController::MaybeRestart(JobRec& rec, const Json& obj) {
  if (rec.max_restarts <= 0 || !rec.bound || !rec.job || !BoundPhase(rec.phase)) return;
  auto sit = obj.find("status");
  if (sit == obj.end() || !sit->is_object()) return;
  const Json& st = *sit;
  // A victim's exits answer its checkpoint signal; they are not failures.
  if (ConditionTrue(st, "PreemptionPending")) return;
  if (IntOr(st, "generation", 0) != rec.generation) return;  // not the binding we know
  const int64_t restarts = IntOr(st, "restarts", 0);
  if (restarts >= rec.max_restarts) return;
  const std::optional<MemberFailure> failed = JudgeMembers(rec.kind, rec.phase, st, 1).failure;
  if (!failed) return;
  // Restored bindings are not in the QueueManager yet; others must be running there.
  if (rec.in_qm && qm_->Phase(rec.job->key()) != sched::JobPhase::kRunning) return;
  const sched::Placement* cur = cluster_->FindPlacement(rec.job->key());
  if (cur == nullptr) return;

  const absl::Time now = clock_.Now();
  const Change why{
      "Restarting",
      absl::StrCat(DescribeFailure(*failed), "; restarting the gang in place (restart ",
                   restarts + 1, " of ", rec.max_restarts, ")"),
      true,
      true,
      {{"member", failed->member}, {"exit_code", failed->code}}};
  const bool written = WriteGeneration(rec, *cur, why, now, [&](Json& s) {
    // Only on the failure this decision was made on.
    if (IntOr(s, "restarts", 0) != restarts || ConditionTrue(s, "PreemptionPending")) return false;
    s["restarts"] = restarts + 1;
    s["lastRestartTime"] = Timestamp(now);
    s["phase"] = "Scheduled";
    s["reason"] = why.reason;
    return true;
  });
  if (!written) return;
  rec.phase = "Scheduled";
  ++stats_.restarts;
  if (metrics_) metrics_->job_restarts.With({"MemberFailed"}).Inc();
}

}  // namespace tessera::controller
