// taint-toleration (Filter, Score): Kubernetes' rules. Filter rejects a node
// with a NoSchedule or NoExecute taint the job does not tolerate. Score
// prefers nodes with fewer untolerated PreferNoSchedule taints
// (100 - 25 per taint, floor 0).
#pragma once

#include "sched/framework/plugin.h"

namespace tessera::sched {

class TaintToleration final : public Plugin, public FilterPlugin, public ScorePlugin {
 public:
  static constexpr absl::string_view kName = "taint-toleration";
  absl::string_view Name() const override { return kName; }
  PluginStatus Filter(CycleState& cs, const JobContext& ctx, const model::MemberGroup& g,
                      const NodeView& n) override;
  int64_t Score(CycleState& cs, const JobContext& ctx, const model::MemberGroup& g,
                const NodeView& n) override;
};

}  // namespace tessera::sched
