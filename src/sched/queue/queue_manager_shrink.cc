// QueueManager: preemption that shrinks elastic victims instead of evicting
// them whole (the search is in sched/plugins/preemption.h).
//
// Protocol. A plan found by the preemption search either evicts whole gangs
// or shrinks elastic jobs (VictimPlan::shrinks: per victim, the members it
// gives up, never below its minMember). For a shrink plan:
//   1. the dry run (VerifyPlan) takes out only the dropped members and their
//      charge (TakeOutPart), so the preemptor is verified against exactly
//      the room the shrink frees;
//   2. each victim is signalled like any victim (terminating, kill_at, a
//      kCheckpointSignal event that names the members it will drop) and
//      keeps `dropping` and its charge: the reclaim view counts only that
//      charge as leaving its queue (RefreshReclaimView), so a queue's
//      guarantee is reclaimed once, not twice;
//   3. at its deadline, or once every victim of its plan has exited
//      (VictimExited, as for whole victims), Kill hands it to ShrinkVictim:
//      Resize to the members it keeps (the dropped GPUs and their charge go
//      back), its preemption count goes up and its run restarts now (its
//      survivors restart from a checkpoint; minRuntime protects the new
//      run, and its expected end is now + its expected runtime), and a
//      kShrunk event replaces kKilled. The preemptor, nominated
//      with no victims left, is placed first in the same cycle;
//   4. a cancelled preemptor spares the victim (Finish), a finished or lost
//      victim releases everything as before.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "sched/plugins/preemption.h"
#include "sched/queue/queue_manager.h"

namespace tessera::sched {
namespace {

bool SameOrdinal(const MemberPlacement& a, const MemberPlacement& b) {
  return a.group == b.group && a.member == b.member;
}

}  // namespace

ResourceList QueueManager::UsageOf(const RunningJob& j,
                                   const std::vector<MemberPlacement>& members) const {
  ModelId model = DemandModel(*j.job);
  for (const MemberPlacement& m : j.members) {
    if (!m.gpus.empty()) {
      model = cluster_->state(m.node).model;
      break;
    }
  }
  return PlacedDemand(*j.job, members, model);
}

void QueueManager::RefreshShrinkState() {
  env_.placed_usage = [this](const RunningJob& j, const std::vector<MemberPlacement>& members) {
    return UsageOf(j, members);
  };
  for (int32_t s = 0; s < running_.num_slots(); ++s) {
    if (!running_.live(s) || !running_.at(s).shrinking()) continue;
    RunningJob& rj = running_.at(s);
    rj.dropping_usage = UsageOf(rj, rj.dropping);
  }
}

bool QueueManager::MarkShrink(const VictimPlan& plan, RunningJob* rj) const {
  rj->dropping.clear();
  rj->dropping_usage.clear();
  const int32_t slot = running_.SlotOf(rj->key);
  for (const ShrinkPart& part : plan.shrinks) {
    if (part.slot != slot || part.dropped.empty()) continue;
    rj->dropping = part.dropped;
    rj->dropping_usage = UsageOf(*rj, rj->dropping);
    return true;
  }
  return false;
}

void QueueManager::TakeOutPart(const RunningJob& j) {
  if (!j.shrinking()) return TakeOut(j);
  // Rebind the kept members only; the charge loses the dropped ones.
  Placement kept;
  kept.job_key = j.key;
  for (const MemberPlacement& m : j.members) {
    const bool dropped = std::any_of(j.dropping.begin(), j.dropping.end(),
                                     [&](const MemberPlacement& d) { return SameOrdinal(d, m); });
    if (!dropped) kept.members.push_back(m);
  }
  (void)cluster_->Release(j.key);
  for (const MemberPlacement& m : kept.members) (void)cluster_->Assume(m);
  (void)cluster_->Bind(std::move(kept));
  tree_->Remove(j.leaf, j.dropping_usage);
}

void QueueManager::PutBackPart(const RunningJob& j) {
  if (!j.shrinking()) return PutBack(j);
  (void)cluster_->Release(j.key);  // the kept members, bound again with the rest
  RunningJob dropped = j;
  dropped.usage = j.dropping_usage;  // the kept members' charge never left
  PutBack(dropped);
}

void QueueManager::ShrinkVictim(const std::string& key, absl::Time now, CycleReport* rep) {
  RunningJob* rj = running_.Find(key);
  if (rj == nullptr) return;
  // The victim stops being one (terminating, dropping, start change below):
  // a remembered preemption search (SearchMemo) no longer holds.
  ++manager_gen_;
  const std::string by = rj->preempted_by;
  std::vector<MemberPlacement> dropped = std::move(rj->dropping);
  rj->dropping.clear();
  rj->dropping_usage.clear();
  Placement kept;
  kept.job_key = key;
  for (const MemberPlacement& m : rj->members) {
    const bool drop = std::any_of(dropped.begin(), dropped.end(),
                                  [&](const MemberPlacement& d) { return SameOrdinal(d, m); });
    if (!drop) kept.members.push_back(m);
  }
  // Resize refuses a terminating job: the preemption ends here either way.
  rj->terminating = false;
  rj->kill_at = absl::InfiniteFuture();
  rj->preempted_by.clear();
  const bool exited = rj->exited;
  rj->exited = false;
  if (absl::Status s = Resize(key, kept, now); !s.ok()) {
    // E.g. a kept member's GPU turned unhealthy since the plan: evict it
    // whole, as before shrinking existed.
    rj = running_.Find(key);
    rj->terminating = true;
    rj->preempted_by = by;
    rj->exited = exited;
    Kill(key, now, rep);
    return;
  }
  rj = running_.Find(key);
  ++rj->times_preempted;
  // The survivors restart from a checkpoint: a new run, for minRuntime and
  // for backfill (its expected end, as for a job started now).
  rj->start = now;
  if (auto meta = running_meta_.find(key); meta != running_meta_.end()) {
    rj->expected_end = now + meta->second.runtime;
  }
  if (auto it = pending_.find(by); it != pending_.end()) it->second.victims.erase(key);
  if (rep != nullptr) {
    rep->events.push_back(
        {QueueEvent::Kind::kShrunk, key, by, now,
         absl::StrCat("gave up ", dropped.size(), " member(s) to ", by, "; running ",
                      kept.members.size(), " of ", rj->job->total_members()),
         std::move(dropped)});
  }
}

}  // namespace tessera::sched
