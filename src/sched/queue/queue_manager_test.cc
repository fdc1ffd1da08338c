// QueueManager: placement-aware admission and its reasons (incl. the Kueue
// #4329 case), multi-model quota, backfill, configuration.
#include "sched/queue/queue_manager.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "absl/strings/str_cat.h"
#include "sched/queue/queue_test_util.h"

namespace tessera::sched {
namespace {

using testing::GangJob;
using testing::kT0;
using testing::Q;
using testing::SmallCluster;

std::unique_ptr<QueueManager> Make(ClusterState* cs, QueueManagerConfig c) {
  auto m = QueueManager::Create(std::move(c), cs);
  EXPECT_TRUE(m.ok()) << m.status();
  return std::move(*m);
}

TEST(Admission, Kueue4329QuotaAllowsButNoPlacementCanHoldIt) {
  // Two 4-GPU nodes; the queue's quota is 8 GPUs; the job is one 8-GPU pod.
  auto cs = SmallCluster(2, 4);
  QueueManagerConfig c;
  c.tree.queues = {Q("team", "", 8, 0)};
  auto qm = Make(cs.get(), c);
  ASSERT_TRUE(qm->Submit(GangJob("one-by-eight", "team", 1, 8), {}, kT0).ok());
  EXPECT_EQ(qm->WaitingReasonClass("default/one-by-eight"), WaitReason::kNotTried);
  qm->Cycle(kT0);
  EXPECT_EQ(qm->WaitingReasonClass("default/one-by-eight"), WaitReason::kUnschedulable);
  EXPECT_EQ(qm->Phase("default/one-by-eight"), JobPhase::kPending);
  EXPECT_EQ(qm->WaitingReason("default/one-by-eight"),
            "a member of group worker needs 8 GPUs on one node; the largest node has 4 (no "
            "preemption can help)");
  // Not admitted: no quota is held, so the 2x4 job that can run does.
  EXPECT_EQ(qm->tree().usage(qm->tree().Find("team"), 0), 0);
  ASSERT_TRUE(qm->Submit(GangJob("two-by-four", "team", 2, 4), {}, kT0).ok());
  qm->Cycle(kT0 + absl::Seconds(1));
  EXPECT_EQ(qm->Phase("default/two-by-four"), JobPhase::kRunning);
}

TEST(Admission, FragmentedFleetIsNotAdmittedAndSaysWhy) {
  // 8 GPUs free in total but 4 on each node: quota and the gang bound allow
  // it, no placement does.
  auto cs = SmallCluster(2, 8);
  QueueManagerConfig c;
  c.tree.queues = {Q("team", "", 32, 0)};
  auto qm = Make(cs.get(), c);
  ASSERT_TRUE(qm->Submit(GangJob("x", "team", 1, 4, 100), {}, kT0).ok());
  model::Job z = GangJob("z", "team", 1, 4, 100);
  z.placement = model::PlacementPreference::kSpread;
  ASSERT_TRUE(qm->Submit(z, {.expected_runtime = absl::Hours(2)}, kT0 + absl::Seconds(1)).ok());
  qm->Cycle(kT0);
  ASSERT_EQ(qm->Phase("default/z"), JobPhase::kRunning);
  ASSERT_TRUE(qm->Submit(GangJob("w", "team", 1, 8, 100), {}, kT0).ok());
  qm->Cycle(kT0 + absl::Seconds(1));
  EXPECT_EQ(qm->Phase("default/w"), JobPhase::kPending);
  std::string why = qm->WaitingReason("default/w");
  EXPECT_NE(why.find("member group worker: no schedulable node in the cluster has 8 free GPUs"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("reserved to start by"), std::string::npos) << why;
  EXPECT_EQ(qm->WaitingReasonClass("default/w"), WaitReason::kReserved);
  ASSERT_EQ(qm->reservations().size(), 1u);
  EXPECT_EQ(qm->reservations()[0].start, kT0 + absl::Hours(1));   // x ends (default runtime)
  EXPECT_EQ(qm->tree().usage(qm->tree().Find("team"), 0), 8000);  // w holds no quota
}

TEST(Admission, AWaitingJobHearsWhenOnlyCordonedNodesHaveRoom) {
  // A drained node keeps its free GPUs: the reason says the room is there but cordoned.
  auto cs = SmallCluster(2, 8);
  QueueManagerConfig c;
  c.tree.queues = {Q("team", "", 32, 0)};
  auto qm = Make(cs.get(), c);
  ASSERT_TRUE(qm->Submit(GangJob("x", "team", 1, 6, 100), {}, kT0).ok());
  qm->Cycle(kT0);
  ASSERT_EQ(qm->Phase("default/x"), JobPhase::kRunning);
  ASSERT_TRUE(cs->SetSchedulable(1, false).ok());
  ASSERT_TRUE(cs->SetSchedulable(0, false).ok());
  ASSERT_TRUE(qm->Submit(GangJob("w", "team", 1, 4, 100), {}, kT0).ok());
  qm->Cycle(kT0 + absl::Seconds(1));
  EXPECT_EQ(qm->Phase("default/w"), JobPhase::kPending);
  const std::string why = qm->WaitingReason("default/w");
  EXPECT_NE(why.find("gang needs at least 4 free GPUs; 0 are free on schedulable nodes (10 more "
                     "on 2 cordoned nodes, e.g. "),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("with 8)"), std::string::npos) << why;
}

TEST(Admission, QuotaAndTopologyReasons) {
  auto cs = SmallCluster(16, 8, 8);  // two racks of 64 GPUs
  QueueManagerConfig c;
  c.tree.queues = {Q("team-a", "", 64, 0), Q("team-b", "")};
  auto qm = Make(cs.get(), c);
  model::Job a1 = GangJob("a1", "team-a", 5, 8);
  a1.topology = {model::TopologyLevel::kRack, true};
  ASSERT_TRUE(qm->Submit(a1, {}, kT0).ok());
  qm->Cycle(kT0);
  ASSERT_TRUE(qm->Submit(GangJob("a2", "team-a", 4, 8), {}, kT0).ok());
  qm->Cycle(kT0);
  std::string want =
      "queue team-a over quota: 40 H100 GPUs of 64 H100 GPUs guaranteed in use, job needs 32 "
      "H100 GPUs, borrowing limit 0 H100 GPUs; preemption: ";
  EXPECT_EQ(qm->WaitingReason("default/a2").substr(0, want.size()), want);
  EXPECT_EQ(qm->WaitingReasonClass("default/a2"), WaitReason::kOverQuota);
  ASSERT_TRUE(qm->Finish("default/a2", kT0).ok());
  // b1 spreads into the other rack: 24 GPUs free in one rack, 40 in the other.
  model::Job b1 = GangJob("b1", "team-b", 3, 8);
  b1.topology = {model::TopologyLevel::kRack, true};
  b1.placement = model::PlacementPreference::kSpread;
  ASSERT_TRUE(qm->Submit(b1, {}, kT0).ok());
  model::Job rack = GangJob("rack", "team-b", 8, 8);
  rack.topology = {model::TopologyLevel::kRack, true};
  ASSERT_TRUE(qm->Submit(rack, {}, kT0 + absl::Seconds(1)).ok());
  qm->Cycle(kT0 + absl::Seconds(1));
  ASSERT_EQ(qm->Phase("default/b1"), JobPhase::kRunning);
  std::string why = qm->WaitingReason("default/rack");
  EXPECT_NE(why.find("needs 64 GPUs in one rack; largest free in any rack: 40"), std::string::npos)
      << why;
  auto st = qm->Queue("team-a");
  ASSERT_TRUE(st.ok());
  EXPECT_NEAR(st->usage, 40.0 / 128, 1e-9);
  EXPECT_NEAR(st->entitlement, 0.5, 1e-9);
}

TEST(Admission, AnyModelJobLandsOnlyOnAModelItsQuotaAdmits) {
  auto cs = SmallCluster(2, 8);  // H100
  model::SyntheticClusterSpec a100;
  a100.nodes = 2;
  a100.gpu_model = "A100";
  a100.name_prefix = "a";
  auto ns = model::BuildSyntheticCluster(a100);
  ASSERT_TRUE(ns.ok());
  for (auto& n : *ns) ASSERT_TRUE(cs->AddNode(std::move(n)).ok());
  QueueManagerConfig c;
  QueueSpec team = Q("team", "", 8, 0);
  team.quotas["gpu/A100"] = {.guaranteed = 16000, .borrowing_limit = 0};
  c.tree.queues = {team};
  auto qm = Make(cs.get(), c);
  model::Job h = GangJob("h", "team", 1, 8);
  h.gpu_models = {"H100"};
  ASSERT_TRUE(qm->Submit(h, {}, kT0).ok());
  qm->Cycle(kT0);
  // H100 quota is used up: the any-model jobs go to A100, then none fit.
  for (const char* n : {"x", "y", "z"}) {
    ASSERT_TRUE(qm->Submit(GangJob(n, "team", 1, 8), {}, kT0 + absl::Seconds(1)).ok());
  }
  qm->Cycle(kT0 + absl::Seconds(1));
  for (const char* n : {"default/x", "default/y"}) {
    ASSERT_EQ(qm->Phase(n), JobPhase::kRunning) << qm->WaitingReason(n);
    const Placement* p = cs->FindPlacement(n);
    EXPECT_EQ(cs->node(p->members[0].node).gpu_model(), "A100");
  }
  EXPECT_EQ(qm->Phase("default/z"), JobPhase::kPending);
  EXPECT_NE(qm->WaitingReason("default/z").find("over quota"), std::string::npos)
      << qm->WaitingReason("default/z");
  EXPECT_TRUE(qm->tree().CheckInvariants().ok());
}

TEST(Admission, BadReconfigurationKeepsThePreviousOne) {
  auto cs = SmallCluster(2, 8);
  QueueManagerConfig c;
  c.tree.queues = {Q("org", "", 16), Q("team", "org", 8)};
  auto qm = Make(cs.get(), c);
  ASSERT_TRUE(qm->Submit(GangJob("j", "team", 1, 8), {}, kT0).ok());
  qm->Cycle(kT0);
  QueueManagerConfig bad = c;
  bad.tree.queues = {Q("org", "team", 16), Q("team", "org", 8)};
  EXPECT_FALSE(qm->Reconfigure(bad).ok());
  bad = c;
  bad.default_priority_class = "urgent";
  absl::Status s = qm->Reconfigure(bad);
  EXPECT_EQ(s.message(), "defaultPriorityClass: unknown priority class \"urgent\"");
  bad = c;
  bad.tree.queues = {Q("org", "", 16)};  // "team" has a running job
  EXPECT_FALSE(qm->Reconfigure(bad).ok());
  EXPECT_EQ(qm->tree().num_queues(), 2);
  EXPECT_EQ(qm->config().default_priority_class, "");
  EXPECT_EQ(qm->tree().usage(qm->tree().Find("team"), 0), 8000);
  // Unknown priority class on a job.
  s = qm->Submit(GangJob("k", "team", 1, 8), {.priority_class = "urgent"}, kT0);
  EXPECT_EQ(s.message(), "spec.priorityClassName: unknown priority class \"urgent\"");
  EXPECT_EQ(qm->Submit(GangJob("k", "org", 1, 8), {}, kT0).message(),
            "spec.queue: \"org\" is not a leaf queue; submit to one of its children");
}

TEST(FairShareHistory, SurvivesAReconfigurationOfAnotherQueue) {
  // team-a runs alone for two hours: its decayed usage grows and it spends
  // credit, while team-b banks credit. Adding team-c (a Queue edit) rebuilds
  // the tree; the two teams' history must carry over, and team-c start empty.
  auto cs = SmallCluster(2, 8);
  QueueManagerConfig c;
  c.tree.half_life = absl::Minutes(30);
  c.tree.queues = {Q("team-a", ""), Q("team-b", "")};
  c.tree.queues[0].quotas["gpu/H100"] = {};  // shares are measured on a named resource
  auto qm = Make(cs.get(), c);
  ASSERT_TRUE(qm->Submit(GangJob("a", "team-a", 1, 8), {}, kT0).ok());
  absl::Time now = kT0;
  for (int m = 0; m <= 120; ++m, now += absl::Minutes(1)) qm->Cycle(now);
  const QueueStatus a0 = *qm->Queue("team-a");
  const QueueStatus b0 = *qm->Queue("team-b");
  ASSERT_GT(a0.decayed_usage, 0.4);  // half the fleet for four half-lives
  ASSERT_GT(b0.credit, 0);
  QueueManagerConfig more = c;
  more.tree.queues.push_back(Q("team-c", ""));
  ASSERT_TRUE(qm->Reconfigure(more).ok());
  EXPECT_DOUBLE_EQ(qm->Queue("team-a")->decayed_usage, a0.decayed_usage);
  // Entitlements drop from 1/2 to 1/3, and credit is clamped to the new cap.
  const double cap = (1.0 / 3) * 1800 / std::log(2.0);
  EXPECT_DOUBLE_EQ(qm->Queue("team-b")->credit, std::min(b0.credit, cap));
  EXPECT_EQ(qm->Queue("team-c")->decayed_usage, 0);
  // The next Advance continues from the last one (no gap, no reset).
  qm->Cycle(now);
  EXPECT_NEAR(qm->Queue("team-a")->decayed_usage, a0.decayed_usage, 0.02);
  // Seeding from a stored status, e.g. after a restart.
  ASSERT_TRUE(qm->SetFairShareHistory("team-c", 0.25, 1e9).ok());
  EXPECT_EQ(qm->Queue("team-c")->decayed_usage, 0.25);
  EXPECT_DOUBLE_EQ(qm->Queue("team-c")->credit, cap);
  EXPECT_FALSE(qm->SetFairShareHistory("team-z", 0, 0).ok());
}

// Without quotas, and with a queue whose guarantee is the whole fleet: then a
// job the fleet has no room for fails the root's capacity check, not its
// queue's, and it must still get the reservation (a full fleet is exactly
// when backfill has to protect the big gang in front).
class Backfill : public ::testing::TestWithParam<bool> {};

TEST_P(Backfill, SmallJobsRunOnlyIfTheyDoNotDelayTheReservation) {
  auto cs = SmallCluster(2, 8);
  QueueManagerConfig c;
  c.tree.queues = {GetParam() ? Q("q", "", 8) : Q("q", "")};
  auto qm = Make(cs.get(), c);
  ASSERT_TRUE(
      qm->Submit(GangJob("long", "q", 1, 8), {.expected_runtime = absl::Hours(10)}, kT0).ok());
  ASSERT_TRUE(
      qm->Submit(GangJob("short", "q", 1, 4), {.expected_runtime = absl::Hours(1)}, kT0).ok());
  qm->Cycle(kT0);
  // head needs both nodes: earliest when "short" ends... and "long" ends at +10h.
  ASSERT_TRUE(qm->Submit(GangJob("head", "q", 2, 8), {}, kT0 + absl::Seconds(1)).ok());
  ASSERT_TRUE(qm->Submit(GangJob("fits-before", "q", 1, 2), {.expected_runtime = absl::Minutes(30)},
                         kT0 + absl::Seconds(2))
                  .ok());
  ASSERT_TRUE(qm->Submit(GangJob("too-long", "q", 1, 2), {.expected_runtime = absl::Hours(20)},
                         kT0 + absl::Seconds(3))
                  .ok());
  qm->Cycle(kT0 + absl::Seconds(5));
  ASSERT_EQ(qm->reservations().size(), 1u);
  EXPECT_EQ(qm->reservations()[0].job, "default/head");
  EXPECT_EQ(qm->reservations()[0].start, kT0 + absl::Hours(10));
  EXPECT_EQ(qm->Phase("default/fits-before"), JobPhase::kRunning);
  EXPECT_EQ(qm->Phase("default/too-long"), JobPhase::kPending);
  // Without quotas the reserved nodes stop it; with them, first the fleet's
  // capacity the reservation holds (it would take 2 of the 16 GPUs "head" needs).
  EXPECT_NE(qm->WaitingReason("default/too-long")
                .find(GetParam() ? "left to borrow in the fleet" : "reserved for a waiting job"),
            std::string::npos)
      << qm->WaitingReason("default/too-long");
  EXPECT_EQ(qm->WaitingReasonClass("default/too-long"), WaitReason::kNoRoom);
  EXPECT_EQ(qm->WaitingReasonClass("default/head"), WaitReason::kReserved);
}

INSTANTIATE_TEST_SUITE_P(QuotaOnTheFleet, Backfill, ::testing::Bool());

// Conservative backfill: with two reservations, a long job that keeps off the
// head's node still may not take the room the second waiting job drains for;
// with one (EASY) it may, and so delays the second job.
TEST(ConservativeBackfill, TheSecondWaitingJobKeepsItsRoom) {
  for (int32_t reservations : {1, 2}) {
    SCOPED_TRACE(absl::StrCat("reservations ", reservations));
    auto cs = SmallCluster(3, 8);
    QueueManagerConfig c;
    c.tree.queues = {Q("q", "")};
    c.reservations = reservations;
    auto qm = Make(cs.get(), c);
    // Node A: 8 GPUs to +2h; node B: 8 GPUs to +6h; node C: 4 of 8 GPUs to +2.5h.
    const std::pair<int, absl::Duration> runs[] = {
        {8, absl::Hours(2)}, {8, absl::Hours(6)}, {4, absl::Minutes(150)}};
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(qm->Submit(GangJob(absl::StrCat("run", i), "q", 1, runs[i].first),
                             {.expected_runtime = runs[i].second}, kT0 + absl::Seconds(i))
                      .ok());
    }
    const absl::Time t0 = kT0 + absl::Seconds(3);  // they start here
    qm->Cycle(t0);
    for (int i = 0; i < 3; ++i) {
      ASSERT_EQ(qm->Phase(absl::StrCat("default/run", i)), JobPhase::kRunning);
    }
    const absl::Time t1 = kT0 + absl::Seconds(10);
    for (const char* name : {"first", "second"}) {
      ASSERT_TRUE(
          qm->Submit(GangJob(name, "q", 1, 8), {.expected_runtime = absl::Hours(5)}, t1).ok());
    }
    ASSERT_TRUE(qm->Submit(GangJob("long", "q", 1, 4), {.expected_runtime = absl::Hours(10)},
                           t1 + absl::Seconds(1))
                    .ok());
    qm->Cycle(t1 + absl::Seconds(2));
    ASSERT_GE(qm->reservations().size(), 1u);
    EXPECT_EQ(qm->reservations()[0].job, "default/first");
    EXPECT_EQ(qm->reservations()[0].start, t0 + absl::Hours(2));  // node A
    if (reservations == 1) {
      // EASY: "long" keeps off node A only and takes node C's free half.
      EXPECT_EQ(qm->reservations().size(), 1u);
      EXPECT_EQ(qm->Phase("default/long"), JobPhase::kRunning);
    } else {
      // "second" holds node C from +2.5h: "long" (to +10h) may not start there.
      ASSERT_EQ(qm->reservations().size(), 2u);
      EXPECT_EQ(qm->reservations()[1].job, "default/second");
      EXPECT_EQ(qm->reservations()[1].start, t0 + absl::Minutes(150));
      EXPECT_EQ(qm->Phase("default/long"), JobPhase::kPending);
      EXPECT_NE(qm->WaitingReason("default/long").find("reserved for a waiting job"),
                std::string::npos)
          << qm->WaitingReason("default/long");
      EXPECT_EQ(qm->ReservationOf("default/second"), &qm->reservations()[1]);
      EXPECT_EQ(qm->WaitingReasonClass("default/second"), WaitReason::kReserved);
    }
    EXPECT_EQ(qm->ReservationOf("default/long"), nullptr);
  }
}

// A job without an estimate gets the learned one (backfill.learnRuntimes),
// and one that outruns it is expected to run as long again.
TEST(Backfill, RuntimesLearnedFromCompletedJobsAndOverrunsExtended) {
  for (bool learn : {false, true}) {
    SCOPED_TRACE(learn ? "learned" : "default runtime");
    auto cs = SmallCluster(1, 8);
    QueueManagerConfig c;
    c.tree.queues = {Q("q", "")};
    c.learn_runtimes = learn;
    auto qm = Make(cs.get(), c);
    absl::Time t = kT0;
    for (int i = 0; i < 5; ++i) {
      const std::string name = absl::StrCat("done", i);
      ASSERT_TRUE(qm->Submit(GangJob(name, "q", 1, 8), {}, t).ok());
      qm->Cycle(t);
      ASSERT_EQ(qm->Phase("default/" + name), JobPhase::kRunning);
      t += absl::Hours(2);
      ASSERT_TRUE(qm->Completed("default/" + name, t).ok());
    }
    ASSERT_TRUE(qm->Submit(GangJob("run", "q", 1, 8), {}, t).ok());
    qm->Cycle(t);
    ASSERT_EQ(qm->Phase("default/run"), JobPhase::kRunning);
    ASSERT_TRUE(qm->Submit(GangJob("head", "q", 1, 8), {}, t + absl::Seconds(1)).ok());
    qm->Cycle(t + absl::Seconds(1));
    ASSERT_EQ(qm->reservations().size(), 1u);
    // Five 2 h runs: the 0.8 quantile, times the 1.2 margin.
    const absl::Duration expected = learn ? absl::Minutes(144) : c.default_runtime;
    EXPECT_EQ(qm->reservations()[0].start, t + expected);
    // Past its expected end it still holds the node: expected as long again.
    const absl::Time late = t + expected + absl::Minutes(30);
    qm->Cycle(late);
    ASSERT_EQ(qm->reservations().size(), 1u);
    EXPECT_EQ(qm->reservations()[0].start, late + expected);
  }
}

// A gang a failure stopped (SubmitOptions::restart) goes before older jobs of
// its queue and priority; a new job does not. Queues' guarantees still come
// first.
TEST(Ordering, GangRestartingAfterAFailureGoesFirst) {
  auto cs = SmallCluster(1, 8);
  QueueManagerConfig c;
  c.tree.queues = {Q("team", "", 8), Q("other", "", 0)};
  auto qm = Make(cs.get(), c);
  ASSERT_TRUE(qm->Submit(GangJob("run", "team", 1, 8), {}, kT0).ok());
  qm->Cycle(kT0);
  ASSERT_EQ(qm->Phase("default/run"), JobPhase::kRunning);
  ASSERT_TRUE(qm->Submit(GangJob("old", "team", 1, 8), {}, kT0 + absl::Seconds(1)).ok());
  ASSERT_TRUE(
      qm->Submit(GangJob("restarted", "team", 1, 8), {.restart = true}, kT0 + absl::Seconds(2))
          .ok());
  ASSERT_TRUE(qm->Finish("default/run", kT0 + absl::Seconds(3)).ok());
  qm->Cycle(kT0 + absl::Seconds(3));
  EXPECT_EQ(qm->Phase("default/restarted"), JobPhase::kRunning);
  EXPECT_EQ(qm->Phase("default/old"), JobPhase::kPending);

  // Without the flag the older job goes first (creation time).
  ASSERT_TRUE(qm->Finish("default/restarted", kT0 + absl::Seconds(4)).ok());
  ASSERT_TRUE(qm->Submit(GangJob("later", "team", 1, 8), {}, kT0 + absl::Seconds(4)).ok());
  qm->Cycle(kT0 + absl::Seconds(4));
  EXPECT_EQ(qm->Phase("default/old"), JobPhase::kRunning);
  EXPECT_EQ(qm->Phase("default/later"), JobPhase::kPending);

  // A restarting gang of a queue without a guarantee waits behind a job its
  // queue's guarantee covers.
  ASSERT_TRUE(
      qm->Submit(GangJob("borrower", "other", 1, 8), {.restart = true}, kT0 + absl::Seconds(5))
          .ok());
  ASSERT_TRUE(qm->Finish("default/old", kT0 + absl::Seconds(6)).ok());
  qm->Cycle(kT0 + absl::Seconds(6));
  EXPECT_EQ(qm->Phase("default/later"), JobPhase::kRunning);
  EXPECT_EQ(qm->Phase("default/borrower"), JobPhase::kPending);
}

}  // namespace
}  // namespace tessera::sched
