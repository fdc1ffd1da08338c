// topology (PreFilter, Score): keep a gang in the smallest domain that holds
// it, and give each member its best-connected GPUs.
//
// PreFilter, for a job with a topology level (node, rack, block):
//   node: candidate nodes with enough whole free GPUs for the whole gang,
//         from the capacity index in best-fit order;
//   rack/block: every domain whose FreeHistogram says each member group fits
//         (sum_k nodes[k] * floor(k/g) >= count) and whose free GPUs cover
//         the total; O(domains x 17), no node scan. Pack orders them tightest
//         first (best fit, leaves big domains whole), spread emptiest first.
// Required: only those domains; none -> Unschedulable with the largest free
// capacity of any domain in the message. Preferred: those domains first, then
// the whole cluster.
// Score: closeness to the members already placed in this cycle (same node
// 100, same rack 70, same block 40, else 0) and, for multi-GPU members, the
// link class of the GPU set the node can offer (NVSwitch/NVLink best).
#pragma once

#include "sched/framework/plugin.h"

namespace tessera::sched {

class Topology final : public Plugin, public PreFilterPlugin, public ScorePlugin {
 public:
  static constexpr absl::string_view kName = "topology";
  absl::string_view Name() const override { return kName; }
  PluginStatus PreFilter(CycleState& cs, const JobContext& ctx, PreFilterResult* out) override;
  int64_t Score(CycleState& cs, const JobContext& ctx, const model::MemberGroup& g,
                const NodeView& n) override;

  // Most domains returned by PreFilter (the profile's max_domains caps it too).
  static constexpr int kMaxDomains = 16;
};

}  // namespace tessera::sched
