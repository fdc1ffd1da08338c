// FreedGpus: what evicting a candidate set of members would free, for the preemption search
// (preemption.cc). Members are added to (or taken back from) the set one at a time; after each
// change it knows the whole GPUs the set frees and, per group of the preemptor, how many more of
// its members would fit. A search that grows a set one victim at a time pays per victim, not per
// set (the greedy pass's sets are thousands of small jobs).
//
// A node's figure is its whole free GPUs with the set's grants given back, less its whole_free
// now (so a GPU partly used by a job outside the set stays not whole). The per-node array is
// sized on first use: most searches end before touching a node.
//
// Not thread-safe; one per search. Reads `cluster`, which must not change while a set is held.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "model/resources.h"
#include "sched/framework/cluster_state.h"
#include "sched/framework/types.h"

namespace tessera::sched {

class FreedGpus {
 public:
  explicit FreedGpus(const ClusterState& cluster) : cs_(cluster) {}

  // The preemptor's groups: whole GPUs per member. Set before the first Change.
  void set_group_gpus(std::vector<int32_t> gpus) {
    group_gpus_ = std::move(gpus);
    members_.assign(group_gpus_.size(), 0);
  }

  // Adds (sign +1) or takes back (-1) member `m`'s grants.
  void Change(const MemberPlacement& m, int sign) {
    if (scratch_.empty()) {
      scratch_.assign(cs_.num_node_slots(), {});
      node_whole_.assign(cs_.num_node_slots(), -1);
    }
    const NodeState& st = cs_.state(m.node);
    int& now = node_whole_[m.node];
    if (now < 0) {
      now = st.whole_free;
      touched_.push_back(m.node);
    }
    for (const GpuGrant& g : m.gpus) {
      scratch_[m.node][g.gpu] = static_cast<int16_t>(scratch_[m.node][g.gpu] + sign * g.milli);
    }
    int after = 0;
    for (int g = 0; g < st.num_gpus; ++g) {
      if (st.healthy(g) && st.free_milli[g] + scratch_[m.node][g] == model::kMilliPerGpu) ++after;
    }
    whole_ += after - now;
    for (size_t i = 0; i < group_gpus_.size(); ++i) {
      members_[i] += after / group_gpus_[i] - now / group_gpus_[i];
    }
    now = after;
  }

  // Whole GPUs the set frees, and per group the members that fit in them.
  int64_t whole() const { return whole_; }
  const std::vector<int64_t>& members() const { return members_; }

  // Empties the set.
  void Clear() {
    for (NodeId id : touched_) {
      scratch_[id] = {};
      node_whole_[id] = -1;
    }
    touched_.clear();
    whole_ = 0;
    members_.assign(group_gpus_.size(), 0);
  }

 private:
  const ClusterState& cs_;
  std::vector<int32_t> group_gpus_;
  std::vector<std::array<int16_t, model::kMaxGpusPerNode>> scratch_;  // milli given back
  std::vector<int32_t> node_whole_;  // whole free GPUs with the set given back; -1: untouched
  std::vector<NodeId> touched_;
  int64_t whole_ = 0;
  std::vector<int64_t> members_;
};

}  // namespace tessera::sched
