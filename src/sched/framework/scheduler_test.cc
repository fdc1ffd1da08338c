#include "sched/framework/scheduler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "sched/test_util.h"

namespace tessera::sched {
namespace {

using testing::AddNodes;
using ::testing::HasSubstr;
using testing::MakeJob;
using testing::MakeScheduler;

TEST(SchedulerTest, PlacesSingleGpuJob) {
  ClusterState cs;
  AddNodes(&cs, {.nodes = 4, .gpus_per_node = 8});
  auto s = MakeScheduler(&cs);
  ScheduleResult r = s->Schedule(MakeJob("a", 1, 1));
  ASSERT_TRUE(r.placed()) << r.reason;
  ASSERT_EQ(r.placement.members.size(), 1u);
  EXPECT_EQ(r.placement.members[0].gpus.size(), 1u);
  EXPECT_NE(cs.FindPlacement("default/a"), nullptr);
  EXPECT_EQ(cs.allocated_milli(), 1000);
  ASSERT_TRUE(s->Release("default/a").ok());
  EXPECT_EQ(cs.allocated_milli(), 0);
}

TEST(SchedulerTest, PackFillsOneNodeSpreadUsesMany) {
  ClusterState cs;
  AddNodes(&cs, {.nodes = 4, .gpus_per_node = 8});
  auto s = MakeScheduler(&cs);
  std::set<NodeId> pack_nodes;
  for (int i = 0; i < 4; ++i) {
    ScheduleResult r = s->Schedule(MakeJob("p" + std::to_string(i), 1, 2));
    ASSERT_TRUE(r.placed());
    pack_nodes.insert(r.placement.members[0].node);
  }
  EXPECT_EQ(pack_nodes.size(), 1u) << "pack: four 2-GPU jobs fill one 8-GPU node";

  model::Job inf = MakeJob("inference", 4, 1);
  inf.placement = model::PlacementPreference::kSpread;
  ScheduleResult r = s->Schedule(inf);
  ASSERT_TRUE(r.placed());
  std::set<NodeId> spread_nodes;
  for (const auto& m : r.placement.members) spread_nodes.insert(m.node);
  EXPECT_EQ(spread_nodes.size(), 3u) << "spread: one replica per free node";
  EXPECT_FALSE(spread_nodes.contains(*pack_nodes.begin())) << "the full node is avoided";
}

TEST(SchedulerTest, GangIsAllOrNothing) {
  ClusterState cs;
  AddNodes(&cs, {.nodes = 2, .gpus_per_node = 8});
  auto s = MakeScheduler(&cs);
  ASSERT_TRUE(s->Schedule(MakeJob("filler", 1, 4)).placed());
  // 3 members x 8 GPUs: only one node is whole; nothing may be held.
  ScheduleResult r = s->Schedule(MakeJob("gang", 3, 8));
  EXPECT_FALSE(r.placed());
  EXPECT_EQ(cs.allocated_milli(), 4000) << "the failed gang holds nothing";
  EXPECT_FALSE(r.reason.empty());
  EXPECT_TRUE(cs.CheckConsistency().ok());
}

TEST(SchedulerTest, MinMemberAllowsPartialGang) {
  ClusterState cs;
  AddNodes(&cs, {.nodes = 2, .gpus_per_node = 8});
  auto s = MakeScheduler(&cs);
  model::Job j = MakeJob("elastic", 3, 8);
  j.gang.min_member = 2;
  ScheduleResult r = s->Schedule(j);
  ASSERT_TRUE(r.placed()) << r.reason;
  EXPECT_EQ(r.placement.members.size(), 2u);
}

TEST(SchedulerTest, RequiredRackKeepsGangInOneRack) {
  ClusterState cs;
  // 4 racks x 2 nodes x 8 GPUs. Rack 0 is partly used.
  AddNodes(&cs, {.nodes = 8, .gpus_per_node = 8, .nodes_per_rack = 2, .racks_per_block = 2});
  auto s = MakeScheduler(&cs);
  ASSERT_TRUE(s->Schedule(MakeJob("filler", 1, 4)).placed());
  model::Job g = MakeJob("gang", 4, 4);  // 16 GPUs: needs a whole rack
  g.topology = {model::TopologyLevel::kRack, true};
  ScheduleResult r = s->Schedule(g);
  ASSERT_TRUE(r.placed()) << r.reason;
  std::set<int> racks;
  for (const auto& m : r.placement.members) racks.insert(cs.state(m.node).rack);
  EXPECT_EQ(racks.size(), 1u);
  EXPECT_NE(*racks.begin(), cs.state(cs.FindPlacement("default/filler")->members[0].node).rack);
}

TEST(SchedulerTest, RequiredRackReportsLargestFree) {
  ClusterState cs;
  AddNodes(&cs, {.nodes = 4, .gpus_per_node = 8, .nodes_per_rack = 2});
  auto s = MakeScheduler(&cs);
  model::Job g = MakeJob("big", 3, 8);  // 24 GPUs in one rack of 16
  g.topology = {model::TopologyLevel::kRack, true};
  ScheduleResult r = s->Schedule(g);
  EXPECT_FALSE(r.placed());
  EXPECT_THAT(r.reason, HasSubstr("needs 24 GPUs in one rack; largest free in any rack: 16"));
  EXPECT_EQ(cs.allocated_milli(), 0);
  // Preferred instead of required: it spans racks.
  g.topology.required = false;
  r = s->Schedule(g);
  EXPECT_TRUE(r.placed()) << r.reason;
}

TEST(SchedulerTest, PreferredRackPacksIntoOneRackWhenPossible) {
  ClusterState cs;
  AddNodes(&cs, {.nodes = 8, .gpus_per_node = 8, .nodes_per_rack = 4});
  auto s = MakeScheduler(&cs);
  model::Job g = MakeJob("gang", 8, 2);
  g.topology = {model::TopologyLevel::kRack, false};
  ScheduleResult r = s->Schedule(g);
  ASSERT_TRUE(r.placed());
  std::set<int> racks;
  for (const auto& m : r.placement.members) racks.insert(cs.state(m.node).rack);
  EXPECT_EQ(racks.size(), 1u);
}

TEST(SchedulerTest, TaintsAndSelectorsHonored) {
  ClusterState cs;
  AddNodes(&cs, {.nodes = 2, .gpus_per_node = 8});
  // Taint node 0 via a new node spec: rebuild it tainted.
  model::Node tainted = cs.node(0);
  tainted.name = "tainted";
  tainted.taints.push_back(
      {.key = "dedicated", .value = "infra", .effect = model::TaintEffect::kNoSchedule});
  tainted.labels["pool"] = "infra";
  ASSERT_TRUE(cs.AddNode(tainted).ok());
  auto s = MakeScheduler(&cs);
  model::Job j = MakeJob("sel", 1, 1);
  j.node_selector["pool"] = "infra";
  ScheduleResult r = s->Schedule(j);
  EXPECT_FALSE(r.placed());
  EXPECT_THAT(r.reason, HasSubstr("untolerated taint {dedicated=infra:NoSchedule}"));
  j.tolerations.push_back(
      {.key = "dedicated", .op = model::Toleration::Op::kEqual, .value = "infra"});
  r = s->Schedule(j);
  ASSERT_TRUE(r.placed()) << r.reason;
  EXPECT_EQ(cs.node(r.placement.members[0].node).name, "tainted");
}

TEST(SchedulerTest, GpuModelConstraint) {
  ClusterState cs;
  AddNodes(&cs, {.nodes = 2, .gpus_per_node = 8, .gpu_model = "A100", .name_prefix = "a"});
  AddNodes(&cs, {.nodes = 2, .gpus_per_node = 8, .gpu_model = "H100", .name_prefix = "h"});
  auto s = MakeScheduler(&cs);
  model::Job j = MakeJob("h", 2, 8);
  j.gpu_models = {"H100"};
  ScheduleResult r = s->Schedule(j);
  ASSERT_TRUE(r.placed());
  for (const auto& m : r.placement.members) EXPECT_EQ(cs.node(m.node).gpu_model(), "H100");
  j.name = "h2";
  r = s->Schedule(j);
  EXPECT_FALSE(r.placed()) << "H100s are full; A100s must not be used";
  j.gpu_models = {"B200"};
  j.name = "b";
  r = s->Schedule(j);
  EXPECT_FALSE(r.placed());
  EXPECT_TRUE(r.unresolvable);
  EXPECT_THAT(r.reason, HasSubstr("B200"));
}

TEST(SchedulerTest, FractionalGpusShareAndPack) {
  ClusterState cs;
  AddNodes(&cs, {.nodes = 2, .gpus_per_node = 2});
  auto s = MakeScheduler(&cs);
  ScheduleResult a = s->Schedule(MakeJob("a", 1, 1, 500));
  ScheduleResult b = s->Schedule(MakeJob("b", 1, 1, 300));
  ASSERT_TRUE(a.placed() && b.placed());
  EXPECT_EQ(a.placement.members[0].node, b.placement.members[0].node);
  EXPECT_EQ(a.placement.members[0].gpus[0].gpu, b.placement.members[0].gpus[0].gpu)
      << "best fit: the second share lands on the partly used GPU";
  ScheduleResult c = s->Schedule(MakeJob("c", 1, 1, 300));
  ASSERT_TRUE(c.placed());
  EXPECT_NE(c.placement.members[0].gpus[0].gpu, a.placement.members[0].gpus[0].gpu)
      << "only 200 milli left there";
  EXPECT_TRUE(cs.CheckConsistency().ok());
}

TEST(SchedulerTest, BadInputIsRejectedWithFieldAndChangesNothing) {
  ClusterState cs;
  AddNodes(&cs, {.nodes = 2, .gpus_per_node = 8});
  auto s = MakeScheduler(&cs);
  model::Job j = MakeJob("bad", 2, 2);
  j.gang.min_member = 3;
  ScheduleResult r = s->Schedule(j);
  EXPECT_FALSE(r.placed());
  EXPECT_THAT(r.reason, HasSubstr("spec.gang.minMember"));
  j = MakeJob("neg", 1, -1);
  r = s->Schedule(j);
  EXPECT_THAT(r.reason, HasSubstr("spec.groups[0].resources.gpus"));
  j = MakeJob("frac", 1, 2, 500);
  r = s->Schedule(j);
  EXPECT_THAT(r.reason, HasSubstr("gpuMilli"));
  EXPECT_EQ(cs.allocated_milli(), 0);
}

TEST(SchedulerTest, ProfileValidation) {
  ClusterState cs;
  PluginRegistry reg = DefaultRegistry();
  Profile p = Profile::Default();
  p.plugins.push_back({.name = "no-such-plugin"});
  auto s = Scheduler::Create(p, reg, &cs);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("profile.plugins[6].name"));
  p = Profile::Default();
  p.plugins[4].weight = 0;
  s = Scheduler::Create(p, reg, &cs);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("profile.plugins[4].weight"));
  p = Profile::Default();
  p.queue_sort = "resource-fit";
  s = Scheduler::Create(p, reg, &cs);
  EXPECT_FALSE(s.ok()) << "a Filter plugin is not a QueueSort";
}

TEST(SchedulerTest, EvaluateChangesNothing) {
  ClusterState cs;
  AddNodes(&cs, {.nodes = 2, .gpus_per_node = 8});
  auto s = MakeScheduler(&cs);
  ScheduleResult r = s->Evaluate(MakeJob("dry", 2, 8));
  EXPECT_TRUE(r.placed());
  EXPECT_EQ(cs.allocated_milli(), 0);
  EXPECT_EQ(cs.FindPlacement("default/dry"), nullptr);
}

TEST(SchedulerTest, NodeLevelTopologyPutsGangOnOneNode) {
  ClusterState cs;
  AddNodes(&cs, {.nodes = 3, .gpus_per_node = 8});
  auto s = MakeScheduler(&cs);
  ASSERT_TRUE(s->Schedule(MakeJob("f", 1, 2)).placed());
  model::Job j = MakeJob("local", 4, 2);
  j.topology = {model::TopologyLevel::kNode, true};
  ScheduleResult r = s->Schedule(j);
  ASSERT_TRUE(r.placed()) << r.reason;
  std::set<NodeId> nodes;
  for (const auto& m : r.placement.members) nodes.insert(m.node);
  EXPECT_EQ(nodes.size(), 1u);
}

}  // namespace
}  // namespace tessera::sched

namespace tessera::sched {
namespace {

// A node's max_members caps what lands on it whatever the members ask: a gang of many
// GPU-less members spreads over nodes instead of crowding one, and one that cannot fit under
// the caps is not placed at all.
TEST(SchedulerTest, MaxMembersCapsAMemberFloodPerNode) {
  ClusterState cs;
  auto nodes = model::BuildSyntheticCluster({.nodes = 2, .gpus_per_node = 8});
  ASSERT_TRUE(nodes.ok());
  for (model::Node& n : *nodes) {
    n.max_members = 5;
    ASSERT_TRUE(cs.AddNode(std::move(n)).ok());
  }
  auto s = testing::MakeScheduler(&cs);
  model::Job tiny = testing::MakeJob("tiny", 8, 0);
  tiny.groups[0].resources.cpu_milli = 1;
  tiny.groups[0].resources.memory_mib = 1;
  ScheduleResult r = s->Schedule(tiny);
  ASSERT_TRUE(r.placed()) << r.reason;
  std::map<NodeId, int> per_node;
  for (const MemberPlacement& m : r.placement.members) ++per_node[m.node];
  for (auto& [node, n] : per_node) EXPECT_LE(n, 5) << "node " << node;
  // 8 more: only 2 places left under the caps; the gang holds nothing.
  model::Job more = testing::MakeJob("more", 8, 0);
  more.groups[0].resources.cpu_milli = 1;
  ScheduleResult r2 = s->Schedule(more);
  EXPECT_FALSE(r2.placed());
  EXPECT_THAT(r2.reason, ::testing::HasSubstr("Too many members"));
  EXPECT_EQ(cs.state(0).members + cs.state(1).members, 8);
  // Assume itself refuses beyond the cap (no caller can over-fill a node).
  MemberPlacement extra;
  extra.node = r.placement.members[0].node;
  extra.cpu_milli = 1;
  while (cs.state(extra.node).members < 5) ASSERT_TRUE(cs.Assume(extra).ok());
  EXPECT_FALSE(cs.Assume(extra).ok());
  EXPECT_TRUE(cs.CheckConsistency().ok());
}

}  // namespace
}  // namespace tessera::sched

namespace tessera::sched {
namespace {

// Extended resources (MIG slices offered per profile): counted per node, never over-allocated,
// freed on release; nodes whose free slices differ are never treated as one equivalence class.
TEST(SchedulerScalarTest, MigSlicesAreCountedPerNodeAndNeverOverAllocated) {
  ClusterState cs;
  for (int i = 0; i < 3; ++i) {
    model::Node n;
    n.name = "mig-" + std::to_string(i);
    n.cpu_milli = 64000;
    n.memory_mib = 512 * 1024;
    n.scalars = {{"nvidia.com/mig-1g.10gb", 7}, {"nvidia.com/mig-3g.40gb", i == 0 ? 2 : 0}};
    ASSERT_TRUE(cs.AddNode(n).ok());
  }
  auto s = testing::MakeScheduler(&cs);
  auto job = [](const std::string& name, int members, const std::string& profile, int64_t n) {
    model::Job j;
    j.name = name;
    j.groups.push_back({.name = "w",
                        .count = members,
                        .resources = {.gpus = 0, .cpu_milli = 100, .scalars = {{profile, n}}}});
    return j;
  };
  // Only mig-0 has 3g slices: both go there, a third does not fit anywhere.
  ScheduleResult a = s->Schedule(job("a", 2, "nvidia.com/mig-3g.40gb", 1));
  ASSERT_TRUE(a.placed()) << a.reason;
  for (const MemberPlacement& m : a.placement.members) EXPECT_EQ(cs.node(m.node).name, "mig-0");
  ScheduleResult b = s->Schedule(job("b", 1, "nvidia.com/mig-3g.40gb", 1));
  EXPECT_FALSE(b.placed());
  EXPECT_THAT(b.reason, HasSubstr("nvidia.com/mig-3g.40gb"));
  // 21 1g slices in the cluster: 7 members of 3 fit, an eighth does not.
  int placed = 0;
  for (int i = 0; i < 8; ++i)
    placed += s->Schedule(job("c" + std::to_string(i), 1, "nvidia.com/mig-1g.10gb", 3)).placed();
  EXPECT_EQ(placed, 6);  // 7 per node holds two members of 3 (6 slices): 3 nodes x 2
  for (NodeId id = 0; id < cs.num_node_slots(); ++id) {
    EXPECT_GE(cs.state(id).scalar_free[0], 0);
    EXPECT_EQ(cs.state(id).scalar_free[0], 1);
  }
  // Released slices come back.
  ASSERT_TRUE(s->Release("default/a").ok());
  EXPECT_EQ(cs.state(0).scalar_free[1], 2);
  EXPECT_TRUE(s->Schedule(job("b2", 1, "nvidia.com/mig-3g.40gb", 2)).placed());
  EXPECT_TRUE(cs.CheckConsistency().ok());
}

}  // namespace
}  // namespace tessera::sched
