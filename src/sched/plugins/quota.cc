#include "sched/plugins/quota.h"

namespace tessera::sched {

PluginStatus Quota::PreFilter(CycleState&, const JobContext&, PreFilterResult*) {
  if (env_->leaf < 0 || env_->tree == nullptr || env_->quota_checked) return PluginStatus::Skip();
  std::string why = env_->tree->Check(env_->leaf, env_->demand, {});
  if (why.empty()) return PluginStatus::Success();
  return PluginStatus::Unschedulable(std::move(why));
}

PluginStatus ReservationFilter::Filter(CycleState&, const JobContext&, const model::MemberGroup&,
                                       const NodeView& n) {
  if (env_->KeepsOff(n.id)) {
    return PluginStatus::Unschedulable("node reserved for a waiting job (backfill)");
  }
  return PluginStatus::Success();
}

}  // namespace tessera::sched
