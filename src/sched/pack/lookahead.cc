#include "sched/pack/lookahead.h"

#include "absl/strings/str_cat.h"

namespace tessera::sched::pack {

bool HoldsSharedGpus(const ArrivalForecast& f, const ClusterState& cs) {
  if (f.whole_gpu_milli <= 0) return false;
  double wanted = static_cast<double>(f.whole_gpu_milli);
  const double cpu_free = static_cast<double>(cs.free_cpu_milli());
  if (static_cast<double>(f.cpu_milli) > cpu_free) {
    wanted *= cpu_free / static_cast<double>(f.cpu_milli);
  }
  int64_t free_gpus = 0;
  for (ModelId m = 0; m < cs.num_models(); ++m) free_gpus += cs.cluster_free(m).free_gpus;
  return wanted >= static_cast<double>(free_gpus * model::kMilliPerGpu);
}

PluginStatus LookaheadPermit::Permit(CycleState&, const JobContext& ctx,
                                     const std::vector<MemberPlacement>& placed) {
  const std::optional<ArrivalForecast>& f = ctx_->forecast();
  if (!f || placed.size() != 1 || placed[0].gpus.size() != 1) return PluginStatus::Success();
  const MemberPlacement& m = placed[0];
  const GpuGrant& g = m.gpus[0];
  if (g.milli >= model::kMilliPerGpu) return PluginStatus::Success();
  // The member is assumed: the GPU was wholly free if the grant and what
  // is left make a whole GPU.
  const NodeState& st = ctx.cluster->state(m.node);
  if (st.free_milli[g.gpu] + g.milli != model::kMilliPerGpu) return PluginStatus::Success();
  const int32_t leftover = model::kMilliPerGpu - g.milli;
  if (ctx_->ShareFitting(leftover) >= kLookaheadUsableShare) return PluginStatus::Success();
  if (static_cast<double>(st.cpu_free + m.cpu_milli) < ctx_->whole_cpu_per_gpu()) {
    return PluginStatus::Success();
  }
  if (!HoldsSharedGpus(*f, *ctx.cluster)) return PluginStatus::Success();
  return PluginStatus::Wait(absl::StrCat("held: ", g.milli, " milli would strand ", leftover,
                                         " milli of a free GPU that arriving whole-GPU pods want"));
}

}  // namespace tessera::sched::pack
