// AdmissionEnv: the queueing layer's state that its framework plugins (quota,
// preemption, reservation) read during a scheduling cycle. Owned by
// QueueManager, which fills the per-cycle fields before each Schedule call;
// plugins hold a borrowed pointer. Not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "sched/framework/cluster_state.h"
#include "sched/queue/queue_tree.h"
#include "sched/queue/running_set.h"

namespace tessera::sched {

struct VictimPlan;  // plugins/preemption.h

struct PreemptionPolicy {
  // Lower-priority jobs of the preemptor's own queue may be evicted.
  bool within_queue = true;
  // A queue within its guarantee may evict jobs (any priority) of queues that
  // borrow (reclaim of lent capacity).
  bool reclaim = true;
  // Lower-priority jobs of other queues may be evicted, but only from queues
  // that borrow: another queue's guaranteed capacity is never taken.
  bool cross_queue_lower_priority = false;
  // Victim-set cost order: false (default) lowest priority class first, then
  // fewest gangs; true fewest gangs first, then lowest priority.
  bool gangs_first = false;
  // Cap on GPUs evicted for one preemptor (0: none), absolute and as a
  // multiple of the GPUs the preemptor needs.
  int64_t max_evicted_gpus = 0;
  double max_evicted_ratio = 0;
  // Victims get a checkpoint signal, then are killed after this grace period.
  absl::Duration grace_period = absl::Seconds(30);
  // A job that has run for less than this is not preempted (stops thrashing:
  // every run makes progress to at least one checkpoint).
  absl::Duration min_runtime = absl::Minutes(5);
  // Per domain, candidates up to which every pair is tried (exact two-victim search).
  int32_t exhaustive_pair_limit = 48;
  // Candidate-set evaluations per decision before only greedy search is used.
  int64_t eval_budget = 200000;
};

struct AdmissionEnv {
  ClusterState* cluster = nullptr;
  RunningSet* running = nullptr;
  QueueTree* tree = nullptr;
  PreemptionPolicy policy;
  absl::Time now = absl::UnixEpoch();

  // The job being scheduled: its leaf queue (-1: no quota check) and demand.
  int leaf = -1;
  ResourceList demand;
  // The caller already restricted the job to GPU models its quota admits.
  bool quota_checked = false;
  // Preemption may be attempted for this job (false while backfilling).
  bool allow_preemption = true;
  // Reclaim bookkeeping per QueueTree node, summed up the tree; filled by the
  // QueueManager before each attempt (empty: nothing in flight). `pledged`:
  // demand of preemptors already nominated (admitted, waiting for their
  // victims); `leaving`: usage of victims already signalled. A reclaiming
  // queue counts its pledged demand as used, and a victim's queue borrows only
  // beyond what is already leaving it, so several preemptors of one cycle do
  // not each reclaim the same guarantee (the ping-pong `sim replay` found).
  std::vector<ResourceList> pledged;
  std::vector<ResourceList> leaving;
  // The current job is itself nominated: its demand is in `pledged`.
  bool own_pledge = false;
  // Jobs the current job must never preempt (those that preempted it).
  const absl::flat_hash_set<std::string>* protected_jobs = nullptr;
  // What `members` of running job `j` are charged to its queue (a shrink
  // plan's quota check). Set by the QueueManager; when empty the search
  // scales j.usage by the share of members.
  std::function<ResourceList(const RunningJob& j, const std::vector<MemberPlacement>& members)>
      placed_usage;
  // Backfill: per node slot, the earliest start of a reservation holding it
  // (InfiniteFuture: none), and the end of the current job's run: it keeps
  // off every node reserved from before then, so that no reservation is
  // delayed (InfinitePast: it keeps off none; InfiniteFuture: all, as the
  // reservation search and Grow do).
  std::vector<absl::Time> reserved_from;
  absl::Time keep_off_before = absl::InfinitePast();
  bool KeepsOff(NodeId n) const {
    return n < static_cast<NodeId>(reserved_from.size()) && reserved_from[n] < keep_off_before;
  }
  // Set by the QueueManager when it knows the preemption search for the
  // current job would find no victims, with this plan: the same search failed
  // for a job of the same shape on the same state (search_memo.h). The
  // plugin then returns this plan instead of searching again.
  const VictimPlan* known_failure = nullptr;
};

}  // namespace tessera::sched
