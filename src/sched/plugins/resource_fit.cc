#include "sched/plugins/resource_fit.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tessera::sched {

PluginStatus ResourceFit::PreFilter(CycleState&, const JobContext& ctx, PreFilterResult*) {
  const model::Job& job = *ctx.job;
  const ClusterState& cs = *ctx.cluster;
  if (!ctx.any_model && ctx.allowed_models.empty()) {
    return PluginStatus::Unresolvable(
        absl::StrCat("no node has a GPU of model ", absl::StrJoin(job.gpu_models, " or ")));
  }
  int largest = 0;
  for (ModelId m = 0; m < cs.num_models(); ++m) {
    if (ctx.AllowsModel(m)) largest = std::max(largest, cs.max_node_gpus(m));
  }
  for (const model::MemberGroup& g : job.groups) {
    if (g.resources.gpus > largest) {
      return PluginStatus::Unresolvable(
          absl::StrCat("a member of group ", g.name, " needs ", g.resources.gpus,
                       " GPUs on one node; the largest node has ", largest));
    }
  }
  return PluginStatus::Success();
}

PluginStatus ResourceFit::Filter(CycleState&, const JobContext& ctx, const model::MemberGroup& g,
                                 const NodeView& n) {
  const model::ResourceRequest& r = g.resources;
  const NodeState& st = n.state;
  if (n.node.max_members > 0 && st.members >= n.node.max_members) {
    return PluginStatus::Unschedulable("Too many members on the node");
  }
  if (r.gpus > 0) {
    if (!ctx.AllowsModel(st.model) || st.num_gpus == 0) {
      return PluginStatus::Unschedulable("GPU model not allowed");
    }
    if (r.gpu_memory_mib > st.gpu_memory_mib) {
      return PluginStatus::Unschedulable("GPU memory too small");
    }
    if (r.fractional()) {
      if (st.max_partial < r.gpu_milli && st.whole_free == 0) {
        return PluginStatus::Unschedulable("Insufficient GPU share");
      }
    } else if (st.whole_free < r.gpus) {
      return PluginStatus::Unschedulable("Insufficient GPUs");
    }
  }
  if (r.cpu_milli > st.cpu_free) return PluginStatus::Unschedulable("Insufficient CPU");
  if (r.memory_mib > st.memory_free) return PluginStatus::Unschedulable("Insufficient memory");
  for (const auto& [name, amount] : r.scalars) {
    const int i = ScalarIndex(n.node, name);
    if (i < 0 || st.scalar_free[i] < amount) {
      return PluginStatus::Unschedulable(absl::StrCat("Insufficient ", name));
    }
  }
  return PluginStatus::Success();
}

}  // namespace tessera::sched
