// Equivalence classes of nodes and the runner's dedupe and tie-break modes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "sched/framework/cluster_state.h"
#include "sched/framework/scheduler.h"
#include "sched/test_util.h"

namespace tessera::sched {
namespace {

using testing::AddNodes;
using ::testing::HasSubstr;
using testing::MakeJob;

MemberPlacement On(NodeId node, int gpu, int milli) {
  MemberPlacement m;
  m.node = node;
  m.gpus.push_back(GpuGrant{static_cast<int8_t>(gpu), static_cast<int16_t>(milli)});
  m.cpu_milli = 1000;
  return m;
}

int32_t ClassSize(const ClusterState& cs, NodeId id) {
  return static_cast<int32_t>(cs.class_nodes(cs.node_class(id)).size());
}

TEST(EquivalenceTest, IdenticalNodesShareAClassUntilTheyDiffer) {
  ClusterState cs;
  AddNodes(&cs, {.nodes = 4, .gpus_per_node = 8});
  ASSERT_EQ(cs.num_live_classes(), 1);
  EXPECT_EQ(cs.class_info(cs.node_class(2)).size, 4);
  EXPECT_EQ(cs.class_info(cs.node_class(2)).min_id, 0);

  ASSERT_TRUE(cs.Assume(On(0, 0, 500)).ok());
  EXPECT_EQ(cs.num_live_classes(), 2);
  EXPECT_EQ(ClassSize(cs, 0), 1);
  EXPECT_EQ(ClassSize(cs, 1), 3);
  EXPECT_EQ(cs.class_info(cs.node_class(1)).min_id, 1);
  // The same share on another GPU of a symmetric (NVSwitch) node is the
  // same state.
  ASSERT_TRUE(cs.Assume(On(1, 5, 500)).ok());
  EXPECT_EQ(cs.node_class(0), cs.node_class(1));
  EXPECT_EQ(cs.num_live_classes(), 2);
  ASSERT_TRUE(cs.CheckConsistency().ok()) << cs.CheckConsistency();

  cs.Forget(On(0, 0, 500));
  cs.Forget(On(1, 5, 500));
  EXPECT_EQ(cs.num_live_classes(), 1);
  EXPECT_EQ(cs.class_info(cs.node_class(2)).size, 4);
  EXPECT_EQ(cs.class_info(cs.node_class(2)).min_id, 0);
  ASSERT_TRUE(cs.CheckConsistency().ok());
}

TEST(EquivalenceTest, AsymmetricTopologiesKeepGpuPositions) {
  ClusterState cs;
  AddNodes(&cs, {.nodes = 2, .gpus_per_node = 8, .layout = model::GpuLayout::kPcieSwitchPairs});
  ASSERT_TRUE(cs.Assume(On(0, 0, 500)).ok());
  ASSERT_TRUE(cs.Assume(On(1, 7, 500)).ok());
  EXPECT_NE(cs.node_class(0), cs.node_class(1));
  ASSERT_TRUE(cs.CheckConsistency().ok());
}

TEST(EquivalenceTest, CordonedNodesLeaveTheirClass) {
  ClusterState cs;
  AddNodes(&cs, {.nodes = 3, .gpus_per_node = 8});
  ASSERT_TRUE(cs.SetSchedulable(0, false).ok());
  EXPECT_EQ(cs.node_class(0), -1);
  EXPECT_EQ(cs.class_info(cs.node_class(2)).size, 2);
  EXPECT_EQ(cs.class_info(cs.node_class(2)).min_id, 1);
  ASSERT_TRUE(cs.SetSchedulable(0, true).ok());
  EXPECT_EQ(cs.class_info(cs.node_class(2)).size, 3);
  EXPECT_EQ(cs.class_info(cs.node_class(2)).min_id, 0);
  ASSERT_TRUE(cs.CheckConsistency().ok());
}

Profile AllNodes(bool dedupe, Profile::TieBreak tb) {
  Profile p = Profile::Default();
  p.nodes_to_score = 0;
  p.dedupe_equivalent_nodes = dedupe;
  p.tie_break = tb;
  return p;
}

TEST(DedupeTest, SamePlacementsAsScoringEveryNode) {
  ClusterState a, b;
  AddNodes(&a, {.nodes = 12, .gpus_per_node = 8});
  AddNodes(&b, {.nodes = 12, .gpus_per_node = 8});
  auto sa = testing::MakeScheduler(&a, AllNodes(false, Profile::TieBreak::kLowestNodeId));
  auto sb = testing::MakeScheduler(&b, AllNodes(true, Profile::TieBreak::kLowestNodeId));
  std::mt19937_64 gen(3);
  for (int i = 0; i < 60; ++i) {
    int kind = static_cast<int>(gen() % 3);
    model::Job j = MakeJob(absl::StrCat("j", i), 1,
                           kind == 0   ? 1
                           : kind == 1 ? 2
                                       : 1,
                           kind == 2 ? 300 : 1000);
    ScheduleResult ra = sa->Schedule(j);
    ScheduleResult rb = sb->Schedule(j);
    ASSERT_EQ(ra.placed(), rb.placed()) << i;
    if (!ra.placed()) continue;
    EXPECT_EQ(ra.placement.members[0].node, rb.placement.members[0].node) << i;
    EXPECT_LE(rb.nodes_evaluated, ra.nodes_evaluated) << i;
  }
  ASSERT_TRUE(b.CheckConsistency().ok());
}

TEST(DedupeTest, RandomTiesAreSeededAndCoverTheTiedNodes) {
  std::vector<NodeId> runs[2];
  for (auto& out : runs) {
    ClusterState cs;
    AddNodes(&cs, {.nodes = 6, .gpus_per_node = 8});
    Profile p = AllNodes(true, Profile::TieBreak::kRandom);
    p.plugins = {{.name = "resource-fit"}};  // no scores: every feasible node ties
    auto s = testing::MakeScheduler(&cs, p);
    std::mt19937_64 rng(11);
    s->SetRandom(&rng);
    for (int i = 0; i < 30; ++i) {
      ScheduleResult r = s->Schedule(MakeJob(absl::StrCat("j", i), 1, 1));
      ASSERT_TRUE(r.placed());
      out.push_back(r.placement.members[0].node);
    }
  }
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_EQ(std::set<NodeId>(runs[0].begin(), runs[0].end()).size(), 6u);
}

TEST(DedupeTest, FailureIsStillExplained) {
  ClusterState cs;
  AddNodes(&cs, {.nodes = 3, .gpus_per_node = 8, .cpu_milli = 2000});
  auto s = testing::MakeScheduler(&cs, AllNodes(true, Profile::TieBreak::kLowestNodeId));
  model::Job j = MakeJob("big-cpu", 1, 1);
  j.groups[0].resources.cpu_milli = 4000;
  ScheduleResult r = s->Schedule(j);
  ASSERT_FALSE(r.placed());
  EXPECT_THAT(r.reason, HasSubstr("3 Insufficient CPU"));
  r = s->Schedule(MakeJob("too-many", 1, 9));
  ASSERT_FALSE(r.placed());
}

}  // namespace
}  // namespace tessera::sched
