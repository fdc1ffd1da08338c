// QueueManager::Resize and Grow: an elastic job's placement, cluster binding
// and queue charge move together, and growing never takes room pending work
// has a claim on.
#include <gtest/gtest.h>

#include <set>
#include <utility>

#include "sched/queue/queue_manager.h"
#include "sched/queue/queue_test_util.h"

namespace tessera::sched {
namespace {

using testing::GangJob;
using testing::kT0;
using testing::Q;
using testing::SmallCluster;

const char kKey[] = "default/el";

class ElasticQueueTest : public ::testing::Test {
 protected:
  void SetUp() override { Build(true, 32); }

  void Build(bool backfill, int64_t quota_gpus) {
    cs_ = SmallCluster(2, 8);
    QueueManagerConfig c;
    c.backfill = backfill;
    c.tree.queues = {Q("team", "", quota_gpus, 0)};
    auto m = QueueManager::Create(std::move(c), cs_.get());
    ASSERT_TRUE(m.ok()) << m.status();
    qm_ = *std::move(m);
  }

  // An elastic job: 4 members of 4 GPUs, at least 2; placed on both nodes.
  void StartElastic() {
    model::Job j = GangJob("el", "team", 4, 4);
    j.gang.min_member = 2;
    j.gang.elastic = true;
    ASSERT_TRUE(qm_->Submit(j, {}, kT0).ok());
    qm_->Cycle(kT0);
    ASSERT_EQ(qm_->Phase(kKey), JobPhase::kRunning);
    ASSERT_EQ(cs_->FindPlacement(kKey)->members.size(), 4u);
  }

  int64_t GpuUsage() { return testing::GpuUsage(qm_->tree(), "team"); }

  // The placement without the members on `node`.
  Placement Without(NodeId node) {
    Placement p = *cs_->FindPlacement(kKey);
    std::erase_if(p.members, [&](const MemberPlacement& m) { return m.node == node; });
    return p;
  }

  int64_t BoundMilli() { return testing::BoundMilli(*cs_); }

  std::unique_ptr<ClusterState> cs_;
  std::unique_ptr<QueueManager> qm_;
};

TEST_F(ElasticQueueTest, ResizeShrinksTheChargeAndFreesOnlyTheDroppedGpus) {
  StartElastic();
  EXPECT_EQ(GpuUsage(), 16000);
  const NodeId lost = cs_->FindPlacement(kKey)->members.back().node;
  Placement kept = Without(lost);
  ASSERT_EQ(kept.members.size(), 2u);
  ASSERT_TRUE(qm_->Resize(kKey, kept, kT0 + absl::Seconds(10)).ok());
  EXPECT_EQ(GpuUsage(), 8000);  // the charge follows the held members
  EXPECT_EQ(BoundMilli(), 8000);
  const RunningJob* rj = qm_->running().Find(kKey);
  ASSERT_NE(rj, nullptr);
  EXPECT_EQ(rj->members.size(), 2u);
  EXPECT_EQ(rj->gpu_milli, 8000);
  EXPECT_TRUE(qm_->running().on_node(lost).empty());
  EXPECT_EQ(qm_->Phase(kKey), JobPhase::kRunning);
  // The freed GPUs go to the next job, and none is handed out twice.
  ASSERT_TRUE(qm_->Submit(GangJob("next", "team", 1, 8), {}, kT0).ok());
  qm_->Cycle(kT0 + absl::Seconds(20));
  EXPECT_EQ(qm_->Phase("default/next"), JobPhase::kRunning);
  EXPECT_EQ(cs_->FindPlacement("default/next")->members[0].node, lost);
  EXPECT_EQ(BoundMilli(), 16000);
  EXPECT_EQ(GpuUsage(), 16000);
  // Finishing the shrunk job returns exactly what it holds.
  ASSERT_TRUE(qm_->Finish(kKey, kT0 + absl::Seconds(30)).ok());
  EXPECT_EQ(GpuUsage(), 8000);
  EXPECT_EQ(BoundMilli(), 8000);
}

TEST_F(ElasticQueueTest, ElasticJobStartsWithWhatItsQuotaAdmits) {
  Build(true, 8);  // 16 GPUs in the fleet, 8 in the queue's quota
  model::Job gang = GangJob("gang", "team", 4, 4);
  gang.gang.min_member = 2;  // not elastic: admitted for all its members
  ASSERT_TRUE(qm_->Submit(gang, {}, kT0).ok());
  qm_->Cycle(kT0);
  EXPECT_EQ(qm_->Phase("default/gang"), JobPhase::kPending);
  EXPECT_NE(qm_->WaitingReason("default/gang").find("over quota"), std::string::npos);
  ASSERT_TRUE(qm_->Finish("default/gang", kT0).ok());
  model::Job el = GangJob("el", "team", 4, 4);
  el.gang.min_member = 2;
  el.gang.elastic = true;
  ASSERT_TRUE(qm_->Submit(el, {}, kT0).ok());
  qm_->Cycle(kT0 + absl::Seconds(1));
  ASSERT_EQ(qm_->Phase(kKey), JobPhase::kRunning);
  EXPECT_EQ(cs_->FindPlacement(kKey)->members.size(), 2u);  // the quota's 8 GPUs
  EXPECT_EQ(GpuUsage(), 8000);
  EXPECT_EQ(BoundMilli(), 8000);
  ASSERT_TRUE(qm_->tree().CheckInvariants().ok());
  // Growing needs quota too.
  QueueManager::GrowResult g = qm_->Grow(kKey, kT0 + absl::Seconds(2));
  EXPECT_FALSE(g.grown);
  EXPECT_NE(g.reason.find("quota"), std::string::npos) << g.reason;
}

TEST_F(ElasticQueueTest, ResizeRefusesBadPlacementsAndChangesNothing) {
  StartElastic();
  const Placement full = *cs_->FindPlacement(kKey);
  Placement p = Without(full.members.back().node);
  p.members.push_back(p.members[0]);  // a member twice
  EXPECT_TRUE(absl::IsInvalidArgument(qm_->Resize(kKey, p, kT0)));
  p = Without(full.members.back().node);
  p.members[0].member = 7;  // no such member
  EXPECT_TRUE(absl::IsInvalidArgument(qm_->Resize(kKey, p, kT0)));
  // A member moved onto GPUs another member holds: Assume fails.
  p = full;
  const int32_t freed = p.members[0].member;
  p.members.erase(p.members.begin());
  MemberPlacement clash = p.members[0];
  clash.member = freed;
  p.members.push_back(clash);
  EXPECT_FALSE(qm_->Resize(kKey, p, kT0).ok());
  EXPECT_TRUE(absl::IsNotFound(qm_->Resize("default/none", full, kT0)));
  EXPECT_EQ(cs_->FindPlacement(kKey)->members.size(), 4u);
  EXPECT_EQ(GpuUsage(), 16000);
  EXPECT_EQ(BoundMilli(), 16000);
}

TEST_F(ElasticQueueTest, GrowPlacesTheMissingMembersThroughTheScheduler) {
  StartElastic();
  const NodeId lost = cs_->FindPlacement(kKey)->members.back().node;
  std::set<int32_t> dropped;
  for (const MemberPlacement& m : cs_->FindPlacement(kKey)->members) {
    if (m.node == lost) dropped.insert(m.member);
  }
  ASSERT_TRUE(qm_->Resize(kKey, Without(lost), kT0).ok());
  qm_->Cycle(kT0 + absl::Seconds(1));
  QueueManager::GrowResult g = qm_->Grow(kKey, kT0 + absl::Seconds(1));
  ASSERT_TRUE(g.grown) << g.reason;
  EXPECT_EQ(g.added, 2);
  ASSERT_EQ(g.placement.members.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(g.placement.members[i].member, i);  // ordinals restored
  for (const MemberPlacement& m : g.placement.members) {
    if (dropped.contains(m.member)) {
      EXPECT_EQ(m.node, lost);
    }
  }
  EXPECT_EQ(cs_->FindPlacement(kKey)->members.size(), 4u);
  EXPECT_EQ(qm_->running().Find(kKey)->members.size(), 4u);
  EXPECT_EQ(GpuUsage(), 16000);
  EXPECT_EQ(BoundMilli(), 16000);
  g = qm_->Grow(kKey, kT0 + absl::Seconds(2));
  EXPECT_FALSE(g.grown);
  EXPECT_EQ(g.reason, "at its maximum");
}

TEST_F(ElasticQueueTest, GrowNeedsTheQueueQuota) {
  StartElastic();
  ASSERT_TRUE(qm_->Resize(kKey, Without(cs_->FindPlacement(kKey)->members.back().node), kT0).ok());
  // The queue's quota shrinks to what the job holds now.
  QueueManagerConfig c = qm_->config();
  c.tree.queues = {Q("team", "", 8, 0)};
  ASSERT_TRUE(qm_->Reconfigure(c).ok());
  EXPECT_EQ(GpuUsage(), 8000);
  QueueManager::GrowResult g = qm_->Grow(kKey, kT0 + absl::Seconds(1));
  EXPECT_FALSE(g.grown);
  EXPECT_NE(g.reason.find("quota"), std::string::npos) << g.reason;
  EXPECT_EQ(BoundMilli(), 8000);
}

TEST_F(ElasticQueueTest, GrowKeepsOffTheReservationOfAWaitingJob) {
  // Three nodes: the elastic job keeps one whole node, a small job takes half
  // of another, and a 2x6-GPU job the quota admits cannot be placed (12 GPUs
  // free, 4 + 8): it reserves nodes for its earliest start.
  cs_ = SmallCluster(3, 8);
  QueueManagerConfig c;
  c.tree.queues = {Q("team", "", 48, 0)};
  qm_ = *QueueManager::Create(std::move(c), cs_.get());
  StartElastic();
  const NodeId lost = cs_->FindPlacement(kKey)->members.back().node;
  ASSERT_TRUE(qm_->Resize(kKey, Without(lost), kT0).ok());
  ASSERT_TRUE(qm_->Submit(GangJob("small", "team", 1, 4), {}, kT0).ok());
  qm_->Cycle(kT0);
  ASSERT_EQ(qm_->Phase("default/small"), JobPhase::kRunning);
  ASSERT_TRUE(qm_->Submit(GangJob("big", "team", 2, 6), {}, kT0).ok());
  qm_->Cycle(kT0 + absl::Seconds(1));
  ASSERT_EQ(qm_->Phase("default/big"), JobPhase::kPending);
  ASSERT_FALSE(qm_->reservations().empty()) << qm_->WaitingReason("default/big");
  std::set<NodeId> reserved(qm_->reservations()[0].nodes.begin(),
                            qm_->reservations()[0].nodes.end());
  int free_reserved = 0;
  for (NodeId n : reserved) free_reserved += cs_->state(n).whole_free;
  ASSERT_GE(free_reserved, 4);  // room a grow could have taken
  const Placement before = *cs_->FindPlacement(kKey);
  QueueManager::GrowResult g = qm_->Grow(kKey, kT0 + absl::Seconds(1));
  for (const MemberPlacement& m : cs_->FindPlacement(kKey)->members) {
    bool held = false;
    for (const MemberPlacement& o : before.members) held |= o.member == m.member;
    if (!held) {
      EXPECT_FALSE(reserved.contains(m.node)) << "grew onto a reserved node";
    }
  }
  if (!g.grown) {
    EXPECT_NE(g.reason.find("reserved"), std::string::npos) << g.reason;
  }
  BoundMilli();
}

TEST_F(ElasticQueueTest, GrowWaitsWhileAPendingJobWaitsForRoom) {
  Build(/*backfill=*/false, 32);
  StartElastic();
  ASSERT_TRUE(qm_->Resize(kKey, Without(cs_->FindPlacement(kKey)->members.back().node), kT0).ok());
  ASSERT_TRUE(qm_->Submit(GangJob("big", "team", 2, 8), {}, kT0).ok());
  qm_->Cycle(kT0 + absl::Seconds(1));
  ASSERT_EQ(qm_->Phase("default/big"), JobPhase::kPending);
  QueueManager::GrowResult g = qm_->Grow(kKey, kT0 + absl::Seconds(1));
  EXPECT_FALSE(g.grown);
  EXPECT_EQ(g.reason, "pending job default/big waits for room");
  // Once the waiting job is gone, the job grows back.
  ASSERT_TRUE(qm_->Finish("default/big", kT0 + absl::Seconds(2)).ok());
  g = qm_->Grow(kKey, kT0 + absl::Seconds(2));
  EXPECT_TRUE(g.grown) << g.reason;
  EXPECT_EQ(BoundMilli(), 16000);
}

}  // namespace
}  // namespace tessera::sched
