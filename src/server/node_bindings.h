// NodeBindingIndex: which jobs are bound to each node, kept in memory by tailing the store, so
// that a node agent's binding sync costs O(its own bindings) instead of a list of every job
// (docs/agent.md, "Agent <-> server").
//
// Algorithm. A job (TrainingJob or InferenceService) is bound to node N when its status.phase is
// a bound phase (Scheduled, Running, Deploying, Ready, Degraded) and its status.placement[] has a
// member with node == N (read from the stored text, which is ToStored's compact dump: a value
// without the text `"placement":[{` is bound nowhere and is not parsed). The index maps job key ->
// its nodes and node -> {its jobs, `changed`}, where `changed` is the revision of the last write to
// any job bound to N before or after that write (a new binding, a removed one, a new generation,
// any spec or status change of a bound job). Build: List both kinds. Follow: a background thread
// waits for new store revisions and applies Events(prefix, applied) for both kinds up to a target
// revision sampled first, so `revision()` means "every job write <= revision is reflected". A node
// never seen has changed = 0; after a (re)build every node counts as changed at the build's
// revision (a job may have left it while nobody was looking). Compaction overtaking the index
// (OutOfRange) rebuilds.
//
// Waiting: Wait(node, since, deadline) returns as soon as changed(node) > since, else blocks on
// that node's own condition variable, so a write wakes only the waiters of the nodes it touches
// (12,500 waiting agents cost no CPU until their bindings change).
//
// Thread safety: every method may be called from any thread. The Store must outlive the index.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "store/store.h"

namespace tessera::server {

class NodeBindingIndex {
 public:
  explicit NodeBindingIndex(store::Store& store);
  ~NodeBindingIndex();
  NodeBindingIndex(const NodeBindingIndex&) = delete;
  NodeBindingIndex& operator=(const NodeBindingIndex&) = delete;

  // Starts building the index (in the background) and following the store. Idempotent.
  absl::Status Start();
  // Stops following and wakes every waiter. Idempotent.
  void Stop();

  // Applies every job write up to the store's current revision (so a read right after a write
  // sees it). Cheap when nothing is new.
  absl::Status CatchUp();

  struct Snapshot {
    int64_t revision = 0;           // the index revision this set is valid at
    bool changed = true;            // false: the wait timed out with nothing new after `since`
    std::vector<std::string> jobs;  // store keys of the jobs bound to the node, sorted
    // Per entry of `jobs`: the revision of the job's write that the index applied. A reader that
    // fetches the job and finds this revision knows, without parsing it, that it is bound here.
    std::vector<int64_t> revisions;
  };
  // The node's bound jobs once they changed after `since` (at once when since <= 0 or they
  // already did), or when `deadline` passes or Stop() is called (then changed == false).
  Snapshot Wait(const std::string& node, int64_t since, absl::Time deadline);
  // Waiting without a thread: calls `wake` once, as soon as the node's bound jobs change after
  // `since` (on the thread applying the change: keep it short, e.g. post the real work), or
  // when Stop() is called; at once, on this thread, when they already did (or the index is
  // stopped). Returns an id for CancelNotify, 0 when `wake` ran already.
  uint64_t NotifyOnChange(const std::string& node, int64_t since, std::function<void()> wake);
  // Forgets a NotifyOnChange whose `wake` has not run (its request was answered by a deadline).
  // No-op for id 0 or one that ran.
  void CancelNotify(const std::string& node, uint64_t id);

  int64_t revision() const;
  // Requests waiting for a change: Wait() and NotifyOnChange() together.
  int waiters() const;
  // Nodes with at least one bound job.
  size_t bound_nodes() const;

 private:
  struct NodeEntry {
    std::map<std::string, int64_t> jobs;  // bound job's key -> revision applied
    int64_t changed = 0;
    int waiters = 0;
    absl::CondVar cv;
    std::map<uint64_t, std::pair<int64_t, std::function<void()>>> notify;  // id -> since, wake
  };
  // Moves the wake-ups of `e` that are due into `due` (run them after releasing mu_).
  void TakeDue(NodeEntry& e, std::vector<std::function<void()>>& due)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Rebuild();
  // Applies one job's new state (deleted: empty object); returns the nodes to wake.
  void Apply(const std::string& key, const std::string* value, int64_t revision,
             std::set<std::string>& touched);
  NodeEntry& Entry(const std::string& node) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Follow();

  store::Store& store_;
  // One CatchUp/Rebuild at a time (store reads happen under it, not under mu_).
  absl::Mutex apply_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  int64_t applied_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t base_ ABSL_GUARDED_BY(mu_) = 0;  // revision of the last (re)build
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int waiting_ ABSL_GUARDED_BY(mu_) = 0;
  int notifying_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_notify_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<std::string, std::set<std::string>> job_nodes_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t> job_rev_ ABSL_GUARDED_BY(apply_mu_);
  std::map<std::string, std::unique_ptr<NodeEntry>> nodes_ ABSL_GUARDED_BY(mu_);
  bool started_ ABSL_GUARDED_BY(apply_mu_) = false;
  bool built_ ABSL_GUARDED_BY(apply_mu_) = false;
  std::thread follower_;
};

}  // namespace tessera::server
