// quota (PreFilter): admit a job only when its queue's hierarchical quota
// allows it (see sched/queue/queue_tree.h for the algorithm). The refusal
// names the queue and the numbers ("queue team-a over quota: 120 of 128 H100
// GPUs guaranteed in use, job needs 16, borrowing limit 0 H100 GPUs"). It is
// Unschedulable, not unresolvable: reclaim or preemption may make room.
// ReservationFilter (Filter): while the queueing layer backfills, keeps a job
// that would outlive the head-of-line reservation off the reserved nodes.
#pragma once

#include "sched/framework/plugin.h"
#include "sched/queue/admission_env.h"

namespace tessera::sched {

class Quota final : public Plugin, public PreFilterPlugin {
 public:
  static constexpr absl::string_view kName = "quota";
  explicit Quota(AdmissionEnv* env) : env_(env) {}
  absl::string_view Name() const override { return kName; }
  PluginStatus PreFilter(CycleState& cs, const JobContext& ctx, PreFilterResult* out) override;

 private:
  AdmissionEnv* env_;
};

class ReservationFilter final : public Plugin, public FilterPlugin {
 public:
  static constexpr absl::string_view kName = "reservation";
  explicit ReservationFilter(const AdmissionEnv* env) : env_(env) {}
  absl::string_view Name() const override { return kName; }
  PluginStatus Filter(CycleState& cs, const JobContext& ctx, const model::MemberGroup& g,
                      const NodeView& n) override;

 private:
  const AdmissionEnv* env_;
};

}  // namespace tessera::sched
