// resource-fit (PreFilter, Filter): can a member's resources fit on a node?
//
// PreFilter rejects, as unresolvable, a job whose GPU models do not exist in
// the cluster or whose member needs more GPUs than any node has.
// Filter checks, in O(1) from NodeState: the node's GPU model is allowed; its
// GPUs are large enough (gpu_memory_mib); enough whole free healthy GPUs, or
// for a fraction one healthy GPU with that share free; CPU; memory.
#pragma once

#include <vector>

#include "sched/framework/plugin.h"

namespace tessera::sched {

class ResourceFit final : public Plugin, public PreFilterPlugin, public FilterPlugin {
 public:
  static constexpr absl::string_view kName = "resource-fit";
  absl::string_view Name() const override { return kName; }
  PluginStatus PreFilter(CycleState& cs, const JobContext& ctx, PreFilterResult* out) override;
  PluginStatus Filter(CycleState& cs, const JobContext& ctx, const model::MemberGroup& g,
                      const NodeView& n) override;

 private:
  // Largest GPU count of a present node, per model; rebuilt when the node
  // set changes (node slots or live count), not on every allocation.
  std::vector<int> largest_by_model_;
  int cached_slots_ = -1;
  int cached_nodes_ = -1;
};

}  // namespace tessera::sched
