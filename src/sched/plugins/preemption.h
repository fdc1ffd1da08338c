// preemption (PostFilter): gang-aware, checkpoint-aware, minimal preemption.
//
// When a job cannot be placed (or its queue's quota refuses it), find the
// cheapest set of running gangs whose eviction lets it run. Victims are whole
// gangs (never part of one, so never below minMember). Eligible victims
// (AdmissionEnv::policy): lower-priority jobs of the same queue; jobs of a
// queue that borrows while the preemptor's queue stays within its guarantee
// (reclaim; counting the demand of its preemptors already nominated, and a
// victim queue's usage less its victims already signalled, from
// AdmissionEnv::pledged/leaving); optionally lower-priority jobs of other
// queues that borrow.
// Another queue's guaranteed capacity is never taken (this also breaks the
// reclaim/priority ping-pong between queues). Never a job that is
// already terminating, never one that has run less than the minimum runtime
// (no thrashing), and never a job that preempted the preemptor (no cycles).
//
// Cost, compared lexicographically: the highest victim priority, then the
// number of gangs, then the sum of victim priorities, then how often the
// victims were preempted before (spreads preemption: a job just restarted
// from a checkpoint has little work to lose and would otherwise be picked
// again and again), then the work lost (GPU-seconds since each victim's last
// checkpoint), then GPUs evicted. With
// policy.gangs_first the number of gangs comes before the highest priority
// (the literal order; the default never evicts a higher class when a
// lower one can make room). A set evicting more GPUs than the cap is never
// chosen.
//
// Algorithm. Eligible victims are sorted by priority; for each priority tier
// (victims at or below it) the search runs per topology domain the job needs
// (each rack/block/node for a required topology, else the whole cluster).
// Feasibility is a quick check on whole free GPUs: for each member group of g
// GPUs, sum over the domain's nodes of floor(free/g) after eviction must cover
// its members (only the victims' nodes change, so each check costs the
// victims' members), plus the quota check with the victims' usage removed.
// Per domain: every single victim; then, for small domains, every pair; then
// greedy (most useful GPUs first, cheapest work lost first) followed by a
// reprieve pass that drops every victim not needed. A lower bound on the
// gangs needed prunes domains that cannot beat the best set so far. The first
// tier that yields a set wins (gangs_first: one tier holding every victim). The queueing layer
// verifies the set with a dry-run placement before signalling anyone.
//
// Elastic victims (GangPolicy::elastic) may be shrunk instead: a running
// elastic job holding more members than its minMember may give up members
// above that minimum (never more), keeping the rest running, as KAI and
// Volcano reclaim elastic pods. The shrink search runs over the same eligible
// jobs (the same rules as above), per priority tier (gangs_first: one tier)
// and per topology domain: the candidates' surplus members in the domain are
// grouped by node, nodes ordered by the whole free GPUs they would have with
// all of them dropped (most first), and members are added node by node (each
// victim at most its surplus; within a node the cheapest victim first) until
// the quick check and the quota check pass; then a reprieve pass gives back
// every member not needed (most expensive victim first). The members named
// are thus those on the nodes the preemptor needs, and no fewer would do.
// Its cost is the Cost above with the victims shrunk as the gangs, their
// whole work lost (survivors restart from the checkpoint) and the GPUs
// dropped. A plan either shrinks or evicts, never both.
//
// Preference: the shrink plan is chosen when no whole-gang plan exists, or
// when it is no worse on (highest priority it takes, jobs it touches) -
// (jobs, highest priority) with gangs_first - than the whole-gang plan: on a
// tie the shrink wins, since it costs each victim less than an eviction (the
// victim keeps running). So a lower-priority eviction still beats shrinking a
// higher-priority job, and one eviction beats shrinking three jobs of the
// same priority (each shrink restarts its survivors). A need no shrink covers
// is met by whole evictions, which may include elastic jobs evicted whole.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sched/framework/plugin.h"
#include "sched/queue/admission_env.h"

namespace tessera::sched {

// An elastic victim's members a shrink plan takes.
struct ShrinkPart {
  int32_t slot = -1;                     // RunningSet slot
  std::vector<MemberPlacement> dropped;  // members given up (the rest keep running)
};

struct VictimPlan {
  std::vector<int32_t> slots;  // RunningSet slots
  // A shrink plan: per victim (the same order as `slots`), the members it
  // gives up; empty for a plan of whole gangs.
  std::vector<ShrinkPart> shrinks;
  int32_t max_priority = 0;
  int64_t sum_priority = 0;
  double work_lost = 0;       // GPU-seconds
  int64_t evicted_milli = 0;  // a shrink plan: the GPUs of the dropped members
  int64_t needed_milli = 0;
  int64_t evaluations = 0;
  std::string reason;  // when empty: why no set was found
  bool found() const { return !slots.empty(); }
  bool shrink() const { return !shrinks.empty(); }
};

// The search itself (pure over `env`; mutates nothing visible).
VictimPlan FindVictims(AdmissionEnv& env, const model::Job& job, const JobContext& ctx);

class Preemption final : public Plugin, public PostFilterPlugin {
 public:
  static constexpr absl::string_view kName = "preemption";
  explicit Preemption(AdmissionEnv* env) : env_(env) {}
  absl::string_view Name() const override { return kName; }
  PostFilterResult PostFilter(CycleState& cs, const JobContext& ctx,
                              const FailureSummary& failure) override;
  const VictimPlan& last_plan() const { return last_; }
  // Forgets the last plan (so a caller can tell whether PostFilter ran).
  void Reset() {
    last_ = VictimPlan();
    ran_ = false;
  }
  bool ran() const { return ran_; }

 private:
  AdmissionEnv* env_;
  VictimPlan last_;
  bool ran_ = false;
};

}  // namespace tessera::sched
