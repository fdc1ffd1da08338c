// Direct tests of single plugins on hand-made nodes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sched/plugins/gang.h"
#include "sched/plugins/pack_spread.h"
#include "sched/plugins/resource_fit.h"
#include "sched/plugins/taint_toleration.h"
#include "sched/plugins/topology.h"
#include "sched/test_util.h"

namespace tessera::sched {
namespace {

using testing::AddNodes;
using ::testing::HasSubstr;
using testing::MakeJob;

struct Fixture {
  ClusterState cs;
  model::Job job;
  JobContext ctx;
  CycleState cycle;
  explicit Fixture(model::Job j) : job(std::move(j)) {
    ctx.job = &job;
    ctx.cluster = &cs;
    ctx.min_member = job.effective_min_member();
  }
  NodeView View(NodeId id) { return NodeView{id, cs.node(id), cs.state(id)}; }
};

TEST(ResourceFitTest, ReasonsPerResource) {
  Fixture f(MakeJob("j", 1, 4));
  AddNodes(&f.cs, {.nodes = 1, .gpus_per_node = 2, .cpu_milli = 500});
  ResourceFit fit;
  EXPECT_EQ(fit.Filter(f.cycle, f.ctx, f.job.groups[0], f.View(0)).reason(), "Insufficient GPUs");
  f.job.groups[0].resources.gpus = 1;
  EXPECT_EQ(fit.Filter(f.cycle, f.ctx, f.job.groups[0], f.View(0)).reason(), "Insufficient CPU");
  f.job.groups[0].resources.cpu_milli = 100;
  f.job.groups[0].resources.gpu_memory_mib = 200000;
  EXPECT_EQ(fit.Filter(f.cycle, f.ctx, f.job.groups[0], f.View(0)).reason(),
            "GPU memory too small");
  f.job.groups[0].resources.gpu_memory_mib = 0;
  EXPECT_TRUE(fit.Filter(f.cycle, f.ctx, f.job.groups[0], f.View(0)).ok());
  // A member larger than any node is unresolvable.
  f.job.groups[0].resources.gpus = 4;
  PreFilterResult pre;
  PluginStatus s = fit.PreFilter(f.cycle, f.ctx, &pre);
  EXPECT_EQ(s.code(), PluginStatus::Code::kUnschedulableAndUnresolvable);
  EXPECT_THAT(s.reason(), HasSubstr("largest node has 2"));
}

TEST(TaintTolerationTest, PreferNoScheduleLowersScore) {
  Fixture f(MakeJob("j", 1, 1));
  AddNodes(&f.cs, {.nodes = 1, .gpus_per_node = 1});
  model::Node n = f.cs.node(0);
  n.name = "soft";
  n.taints = {{.key = "a", .effect = model::TaintEffect::kPreferNoSchedule},
              {.key = "b", .effect = model::TaintEffect::kPreferNoSchedule}};
  NodeId soft = *f.cs.AddNode(n);
  TaintToleration tt;
  EXPECT_TRUE(tt.Filter(f.cycle, f.ctx, f.job.groups[0], f.View(soft)).ok());
  EXPECT_EQ(tt.Score(f.cycle, f.ctx, f.job.groups[0], f.View(0)), 100);
  EXPECT_EQ(tt.Score(f.cycle, f.ctx, f.job.groups[0], f.View(soft)), 50);
  f.job.tolerations.push_back({.key = "a", .op = model::Toleration::Op::kExists});
  EXPECT_EQ(tt.Score(f.cycle, f.ctx, f.job.groups[0], f.View(soft)), 75);
}

TEST(PackSpreadTest, PackPrefersFullerSpreadPrefersEmptier) {
  Fixture f(MakeJob("j", 1, 1));
  AddNodes(&f.cs, {.nodes = 2, .gpus_per_node = 4});
  MemberPlacement m;
  m.node = 0;
  m.gpus.push_back({0, 1000});
  ASSERT_TRUE(f.cs.Assume(m).ok());
  PackSpread ps;
  int64_t busy = ps.Score(f.cycle, f.ctx, f.job.groups[0], f.View(0));
  int64_t idle = ps.Score(f.cycle, f.ctx, f.job.groups[0], f.View(1));
  EXPECT_GT(busy, idle);
  f.job.placement = model::PlacementPreference::kSpread;
  EXPECT_LT(ps.Score(f.cycle, f.ctx, f.job.groups[0], f.View(0)),
            ps.Score(f.cycle, f.ctx, f.job.groups[0], f.View(1)));
}

TEST(GangTest, CapacityBoundAndPermit) {
  Fixture f(MakeJob("g", 5, 8));
  AddNodes(&f.cs, {.nodes = 4, .gpus_per_node = 8});
  Gang gang;
  PreFilterResult pre;
  PluginStatus s = gang.PreFilter(f.cycle, f.ctx, &pre);
  EXPECT_EQ(s.code(), PluginStatus::Code::kUnschedulableAndUnresolvable);
  EXPECT_THAT(s.reason(), HasSubstr("needs at least 40 GPUs; the fleet has 32"));
  f.job.gang.min_member = 2;
  f.ctx.min_member = 2;
  EXPECT_TRUE(gang.PreFilter(f.cycle, f.ctx, &pre).ok());
  std::vector<MemberPlacement> one(1);
  EXPECT_FALSE(gang.Permit(f.cycle, f.ctx, one).ok());
  std::vector<MemberPlacement> two(2);
  EXPECT_TRUE(gang.Permit(f.cycle, f.ctx, two).ok());
}

TEST(TopologyTest, RackDomainsBestFitFirst) {
  Fixture f(MakeJob("g", 2, 8));
  f.job.topology = {model::TopologyLevel::kRack, true};
  AddNodes(&f.cs, {.nodes = 9, .gpus_per_node = 8, .nodes_per_rack = 3});
  // Rack 1 has one node busy: 16 free, the tightest fit for 16 GPUs.
  MemberPlacement m;
  m.node = 3;
  for (int g = 0; g < 8; ++g) m.gpus.push_back({static_cast<int8_t>(g), 1000});
  ASSERT_TRUE(f.cs.Assume(m).ok());
  Topology topo;
  PreFilterResult pre;
  ASSERT_TRUE(topo.PreFilter(f.cycle, f.ctx, &pre).ok());
  ASSERT_EQ(pre.domains.size(), 3u);
  EXPECT_EQ(pre.domains[0].id, 1);
  EXPECT_FALSE(pre.fallback_to_cluster);
}

}  // namespace
}  // namespace tessera::sched
