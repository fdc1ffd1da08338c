// Phases of many jobs written together (SchedulingController::SetJobPhases), many jobs per store
// transaction: the admissions Admit decided (WriteAdmissions: each job's Pending -> Queued with
// its Admitted condition and Event, -> Suspended when spec.suspend is set) and a cycle's new
// waiting reasons (WaitingReasons).
//
// Why: a page of new jobs used to cost one read and one durable write each, serially on the
// controller's thread; on etcd (a round trip and a WAL fsync each) that alone held 2,430 new jobs
// for ~11 s before their first cycle. Admissions use the object the event carried, so there is
// no read.
#include <map>

#include "controller/controller_internal.h"
#include "controller/scheduling_controller.h"

namespace tessera::controller {

using namespace internal;  // NOLINT: the module's own helpers

int SchedulingController::SetJobPhases(std::vector<PhaseWrite>& writes) {
  const absl::Time now = clock_.Now();
  auto extra = [](const PhaseWrite& w) {
    return w.extra_status.is_null() ? nullptr : &w.extra_status;
  };
  auto write_one = [&](const PhaseWrite& w) {
    if (absl::Status s =
            SetJobPhase(*w.rec, w.phase, w.why, w.clear_placement, w.status_reason, extra(w));
        !s.ok()) {
      options_.log.Error("job phase not written", {{"job", w.rec->name},
                                                   {"namespace", w.rec->ns},
                                                   {"phase", w.phase},
                                                   {"error", std::string(s.message())}});
    }
  };
  struct Planned {
    const PhaseWrite* w;
    PreparedWrite prepared;
  };
  std::vector<Planned> planned;
  planned.reserve(writes.size());
  for (const PhaseWrite& w : writes) {
    // When the job moved on since `expected` (or `current` was read later than that), the run
    // fails and each job is written on its own, from what is stored.
    absl::StatusOr<PreparedWrite> p = PrepareUpdate(
        w.rec->key, w.expected,
        [&](Json& obj) {
          return ApplyPhase(obj, w.phase, w.why, w.clear_placement, w.status_reason, extra(w), now);
        },
        w.why, w.current);
    if (p.ok()) {
      planned.push_back({&w, *std::move(p)});
    } else if (!absl::IsCancelled(p.status())) {
      write_one(w);
    }
  }
  std::vector<PreparedWrite*> ops;
  ops.reserve(planned.size());
  for (Planned& p : planned) ops.push_back(&p.prepared);
  int failed_runs = 0;
  CommitInRuns(ops, [&](size_t begin, size_t end, const absl::StatusOr<int64_t>& rev) {
    if (!rev.ok()) ++failed_runs;
    for (size_t i = begin; i < end; ++i) {
      const PhaseWrite& w = *planned[i].w;
      if (!rev.ok()) {
        write_one(w);
        continue;
      }
      LogChange(planned[i].prepared.obj, w.why);
      w.rec->phase = w.phase;
      w.rec->last_message = w.why.message;
      if (planned[i].prepared.base == w.rec->revision) w.rec->revision = *rev;
    }
  });
  return failed_runs;
}

bool SchedulingController::QueuedButNotWritten(const std::string& key) const {
  auto it = pending_admissions_.find(key);
  return it != pending_admissions_.end() && it->second.to == "Queued";
}

void SchedulingController::WriteAdmissions(const std::string* only) {
  if (pending_admissions_.empty()) return;
  std::map<std::string, PendingAdmission> pending;
  if (only == nullptr) {
    pending.swap(pending_admissions_);
  } else if (auto node = pending_admissions_.extract(*only)) {
    pending.insert(std::move(node));
  } else {
    return;
  }
  std::vector<PhaseWrite> writes;
  writes.reserve(pending.size());
  for (const auto& [key, a] : pending) {
    // Still the job admitted, still waiting (not bound, deleted or admitted again since)?
    auto it = jobs_.find(key);
    if (it == jobs_.end()) continue;
    JobRec& rec = *it->second;
    if (rec.phase != a.phase || rec.bound) continue;
    // CAS on the revision the job had when admitted; the object is as the event carried it.
    PhaseWrite w;
    w.rec = &rec;
    w.phase = a.to;
    w.why = a.why;
    w.clear_placement = a.to == "Suspended";
    w.expected = a.revision;
    w.current = &a.obj;
    writes.push_back(std::move(w));
  }
  stats_.admission_batch_fallbacks += SetJobPhases(writes);
}

}  // namespace tessera::controller
