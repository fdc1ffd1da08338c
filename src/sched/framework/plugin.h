// Extension points of the scheduling framework.
//
// Modelled on the Kubernetes scheduler framework. A plugin is a class that
// derives from `Plugin` and from the interface of every extension point it
// implements; its header says which. The runner (Scheduler) calls them in
// this order for each job (a gang is scheduled in one cycle):
//
//   QueueSort   orders pending jobs (exactly one plugin per profile).
//   PreFilter   once per job: precompute, reject early, or restrict the
//               search to topology domains (racks, blocks, nodes).
//   for each member:
//     Filter    per candidate node: can this member run there?
//     Score     per feasible node: 0..100, weighted; Normalize optional.
//     GpuChooser  on the winning node: which GPUs (one plugin per profile).
//     Reserve   the member is assumed on the node; Unreserve undoes it.
//   Permit      once per job with all placed members: allow or reject the gang.
//   PostFilter  when the job cannot be placed: e.g. preemption.
//   Bind        commit the placement.
//
// Contracts: plugins never do I/O; Filter and Score must not mutate cluster
// state; Unreserve must be idempotent and must tolerate a member that Reserve
// never saw. All calls happen on the scheduler's one thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"
#include "model/job.h"
#include "sched/framework/cluster_state.h"
#include "sched/framework/cycle_state.h"
#include "sched/framework/plugin_status.h"
#include "sched/framework/types.h"

namespace tessera::sched {

inline constexpr int64_t kMaxNodeScore = 100;

// A topology domain: one node, rack or block (kNone: the whole cluster).
struct Domain {
  model::TopologyLevel level = model::TopologyLevel::kNone;
  int32_t id = -1;  // NodeId, rack id or block id
};

// Per-job facts computed once per cycle by the runner.
struct JobContext {
  const model::Job* job = nullptr;
  const ClusterState* cluster = nullptr;
  // GPU models the job accepts (empty with any_model).
  absl::InlinedVector<ModelId, 4> allowed_models;
  bool any_model = true;
  int32_t min_member = 0;
  // The domain the runner is trying now.
  Domain domain;

  bool AllowsModel(ModelId m) const {
    if (any_model) return true;
    for (ModelId a : allowed_models) {
      if (a == m) return true;
    }
    return false;
  }
};

// A node as plugins see it.
struct NodeView {
  NodeId id;
  const model::Node& node;
  const NodeState& state;
};

class Plugin {
 public:
  virtual ~Plugin() = default;
  virtual absl::string_view Name() const = 0;
};

class QueueSortPlugin {
 public:
  virtual ~QueueSortPlugin() = default;
  // Strict weak order: true when `a` should be scheduled before `b`.
  virtual bool Less(const model::Job& a, const model::Job& b) const = 0;
};

struct PreFilterResult {
  // When non-empty, try only these domains, in this order.
  std::vector<Domain> domains;
  // With domains set: after they all fail, also try the whole cluster
  // (a preferred, not required, topology).
  bool fallback_to_cluster = false;
};

class PreFilterPlugin {
 public:
  virtual ~PreFilterPlugin() = default;
  virtual PluginStatus PreFilter(CycleState& cs, const JobContext& ctx, PreFilterResult* out) = 0;
};

class FilterPlugin {
 public:
  virtual ~FilterPlugin() = default;
  virtual PluginStatus Filter(CycleState& cs, const JobContext& ctx, const model::MemberGroup& g,
                              const NodeView& n) = 0;
};

class ScorePlugin {
 public:
  virtual ~ScorePlugin() = default;
  // 0..kMaxNodeScore; higher is better.
  virtual int64_t Score(CycleState& cs, const JobContext& ctx, const model::MemberGroup& g,
                        const NodeView& n) = 0;
  // Optional rescaling of the scores of all feasible nodes to 0..kMaxNodeScore.
  virtual void Normalize(const JobContext& /*ctx*/, absl::Span<int64_t> /*scores*/) {}
};

class GpuChooserPlugin {
 public:
  virtual ~GpuChooserPlugin() = default;
  // Picks the GPUs for one member on a node that passed Filter. Returns false
  // when the node cannot hold it after all (treated as a Filter rejection).
  virtual bool ChooseGpus(const JobContext& ctx, const model::MemberGroup& g, const NodeView& n,
                          absl::InlinedVector<GpuGrant, 8>* out) = 0;
};

class ReservePlugin {
 public:
  virtual ~ReservePlugin() = default;
  virtual PluginStatus Reserve(CycleState& cs, const JobContext& ctx, const MemberPlacement& m) = 0;
  // Idempotent.
  virtual void Unreserve(CycleState& cs, const JobContext& ctx, const MemberPlacement& m) = 0;
};

class PermitPlugin {
 public:
  virtual ~PermitPlugin() = default;
  virtual PluginStatus Permit(CycleState& cs, const JobContext& ctx,
                              const std::vector<MemberPlacement>& placed) = 0;
};

// Why a job could not be placed, handed to PostFilter.
struct FailureSummary {
  std::string reason;
  std::string plugin;
  int32_t members_needed = 0;
  int32_t best_members_placed = 0;
};

struct PostFilterResult {
  PluginStatus status = PluginStatus::Unschedulable("");
  // Jobs (keys) whose eviction would let this job be placed.
  std::vector<std::string> victims;
  std::string message;
};

class PostFilterPlugin {
 public:
  virtual ~PostFilterPlugin() = default;
  virtual PostFilterResult PostFilter(CycleState& cs, const JobContext& ctx,
                                      const FailureSummary& failure) = 0;
};

class BindPlugin {
 public:
  virtual ~BindPlugin() = default;
  // Skip() passes to the next binder; the first Success ends the chain.
  virtual PluginStatus Bind(const JobContext& ctx, const Placement& p) = 0;
};

}  // namespace tessera::sched
