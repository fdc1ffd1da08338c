// nvlink-aware (GpuChooser): picks a member's GPUs inside the chosen node with
// ChooseWholeGpus / ChooseFractionalGpu (see gpu_set.h for the algorithm):
// best worst-link first, fewest NVLink domains, keep free islands whole.
#pragma once

#include "sched/framework/plugin.h"

namespace tessera::sched {

class NvlinkChooser final : public Plugin, public GpuChooserPlugin {
 public:
  static constexpr absl::string_view kName = "nvlink-aware";
  absl::string_view Name() const override { return kName; }
  bool ChooseGpus(const JobContext& ctx, const model::MemberGroup& g, const NodeView& n,
                  absl::InlinedVector<GpuGrant, 8>* out) override;
};

}  // namespace tessera::sched
