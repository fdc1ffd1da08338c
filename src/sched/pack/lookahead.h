// Look-ahead admission: tessera's Permit plugin, which holds a shared-GPU
// pod back while the work known to be arriving would use its GPU better.
//
// Algorithm. A placed member passes unless all of these hold:
//  1. it is one pod on one shared GPU (gpu_milli < 1000) and it takes a GPU
//     that was wholly free, leaving a leftover L = 1000 - gpu_milli;
//  2. few arriving pods can use L: under kLookaheadUsableShare of the
//     typical mix's one-GPU pods ask L or less (openb's 810-milli pods
//     leave 190 milli, which 1.5% of pods fit);
//  3. the node keeps the CPU a whole-GPU pod of the mix needs per GPU, so
//     the GPU, if left free, could go to one;
//  4. the forecast says the free GPUs will be wanted anyway: the GPU milli
//     of arriving whole-GPU pods, scaled down by free CPU / arriving CPU when
//     CPU is the scarcer resource, is at least the fleet's wholly free GPUs.
// Then the member is refused with kWait ("held"): its driver keeps it and
// tries again when the forecast no longer says so (HoldsSharedGpus), which
// at the latest is when nothing more is known to arrive.
//
// Why. Each such pod placed strands L milli for good; held, its GPU goes to
// a whole-GPU pod and is used completely. Under overload (more work arriving
// than GPUs free) that is the better use of the GPU, and the held pod is the
// one that would not fit at the end anyway. Without overload (4 fails) or
// when the GPU could not take a whole-GPU pod (3 fails) nothing is held, so
// the plugin is work-conserving whenever the fleet has room for everything
// it knows about.
//
// The price is time: held pods wait while GPUs are free. On openb `default`
// (docs/sim-pack.md) tessera with the whole stream known reaches 97.7% of
// the GPUs allocated when 130% of capacity has arrived (95.96% without
// look-ahead), but only 91.0% when 100% has arrived (95.87% without),
// because the 810-milli pods wait for the stream's end. So it is off unless
// the driver sets a forecast (`tessera sim pack --lookahead`).
//
// Not thread-safe (one instance per scheduler, like every plugin).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sched/framework/cluster_state.h"
#include "sched/framework/plugin.h"
#include "sched/pack/forecast.h"
#include "sched/pack/policies.h"

namespace tessera::sched::pack {

// A leftover is "stranded" when fewer than this share of one-GPU pods fit it.
inline constexpr double kLookaheadUsableShare = 0.05;
inline constexpr char kLookaheadPlugin[] = "pack-lookahead";

// Condition 4 above: does `f` say the fleet's wholly free GPUs in `cs` will
// be taken by arriving whole-GPU work? False when nothing such arrives.
bool HoldsSharedGpus(const ArrivalForecast& f, const ClusterState& cs);

class LookaheadPermit : public Plugin, public PermitPlugin {
 public:
  LookaheadPermit(std::string name, std::shared_ptr<PackContext> ctx)
      : name_(std::move(name)), ctx_(std::move(ctx)) {}
  absl::string_view Name() const override { return name_; }
  // Success, or kWait with the reason when the member is held (see above).
  PluginStatus Permit(CycleState& cs, const JobContext& ctx,
                      const std::vector<MemberPlacement>& placed) override;

 private:
  std::string name_;
  std::shared_ptr<PackContext> ctx_;
};

}  // namespace tessera::sched::pack
