#include "sched/framework/cluster_state.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sched/test_util.h"

namespace tessera::sched {
namespace {

using testing::AddNodes;

MemberPlacement Member(NodeId node, std::initializer_list<std::pair<int, int>> gpus) {
  MemberPlacement m;
  m.node = node;
  for (auto [g, milli] : gpus)
    m.gpus.push_back({static_cast<int8_t>(g), static_cast<int16_t>(milli)});
  return m;
}

TEST(ClusterStateTest, AddNodeIndexesAndHistograms) {
  ClusterState cs;
  AddNodes(&cs, {.nodes = 4, .gpus_per_node = 8, .nodes_per_rack = 2, .racks_per_block = 1});
  EXPECT_EQ(cs.num_nodes(), 4);
  EXPECT_EQ(cs.num_racks(), 2);
  EXPECT_EQ(cs.num_blocks(), 2);
  ModelId h100 = cs.FindModel("H100");
  ASSERT_NE(h100, kNoModel);
  EXPECT_EQ(cs.cluster_free(h100).free_gpus, 32);
  EXPECT_EQ(cs.rack_free(0, h100).nodes[8], 2);
  EXPECT_EQ(cs.index().whole_bucket(h100, 8).size(), 4u);
  EXPECT_TRUE(cs.CheckConsistency().ok());
  EXPECT_FALSE(cs.AddNode(cs.node(0)).ok()) << "duplicate name must be rejected";
}

TEST(ClusterStateTest, AssumeIsAllOrNothing) {
  ClusterState cs;
  AddNodes(&cs, {.nodes = 1, .gpus_per_node = 4});
  ASSERT_TRUE(cs.Assume(Member(0, {{0, 1000}, {1, 600}})).ok());
  EXPECT_EQ(cs.state(0).whole_free, 2);
  EXPECT_EQ(cs.state(0).max_partial, 400);
  // GPU 1 has 400 left: asking 500 fails and GPU 2 must stay untouched.
  absl::Status s = cs.Assume(Member(0, {{2, 1000}, {1, 500}}));
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(cs.state(0).free_milli[2], 1000);
  EXPECT_FALSE(cs.Assume(Member(0, {{3, 1000}, {3, 1000}})).ok()) << "same GPU twice";
  EXPECT_FALSE(cs.Assume(Member(0, {{9, 1000}})).ok());
  EXPECT_TRUE(cs.CheckConsistency().ok());
  cs.Forget(Member(0, {{0, 1000}, {1, 600}}));
  EXPECT_EQ(cs.state(0).whole_free, 4);
  EXPECT_EQ(cs.allocated_milli(), 0);
  EXPECT_TRUE(cs.CheckConsistency().ok());
}

TEST(ClusterStateTest, UnhealthyGpuLeavesPoolAndReportsJobs) {
  ClusterState cs;
  AddNodes(&cs, {.nodes = 1, .gpus_per_node = 8});
  MemberPlacement m = Member(0, {{3, 1000}});
  ASSERT_TRUE(cs.Assume(m).ok());
  ASSERT_TRUE(cs.Bind({.job_key = "default/a", .members = {m}}).ok());
  std::vector<std::string> affected;
  ASSERT_TRUE(cs.SetGpuHealth(0, 3, false, &affected).ok());
  EXPECT_THAT(affected, ::testing::ElementsAre("default/a"));
  ASSERT_TRUE(cs.SetGpuHealth(0, 5, false, &affected).ok());
  EXPECT_EQ(cs.state(0).whole_free, 6);
  ASSERT_TRUE(cs.Release("default/a").ok());
  EXPECT_EQ(cs.state(0).whole_free, 6) << "GPU 3 is freed but still unhealthy";
  ASSERT_TRUE(cs.SetGpuHealth(0, 3, true, nullptr).ok());
  EXPECT_EQ(cs.state(0).whole_free, 7);
  EXPECT_FALSE(cs.SetGpuHealth(0, 8, true, nullptr).ok());
  EXPECT_TRUE(cs.CheckConsistency().ok());
}

TEST(ClusterStateTest, RemoveNodeReleasesItsJobs) {
  ClusterState cs;
  AddNodes(&cs, {.nodes = 2, .gpus_per_node = 8});
  MemberPlacement a = Member(0, {{0, 1000}});
  MemberPlacement b = Member(1, {{0, 1000}});
  ASSERT_TRUE(cs.Assume(a).ok());
  ASSERT_TRUE(cs.Assume(b).ok());
  ASSERT_TRUE(cs.Bind({.job_key = "ns/gang", .members = {a, b}}).ok());
  std::vector<std::string> released;
  ASSERT_TRUE(cs.RemoveNode(cs.node(0).name, &released).ok());
  EXPECT_THAT(released, ::testing::ElementsAre("ns/gang"));
  EXPECT_EQ(cs.num_nodes(), 1);
  EXPECT_EQ(cs.state(1).whole_free, 8) << "the gang's other member was released too";
  EXPECT_EQ(cs.FindPlacement("ns/gang"), nullptr);
  EXPECT_TRUE(cs.CheckConsistency().ok());
}

TEST(ClusterStateTest, FreeCpuFollowsAssumeForgetAndRemoval) {
  ClusterState cs;
  AddNodes(&cs, {.nodes = 2, .gpus_per_node = 8, .cpu_milli = 64000});
  EXPECT_EQ(cs.free_cpu_milli(), 128000);
  MemberPlacement a = Member(0, {{0, 500}});
  a.cpu_milli = 6000;
  MemberPlacement b = Member(1, {{1, 1000}});
  b.cpu_milli = 10000;
  ASSERT_TRUE(cs.Assume(a).ok());
  ASSERT_TRUE(cs.Assume(b).ok());
  EXPECT_EQ(cs.free_cpu_milli(), 112000);
  cs.Forget(a);
  EXPECT_EQ(cs.free_cpu_milli(), 118000);
  ASSERT_TRUE(cs.Bind({.job_key = "ns/b", .members = {b}}).ok());
  ASSERT_TRUE(cs.RemoveNode(cs.node(1).name, nullptr).ok());
  EXPECT_EQ(cs.free_cpu_milli(), 64000) << "a removed node's CPU leaves the pool";
  EXPECT_TRUE(cs.CheckConsistency().ok());
}

TEST(ClusterStateTest, CordonRemovesFromIndex) {
  ClusterState cs;
  AddNodes(&cs, {.nodes = 2, .gpus_per_node = 8});
  ModelId m = cs.FindModel("H100");
  ASSERT_TRUE(cs.SetSchedulable(0, false).ok());
  EXPECT_EQ(cs.index().whole_bucket(m, 8).size(), 1u);
  EXPECT_EQ(cs.cluster_free(m).free_gpus, 8);
  ASSERT_TRUE(cs.SetSchedulable(0, true).ok());
  EXPECT_EQ(cs.cluster_free(m).free_gpus, 16);
  EXPECT_TRUE(cs.CheckConsistency().ok());
}

}  // namespace
}  // namespace tessera::sched
