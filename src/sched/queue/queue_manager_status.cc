// QueueManager's read side: where a job stands (phase), why it waits (the prose and its bounded
// class), a queue's status and the last preemption plan. Const: nothing here changes a decision.
#include "absl/strings/str_cat.h"
#include "sched/queue/queue_manager.h"

namespace tessera::sched {

JobPhase QueueManager::Phase(absl::string_view key) const {
  if (auto it = pending_.find(key); it != pending_.end()) {
    return it->second.nominated ? JobPhase::kNominated : JobPhase::kPending;
  }
  const RunningJob* rj = running_.Find(key);
  if (rj == nullptr) return JobPhase::kUnknown;
  return rj->terminating ? JobPhase::kTerminating : JobPhase::kRunning;
}

std::string QueueManager::WaitingReason(absl::string_view key) const {
  auto it = pending_.find(key);
  return it == pending_.end() ? "" : it->second.reason;
}

WaitReason QueueManager::WaitingReasonClass(absl::string_view key) const {
  auto it = pending_.find(key);
  return it == pending_.end() ? WaitReason::kNotTried : it->second.reason_class;
}

absl::StatusOr<QueueStatus> QueueManager::Queue(absl::string_view name) const {
  int q = tree_->Find(name);
  if (q < 0) return absl::NotFoundError(absl::StrCat("queue ", name, " not found"));
  return tree_->Status(q);
}

const VictimPlan& QueueManager::last_plan() const { return preemption_->last_plan(); }

}  // namespace tessera::sched
