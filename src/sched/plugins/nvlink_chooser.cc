#include "sched/plugins/nvlink_chooser.h"

#include "sched/plugins/gpu_set.h"

namespace tessera::sched {

bool NvlinkChooser::ChooseGpus(const JobContext& ctx, const model::MemberGroup& g,
                               const NodeView& n, absl::InlinedVector<GpuGrant, 8>* out) {
  const model::ResourceRequest& r = g.resources;
  if (r.fractional()) {
    int gpu = ChooseFractionalGpu(n.node.topology, n.state, r.gpu_milli,
                                  ctx.job->placement == model::PlacementPreference::kPack);
    if (gpu < 0) return false;
    out->push_back(GpuGrant{static_cast<int8_t>(gpu), static_cast<int16_t>(r.gpu_milli)});
    return true;
  }
  GpuSetChoice c;
  if (!ChooseWholeGpus(n.node.topology, n.state, r.gpus, &c)) return false;
  for (int8_t gpu : c.gpus)
    out->push_back(GpuGrant{gpu, static_cast<int16_t>(model::kMilliPerGpu)});
  return true;
}

}  // namespace tessera::sched
