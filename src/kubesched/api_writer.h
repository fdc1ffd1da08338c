// ApiWriter: a fixed pool of threads that run the scheduler's API writes (bindings, Pod status,
// Events, PodGroup status) so that many are in flight while the scheduling loop goes on.
//
// Tasks run in submission order per thread pick-up, not globally: callers that need an order
// between two writes make them one task. A task must not block on the scheduling loop.
// Two lanes: a writer takes a kLater task only when no kFirst task is queued, so what a Pod
// waits on (its binding, its status) goes ahead of what only informs (a Scheduled Event), as
// kube-scheduler's Events trail its bindings through their own broadcaster. While bindings keep
// coming, kLater tasks wait; they are never dropped.
// Thread safety: Post and pending from any thread. The destructor runs what was posted, then
// joins (a task posted after Close is dropped).
#pragma once

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tessera::kubesched {

class ApiWriter {
 public:
  explicit ApiWriter(int threads);
  ~ApiWriter();
  ApiWriter(const ApiWriter&) = delete;
  ApiWriter& operator=(const ApiWriter&) = delete;

  enum class Lane { kFirst, kLater };
  void Post(std::function<void()> task, Lane lane = Lane::kFirst);
  // Finishes the queued tasks and joins; idempotent.
  void Close();
  // Tasks queued or running.
  int pending() const;
  // Waits until no task is queued or running; false on timeout.
  bool WaitIdle(absl::Duration timeout) const;

 private:
  void Work();
  bool Ready() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return closed_ || !tasks_.empty() || !later_.empty();
  }
  bool Idle() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return tasks_.empty() && later_.empty() && running_ == 0;
  }

  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);  // Lane::kFirst
  std::deque<std::function<void()>> later_ ABSL_GUARDED_BY(mu_);  // Lane::kLater
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace tessera::kubesched
