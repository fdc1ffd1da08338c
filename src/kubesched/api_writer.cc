#include "kubesched/api_writer.h"

#include <utility>

namespace tessera::kubesched {

ApiWriter::ApiWriter(int threads) {
  threads_.reserve(threads);
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
}

ApiWriter::~ApiWriter() { Close(); }

void ApiWriter::Post(std::function<void()> task, Lane lane) {
  absl::MutexLock l(&mu_);
  if (closed_) return;
  (lane == Lane::kFirst ? tasks_ : later_).push_back(std::move(task));
}

void ApiWriter::Close() {
  {
    absl::MutexLock l(&mu_);
    if (closed_ && threads_.empty()) return;
    closed_ = true;
  }
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

int ApiWriter::pending() const {
  absl::MutexLock l(&mu_);
  return static_cast<int>(tasks_.size() + later_.size()) + running_;
}

bool ApiWriter::WaitIdle(absl::Duration timeout) const {
  absl::MutexLock l(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(this, &ApiWriter::Idle), timeout);
}

void ApiWriter::Work() {
  for (;;) {
    std::function<void()> task;
    {
      absl::MutexLock l(&mu_);
      mu_.Await(absl::Condition(this, &ApiWriter::Ready));
      std::deque<std::function<void()>>& from = tasks_.empty() ? later_ : tasks_;
      if (from.empty()) return;  // closed and drained
      task = std::move(from.front());
      from.pop_front();
      ++running_;
    }
    task();
    absl::MutexLock l(&mu_);
    --running_;
  }
}

}  // namespace tessera::kubesched
