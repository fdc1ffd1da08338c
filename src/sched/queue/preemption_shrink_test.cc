// Preemption that shrinks elastic victims: only the surplus members the
// preemptor needs (never below minMember), preferred over a whole eviction
// at equal priority, whole eviction when a shrink cannot make room, and the
// queues' charges and reclaim view follow the members actually dropped.
#include <gtest/gtest.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "sched/plugins/preemption.h"
#include "sched/queue/queue_manager.h"
#include "sched/queue/queue_test_util.h"

namespace tessera::sched {
namespace {

using testing::GangJob;
using testing::kT0;
using testing::Q;
using testing::SmallCluster;

const absl::Time kLater = kT0 + absl::Hours(1);  // past every victim's minRuntime

class ShrinkTest : public ::testing::Test {
 protected:
  void Build(int nodes, std::vector<QueueSpec> queues = {Q("q", "", 16)},
             PreemptionPolicy policy = {}) {
    cs_ = SmallCluster(nodes, 8);
    QueueManagerConfig c;
    c.tree.queues = std::move(queues);
    c.preemption = policy;
    auto m = QueueManager::Create(std::move(c), cs_.get());
    ASSERT_TRUE(m.ok()) << m.status();
    qm_ = *std::move(m);
  }

  // Submits and runs `name`: `members` x `gpus`, elastic down to `min` (0: rigid).
  void Run(const std::string& name, int members, int gpus, int min, int32_t prio,
           const std::string& queue = "q") {
    model::Job j = GangJob(name, queue, members, gpus, prio);
    if (min > 0) {
      j.gang.min_member = min;
      j.gang.elastic = true;
    }
    ASSERT_TRUE(qm_->Submit(j, {}, kT0).ok());
    qm_->Cycle(kT0);
    ASSERT_EQ(qm_->Phase(Key(name)), JobPhase::kRunning) << qm_->WaitingReason(Key(name));
    ASSERT_EQ(cs_->FindPlacement(Key(name))->members.size(), static_cast<size_t>(members));
  }

  static std::string Key(const std::string& name) { return absl::StrCat("default/", name); }

  // Submits preemptor "p" (`members` x `gpus`, production-like priority) at
  // kLater and runs a cycle; returns its checkpoint signals.
  std::vector<QueueEvent> Preempt(int members, int gpus) {
    EXPECT_TRUE(qm_->Submit(GangJob("p", "q", members, gpus, 1000), {}, kLater).ok());
    return Of(qm_->Cycle(kLater), QueueEvent::Kind::kCheckpointSignal);
  }

  // The events of one cycle of `kind`, by job.
  static std::vector<QueueEvent> Of(const CycleReport& r, QueueEvent::Kind kind) {
    std::vector<QueueEvent> out;
    for (const QueueEvent& e : r.events) {
      if (e.kind == kind) out.push_back(e);
    }
    return out;
  }

  size_t Members(const std::string& name) {
    const Placement* p = cs_->FindPlacement(Key(name));
    return p == nullptr ? 0 : p->members.size();
  }

  int64_t GpuUsage(const std::string& queue) { return testing::GpuUsage(qm_->tree(), queue); }

  // Every GPU held once (testing::BoundMilli), and the queue layer's running
  // set agrees with the cluster's bindings.
  int64_t BoundMilli() {
    for (const auto& [key, p] : cs_->bound()) {
      const RunningJob* rj = qm_->running().Find(key);
      EXPECT_NE(rj, nullptr) << key;
      if (rj != nullptr) {
        EXPECT_EQ(rj->members.size(), p.members.size()) << key;
      }
    }
    return testing::BoundMilli(*cs_);
  }

  // el1 (priority 100) and el2 (50), 2 x 4 GPUs each, minMember 1: each
  // holds 4 GPUs on node 0 and on node 1 (bound here, then restored).
  void RestoreSplitPair() {
    for (int v = 0; v < 2; ++v) {
      model::Job j = GangJob(absl::StrCat("el", v + 1), "q", 2, 4, v == 0 ? 100 : 50);
      j.gang.min_member = 1;
      j.gang.elastic = true;
      Placement p;
      p.job_key = j.key();
      for (int m = 0; m < 2; ++m) {
        MemberPlacement mp{
            .group = 0, .member = m, .node = m, .cpu_milli = 1000, .memory_mib = 1024};
        for (int g = 0; g < 4; ++g) mp.gpus.push_back({static_cast<int8_t>(4 * v + g), 1000});
        ASSERT_TRUE(cs_->Assume(mp).ok());
        p.members.push_back(mp);
      }
      ASSERT_TRUE(cs_->Bind(p).ok());
      ASSERT_TRUE(qm_->Restore(j, p, {}, kT0).ok());
    }
  }

  std::unique_ptr<ClusterState> cs_;
  std::unique_ptr<QueueManager> qm_;
};

TEST_F(ShrinkTest, RestoredShrinkInFlightCompletesAsDecided) {
  // A control plane decides a shrink, then restarts before the deadline: the
  // new one restores the bindings, the preemptor as pending and the shrink in
  // flight (RestoreVictim); at the deadline the same members go and the
  // preemptor runs, with no new search and no second signal.
  Build(2);
  Run("el", 4, 4, 2, 100);
  std::vector<QueueEvent> sig = Preempt(1, 8);
  ASSERT_EQ(sig.size(), 1u);
  ASSERT_EQ(sig[0].dropped.size(), 2u);
  const Placement held = *cs_->FindPlacement(Key("el"));
  std::vector<MemberPlacement> dropping(2);
  for (int i = 0; i < 2; ++i) {
    dropping[i].group = sig[0].dropped[i].group;
    dropping[i].member = sig[0].dropped[i].member;
  }
  const absl::Time deadline = sig[0].deadline;

  qm_.reset();  // the restarted control plane
  Build(2);
  for (const MemberPlacement& m : held.members) ASSERT_TRUE(cs_->Assume(m).ok());
  ASSERT_TRUE(cs_->Bind(held).ok());
  model::Job el = GangJob("el", "q", 4, 4, 100);
  el.gang.min_member = 2;
  el.gang.elastic = true;
  ASSERT_TRUE(qm_->Restore(el, held, {.started = kT0}, kLater + absl::Seconds(5)).ok());
  ASSERT_TRUE(qm_->Submit(GangJob("p", "q", 1, 8, 1000), {}, kLater).ok());
  // Refused: a member it does not hold, or fewer than minMember left.
  std::vector<MemberPlacement> unknown(1);
  unknown[0].member = 9;
  EXPECT_TRUE(absl::IsInvalidArgument(qm_->RestoreVictim(Key("el"), Key("p"), deadline, unknown)));
  std::vector<MemberPlacement> too_many(3);
  for (int i = 0; i < 3; ++i) too_many[i].member = i;
  EXPECT_TRUE(absl::IsInvalidArgument(qm_->RestoreVictim(Key("el"), Key("p"), deadline, too_many)));
  EXPECT_TRUE(
      absl::IsFailedPrecondition(qm_->RestoreVictim(Key("nobody"), Key("p"), deadline, dropping)));
  // A preemptor that is gone spares its victim, as a cancelled one does.
  EXPECT_TRUE(
      absl::IsFailedPrecondition(qm_->RestoreVictim(Key("el"), Key("gone"), deadline, dropping)));
  EXPECT_EQ(qm_->Phase(Key("el")), JobPhase::kRunning);
  ASSERT_TRUE(qm_->RestoreVictim(Key("el"), Key("p"), deadline, dropping).ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(
      qm_->RestoreVictim(Key("el"), Key("p"), deadline, dropping)));  // already terminating
  EXPECT_EQ(qm_->Phase(Key("el")), JobPhase::kTerminating);
  EXPECT_EQ(qm_->Phase(Key("p")), JobPhase::kNominated);
  // Before the deadline nothing moves and nobody else is signalled.
  CycleReport before = qm_->Cycle(kLater + absl::Seconds(10));
  EXPECT_TRUE(Of(before, QueueEvent::Kind::kCheckpointSignal).empty());
  EXPECT_EQ(Members("el"), 4u);
  CycleReport at = qm_->Cycle(deadline);
  std::vector<QueueEvent> shrunk = Of(at, QueueEvent::Kind::kShrunk);
  ASSERT_EQ(shrunk.size(), 1u);
  EXPECT_EQ(shrunk[0].other, Key("p"));
  EXPECT_EQ(qm_->Phase(Key("p")), JobPhase::kRunning);
  EXPECT_EQ(Members("el"), 2u);
  for (const MemberPlacement& kept : cs_->FindPlacement(Key("el"))->members) {
    for (const MemberPlacement& d : dropping) EXPECT_NE(kept.member, d.member);
  }
  EXPECT_EQ(BoundMilli(), 16000);
}

TEST_F(ShrinkTest, PreemptorGetsExactlyTheSurplusMembersItNeeds) {
  Build(2);
  Run("el", 4, 4, 2, 100);  // two members on each node
  std::vector<QueueEvent> sig = Preempt(1, 8);
  ASSERT_EQ(sig.size(), 1u);
  EXPECT_EQ(sig[0].job, Key("el"));
  EXPECT_EQ(sig[0].other, Key("p"));
  // An 8-GPU member needs one whole node: the two members there, no more.
  ASSERT_EQ(sig[0].dropped.size(), 2u);
  EXPECT_EQ(sig[0].dropped[0].node, sig[0].dropped[1].node);
  const NodeId freed = sig[0].dropped[0].node;
  EXPECT_TRUE(qm_->last_plan().shrink());
  EXPECT_EQ(qm_->last_plan().evicted_milli, 8000);
  EXPECT_EQ(qm_->Phase(Key("el")), JobPhase::kTerminating);
  EXPECT_EQ(qm_->Phase(Key("p")), JobPhase::kNominated);
  EXPECT_NE(qm_->WaitingReason(Key("p")).find("to checkpoint and shrink"), std::string::npos)
      << qm_->WaitingReason(Key("p"));
  EXPECT_EQ(Members("el"), 4u);  // nothing moves before the deadline
  EXPECT_EQ(BoundMilli(), 16000);

  // At the deadline: the victim shrinks (not killed) and the preemptor runs there.
  CycleReport r = qm_->Cycle(kLater + absl::Seconds(30));
  EXPECT_TRUE(Of(r, QueueEvent::Kind::kKilled).empty());
  std::vector<QueueEvent> shrunk = Of(r, QueueEvent::Kind::kShrunk);
  ASSERT_EQ(shrunk.size(), 1u);
  EXPECT_EQ(shrunk[0].job, Key("el"));
  EXPECT_EQ(shrunk[0].other, Key("p"));
  EXPECT_EQ(shrunk[0].dropped.size(), 2u);
  EXPECT_EQ(qm_->Phase(Key("el")), JobPhase::kRunning);
  EXPECT_EQ(Members("el"), 2u);
  for (const MemberPlacement& m : cs_->FindPlacement(Key("el"))->members) EXPECT_NE(m.node, freed);
  ASSERT_EQ(qm_->Phase(Key("p")), JobPhase::kRunning);
  EXPECT_EQ(cs_->FindPlacement(Key("p"))->members[0].node, freed);
  EXPECT_EQ(qm_->running().Find(Key("el"))->gpu_milli, 8000);
  EXPECT_EQ(qm_->running().Find(Key("el"))->times_preempted, 1);
  EXPECT_EQ(GpuUsage("q"), 16000);
  EXPECT_EQ(BoundMilli(), 16000);
}

TEST_F(ShrinkTest, OneMemberWhenOneIsEnoughAndTheVictimMayExitEarly) {
  Build(2);
  Run("el", 4, 4, 2, 100);
  std::vector<QueueEvent> sig = Preempt(1, 4);
  ASSERT_EQ(sig.size(), 1u);
  ASSERT_EQ(sig[0].dropped.size(), 1u);
  // The victim checkpointed and exited after 5 s: the next cycle shrinks it.
  ASSERT_TRUE(qm_->VictimExited(Key("el"), kLater + absl::Seconds(5)).ok());
  CycleReport r = qm_->Cycle(kLater + absl::Seconds(5));
  ASSERT_EQ(Of(r, QueueEvent::Kind::kShrunk).size(), 1u);
  EXPECT_EQ(Members("el"), 3u);
  EXPECT_EQ(qm_->Phase(Key("p")), JobPhase::kRunning);
  EXPECT_EQ(BoundMilli(), 16000);
}

TEST_F(ShrinkTest, WholeEvictionWhenTheSurplusCannotMakeRoom) {
  Build(2);
  Run("el", 4, 4, 3, 100);  // one member of surplus: 4 GPUs, not a node
  std::vector<QueueEvent> sig = Preempt(1, 8);
  ASSERT_EQ(sig.size(), 1u);
  EXPECT_EQ(sig[0].job, Key("el"));
  EXPECT_TRUE(sig[0].dropped.empty());  // evicted whole
  EXPECT_FALSE(qm_->last_plan().shrink());
  CycleReport r = qm_->Cycle(kLater + absl::Seconds(30));
  EXPECT_TRUE(Of(r, QueueEvent::Kind::kShrunk).empty());
  ASSERT_EQ(Of(r, QueueEvent::Kind::kKilled).size(), 1u);
  EXPECT_EQ(qm_->Phase(Key("el")), JobPhase::kPending);
  EXPECT_EQ(qm_->Phase(Key("p")), JobPhase::kRunning);
  EXPECT_EQ(BoundMilli(), 8000);
}

TEST_F(ShrinkTest, ShrinkBeatsAnEvictionAtEqualPriorityButNotALowerOne) {
  for (int32_t rigid_prio : {100, 50}) {
    SCOPED_TRACE(rigid_prio);
    Build(2);
    Run("rigid", 1, 8, 0, rigid_prio);  // one whole node
    Run("el", 2, 4, 1, 100);            // the other node
    ASSERT_TRUE(qm_->Submit(GangJob("p", "q", 1, 4, 1000), {}, kLater).ok());
    CycleReport r = qm_->Cycle(kLater);
    std::vector<QueueEvent> sig = Of(r, QueueEvent::Kind::kCheckpointSignal);
    ASSERT_EQ(sig.size(), 1u);
    if (rigid_prio == 100) {
      EXPECT_EQ(sig[0].job, Key("el"));  // a shrink costs less than an eviction
      EXPECT_EQ(sig[0].dropped.size(), 1u);
    } else {
      EXPECT_EQ(sig[0].job, Key("rigid"));  // priority first
      EXPECT_TRUE(sig[0].dropped.empty());
    }
    qm_->Cycle(kLater + absl::Seconds(30));
    EXPECT_EQ(qm_->Phase(Key("p")), JobPhase::kRunning);
    EXPECT_GE(Members("el"), 1u);
    BoundMilli();
  }
}

TEST_F(ShrinkTest, ReclaimCountsOnlyTheDroppedMembersAsLeaving) {
  // Queue b (guaranteed 8) runs two elastic jobs on all 16 GPUs, borrowing 8
  // of a's guarantee. a asks for two 4-GPU jobs in one cycle: each shrinks
  // one victim by one member. Counting a shrunk victim's whole usage as
  // leaving b would show b within its guarantee after the first plan and
  // refuse the second reclaim.
  Build(2, {Q("a", "", 8), Q("b", "", 8)});
  Run("el1", 2, 4, 1, 0, "b");
  Run("el2", 2, 4, 1, 0, "b");
  ASSERT_EQ(GpuUsage("b"), 16000);
  ASSERT_TRUE(qm_->Submit(GangJob("p1", "a", 1, 4), {}, kLater).ok());
  ASSERT_TRUE(qm_->Submit(GangJob("p2", "a", 1, 4), {}, kLater).ok());
  CycleReport r = qm_->Cycle(kLater);
  EXPECT_EQ(r.preemptions, 2);
  std::vector<QueueEvent> sig = Of(r, QueueEvent::Kind::kCheckpointSignal);
  ASSERT_EQ(sig.size(), 2u);
  EXPECT_NE(sig[0].job, sig[1].job);
  for (const QueueEvent& e : sig) EXPECT_EQ(e.dropped.size(), 1u) << e.job;
  // A third job of a would exceed a's guarantee: no reclaim for it.
  ASSERT_TRUE(qm_->Submit(GangJob("p3", "a", 1, 4), {}, kLater + absl::Seconds(1)).ok());
  r = qm_->Cycle(kLater + absl::Seconds(1));
  EXPECT_TRUE(Of(r, QueueEvent::Kind::kCheckpointSignal).empty());
  r = qm_->Cycle(kLater + absl::Seconds(30));
  EXPECT_EQ(Of(r, QueueEvent::Kind::kShrunk).size(), 2u);
  EXPECT_EQ(qm_->Phase(Key("p1")), JobPhase::kRunning);
  EXPECT_EQ(qm_->Phase(Key("p2")), JobPhase::kRunning);
  EXPECT_EQ(Members("el1"), 1u);
  EXPECT_EQ(Members("el2"), 1u);
  EXPECT_EQ(GpuUsage("a"), 8000);
  EXPECT_EQ(GpuUsage("b"), 8000);
  EXPECT_TRUE(qm_->tree().CheckInvariants().ok());
  EXPECT_EQ(BoundMilli(), 16000);
}

TEST_F(ShrinkTest, WithoutAGracePeriodTheShrinkAndTheStartShareOneCycle) {
  PreemptionPolicy policy;
  policy.grace_period = absl::ZeroDuration();
  Build(2, {Q("q", "", 16)}, policy);
  Run("el", 4, 4, 2, 100);
  ASSERT_TRUE(qm_->Submit(GangJob("p", "q", 1, 8, 1000), {}, kLater).ok());
  CycleReport r = qm_->Cycle(kLater);
  ASSERT_EQ(r.events.size(), 4u);  // signal, nominated, shrunk, started: in that order
  EXPECT_EQ(r.events[0].kind, QueueEvent::Kind::kCheckpointSignal);
  EXPECT_EQ(r.events[2].kind, QueueEvent::Kind::kShrunk);
  EXPECT_EQ(r.events[3].kind, QueueEvent::Kind::kStarted);
  EXPECT_EQ(r.events[3].job, Key("p"));
  EXPECT_EQ(Members("el"), 2u);
  EXPECT_EQ(BoundMilli(), 16000);
}

TEST_F(ShrinkTest, TwoVictimsEachGiveUpTheirMemberOnTheNodeThePreemptorNeeds) {
  Build(2);
  RestoreSplitPair();
  ASSERT_EQ(BoundMilli(), 16000);
  std::vector<QueueEvent> sig = Preempt(1, 8);
  ASSERT_EQ(sig.size(), 2u);
  NodeId node = -1;
  for (const QueueEvent& e : sig) {
    ASSERT_EQ(e.dropped.size(), 1u) << e.job;
    if (node < 0) node = e.dropped[0].node;
    EXPECT_EQ(e.dropped[0].node, node) << e.job;  // both on the one node p needs
  }
  CycleReport r = qm_->Cycle(kLater + absl::Seconds(30));
  EXPECT_EQ(Of(r, QueueEvent::Kind::kShrunk).size(), 2u);
  ASSERT_EQ(qm_->Phase(Key("p")), JobPhase::kRunning);
  EXPECT_EQ(cs_->FindPlacement(Key("p"))->members[0].node, node);
  EXPECT_EQ(Members("el1"), 1u);
  EXPECT_EQ(Members("el2"), 1u);
  EXPECT_EQ(BoundMilli(), 16000);
}

TEST_F(ShrinkTest, OneEvictionBeatsShrinkingTwoJobsOfTheSamePriority) {
  Build(3);
  RestoreSplitPair();          // nodes 0 and 1
  Run("rigid", 1, 8, 0, 100);  // node 2, the priority of el1
  std::vector<QueueEvent> sig = Preempt(1, 8);
  ASSERT_EQ(sig.size(), 1u);
  EXPECT_EQ(sig[0].job, Key("rigid"));  // one job touched, not two
  EXPECT_TRUE(sig[0].dropped.empty());
}

TEST_F(ShrinkTest, VictimWhoseKeptMemberLostItsGpuIsEvictedWhole) {
  Build(2);
  Run("el", 4, 4, 2, 100);
  std::vector<QueueEvent> sig = Preempt(1, 8);
  ASSERT_EQ(sig.size(), 1u);
  ASSERT_EQ(sig[0].dropped.size(), 2u);
  // A GPU of a member the shrink would keep turns unhealthy meanwhile.
  for (const MemberPlacement& m : cs_->FindPlacement(Key("el"))->members) {
    if (m.node == sig[0].dropped[0].node) continue;
    std::vector<std::string> affected;
    ASSERT_TRUE(cs_->SetGpuHealth(m.node, m.gpus[0].gpu, false, &affected).ok());
    break;
  }
  CycleReport r = qm_->Cycle(kLater + absl::Seconds(30));
  EXPECT_TRUE(Of(r, QueueEvent::Kind::kShrunk).empty());
  ASSERT_EQ(Of(r, QueueEvent::Kind::kKilled).size(), 1u);
  EXPECT_EQ(qm_->Phase(Key("el")), JobPhase::kPending);
  EXPECT_EQ(qm_->Phase(Key("p")), JobPhase::kRunning);
  BoundMilli();
}

TEST_F(ShrinkTest, CancelledPreemptorSparesTheVictimWhole) {
  Build(2);
  Run("el", 4, 4, 2, 100);
  ASSERT_TRUE(qm_->Submit(GangJob("p", "q", 1, 8, 1000), {}, kLater).ok());
  qm_->Cycle(kLater);
  ASSERT_EQ(qm_->Phase(Key("el")), JobPhase::kTerminating);
  ASSERT_TRUE(qm_->running().Find(Key("el"))->shrinking());
  ASSERT_TRUE(qm_->Finish(Key("p"), kLater + absl::Seconds(1)).ok());
  CycleReport r = qm_->Cycle(kLater + absl::Seconds(30));
  EXPECT_TRUE(Of(r, QueueEvent::Kind::kShrunk).empty());
  EXPECT_EQ(qm_->Phase(Key("el")), JobPhase::kRunning);
  EXPECT_FALSE(qm_->running().Find(Key("el"))->shrinking());
  EXPECT_EQ(Members("el"), 4u);
  EXPECT_EQ(BoundMilli(), 16000);
}

}  // namespace
}  // namespace tessera::sched
