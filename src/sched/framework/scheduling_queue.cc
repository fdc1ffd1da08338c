#include "sched/framework/scheduling_queue.h"

#include <algorithm>

namespace tessera::sched {

SchedulingQueue::SchedulingQueue(const QueueSortPlugin* sort) : active_(Less{sort}) {}

absl::Duration SchedulingQueue::BackoffFor(int32_t attempts) {
  int shift = std::clamp(attempts - 1, 0, 6);
  return std::min(absl::Seconds(1) * (1 << shift), absl::Seconds(60));
}

void SchedulingQueue::Add(std::shared_ptr<const model::Job> job) {
  std::string key = job->key();
  Remove(key);
  auto e = std::make_unique<Entry>();
  e->qj.job = std::move(job);
  e->where = Where::kActive;
  active_.insert(&e->qj);
  entries_[key] = std::move(e);
}

bool SchedulingQueue::Remove(absl::string_view key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return false;
  if (it->second->where == Where::kActive) active_.erase(&it->second->qj);
  entries_.erase(it);
  return true;
}

std::optional<QueuedJob> SchedulingQueue::Pop(absl::Time now) {
  for (auto& [key, e] : entries_) {
    if (e->where == Where::kWaiting && e->qj.backoff_until <= now) {
      e->where = Where::kActive;
      active_.insert(&e->qj);
    }
  }
  if (active_.empty()) return std::nullopt;
  const QueuedJob* top = *active_.begin();
  active_.erase(active_.begin());
  auto it = entries_.find(top->job->key());
  QueuedJob out = std::move(it->second->qj);
  entries_.erase(it);
  return out;
}

void SchedulingQueue::Requeue(QueuedJob qj, absl::Time now, std::string reason) {
  std::string key = qj.job->key();
  Remove(key);
  auto e = std::make_unique<Entry>();
  e->qj = std::move(qj);
  e->qj.attempts++;
  e->qj.last_reason = std::move(reason);
  e->qj.backoff_until = now + BackoffFor(e->qj.attempts);
  e->where = Where::kWaiting;
  entries_[key] = std::move(e);
}

void SchedulingQueue::MoveAllToActive() {
  for (auto& [key, e] : entries_) {
    if (e->where == Where::kWaiting) {
      e->where = Where::kActive;
      active_.insert(&e->qj);
    }
  }
}

std::vector<const QueuedJob*> SchedulingQueue::Waiting() const {
  std::vector<const QueuedJob*> out;
  for (const auto& [key, e] : entries_) {
    if (e->where == Where::kWaiting) out.push_back(&e->qj);
  }
  std::sort(out.begin(), out.end(),
            [](const QueuedJob* a, const QueuedJob* b) { return a->job->key() < b->job->key(); });
  return out;
}

}  // namespace tessera::sched
