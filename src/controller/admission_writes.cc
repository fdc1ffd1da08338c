// Writing the admissions Admit decided (SchedulingController::WriteAdmissions): each job's
// Pending -> Queued with its Admitted condition and Event (-> Suspended when spec.suspend is
// set), many jobs per store transaction.
//
// Why: a page of new jobs used to cost one read and one durable write each, serially on the
// controller's thread; on etcd (a round trip and a WAL fsync each) that alone held 2,430 new jobs
// for ~11 s before their first cycle. The object the event carried is used, so there is no read.
#include <map>

#include "controller/controller_internal.h"
#include "controller/scheduling_controller.h"

namespace tessera::controller {

using namespace internal;  // NOLINT: the module's own helpers

void SchedulingController::WriteAdmissions() {
  if (pending_admissions_.empty()) return;
  std::map<std::string, PendingAdmission> pending;
  pending.swap(pending_admissions_);
  const absl::Time now = clock_.Now();
  struct Planned {
    JobRec* rec;
    const PendingAdmission* a;
    PreparedWrite w;
  };
  const auto clear = [](const PendingAdmission& a) { return a.to == "Suspended"; };
  std::vector<Planned> planned;
  planned.reserve(pending.size());
  auto write_one = [&](JobRec& rec, const PendingAdmission& a) {
    if (absl::Status s = SetJobPhase(rec, a.to, a.why, clear(a)); !s.ok()) {
      options_.log.Error(
          "admission not written",
          {{"job", rec.name}, {"namespace", rec.ns}, {"error", std::string(s.message())}});
    }
  };
  for (const auto& [key, a] : pending) {
    // Still the job admitted, still waiting (not bound, deleted or admitted again since)?
    auto it = jobs_.find(key);
    if (it == jobs_.end()) continue;
    JobRec& rec = *it->second;
    if (rec.phase != a.phase || rec.bound) continue;
    // CAS on the revision the job had when admitted; the object is as the event carried it.
    // When the job moved on (or `obj` was read later than that), the run fails and each job is
    // written on its own, from what is stored.
    absl::StatusOr<PreparedWrite> w = PrepareUpdate(
        key, a.revision,
        [&](Json& obj) { return ApplyPhase(obj, a.to, a.why, clear(a), "", nullptr, now); }, a.why,
        &a.obj);
    if (!w.ok()) {
      if (!absl::IsCancelled(w.status())) write_one(rec, a);
      continue;
    }
    planned.push_back({&rec, &a, *std::move(w)});
  }
  std::vector<PreparedWrite*> writes;
  writes.reserve(planned.size());
  for (Planned& p : planned) writes.push_back(&p.w);
  CommitInRuns(writes, [&](size_t begin, size_t end, const absl::StatusOr<int64_t>& rev) {
    if (!rev.ok()) ++stats_.admission_batch_fallbacks;
    for (size_t i = begin; i < end; ++i) {
      JobRec& rec = *planned[i].rec;
      if (!rev.ok()) {
        write_one(rec, *planned[i].a);
        continue;
      }
      LogChange(planned[i].w.obj, planned[i].a->why);
      rec.phase = planned[i].a->to;
      rec.last_message = planned[i].a->why.message;
      if (rec.revision == planned[i].a->revision) rec.revision = *rev;
    }
  });
}

}  // namespace tessera::controller
