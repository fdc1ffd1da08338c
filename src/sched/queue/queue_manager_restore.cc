// QueueManager: rebuilding the running set from a store after a restart
// (the caller re-binds each job's stored placement in the ClusterState
// first): running jobs (Restore) and preemptions that were in flight
// (RestoreVictim), so a restarted control plane carries on with the
// decisions the previous one made.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "sched/queue/queue_manager.h"

namespace tessera::sched {

absl::Status QueueManager::Restore(model::Job job, const Placement& placement,
                                   const SubmitOptions& opts, absl::Time now) {
  const std::string key = job.key();
  if (cluster_->FindPlacement(key) == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("job ", key, " holds no placement"));
  }
  absl::Status s = Submit(std::move(job), opts, now);
  if (!s.ok()) return s;
  Pending& p = pending_.at(key);
  p.last_checkpoint = opts.last_checkpoint;
  CycleReport ignored;
  Start(p, placement, opts.started == absl::InfinitePast() ? now : std::min(opts.started, now),
        &ignored);
  return absl::OkStatus();
}

absl::Status QueueManager::RestoreVictim(absl::string_view victim, absl::string_view preemptor,
                                         absl::Time deadline,
                                         const std::vector<MemberPlacement>& dropping) {
  RunningJob* rj = running_.Find(victim);
  if (rj == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("job ", victim, " is not running"));
  }
  if (rj->terminating) {
    return absl::FailedPreconditionError(absl::StrCat("job ", victim, " is already terminating"));
  }
  auto preemptor_entry = pending_.find(preemptor);
  if (preemptor_entry == pending_.end()) {
    // As Finish does for a cancelled preemptor: the victim is spared.
    return absl::FailedPreconditionError(
        absl::StrCat("preemptor ", preemptor, " of ", victim, " is not pending; victim spared"));
  }
  std::vector<MemberPlacement> drop;
  for (const MemberPlacement& d : dropping) {
    auto held = std::find_if(rj->members.begin(), rj->members.end(), [&](const MemberPlacement& m) {
      return m.group == d.group && m.member == d.member;
    });
    if (held == rj->members.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("dropping: job ", victim, " holds no member ", d.group, "/", d.member));
    }
    drop.push_back(*held);
  }
  if (!drop.empty()) {
    const int64_t kept = static_cast<int64_t>(rj->members.size() - drop.size());
    if (!rj->job->gang.elastic || kept < rj->job->effective_min_member()) {
      return absl::InvalidArgumentError(
          absl::StrCat("dropping: job ", victim, " cannot shrink to ", kept, " member(s)"));
    }
  }
  rj->terminating = true;
  rj->kill_at = deadline;
  rj->preempted_by = std::string(preemptor);
  rj->dropping = std::move(drop);
  rj->dropping_usage = rj->dropping.empty() ? ResourceList() : UsageOf(*rj, rj->dropping);
  ++manager_gen_;
  preemptor_entry->second.nominated = true;
  preemptor_entry->second.victims.insert(std::string(victim));
  RefreshReclaimView();
  return absl::OkStatus();
}

}  // namespace tessera::sched
