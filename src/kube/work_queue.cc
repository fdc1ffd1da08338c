#include "kube/work_queue.h"

namespace tessera::kube {

WorkQueue::WorkQueue(const Clock& clock, std::unique_ptr<ItemRateLimiter> limiter)
    : clock_(clock), limiter_(limiter ? std::move(limiter) : DefaultControllerRateLimiter(clock)) {}

WorkQueue::~WorkQueue() { ShutDown(); }

void WorkQueue::AddLocked(const std::string& item) {
  if (shutting_down_) return;
  if (!dirty_.insert(item).second) return;
  if (processing_.contains(item)) return;
  queue_.push_back(item);
  cv_.Signal();
}

void WorkQueue::Add(const std::string& item) {
  absl::MutexLock lock(&mu_);
  AddLocked(item);
}

void WorkQueue::AddAfter(const std::string& item, absl::Duration delay) {
  absl::MutexLock lock(&mu_);
  if (shutting_down_) return;
  if (delay <= absl::ZeroDuration()) {
    AddLocked(item);
    return;
  }
  const absl::Time ready = clock_.Now() + delay;
  auto [it, inserted] = waiting_ready_.emplace(item, ready);
  if (!inserted) {
    if (it->second <= ready) return;  // already due sooner
    it->second = ready;
  }
  waiting_.push({ready, item});
  cv_.SignalAll();  // a blocked Get may now have an earlier deadline
}

void WorkQueue::AddRateLimited(const std::string& item) { AddAfter(item, limiter_->When(item)); }
void WorkQueue::Forget(const std::string& item) { limiter_->Forget(item); }
int WorkQueue::NumRequeues(const std::string& item) { return limiter_->NumRequeues(item); }

void WorkQueue::PromoteLocked() {
  const absl::Time now = clock_.Now();
  while (!waiting_.empty() && waiting_.top().ready <= now) {
    Delayed_ d = waiting_.top();
    waiting_.pop();
    auto it = waiting_ready_.find(d.item);
    if (it == waiting_ready_.end() || it->second != d.ready) continue;  // stale entry
    waiting_ready_.erase(it);
    AddLocked(d.item);
  }
}

std::optional<std::string> WorkQueue::PopLocked() {
  if (queue_.empty()) return std::nullopt;
  std::string item = std::move(queue_.front());
  queue_.pop_front();
  processing_.insert(item);
  dirty_.erase(item);
  return item;
}

std::optional<std::string> WorkQueue::Get() {
  absl::MutexLock lock(&mu_);
  for (;;) {
    PromoteLocked();
    if (!queue_.empty()) return PopLocked();
    if (shutting_down_) return std::nullopt;
    if (waiting_.empty()) {
      cv_.Wait(&mu_);
    } else {
      cv_.WaitWithTimeout(&mu_, waiting_.top().ready - clock_.Now());
    }
  }
}

std::optional<std::string> WorkQueue::TryGet() {
  absl::MutexLock lock(&mu_);
  PromoteLocked();
  return PopLocked();
}

void WorkQueue::Done(const std::string& item) {
  absl::MutexLock lock(&mu_);
  processing_.erase(item);
  if (dirty_.contains(item)) {
    queue_.push_back(item);
    cv_.Signal();
  } else if (processing_.empty()) {
    cv_.SignalAll();  // ShutDownWithDrain waits for this
  }
}

int WorkQueue::Len() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(queue_.size());
}

int WorkQueue::Delayed() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(waiting_ready_.size());
}

void WorkQueue::ShutDown() {
  absl::MutexLock lock(&mu_);
  shutting_down_ = true;
  cv_.SignalAll();
}

void WorkQueue::ShutDownWithDrain() {
  absl::MutexLock lock(&mu_);
  shutting_down_ = true;
  cv_.SignalAll();
  while (!processing_.empty()) cv_.Wait(&mu_);
}

bool WorkQueue::ShuttingDown() const {
  absl::MutexLock lock(&mu_);
  return shutting_down_;
}

}  // namespace tessera::kube
