// WorkQueue: client-go's rate-limited work queue (k8s.io/client-go/util/workqueue) for string
// keys ("NS/NAME").
//
// Semantics, as client-go's Typed queue:
//   - An item is in at most one of: the queue (waiting for Get), processing (handed out by Get,
//     not yet Done). `dirty` is the set of items that need processing.
//   - Add(x): if x is dirty, nothing (de-duplication). Else x becomes dirty; if x is being
//     processed it is not queued now but re-queued by Done(x), so one item is never processed by
//     two workers at once.
//   - Get(): blocks until an item is queued or the queue shuts down (nullopt). The item moves to
//     processing and stops being dirty.
//   - Done(x): x leaves processing; re-queued if it was added meanwhile.
//   - AddAfter(x, d): x is added once d has passed on the injected clock (the earliest of several
//     pending times wins). AddRateLimited(x): AddAfter(x, limiter.When(x)). Forget(x) resets x's
//     failure count; NumRequeues(x) reads it.
//   - ShutDown(): Get returns what is queued, then nullopt; adds are dropped.
//     ShutDownWithDrain() also waits until every item handed out is Done.
// Delayed items are promoted by Get/TryGet themselves (no timer thread): a blocked Get waits
// (in real time) until the earliest one is due on the clock. With a ManualClock, advance it and
// call TryGet().
// Thread safety: all methods are safe for concurrent use.
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <queue>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "kube/rate_limiter.h"

namespace tessera::kube {

class WorkQueue {
 public:
  // `clock` must outlive the queue. `limiter` null: DefaultControllerRateLimiter(clock).
  explicit WorkQueue(const Clock& clock, std::unique_ptr<ItemRateLimiter> limiter = nullptr);
  ~WorkQueue();

  void Add(const std::string& item);
  void AddAfter(const std::string& item, absl::Duration delay);
  void AddRateLimited(const std::string& item);
  void Forget(const std::string& item);
  int NumRequeues(const std::string& item);

  // Blocks; nullopt once shut down and empty.
  std::optional<std::string> Get();
  // Does not block: an item ready now, or nullopt.
  std::optional<std::string> TryGet();
  void Done(const std::string& item);

  // Items queued (not processing, not waiting for their delay).
  int Len() const;
  // Items waiting for their AddAfter delay.
  int Delayed() const;
  void ShutDown();
  void ShutDownWithDrain();
  bool ShuttingDown() const;

 private:
  struct Delayed_ {
    absl::Time ready;
    std::string item;
    bool operator>(const Delayed_& o) const { return ready > o.ready; }
  };
  void AddLocked(const std::string& item) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PromoteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::optional<std::string> PopLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Clock& clock_;
  std::unique_ptr<ItemRateLimiter> limiter_;
  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> dirty_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> processing_ ABSL_GUARDED_BY(mu_);
  // Delayed adds: a min-heap by ready time, plus each item's earliest ready time (heap entries
  // with a later time for the same item are stale and skipped).
  std::priority_queue<Delayed_, std::vector<Delayed_>, std::greater<>> waiting_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, absl::Time> waiting_ready_ ABSL_GUARDED_BY(mu_);
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace tessera::kube
