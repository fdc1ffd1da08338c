// Scheduler: runs the framework's extension points for one job at a time.
//
// A job (gang) is placed in one cycle, all or nothing: members are assumed
// one by one on the evolving ClusterState (so later members see earlier
// ones), and if the gang cannot reach its minMember or a Permit plugin
// rejects it, every assumed member is undone before the cycle ends. No
// reservation outlives a cycle, so two gangs can never hold partial
// allocations that deadlock each other.
//
// Candidate nodes come from the topology domain being tried (PreFilter may
// name racks, blocks or nodes) or, without one, from the CapacityIndex in
// best-fit order (pack) or emptiest-first order (spread); the first
// `nodes_to_score` feasible nodes are scored (0: every node). Placement is
// thus sub-linear in the cluster size.
//
// Thread safety: none. One Scheduler per ClusterState, driven by one thread
// (the server's scheduling loop or the simulator).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "model/job.h"
#include "sched/framework/cluster_state.h"
#include "sched/framework/decision_trace.h"
#include "sched/framework/plugin.h"
#include "sched/framework/profile.h"
#include "sched/framework/registry.h"

namespace tessera::sched {

struct ScheduleResult {
  enum class Outcome : uint8_t { kPlaced, kUnschedulable, kError };
  Outcome outcome = Outcome::kUnschedulable;
  Placement placement;  // kPlaced: every placed member
  // kUnschedulable / kError: why, in words a person can act on.
  std::string reason;
  std::string plugin;         // the plugin that decided, when one did
  bool unresolvable = false;  // no node or preemption can help as things stand
  // From PostFilter (e.g. preemption): jobs whose eviction would make room.
  std::vector<std::string> victims;
  int64_t nodes_evaluated = 0;  // Filter calls made
  int32_t domains_tried = 0;
  // Spans per phase and an explanation ("placed ... on rack r012 ...").
  DecisionTrace trace;

  bool placed() const { return outcome == Outcome::kPlaced; }
};

class Scheduler {
 public:
  // Builds the plugins of `profile` (validated against `registry`). `state`
  // is borrowed and must outlive the scheduler.
  static absl::StatusOr<std::unique_ptr<Scheduler>> Create(const Profile& profile,
                                                           const PluginRegistry& registry,
                                                           ClusterState* state);

  // One cycle. On kPlaced the placement is bound in the ClusterState.
  // An invalid job is kUnschedulable+unresolvable with the validation message.
  ScheduleResult Schedule(const model::Job& job);
  // Like Schedule, but undoes everything before returning (admission checks,
  // backfill planning). Bind plugins are not called.
  ScheduleResult Evaluate(const model::Job& job);
  // Releases a bound job; its resources return to the pool.
  absl::Status Release(absl::string_view job_key);

  // Injects the generator used for random tie-breaking (borrowed; must
  // outlive the scheduler; null restores first-candidate ties).
  void SetRandom(std::mt19937_64* rng) { rng_ = rng; }

  const QueueSortPlugin& queue_sort() const { return *queue_sort_; }
  ClusterState& state() { return *state_; }
  const ClusterState& state() const { return *state_; }
  const Profile& profile() const { return profile_; }
  // Times the phases of each cycle for DecisionTrace. Borrowed; null (the
  // default) records zero durations. sched never reads a clock of its own.
  void set_clock(const Clock* clock) { clock_ = clock; }
  // Writes DecisionTrace::explanation for every cycle (string work of a few
  // microseconds per placement: on in the server, off in benchmarks).
  void set_explain(bool on) { explain_ = on; }

  struct Stats {
    int64_t cycles = 0;
    int64_t placed = 0;
    int64_t unschedulable = 0;
    int64_t errors = 0;
    int64_t nodes_evaluated = 0;
  };
  const Stats& stats() const { return stats_; }

  ~Scheduler();

 private:
  Scheduler() = default;
  ScheduleResult Run(const model::Job& job, bool dry_run);
  // Tries to place every member inside `ctx.domain`; true on a permitted gang.
  bool TryDomain(JobContext& ctx, ScheduleResult* result, FailureSummary* failure);
  // Places one member; false (with `why`) when no candidate fits.
  bool PlaceMember(const JobContext& ctx, int group, int member, std::string* why,
                   std::string* why_plugin, int64_t* evaluated);
  void Rollback(const JobContext& ctx);
  // Gathers the feasible equivalence classes into feasible_ (one
  // representative node each) and their sizes into class_weight_.
  // With `rejections` null, rejected classes are only skipped (the fast
  // path); otherwise they are tallied by reason (to explain a failure).
  void CollectClasses(const JobContext& ctx, const model::MemberGroup& g,
                      std::map<std::string, int>* rejections, std::string* first_plugin,
                      int64_t* evaluated);
  // Index into feasible_ of the best total score; ties per profile. In
  // dedupe mode (`classes`), entries stand for classes: ties weigh each by
  // its size, and the chosen entry is replaced by the node of its class the
  // tie-break prefers.
  size_t PickBest(bool classes);
  template <typename Visit>
  void ForEachCandidate(const JobContext& ctx, const model::ResourceRequest& req, Visit&& visit);

  Profile profile_;
  ClusterState* state_ = nullptr;
  std::vector<std::unique_ptr<Plugin>> owned_;
  QueueSortPlugin* queue_sort_ = nullptr;
  GpuChooserPlugin* gpu_chooser_ = nullptr;
  struct Named {
    absl::string_view name;
    int32_t weight;
  };
  std::vector<std::pair<PreFilterPlugin*, Named>> pre_filters_;
  std::vector<std::pair<FilterPlugin*, Named>> filters_;
  std::vector<std::pair<ScorePlugin*, Named>> scorers_;
  std::vector<std::pair<ReservePlugin*, Named>> reservers_;
  std::vector<std::pair<PermitPlugin*, Named>> permits_;
  std::vector<std::pair<PostFilterPlugin*, Named>> post_filters_;
  std::vector<std::pair<BindPlugin*, Named>> binders_;

  absl::Time Now() const { return clock_ ? clock_->Now() : absl::UnixEpoch(); }
  void Explain(const model::Job& job, const Domain& won, ScheduleResult* r) const;

  CycleState cycle_;
  Stats stats_;
  const Clock* clock_ = nullptr;
  bool explain_ = false;
  // Per-cycle phase accounting: filter, score, reserve.
  struct Phase {
    absl::Duration time;
    int64_t candidates = 0;
    int64_t feasible = 0;
  };
  Phase prefilter_phase_, filter_phase_, score_phase_, reserve_phase_, permit_phase_, bind_phase_;
  // Reused buffers (no allocation per member on the hot path).
  std::vector<NodeId> feasible_;
  std::vector<int64_t> totals_;
  std::vector<int64_t> plugin_scores_;
  std::vector<int64_t> class_weight_;  // dedupe mode: nodes per feasible_ entry
  std::mt19937_64* rng_ = nullptr;
};

}  // namespace tessera::sched
