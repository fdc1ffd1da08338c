// gang (PreFilter, Permit): all-or-nothing placement of a job's members.
//
// PreFilter: a cheap capacity bound. The minMember smallest members need at
// least D whole GPUs; if the fleet's allowed models have fewer GPUs in total,
// no preemption can help (unresolvable); if fewer are free now, the job is
// unschedulable until work ends or is preempted.
// Permit: the cycle placed at least minMember members, else reject, and the
// runner undoes every member it assumed. Holds are never kept across cycles.
#pragma once

#include "sched/framework/plugin.h"

namespace tessera::sched {

class Gang final : public Plugin, public PreFilterPlugin, public PermitPlugin {
 public:
  static constexpr absl::string_view kName = "gang";
  absl::string_view Name() const override { return kName; }
  PluginStatus PreFilter(CycleState& cs, const JobContext& ctx, PreFilterResult* out) override;
  PluginStatus Permit(CycleState& cs, const JobContext& ctx,
                      const std::vector<MemberPlacement>& placed) override;
};

}  // namespace tessera::sched
