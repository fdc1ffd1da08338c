#include "sched/plugins/gang.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "sched/framework/cordoned_room.h"

namespace tessera::sched {

PluginStatus Gang::PreFilter(CycleState&, const JobContext& ctx, PreFilterResult*) {
  const model::Job& job = *ctx.job;
  const ClusterState& cs = *ctx.cluster;
  // Whole-GPU demand of the min_member smallest members.
  std::vector<std::pair<int, int>> sizes;  // (gpus, count)
  for (const auto& g : job.groups) {
    if (!g.resources.fractional()) sizes.push_back({g.resources.gpus, g.count});
  }
  std::sort(sizes.begin(), sizes.end());
  int64_t need = 0;
  int left = ctx.min_member;
  for (auto [gpus, count] : sizes) {
    int take = std::min(left, count);
    need += int64_t{take} * gpus;
    left -= take;
    if (left == 0) break;
  }
  if (need == 0) return PluginStatus::Success();
  int64_t total = 0, free = 0;
  for (ModelId m = 0; m < cs.num_models(); ++m) {
    if (!ctx.AllowsModel(m)) continue;
    total += cs.total_gpus(m);
    free += cs.cluster_free(m).free_gpus;
  }
  if (need > total) {
    return PluginStatus::Unresolvable(absl::StrCat("gang needs at least ", need,
                                                   " GPUs; the fleet has ", total,
                                                   ctx.any_model ? "" : " of the allowed models"));
  }
  if (need > free) {
    const CordonedRoom room = FindCordonedRoom(cs, ctx, 1);
    return PluginStatus::Unschedulable(absl::StrCat(
        "gang needs at least ", need, " free GPUs; ", free, " are free",
        ctx.any_model ? "" : " of the allowed models",
        room.nodes == 0 ? ""
                        : absl::StrCat(" on schedulable nodes (", room.free_gpus, " more on ",
                                       room.nodes, " cordoned node", room.nodes > 1 ? "s" : "",
                                       ", e.g. ", room.example, " with ", room.example_free, ")")));
  }
  return PluginStatus::Success();
}

PluginStatus Gang::Permit(CycleState&, const JobContext& ctx,
                          const std::vector<MemberPlacement>& placed) {
  if (static_cast<int32_t>(placed.size()) >= ctx.min_member) return PluginStatus::Success();
  return PluginStatus::Unschedulable(absl::StrCat(
      "gang needs ", ctx.min_member, " members placed together; only ", placed.size(), " fit"));
}

}  // namespace tessera::sched
