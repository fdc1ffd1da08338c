#include "sched/plugins/node_selector.h"

#include "model/node_affinity.h"

namespace tessera::sched {

PluginStatus NodeSelector::Filter(CycleState&, const JobContext& ctx, const model::MemberGroup&,
                                  const NodeView& n) {
  for (const auto& [k, v] : ctx.job->node_selector) {
    auto it = n.node.labels.find(k);
    if (it == n.node.labels.end() || it->second != v) {
      return PluginStatus::Unschedulable("node(s) didn't match node selector");
    }
  }
  if (!model::MatchesNodeAffinity(ctx.job->node_affinity, n.node.name, n.node.labels)) {
    return PluginStatus::Unschedulable("node(s) didn't match Pod's node affinity/selector");
  }
  return PluginStatus::Success();
}

}  // namespace tessera::sched
