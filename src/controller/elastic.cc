// The elastic half of SchedulingController: a TrainingJob with
// spec.elastic {minReplicas, maxReplicas} keeps running on fewer members
// when a node or GPU is lost, and grows back when room returns
// (docs/control-plane.md, "Elastic jobs").
//
// Shrink: a lost node (NotReady past the eviction delay, deleted), a
//   drained or reconfigured node, or an unhealthy GPU takes away the job's
//   members there; so does a preemption that shrinks it (the QueueManager
//   resizes it in memory at the victim's deadline, then
//   WritePreemptionShrink writes it, as a kKilled unbinding is). If at least
//   minReplicas remain, the store gets the smaller placement with a new
//   generation (agents restart the survivors from status.resumeFrom, the
//   newest Ready Checkpoint, with the new world size) and an ElasticShrink
//   Event; then the QueueManager gives the dropped GPUs and quota back
//   (store first, then memory, as every unbinding). Below minReplicas the job
//   is requeued as any gang.
// Grow: after each queue cycle, a running elastic job below maxReplicas,
//   resized or bound at least options.elastic_grow_interval ago, asks the
//   QueueManager to place its missing members (the same Scheduler; pending
//   work and reservations first, see QueueManager::Grow). The grown binding
//   is held in memory, then written (new generation, ElasticGrow Event);
//   if the write fails the memory goes back to the old placement.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "controller/controller_internal.h"
#include "controller/job_codec.h"
#include "controller/scheduling_controller.h"

namespace tessera::controller {

using namespace internal;  // NOLINT: the module's own helpers

namespace {

// "node-a, node-b": the distinct nodes of `members`.
std::string NodesOf(const std::vector<sched::MemberPlacement>& members,
                    const sched::ClusterState& cs) {
  std::vector<std::string> names;
  names.reserve(members.size());
  for (const sched::MemberPlacement& m : members) names.push_back(cs.node(m.node).name);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return absl::StrJoin(names, ", ");
}

}  // namespace

bool SchedulingController::WriteResize(JobRec& rec, const sched::Placement& p, const Change& why,
                                       absl::Time now, bool preempted,
                                       const std::function<void(Json& status)>& also) {
  Change change = why;
  change.fields.emplace_back("replicas", static_cast<int64_t>(p.members.size()));
  const bool written = WriteGeneration(rec, p, change, now, [&](Json& st) {
    st["replicas"] = static_cast<int64_t>(p.members.size());
    st["lastResizeTime"] = Timestamp(now);
    if (preempted) {
      EndPreemption(st, why.reason, Str(st, "message"), now);
    }
    if (also) also(st);
    return true;
  });
  if (written) rec.last_resize = now;
  return written;
}

bool SchedulingController::Shrink(JobRec& rec,
                                  const std::function<bool(const sched::MemberPlacement&)>& lost,
                                  const Change& why) {
  const int32_t min_replicas = rec.elastic_min();
  if (min_replicas <= 0 || !rec.bound || !rec.in_qm || Terminal(rec.phase) ||
      qm_->Phase(rec.job->key()) != sched::JobPhase::kRunning) {
    return false;
  }
  const sched::Placement* cur = cluster_->FindPlacement(rec.job->key());
  if (cur == nullptr) return false;
  sched::Placement kept;
  kept.job_key = cur->job_key;
  std::vector<sched::MemberPlacement> dropped;
  for (const sched::MemberPlacement& m : cur->members) {
    (lost(m) ? dropped : kept.members).push_back(m);
  }
  if (dropped.empty()) return true;  // nothing of this job was lost
  const int32_t keep = static_cast<int32_t>(kept.members.size());
  if (keep < min_replicas) return false;  // below minReplicas: requeue the gang
  const absl::Time now = clock_.Now();
  if (!WriteResize(rec, kept, ShrinkChange(rec, dropped, keep, why), now)) return false;
  // The store no longer binds the dropped members: release them in memory.
  if (absl::Status s = qm_->Resize(rec.job->key(), kept, now); !s.ok()) {
    // Memory keeps the old, larger binding: never less than the store.
    options_.log.Error("elastic shrink not applied in memory",
                       {{"job", rec.name}, {"error", std::string(s.message())}});
  }
  ++stats_.elastic_shrinks;
  if (metrics_) metrics_->elastic_resizes.With({"shrink", why.reason}).Inc();
  cycle_needed_ = true;  // the freed room may start a pending job
  return true;
}

SchedulingController::Change SchedulingController::ShrinkChange(
    const JobRec& rec, const std::vector<sched::MemberPlacement>& dropped, int32_t keep,
    const Change& why) const {
  Change c{
      "ElasticShrink",
      absl::StrCat(why.message, "; elastic: dropped ", dropped.size(), " member(s) on ",
                   NodesOf(dropped, *cluster_), ", running ", keep, " of ",
                   rec.job->total_members(), " replicas (minReplicas ", rec.elastic_min(), ")"),
      true,
      true,
      {{"cause", why.reason}, {"dropped", static_cast<int64_t>(dropped.size())}}};
  for (const obs::LogField& f : why.fields) c.fields.push_back(f);
  return c;
}

bool SchedulingController::WritePreemptionShrink(JobRec& rec, const sched::QueueEvent& ev,
                                                 absl::Time now) {
  const sched::Placement* kept = cluster_->FindPlacement(ev.job);
  if (kept == nullptr) return true;
  const Change why{
      "Preempted", absl::StrCat("preempted by ", ev.other), true, true, {{"preemptor", ev.other}}};
  const Change shrink =
      ShrinkChange(rec, ev.dropped, static_cast<int32_t>(kept->members.size()), why);
  if (!WriteResize(rec, *kept, shrink, now, /*preempted=*/true)) {
    options_.log.Error("preemption shrink not written; re-listing",
                       {{"job", rec.name}, {"namespace", rec.ns}, {"preemptor", ev.other}});
    resync_ = true;
    return false;
  }
  ++stats_.elastic_shrinks;
  ++stats_.preempt_shrinks;
  if (metrics_) metrics_->elastic_resizes.With({"shrink", "Preempted"}).Inc();
  return true;
}

void SchedulingController::GrowElastic(absl::Time now) {
  std::vector<JobRec*> candidates;
  for (const auto& [key, rec] : jobs_) {
    // An autoscaled service grows toward its desiredReplicas instead
    // (inference_autoscale.cc), never to its maximum here.
    if (rec->elastic_min() <= 0 || rec->slo || !rec->bound || !rec->in_qm ||
        !BoundPhase(rec->phase) || now - rec->last_resize < options_.elastic_grow_interval) {
      continue;
    }
    const sched::Placement* p = cluster_->FindPlacement(rec->job->key());
    if (p == nullptr || static_cast<int32_t>(p->members.size()) >= rec->job->total_members()) {
      continue;
    }
    candidates.push_back(rec.get());
  }
  std::sort(candidates.begin(), candidates.end(), GrowsFirst<JobRec>);
  for (JobRec* rec : candidates) {
    const std::string key = rec->job->key();
    const sched::Placement before = *cluster_->FindPlacement(key);
    sched::QueueManager::GrowResult g = qm_->Grow(key, now);
    if (!g.grown) continue;
    const std::vector<sched::MemberPlacement> added = AddedMembers(before, g.placement);
    const Change grow{
        "ElasticGrow",
        absl::StrCat("elastic: added ", g.added, " member(s) on ", NodesOf(added, *cluster_),
                     ", running ", g.placement.members.size(), " of ", rec->job->total_members(),
                     " replicas"),
        false,
        true,
        {{"added", static_cast<int64_t>(g.added)}}};
    if (!WriteResize(*rec, g.placement, grow, now)) {
      // Memory must never hold less than the store: back to what it holds.
      if (absl::Status s = qm_->Resize(key, before, now); !s.ok()) {
        options_.log.Error("elastic grow not undone; re-listing",
                           {{"job", rec->name}, {"error", std::string(s.message())}});
        resync_ = true;
        return;
      }
      continue;
    }
    ++stats_.elastic_grows;
    if (metrics_) metrics_->elastic_resizes.With({"grow", "Capacity"}).Inc();
  }
}

}  // namespace tessera::controller
