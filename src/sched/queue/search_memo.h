// SearchMemo: the QueueManager's memory of preemption searches that found no
// victims, so that a blocked job shape is not searched again, cycle after
// cycle, while nothing the search reads has changed.
//
// What the search (plugins/preemption.h) reads: the cluster's free GPUs
// (ClusterState::generation), queue usage and limits
// (QueueTree::usage_generation), the running set and the reclaim bookkeeping
// (pledged/leaving), which the manager versions itself (`manager`), the
// job's shape (queue, priority, members, constraints: the memo's key), the
// backfill reservation when the job must keep off it, and the time: a
// running job becomes a candidate once it has run `minRuntime`. A failed
// search depends on the time through that only, unless a cap on evicted GPUs
// is set (its greedy pass orders candidates by work lost, which grows with
// time, and may hit the cap first in one order and not in another): then
// only a search that evaluated no set at all is remembered.
//
// State ids. The three generation counters move on every mutation, also on
// the manager's dry runs (take victims out, evaluate, put them back) and on
// failed attempts (members assumed and forgotten), which change nothing the
// search reads. StateId() returns an id that changes whenever the counters
// moved since the last call, except across spans that Absorb() declared
// neutral: an id equal to a remembered one means the same state.
//
// Not thread-safe; owned by the QueueManager.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "sched/framework/types.h"
#include "sched/plugins/preemption.h"

namespace tessera::sched {

class SearchMemo {
 public:
  struct Gens {
    uint64_t cluster = 0;
    uint64_t tree = 0;
    uint64_t manager = 0;
    friend bool operator==(const Gens&, const Gens&) = default;
  };

  uint64_t StateId(const Gens& g) {
    if (!(g == synced_)) {
      ++id_;
      synced_ = g;
    }
    return id_;
  }
  // Everything between `before` and `after` left the state as it was (a dry
  // run, an attempt that placed nothing).
  void Absorb(const Gens& before, const Gens& after) {
    if (before == synced_) synced_ = after;
  }

  // The remembered failure for `key` (shape * 2 + keeps off the reservation)
  // in state `state` at `now`, else nullptr. `reserved`: the reservation's
  // nodes when the job keeps off them, else nullptr.
  const VictimPlan* Find(int64_t key, uint64_t state, absl::Time now,
                         const std::vector<NodeId>* reserved) const {
    auto it = entries_.find(key);
    if (it == entries_.end()) return nullptr;
    const Entry& e = it->second;
    if (e.state != state || now >= e.valid_until) return nullptr;
    if (reserved != nullptr && e.reserved != *reserved) return nullptr;
    return &e.plan;
  }
  // A search for `key` found no victims in state `state`; its outcome holds
  // until `valid_until` (the next time a running job reaches minRuntime).
  void Store(int64_t key, uint64_t state, absl::Time valid_until,
             const std::vector<NodeId>* reserved, const VictimPlan& plan) {
    Entry& e = entries_[key];
    e.state = state;
    e.valid_until = valid_until;
    e.reserved = reserved != nullptr ? *reserved : std::vector<NodeId>();
    e.plan = plan;
  }
  // A failed search may be remembered under `policy` (see the header).
  static bool Cacheable(const VictimPlan& plan, const PreemptionPolicy& policy) {
    if (plan.found()) return false;
    const bool capped = policy.max_evicted_gpus > 0 || policy.max_evicted_ratio > 0;
    return !capped || plan.evaluations == 0;
  }
  void Clear() {
    entries_.clear();
    ++id_;
  }
  int64_t hits = 0;  // for benchmarks
  int64_t stores = 0;

 private:
  struct Entry {
    uint64_t state = 0;
    absl::Time valid_until;
    std::vector<NodeId> reserved;
    VictimPlan plan;
  };
  absl::flat_hash_map<int64_t, Entry> entries_;
  uint64_t id_ = 1;
  Gens synced_;
};

}  // namespace tessera::sched
