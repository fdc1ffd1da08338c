// SchedulingQueue: pending jobs, ordered by the profile's QueueSort plugin.
//
// Three parts, as in kube-scheduler: the active queue (ordered, ready to try),
// the backoff queue (failed recently; ready again at backoff_until, with
// exponential backoff 1s, 2s, 4s ... capped at 60s), and the unschedulable
// set (failed; waits for a cluster event such as a release or a new node,
// which MoveAllToActive() signals, or for its backoff to pass).
// Time is passed in by the caller (no clock here).
// Not thread-safe.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "model/job.h"
#include "sched/framework/plugin.h"

namespace tessera::sched {

struct QueuedJob {
  std::shared_ptr<const model::Job> job;
  int32_t attempts = 0;
  absl::Time backoff_until = absl::InfinitePast();
  std::string last_reason;  // why the last attempt failed
};

class SchedulingQueue {
 public:
  // `sort` is borrowed and must outlive the queue.
  explicit SchedulingQueue(const QueueSortPlugin* sort);

  // Adds or replaces a job (by key) in the active queue.
  void Add(std::shared_ptr<const model::Job> job);
  // Removes a job wherever it is. False if absent.
  bool Remove(absl::string_view key);
  bool Contains(absl::string_view key) const { return entries_.contains(key); }

  // The next job to try at `now`: backoff entries whose time has passed join
  // the active queue first. nullopt when nothing is ready.
  std::optional<QueuedJob> Pop(absl::Time now);
  // Puts back a job that failed at `now`, with backoff.
  void Requeue(QueuedJob qj, absl::Time now, std::string reason);
  // A cluster event may have made room: every waiting job becomes active.
  void MoveAllToActive();

  size_t size() const { return entries_.size(); }
  size_t active_size() const { return active_.size(); }
  // Waiting jobs (backoff or unschedulable), with the reason of their last try.
  std::vector<const QueuedJob*> Waiting() const;

  static absl::Duration BackoffFor(int32_t attempts);

 private:
  struct Less {
    const QueueSortPlugin* sort;
    bool operator()(const QueuedJob* a, const QueuedJob* b) const {
      if (sort->Less(*a->job, *b->job)) return true;
      if (sort->Less(*b->job, *a->job)) return false;
      return a < b;
    }
  };
  enum class Where : uint8_t { kActive, kWaiting, kOut };
  struct Entry {
    QueuedJob qj;
    Where where = Where::kOut;
  };
  absl::flat_hash_map<std::string, std::unique_ptr<Entry>> entries_;
  std::set<const QueuedJob*, Less> active_;
};

}  // namespace tessera::sched
