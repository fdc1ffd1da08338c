#include "sched/plugins/pack_spread.h"

#include <algorithm>

namespace tessera::sched {

int64_t PackSpread::Score(CycleState& cs, const JobContext& ctx, const model::MemberGroup& g,
                          const NodeView& n) {
  const NodeState& st = n.state;
  const model::ResourceRequest& r = g.resources;
  int64_t used_after;  // 0..100
  if (r.gpus > 0 && st.num_gpus > 0) {
    int64_t cap = int64_t{st.num_gpus} * model::kMilliPerGpu;
    int64_t used = cap - st.free_gpu_milli() + r.total_gpu_milli();
    used_after = std::clamp<int64_t>(used * 100 / cap, 0, 100);
  } else if (n.node.cpu_milli > 0) {
    int64_t used = n.node.cpu_milli - st.cpu_free + r.cpu_milli;
    used_after = std::clamp<int64_t>(used * 100 / n.node.cpu_milli, 0, 100);
  } else {
    used_after = 0;
  }
  if (ctx.job->placement == model::PlacementPreference::kPack) return used_after;
  int64_t mine = 0;
  for (const MemberPlacement& m : cs.placed()) mine += m.node == n.id;
  return std::max<int64_t>(0, 100 - used_after - 20 * mine);
}

}  // namespace tessera::sched
