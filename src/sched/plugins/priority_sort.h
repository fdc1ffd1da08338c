// priority (QueueSort): higher priority first; then earlier creation; then
// job key, so the order is total and deterministic.
#pragma once

#include "sched/framework/plugin.h"

namespace tessera::sched {

class PrioritySort final : public Plugin, public QueueSortPlugin {
 public:
  static constexpr absl::string_view kName = "priority";
  absl::string_view Name() const override { return kName; }
  bool Less(const model::Job& a, const model::Job& b) const override;
};

}  // namespace tessera::sched
