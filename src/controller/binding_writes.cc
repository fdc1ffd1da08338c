// Writing the bindings a scheduling cycle decided (SchedulingController::WriteBindings): a run
// of them in one store transaction, one write each when that fails.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/job_accounting.h"
#include "controller/controller_internal.h"
#include "controller/job_codec.h"
#include "controller/scheduling_controller.h"
#include "sched/framework/checkpoint_cadence.h"
#include "store/txn_runs.h"

namespace tessera::controller {

using namespace internal;  // NOLINT: the module's own helpers

namespace {

// The interval Tessera chooses for a TrainingJob that declares what a
// checkpoint costs (spec.checkpoint.costSeconds) and leaves intervalSeconds
// out: Young/Daly for its `gpus`; 0 for every other job.
int64_t ChosenCheckpointInterval(const Json& obj, double gpu_mtbf_s, int64_t gpus) {
  if (Str(obj, "kind", "TrainingJob") != "TrainingJob") return 0;
  auto spec = obj.find("spec");
  if (spec == obj.end() || !spec->is_object()) return 0;
  auto c = spec->find("checkpoint");
  if (c == spec->end() || !c->is_object()) return 0;
  const Json& ckpt = *c;
  if (ckpt.contains("intervalSeconds")) return 0;
  auto cost = ckpt.find("costSeconds");
  if (cost == ckpt.end() || !cost->is_number()) return 0;
  return sched::CheckpointIntervalSeconds(cost->get<double>(), gpu_mtbf_s, gpus);
}

}  // namespace

double SchedulingController::CheckpointGpuMtbfSeconds() const {
  if (options_.checkpoint_gpu_mtbf > absl::ZeroDuration()) {
    return absl::ToDoubleSeconds(options_.checkpoint_gpu_mtbf);
  }
  return sched::GpuMtbfSeconds(gpu_failures_seen_, gpu_seconds_seen_,
                               sched::kDefaultGpuMtbfSeconds);
}

std::optional<SchedulingController::BindingChange> SchedulingController::PlanBinding(
    const JobRec& rec, const std::string& explanation, absl::Time now) const {
  const model::Job& job = *rec.job;
  const sched::Placement* pl = cluster_->FindPlacement(job.key());
  if (pl == nullptr) return std::nullopt;
  BindingChange b;
  b.generation = rec.generation + 1;
  b.members = pl->members.size();
  const std::vector<std::string> nodes = NodeNames(*pl, *cluster_);
  // The scheduler's explanation says where and why; keep the node list,
  // queue and generation so the message stands on its own.
  b.message =
      absl::StrCat("bound ", b.members, " members to ", nodes.size(),
                   " node(s): ", absl::StrJoin(nodes, ", "), " (generation ", b.generation,
                   ", queue ", job.queue, ")", explanation.empty() ? "" : "; ", explanation);
  b.change = {"Scheduled",
              b.message,
              false,
              true,
              {{"nodes", absl::StrJoin(nodes, ",")},
               {"generation", b.generation},
               {"members", static_cast<int64_t>(b.members)}}};
  int64_t gpus = 0;
  for (const sched::MemberPlacement& m : pl->members) gpus += static_cast<int64_t>(m.gpus.size());
  b.mutate = [placement = PlacementToJson(*pl, job, *cluster_, b.generation), nodes,
              gen = b.generation, members = static_cast<int64_t>(b.members), msg = b.message,
              attempts = rec.attempts + 1, priority = job.priority, now, gpus,
              mtbf = CheckpointGpuMtbfSeconds()](Json& obj) {
    Json& st = StatusOf(obj);
    if (Terminal(Str(st, "phase"))) return false;
    // Chosen at each binding, for the GPUs this placement holds.
    if (const int64_t every = ChosenCheckpointInterval(obj, mtbf, gpus); every > 0) {
      st["checkpointIntervalSeconds"] = every;
    } else {
      st.erase("checkpointIntervalSeconds");
    }
    // A binding made while one is open (not the controller's, say): that one ends here.
    api::ReleasePlacement(st, now);
    st["phase"] = "Scheduled";
    st["reason"] = "Scheduled";
    st["placement"] = placement;
    st["generation"] = gen;
    st["replicas"] = members;
    st["attempts"] = attempts;
    st["priority"] = priority;
    st["scheduledTime"] = Timestamp(now);
    st.erase("accountedTime");
    NoteLogNodes(st, nodes);
    api::StampStart(st, now);
    st.erase("estimatedStartTime");
    st["message"] = msg;
    SetCondition(st, "Scheduled", "True", "Scheduled", msg, now);
    EndPreemption(st, "Scheduled", "", now);
    return true;
  };
  return b;
}

void SchedulingController::NoteBound(JobRec& rec, const BindingChange& b, int64_t revision,
                                     absl::Time now) {
  rec.bound = true;
  ArmRuntimeLimit(rec, now);
  rec.last_resize = now;
  rec.generation = b.generation;
  ++rec.attempts;
  rec.phase = "Scheduled";
  rec.last_message = b.message;
  rec.revision = revision;
  ++stats_.bound;
}

void SchedulingController::CommitInRuns(
    const std::vector<PreparedWrite*>& writes,
    absl::FunctionRef<void(size_t begin, size_t end, const absl::StatusOr<int64_t>& rev)> written) {
  std::vector<size_t> sizes;
  sizes.reserve(writes.size());
  for (const PreparedWrite* w : writes) sizes.push_back(w->ops.size());
  size_t begin = 0;
  for (size_t end : store::TxnRuns(sizes, store_.MaxTxnOps())) {
    std::vector<store::Op> ops;
    for (size_t i = begin; i < end; ++i) {
      for (store::Op& op : writes[i]->ops) ops.push_back(std::move(op));
    }
    written(begin, end, store_.Txn(ops));
    begin = end;
  }
}

void SchedulingController::WriteBindings(std::vector<PendingBinding>* batch, absl::Time now) {
  // Memory must never hold less than the store: a binding not written is undone, retried later.
  auto undo = [&](JobRec& rec) {
    ++stats_.bind_conflicts;
    ReleaseMemory(rec);
    if (!Terminal(rec.phase)) Enqueue(rec);
  };
  // A job admitted since the last cycle is bound in the same write as its admission (Pending ->
  // Queued -> Scheduled, both Events): its object is the one the admission holds, so there is no
  // read, and one write instead of two. The binding's change, preceded by admission `a`'s when
  // there is one.
  auto with_admission = [now](const PendingAdmission* a, const std::function<bool(Json&)>& bind) {
    if (a == nullptr) return bind;
    return std::function<bool(Json&)>([to = a->to, why = a->why, bind, now](Json& obj) {
      return ApplyPhase(obj, to, why, false, "", nullptr, now) && bind(obj);
    });
  };
  // One binding on its own: read, CAS, retried while others write the job (not its binding).
  auto write_one = [&](JobRec& rec, const BindingChange& b, const PendingAdmission* a) {
    int64_t base = 0;
    absl::StatusOr<int64_t> rev =
        Update(rec.key, rec.revision, with_admission(a, b.mutate), b.change, &base);
    if (rev.ok()) {
      NoteBound(rec, b, *rev, now);
    } else {
      undo(rec);
    }
  };
  struct Planned {
    JobRec* rec;
    BindingChange b;
    PreparedWrite w;
    std::optional<PendingAdmission> admission;  // written with the binding
  };
  std::vector<Planned> planned;
  planned.reserve(batch->size());
  for (PendingBinding& p : *batch) {
    std::optional<BindingChange> b = PlanBinding(*p.rec, p.explanation, now);
    if (!b) {
      undo(*p.rec);
      continue;
    }
    std::optional<PendingAdmission> admission;
    if (auto a = pending_admissions_.find(p.rec->key); a != pending_admissions_.end()) {
      // Still the job as admitted (WriteAdmissions' test)? Otherwise the admission is dropped:
      // a bound job is never set Queued.
      if (a->second.to == "Queued" && a->second.phase == p.rec->phase &&
          a->second.revision == p.rec->revision) {
        admission = std::move(a->second);
      }
      pending_admissions_.erase(a);
    }
    const PendingAdmission* adm = admission ? &*admission : nullptr;
    // The admission's Event, named before the binding's (names order Events).
    std::optional<store::Op> admitted;
    if (adm != nullptr && adm->why.record) admitted = EventOp(adm->obj, adm->revision, adm->why);
    absl::StatusOr<PreparedWrite> w =
        PrepareUpdate(p.rec->key, p.rec->revision, with_admission(adm, b->mutate), b->change,
                      adm != nullptr ? &adm->obj : nullptr);
    if (!w.ok()) {
      if (admission) pending_admissions_[p.rec->key] = *std::move(admission);  // still to write
      undo(*p.rec);
      continue;
    }
    if (admitted) w->ops.insert(w->ops.begin() + 1, *std::move(admitted));
    planned.push_back({p.rec, *std::move(b), *std::move(w), std::move(admission)});
  }
  batch->clear();
  // As many bindings per Txn as the store takes (etcd: 127 operations).
  std::vector<PreparedWrite*> writes;
  writes.reserve(planned.size());
  for (Planned& p : planned) writes.push_back(&p.w);
  CommitInRuns(writes, [&](size_t begin, size_t end, const absl::StatusOr<int64_t>& rev) {
    if (metrics_) metrics_->binding_batch.With({}).Observe(static_cast<double>(end - begin));
    if (rev.ok()) {
      for (size_t i = begin; i < end; ++i) {
        if (planned[i].admission) LogChange(planned[i].w.obj, planned[i].admission->why);
        LogChange(planned[i].w.obj, planned[i].b.change);
        NoteBound(*planned[i].rec, planned[i].b, *rev, now);
      }
      return;
    }
    // Some job changed after it was read (a user's edit, an agent's report): write each on its
    // own, so one conflict costs only its own binding (its admission's condition goes with it;
    // its Admitted Event does not).
    ++stats_.bind_batch_fallbacks;
    for (size_t i = begin; i < end; ++i) {
      const PendingAdmission* a = planned[i].admission ? &*planned[i].admission : nullptr;
      write_one(*planned[i].rec, planned[i].b, a);
    }
  });
}

}  // namespace tessera::controller
