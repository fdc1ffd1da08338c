// pack-spread (Score): bin-pack or spread, per job.
//
// Pack (default for training): prefer the node that is fullest after the
// member lands (GPU share used / GPUs; CPU share for CPU-only members), so
// whole nodes stay free for large gangs.
// Spread (default for inference replicas): prefer the emptiest node, minus 20
// per member of the same job already on it, so replicas land on different
// nodes and a node failure takes out fewer of them.
#pragma once

#include "sched/framework/plugin.h"

namespace tessera::sched {

class PackSpread final : public Plugin, public ScorePlugin {
 public:
  static constexpr absl::string_view kName = "pack-spread";
  absl::string_view Name() const override { return kName; }
  int64_t Score(CycleState& cs, const JobContext& ctx, const model::MemberGroup& g,
                const NodeView& n) override;
};

}  // namespace tessera::sched
