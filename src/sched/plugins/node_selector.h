// node-selector (Filter): the node's labels include every key=value of the
// job's node selector, and the node matches the job's required node affinity
// (model/node_affinity.h).
#pragma once

#include "sched/framework/plugin.h"

namespace tessera::sched {

class NodeSelector final : public Plugin, public FilterPlugin {
 public:
  static constexpr absl::string_view kName = "node-selector";
  absl::string_view Name() const override { return kName; }
  PluginStatus Filter(CycleState& cs, const JobContext& ctx, const model::MemberGroup& g,
                      const NodeView& n) override;
};

}  // namespace tessera::sched
