// Preemption minimality on hand-made cases: the exact cheapest victim set,
// checkpoint preference, whole gangs, the eviction cap, reclaim and no cycles.
#include "sched/plugins/preemption.h"

#include <gtest/gtest.h>

#include <set>

#include "absl/strings/str_cat.h"
#include "sched/queue/queue_manager.h"
#include "sched/queue/queue_test_util.h"

namespace tessera::sched {
namespace {

using testing::GangJob;
using testing::kT0;
using testing::Q;
using testing::SmallCluster;

struct Fixture {
  std::unique_ptr<ClusterState> cs;
  std::unique_ptr<QueueManager> qm;

  explicit Fixture(int nodes, PreemptionPolicy policy = {}, QueueTreeSpec tree = {},
                   int nodes_per_rack = 32) {
    cs = SmallCluster(nodes, 8, nodes_per_rack);
    QueueManagerConfig c;
    if (tree.queues.empty()) tree.queues = {Q("q", "")};
    c.tree = tree;
    c.preemption = policy;
    auto m = QueueManager::Create(c, cs.get());
    if (!m.ok()) abort();
    qm = std::move(*m);
  }
  void Run(const std::string& name, int members, int gpus, int prio, std::string queue = "q") {
    ASSERT_TRUE(qm->Submit(GangJob(name, queue, members, gpus, prio), {}, kT0).ok());
    CycleReport r = qm->Cycle(kT0);
    ASSERT_EQ(qm->Phase(absl::StrCat("default/", name)), JobPhase::kRunning)
        << qm->WaitingReason(absl::StrCat("default/", name));
  }
  std::set<std::string> Preempt(const std::string& name, int members, int gpus, int prio,
                                absl::Time at, std::string queue = "q") {
    EXPECT_TRUE(qm->Submit(GangJob(name, queue, members, gpus, prio), {}, at).ok());
    CycleReport r = qm->Cycle(at);
    std::set<std::string> victims;
    for (const QueueEvent& e : r.events) {
      if (e.kind == QueueEvent::Kind::kCheckpointSignal) {
        EXPECT_EQ(e.other, absl::StrCat("default/", name));
        EXPECT_EQ(e.deadline, at + qm->config().preemption.grace_period);
        victims.insert(e.job.substr(8));
      }
    }
    return victims;
  }
};

TEST(Preemption, FreshlyCheckpointedVictimPreferredOverStaleOne) {
  Fixture f(2);
  f.Run("stale", 1, 8, 100);
  f.Run("fresh", 1, 8, 100);
  ASSERT_TRUE(f.qm->ReportCheckpoint("default/fresh", kT0 + absl::Minutes(59)).ok());
  ASSERT_TRUE(f.qm->ReportCheckpoint("default/stale", kT0 + absl::Minutes(5)).ok());
  EXPECT_EQ(f.Preempt("p", 1, 8, 1000, kT0 + absl::Hours(1)), std::set<std::string>({"fresh"}));
  EXPECT_EQ(f.qm->Phase("default/p"), JobPhase::kNominated);
  EXPECT_EQ(f.qm->Phase("default/fresh"), JobPhase::kTerminating);
  EXPECT_EQ(f.qm->WaitingReasonClass("default/p"), WaitReason::kPreempting);
  // After the grace period the victim is killed and the preemptor runs.
  CycleReport r = f.qm->Cycle(kT0 + absl::Hours(1) + absl::Seconds(30));
  EXPECT_EQ(f.qm->Phase("default/p"), JobPhase::kRunning);
  EXPECT_EQ(f.qm->Phase("default/fresh"), JobPhase::kPending);
  // Killed at the start of the cycle, then tried again in it: at the head of the queue, it
  // holds the backfill reservation now.
  EXPECT_EQ(f.qm->WaitingReasonClass("default/fresh"), WaitReason::kReserved);
  EXPECT_EQ(f.qm->Phase("default/stale"), JobPhase::kRunning);
}

TEST(Preemption, AVictimKilledWithoutGraceWaitsAsPreempted) {
  PreemptionPolicy policy;
  policy.grace_period = absl::ZeroDuration();
  policy.min_runtime = absl::ZeroDuration();
  Fixture f(1, policy);
  f.Run("low", 1, 8, 100);
  EXPECT_EQ(f.Preempt("high", 1, 8, 1000, kT0 + absl::Hours(1)), std::set<std::string>({"low"}));
  EXPECT_EQ(f.qm->Phase("default/high"), JobPhase::kRunning);
  ASSERT_EQ(f.qm->Phase("default/low"), JobPhase::kPending);
  // Killed mid-cycle, after its turn: the class says why until its next attempt.
  EXPECT_EQ(f.qm->WaitingReasonClass("default/low"), WaitReason::kPreempted);
  EXPECT_NE(f.qm->WaitingReason("default/low").find("preempted by default/high"), std::string::npos)
      << f.qm->WaitingReason("default/low");
}

TEST(Preemption, VictimsThatExitEarlyAreReleasedTogetherAtTheNextCycle) {
  // Two one-node victims for one two-node preemptor. The first exit changes
  // nothing (released alone, its node could go to someone else); after the
  // second, the next cycle kills both (kKilled, as at the deadline) and starts
  // the preemptor, 5 s after the signal instead of the 30 s grace period.
  Fixture f(2);
  f.Run("v1", 1, 8, 100);
  f.Run("v2", 1, 8, 100);
  const absl::Time at = kT0 + absl::Hours(1);
  ASSERT_EQ(f.Preempt("p", 2, 8, 1000, at), std::set<std::string>({"v1", "v2"}));
  EXPECT_FALSE(f.qm->VictimExited("default/p", at).ok());  // not a victim
  ASSERT_TRUE(f.qm->VictimExited("default/v1", at + absl::Seconds(2)).ok());
  CycleReport r = f.qm->Cycle(at + absl::Seconds(3));
  EXPECT_EQ(f.qm->Phase("default/v1"), JobPhase::kTerminating);
  EXPECT_EQ(f.qm->Phase("default/p"), JobPhase::kNominated);
  ASSERT_TRUE(f.qm->VictimExited("default/v2", at + absl::Seconds(5)).ok());
  EXPECT_EQ(f.qm->Phase("default/v2"), JobPhase::kTerminating);  // until the cycle
  r = f.qm->Cycle(at + absl::Seconds(5));
  std::set<std::string> killed;
  for (const QueueEvent& e : r.events) {
    if (e.kind == QueueEvent::Kind::kKilled) killed.insert(e.job.substr(8));
  }
  EXPECT_EQ(killed, std::set<std::string>({"v1", "v2"}));
  EXPECT_EQ(f.qm->Phase("default/p"), JobPhase::kRunning);
  EXPECT_EQ(f.qm->Phase("default/v1"), JobPhase::kPending);
}

TEST(Preemption, CancelledPreemptorSparesItsVictims) {
  Fixture f(1);
  f.Run("low", 1, 8, 100);
  EXPECT_EQ(f.Preempt("p", 1, 8, 1000, kT0 + absl::Hours(1)), std::set<std::string>({"low"}));
  ASSERT_TRUE(f.qm->Finish("default/p", kT0 + absl::Hours(1)).ok());
  f.qm->Cycle(kT0 + absl::Hours(2));
  EXPECT_EQ(f.qm->Phase("default/low"), JobPhase::kRunning);
}

TEST(Preemption, FewestGangsWithinTheLowestPriority) {
  Fixture f(2);
  f.Run("big", 1, 8, 100);
  f.Run("small-1", 1, 4, 100);
  f.Run("small-2", 1, 4, 100);
  // big lost the most work, but one gang beats two.
  ASSERT_TRUE(f.qm->ReportCheckpoint("default/small-1", kT0 + absl::Minutes(59)).ok());
  ASSERT_TRUE(f.qm->ReportCheckpoint("default/small-2", kT0 + absl::Minutes(59)).ok());
  EXPECT_EQ(f.Preempt("p", 1, 8, 1000, kT0 + absl::Hours(1)), std::set<std::string>({"big"}));
}

TEST(Preemption, LowerPriorityBeforeFewerGangs) {
  Fixture f(2);
  f.Run("prod", 1, 8, 500);
  f.Run("dev-1", 1, 4, 100);
  f.Run("dev-2", 1, 4, 100);
  EXPECT_EQ(f.Preempt("p", 1, 8, 1000, kT0 + absl::Hours(1)),
            std::set<std::string>({"dev-1", "dev-2"}));
}

TEST(Preemption, GangsFirstOrderPrefersFewerGangs) {
  PreemptionPolicy policy;
  policy.gangs_first = true;
  Fixture f(2, policy);
  f.Run("prod", 1, 8, 500);
  f.Run("dev-1", 1, 4, 100);
  f.Run("dev-2", 1, 4, 100);
  EXPECT_EQ(f.Preempt("p", 1, 8, 1000, kT0 + absl::Hours(1)), std::set<std::string>({"prod"}));
}

TEST(Preemption, ExactCheapestPairAcrossNodes) {
  Fixture f(4);
  f.Run("a", 1, 8, 100);
  f.Run("b", 1, 8, 100);
  f.Run("c", 1, 4, 100);
  f.Run("d", 1, 4, 100);  // packs next to c
  f.Run("e", 1, 8, 100);
  ASSERT_TRUE(f.qm->ReportCheckpoint("default/b", kT0 + absl::Minutes(58)).ok());
  ASSERT_TRUE(f.qm->ReportCheckpoint("default/e", kT0 + absl::Minutes(57)).ok());
  ASSERT_TRUE(f.qm->ReportCheckpoint("default/c", kT0 + absl::Minutes(59)).ok());
  ASSERT_TRUE(f.qm->ReportCheckpoint("default/d", kT0 + absl::Minutes(59)).ok());
  // Two whole nodes: {b, e} (2 gangs, least work) beats {c, d, x}.
  EXPECT_EQ(f.Preempt("p", 2, 8, 1000, kT0 + absl::Hours(1)), std::set<std::string>({"b", "e"}));
  const VictimPlan& plan = f.qm->last_plan();
  EXPECT_EQ(plan.evicted_milli, 16000);
  EXPECT_EQ(plan.needed_milli, 16000);
}

TEST(Preemption, EquallyCheapRacksResolveToTheLowestRack) {
  // Eight racks of two full nodes, every job alike: each rack offers the same
  // two-victim plan for a rack-bound preemptor. The search visits racks in id
  // order, so the first rack wins in every process (a hash-map order, seeded
  // per process, picked a different rack from run to run).
  Fixture f(16, {}, {}, /*nodes_per_rack=*/2);
  ASSERT_EQ(f.cs->num_racks(), 8);
  for (int i = 0; i < 16; ++i) f.Run(absl::StrCat("j", i), 1, 8, 100);
  model::Job p = GangJob("p", "q", 2, 8, 1000);
  p.topology = {.level = model::TopologyLevel::kRack, .required = true};
  ASSERT_TRUE(f.qm->Submit(p, {}, kT0 + absl::Hours(1)).ok());
  CycleReport r = f.qm->Cycle(kT0 + absl::Hours(1));
  int victims = 0;
  for (const QueueEvent& e : r.events) {
    if (e.kind != QueueEvent::Kind::kCheckpointSignal) continue;
    ++victims;
    const Placement& vp = f.cs->bound().at(e.job);
    for (const MemberPlacement& mp : vp.members) {
      EXPECT_EQ(f.cs->state(mp.node).rack, 0) << e.job;
    }
  }
  EXPECT_EQ(victims, 2);
}

TEST(Preemption, WholeGangsOnlyAndEvictionCap) {
  {
    Fixture f(2);
    f.Run("gang", 2, 8, 100);
    // Needs 8; the only victim is a 16-GPU gang: evicted whole, never half.
    EXPECT_EQ(f.Preempt("p", 1, 8, 1000, kT0 + absl::Hours(1)), std::set<std::string>({"gang"}));
    f.qm->Cycle(kT0 + absl::Hours(2));
    EXPECT_EQ(f.cs->FindPlacement("default/gang"), nullptr);
    EXPECT_EQ(f.qm->Phase("default/p"), JobPhase::kRunning);
  }
  {
    PreemptionPolicy capped;
    capped.max_evicted_gpus = 8;
    Fixture f(2, capped);
    f.Run("gang", 2, 8, 100);
    EXPECT_TRUE(f.Preempt("p", 1, 8, 1000, kT0 + absl::Hours(1)).empty());
    EXPECT_NE(f.qm->WaitingReason("default/p").find("more than the cap of 8 GPUs"),
              std::string::npos)
        << f.qm->WaitingReason("default/p");
    EXPECT_EQ(f.qm->Phase("default/gang"), JobPhase::kRunning);
  }
}

TEST(Preemption, NeverEqualOrHigherPriorityInTheSameQueue) {
  Fixture f(1);
  f.Run("x", 1, 8, 1000);
  EXPECT_TRUE(f.Preempt("p", 1, 8, 1000, kT0 + absl::Hours(1)).empty());
  EXPECT_NE(f.qm->WaitingReason("default/p").find("preemption"), std::string::npos);
}

TEST(Preemption, ReclaimOfLentCapacityAndNoCycle) {
  PreemptionPolicy policy;
  policy.cross_queue_lower_priority = true;
  policy.grace_period = absl::ZeroDuration();
  policy.min_runtime = absl::ZeroDuration();
  QueueTreeSpec tree;
  tree.queues = {Q("org", "", 16), Q("qa", "org", 8), Q("qb", "org", 8)};
  Fixture f(2, policy, tree);
  f.Run("a1", 1, 8, 1000, "qa");
  f.Run("a2", 1, 8, 1000, "qa");  // qa borrows qb's idle 8 GPUs
  // qb takes its guarantee back, although its job has the lower priority.
  ASSERT_TRUE(f.qm->Submit(GangJob("b", "qb", 1, 8, 100), {}, kT0).ok());
  CycleReport r = f.qm->Cycle(kT0 + absl::Minutes(1));
  EXPECT_EQ(f.qm->Phase("default/b"), JobPhase::kRunning);
  std::string victim =
      f.qm->Phase("default/a1") == JobPhase::kPending ? "default/a1" : "default/a2";
  ASSERT_EQ(f.qm->Phase(victim), JobPhase::kPending);
  // The victim outranks b and cross-queue preemption is on, but it may never
  // preempt its own preemptor: no cycle.
  for (int i = 2; i < 10; ++i) f.qm->Cycle(kT0 + absl::Minutes(i));
  EXPECT_EQ(f.qm->Phase("default/b"), JobPhase::kRunning);
  EXPECT_EQ(f.qm->Phase(victim), JobPhase::kPending);
  EXPECT_NE(f.qm->WaitingReason(victim).find("left to borrow"), std::string::npos)
      << f.qm->WaitingReason(victim);
}

// Four late gangs of a queue guaranteed two gangs' worth, in one cycle, while
// the other queue borrows: the first two reclaim (each within the guarantee
// once the earlier one's demand is counted), the last two wait. Before the
// pledged/leaving bookkeeping all four reclaimed, and the flood then took
// them back: a ping-pong that `sim replay --policies queues` found.
TEST(Preemption, ReclaimInOneCycleTakesOnlyTheGuarantee) {
  PreemptionPolicy policy;
  policy.min_runtime = absl::ZeroDuration();
  QueueTreeSpec tree;
  tree.queues = {Q("flood", "", 16), Q("late", "", 16)};
  Fixture f(4, policy, tree);
  for (int i = 0; i < 4; ++i) f.Run(absl::StrCat("f", i), 1, 8, 0, "flood");  // borrows 16
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(f.qm->Submit(GangJob(absl::StrCat("l", i), "late", 1, 8, 0), {}, kT0).ok());
  }
  const absl::Time t1 = kT0 + absl::Minutes(1);
  CycleReport r = f.qm->Cycle(t1);
  std::set<std::string> victims, nominated;
  for (const QueueEvent& e : r.events) {
    if (e.kind == QueueEvent::Kind::kCheckpointSignal) victims.insert(e.job);
    if (e.kind == QueueEvent::Kind::kNominated) nominated.insert(e.job);
  }
  EXPECT_EQ(victims.size(), 2u);
  EXPECT_EQ(nominated.size(), 2u);
  int waiting = 0;
  for (int i = 0; i < 4; ++i) {
    std::string k = absl::StrCat("default/l", i);
    if (f.qm->Phase(k) == JobPhase::kPending) ++waiting;
  }
  EXPECT_EQ(waiting, 2);
  // Once the victims are gone the two start; the flood is at its guarantee
  // and nothing more is reclaimed, in either direction.
  f.qm->Cycle(t1 + policy.grace_period);
  for (int i = 2; i < 20; ++i) {
    CycleReport later = f.qm->Cycle(t1 + absl::Minutes(i));
    for (const QueueEvent& e : later.events) {
      EXPECT_NE(e.kind, QueueEvent::Kind::kCheckpointSignal) << e.job << " at minute " << i;
    }
  }
  int late_running = 0, flood_running = 0;
  for (int i = 0; i < 4; ++i) {
    late_running += f.qm->Phase(absl::StrCat("default/l", i)) == JobPhase::kRunning;
    flood_running += f.qm->Phase(absl::StrCat("default/f", i)) == JobPhase::kRunning;
  }
  EXPECT_EQ(late_running, 2);
  EXPECT_EQ(flood_running, 2);
}

}  // namespace
}  // namespace tessera::sched
