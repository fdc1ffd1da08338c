// The phases a bound job's members' reports call for (member_phase.h), written by the
// controller: status is the control plane's, so agents report members and the controller alone
// moves the job Scheduled -> Running -> Succeeded | Failed, or a service through Deploying,
// Ready and Degraded, each with its Event; the phases a page of reports calls for share one
// store transaction (WritePhases). A finished job is unbound in
// the same write (the store never shows its GPUs bound to a finished job), then released in
// memory.
#include "absl/strings/str_cat.h"
#include "api/job_accounting.h"
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
  if (v.phase == rec.phase) {
    // A later report took back what an earlier one of this page called for.
    pending_phases_.erase(rec.key);
    return;
  }
  PendingPhase p;
  p.phase = v.phase;
  p.generation = rec.generation;
  if (v.phase == "Failed") {
    p.why = {"Failed",
             absl::StrCat("job failed: ", DescribeFailure(*v.failure)),
             true,
             true,
             {{"member", v.failure->member}, {"exit_code", v.failure->code}}};
    p.status_reason = FailureClass(*v.failure);
  } else if (v.phase == "Succeeded") {
    p.why = {"Succeeded", "every member completed"};
  } else if (v.phase == "Running") {
    p.why = {"Started", "every member reported running"};
  } else if (v.phase == "Ready") {
    p.why = {"Ready", "every replica is serving"};
  } else if (v.phase == "Degraded") {
    p.why = {"Degraded", "a replica is down; its node agent starts it again", true};
  } else {
    p.why = {v.phase, "replicas are starting", false, false};
  }
  if (p.status_reason.empty()) p.status_reason = p.why.reason;
  p.revision = rec.revision;
  p.obj = obj;
  pending_phases_[rec.key] = std::move(p);
}

void SchedulingController::WritePhases() {
  if (pending_phases_.empty()) return;
  std::map<std::string, PendingPhase> pending;
  pending.swap(pending_phases_);
  const absl::Time now = clock_.Now();
  // The status change of one pending phase.
  auto set_phase = [now](const PendingPhase& p) {
    return [&p, now](Json& s) {
      s["phase"] = p.phase;
      s["reason"] = p.status_reason;
      s["message"] = p.why.message.substr(0, 4096);
      auto [type, value] = PhaseCondition(p.phase);
      SetCondition(s, type, value, p.why.reason, p.why.message, now);
      if (Terminal(p.phase)) {
        api::ReleasePlacement(s, now);
        api::StampCompletion(s, now);
      }
      return true;
    };
  };
  auto done = [&](JobRec& rec, const PendingPhase& p) {
    rec.last_message = p.why.message;
    // The store first, then memory.
    if (Terminal(p.phase)) ReleaseMemory(rec, p.phase == "Succeeded");
    rec.phase = p.phase;
  };
  // One on its own: read, check the binding, CAS (UpdateBinding).
  auto write_one = [&](JobRec& rec, const PendingPhase& p) {
    absl::StatusOr<int64_t> w = UpdateBinding(rec, set_phase(p), p.why);
    if (w.ok()) {
      done(rec, p);
    } else if (!absl::IsCancelled(w.status())) {
      options_.log.Warn("member-reported phase not written",
                        {{"job", rec.name},
                         {"namespace", rec.ns},
                         {"phase", p.phase},
                         {"error", std::string(w.status().message())}});
    }
  };
  struct Planned {
    JobRec* rec;
    const PendingPhase* p;
    PreparedWrite w;
  };
  std::vector<Planned> planned;
  for (const auto& [key, p] : pending) {
    // Still the binding the reports were of, in memory too (a deletion or a restart since?).
    auto it = jobs_.find(key);
    if (it == jobs_.end()) continue;
    JobRec& rec = *it->second;
    if (!rec.bound || !BoundPhase(rec.phase) || rec.generation != p.generation) continue;
    // CAS on the revision the reports were read at: a write since then makes the whole
    // transaction fail, and each job is then written on its own below.
    absl::StatusOr<PreparedWrite> w =
        PrepareUpdate(key, rec.revision, OnBinding(p.generation, set_phase(p)), p.why,
                      p.revision == rec.revision ? &p.obj : nullptr);
    if (!w.ok()) {
      if (!absl::IsCancelled(w.status())) write_one(rec, p);
      continue;
    }
    planned.push_back({&rec, &p, *std::move(w)});
  }
  // As many jobs per Txn as the store takes (etcd: 127 operations).
  std::vector<PreparedWrite*> writes;
  writes.reserve(planned.size());
  for (Planned& pl : planned) writes.push_back(&pl.w);
  CommitInRuns(writes, [&](size_t begin, size_t end, const absl::StatusOr<int64_t>& rev) {
    if (!rev.ok()) {
      ++stats_.phase_batch_fallbacks;
      for (size_t i = begin; i < end; ++i) write_one(*planned[i].rec, *planned[i].p);
      return;
    }
    if (end - begin > 1) ++stats_.phase_batches;
    for (size_t i = begin; i < end; ++i) {
      LogChange(planned[i].w.obj, planned[i].p->why);
      planned[i].rec->revision = *rev;
      done(*planned[i].rec, *planned[i].p);
    }
  });
}

}  // namespace tessera::controller
