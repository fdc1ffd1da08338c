#include "sched/plugins/taint_toleration.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tessera::sched {
namespace {
bool Tolerated(const model::Job& job, const model::Taint& t) {
  return std::any_of(job.tolerations.begin(), job.tolerations.end(),
                     [&](const model::Toleration& tol) { return model::Tolerates(tol, t); });
}
}  // namespace

PluginStatus TaintToleration::Filter(CycleState&, const JobContext& ctx, const model::MemberGroup&,
                                     const NodeView& n) {
  for (const model::Taint& t : n.node.taints) {
    if (t.effect == model::TaintEffect::kPreferNoSchedule) continue;
    if (!Tolerated(*ctx.job, t)) {
      return PluginStatus::Unschedulable(absl::StrCat("node(s) had untolerated taint {", t.key,
                                                      t.value.empty() ? "" : "=", t.value, ":",
                                                      model::TaintEffectName(t.effect), "}"));
    }
  }
  return PluginStatus::Success();
}

int64_t TaintToleration::Score(CycleState&, const JobContext& ctx, const model::MemberGroup&,
                               const NodeView& n) {
  int64_t bad = 0;
  for (const model::Taint& t : n.node.taints) {
    if (t.effect == model::TaintEffect::kPreferNoSchedule && !Tolerated(*ctx.job, t)) ++bad;
  }
  return std::max<int64_t>(0, kMaxNodeScore - 25 * bad);
}

}  // namespace tessera::sched
