// RunningSet: the jobs that hold resources, with what preemption and backfill
// need to know about each (priority, queue, start, last checkpoint, expected
// end, its placement) and an index from node to the jobs on it.
//
// Slots are stable while a job runs; Remove frees the slot for reuse.
// Not thread-safe; owned by QueueManager.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "model/job.h"
#include "sched/framework/types.h"
#include "sched/queue/queue_tree.h"

namespace tessera::sched {

struct RunningJob {
  std::string key;
  std::shared_ptr<const model::Job> job;
  int32_t priority = 0;
  int leaf = -1;          // QueueTree id
  ResourceList usage;     // charged to `leaf`
  int64_t gpu_milli = 0;  // GPUs held, milli
  absl::Time start;
  absl::Time last_checkpoint = absl::InfinitePast();  // InfinitePast: never
  absl::Time expected_end;
  std::vector<MemberPlacement> members;
  // Signalled for preemption; killed at kill_at unless it exits first.
  bool terminating = false;
  absl::Time kill_at = absl::InfiniteFuture();
  std::string preempted_by;
  // Exited after its checkpoint signal; its resources are held until every
  // victim of the same plan is gone, so the preemptor gets the room.
  bool exited = false;
  // Times this job was preempted before (its earlier runs).
  int32_t times_preempted = 0;
  // Started on room lent by the backfill reservations of `lent_for`, the
  // ones it would still run at (QueueManagerConfig::lend_reserved): from
  // `lease_until` on, any of those jobs may preempt it whatever their
  // priorities and queues. Empty: not lent.
  std::vector<std::string> lent_for;
  absl::Time lease_until = absl::InfiniteFuture();
  bool LentTo(absl::string_view job) const {
    return std::find(lent_for.begin(), lent_for.end(), job) != lent_for.end();
  }
  // Set with `terminating` when the plan shrinks this elastic job instead of
  // evicting it: at kill_at (or once its plan's victims exited) it gives up
  // these members and runs on with the rest (QueueManager::ShrinkVictim).
  std::vector<MemberPlacement> dropping;
  ResourceList dropping_usage;  // what `dropping` is charged to its queue
  bool shrinking() const { return !dropping.empty(); }

  // GPU-seconds of work since the last checkpoint (or start) at `now`.
  double WorkLost(absl::Time now) const {
    absl::Time since = std::max(start, last_checkpoint);
    return std::max(0.0, absl::ToDoubleSeconds(now - since)) * (gpu_milli / 1000.0);
  }
};

class RunningSet {
 public:
  // Adds a job; returns its slot.
  int32_t Add(RunningJob j) {
    int32_t slot;
    if (!free_.empty()) {
      slot = free_.back();
      free_.pop_back();
    } else {
      slot = static_cast<int32_t>(slots_.size());
      slots_.emplace_back();
      live_.push_back(false);
    }
    Index(slot, j.members);
    Count(j, +1);
    by_key_[j.key] = slot;
    slots_[slot] = std::move(j);
    live_[slot] = true;
    ++size_;
    return slot;
  }
  void Remove(absl::string_view key) {
    auto it = by_key_.find(key);
    if (it == by_key_.end()) return;
    int32_t slot = it->second;
    Unindex(slot);
    Count(slots_[slot], -1);
    by_key_.erase(it);
    slots_[slot] = RunningJob();
    live_[slot] = false;
    free_.push_back(slot);
    --size_;
  }
  // Replaces a running job's members (an elastic resize), keeping its slot
  // and the node index in step. No-op for an unknown key.
  void SetMembers(absl::string_view key, std::vector<MemberPlacement> members) {
    auto it = by_key_.find(key);
    if (it == by_key_.end()) return;
    const int32_t slot = it->second;
    Unindex(slot);
    Index(slot, members);
    slots_[slot].members = std::move(members);
  }
  // A job's queue after the queue tree changed. Leaf, priority and lent_for change only through
  // this set (SetLeaf, EndLoan), so that its summary below stays true.
  void SetLeaf(int32_t slot, int leaf) {
    Count(slots_[slot], -1);
    slots_[slot].leaf = leaf;
    Count(slots_[slot], +1);
  }
  // `lender` started or went away: the job at `slot` no longer runs on its room.
  void EndLoan(int32_t slot, absl::string_view lender) {
    RunningJob& j = slots_[slot];
    if (j.lent_for.empty()) return;
    std::erase(j.lent_for, lender);
    if (j.lent_for.empty()) {
      j.lease_until = absl::InfiniteFuture();
      --lent_;
    }
  }
  // The summary: fn(leaf, lowest priority among the jobs of that leaf) for each leaf with
  // running jobs (terminating ones included), in leaf order; and how many jobs run on lent room.
  template <typename Fn>
  void ForEachLeafMinPriority(Fn fn) const {
    int last = -2;
    for (const auto& [leaf_prio, n] : priorities_) {
      if (leaf_prio.first == last) continue;
      last = leaf_prio.first;
      fn(leaf_prio.first, leaf_prio.second);
    }
  }
  int64_t lent() const { return lent_; }

  RunningJob* Find(absl::string_view key) {
    auto it = by_key_.find(key);
    return it == by_key_.end() ? nullptr : &slots_[it->second];
  }
  const RunningJob* Find(absl::string_view key) const {
    auto it = by_key_.find(key);
    return it == by_key_.end() ? nullptr : &slots_[it->second];
  }
  int32_t SlotOf(absl::string_view key) const {
    auto it = by_key_.find(key);
    return it == by_key_.end() ? -1 : it->second;
  }
  int32_t num_slots() const { return static_cast<int32_t>(slots_.size()); }
  bool live(int32_t slot) const { return live_[slot]; }
  const RunningJob& at(int32_t slot) const { return slots_[slot]; }
  RunningJob& at(int32_t slot) { return slots_[slot]; }
  size_t size() const { return size_; }
  // Slots of jobs with a member on `node`.
  const std::vector<int32_t>& on_node(NodeId node) const {
    static const std::vector<int32_t> kEmpty;
    return node < static_cast<NodeId>(node_jobs_.size()) ? node_jobs_[node] : kEmpty;
  }

 private:
  void Count(const RunningJob& j, int delta) {
    auto it = priorities_.try_emplace({j.leaf, j.priority}, 0).first;
    it->second += delta;
    if (it->second == 0) priorities_.erase(it);
    if (!j.lent_for.empty()) lent_ += delta;
  }

  // Adds / removes `slot` in the node index for its members.
  void Index(int32_t slot, const std::vector<MemberPlacement>& members) {
    for (const MemberPlacement& m : members) {
      if (m.node >= static_cast<NodeId>(node_jobs_.size())) node_jobs_.resize(m.node + 1);
      auto& v = node_jobs_[m.node];
      if (std::find(v.begin(), v.end(), slot) == v.end()) v.push_back(slot);
    }
  }
  void Unindex(int32_t slot) {
    for (const MemberPlacement& m : slots_[slot].members) {
      auto& v = node_jobs_[m.node];
      auto f = std::find(v.begin(), v.end(), slot);
      if (f != v.end()) {
        *f = v.back();
        v.pop_back();
      }
    }
  }

  std::vector<RunningJob> slots_;
  std::vector<bool> live_;
  std::vector<int32_t> free_;
  absl::flat_hash_map<std::string, int32_t> by_key_;
  std::vector<std::vector<int32_t>> node_jobs_;
  size_t size_ = 0;
  std::map<std::pair<int, int32_t>, int32_t> priorities_;  // (leaf, priority) -> live jobs
  int64_t lent_ = 0;                                       // live jobs with lent_for
};

}  // namespace tessera::sched
