// Property tests: random clusters and job streams; invariants after every step.
//
//  - no GPU or GPU fraction over-allocated (ClusterState::CheckConsistency
//    recomputes everything and compares with the incremental indexes);
//  - every bound gang has at least minMember members, each member's GPUs are
//    distinct and sized as asked; a failed cycle changes nothing;
//  - a required topology is respected (all members in one rack / node);
//  - releasing everything restores the empty cluster exactly.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "sched/test_util.h"

namespace tessera::sched {
namespace {

using testing::AddNodes;

model::Job RandomJob(std::mt19937_64& rng, int i) {
  std::uniform_int_distribution<int> kind(0, 9);
  model::Job j;
  j.name = "j" + std::to_string(i);
  j.priority = std::uniform_int_distribution<int>(0, 3)(rng) * 100;
  int k = kind(rng);
  model::MemberGroup g;
  g.name = "w";
  g.resources.cpu_milli = 1000;
  g.resources.memory_mib = 4096;
  if (k <= 2) {
    g.count = 1;
    g.resources.gpus = 1;
    g.resources.gpu_milli = std::uniform_int_distribution<int>(1, 9)(rng) * 100;
  } else if (k <= 5) {
    g.count = 1;
    g.resources.gpus = 1 << std::uniform_int_distribution<int>(0, 3)(rng);
  } else {
    g.count = std::uniform_int_distribution<int>(2, 6)(rng);
    g.resources.gpus = std::uniform_int_distribution<int>(0, 1)(rng) ? 8 : 4;
    int t = std::uniform_int_distribution<int>(0, 3)(rng);
    if (t == 1) j.topology = {model::TopologyLevel::kRack, true};
    if (t == 2) j.topology = {model::TopologyLevel::kRack, false};
    if (t == 3 && g.count * g.resources.gpus <= 8) j.topology = {model::TopologyLevel::kNode, true};
    if (std::uniform_int_distribution<int>(0, 3)(rng) == 0) j.gang.min_member = g.count - 1;
  }
  if (std::uniform_int_distribution<int>(0, 4)(rng) == 0) {
    j.placement = model::PlacementPreference::kSpread;
  }
  j.groups.push_back(g);
  return j;
}

void CheckPlacement(const ClusterState& cs, const model::Job& job, const Placement& p) {
  ASSERT_GE(static_cast<int>(p.members.size()), job.effective_min_member());
  std::set<int> racks;
  std::set<NodeId> nodes;
  for (const MemberPlacement& m : p.members) {
    const auto& req = job.groups[m.group].resources;
    ASSERT_EQ(static_cast<int>(m.gpus.size()), req.gpus);
    std::set<int> seen;
    for (const GpuGrant& g : m.gpus) {
      ASSERT_TRUE(seen.insert(g.gpu).second) << "GPU granted twice to one member";
      ASSERT_EQ(g.milli, req.gpu_milli);
    }
    racks.insert(cs.state(m.node).rack);
    nodes.insert(m.node);
    if (!job.gpu_models.empty()) {
      ASSERT_EQ(cs.node(m.node).gpu_model(), job.gpu_models[0]);
    }
  }
  if (job.topology.required && job.topology.level == model::TopologyLevel::kRack) {
    ASSERT_EQ(racks.size(), 1u) << job.name;
  }
  if (job.topology.required && job.topology.level == model::TopologyLevel::kNode) {
    ASSERT_EQ(nodes.size(), 1u) << job.name;
  }
}

class PropertyTest : public ::testing::TestWithParam<int> {};

TEST_P(PropertyTest, InvariantsHoldThroughRandomStreams) {
  std::mt19937_64 rng(GetParam());
  ClusterState cs;
  model::SyntheticClusterSpec spec;
  spec.nodes = std::uniform_int_distribution<int>(4, 40)(rng);
  spec.gpus_per_node = std::vector<int>{4, 8, 8, 16}[GetParam() % 4];
  spec.nodes_per_rack = std::uniform_int_distribution<int>(2, 8)(rng);
  spec.racks_per_block = 2;
  spec.layout = static_cast<model::GpuLayout>(GetParam() % 4);
  AddNodes(&cs, spec);
  // A second GPU model on a few nodes.
  AddNodes(&cs, {.nodes = 3,
                 .gpus_per_node = 8,
                 .nodes_per_rack = 3,
                 .gpu_model = "A100",
                 .name_prefix = "a"});
  auto s = testing::MakeScheduler(&cs);
  const int64_t initial_free = cs.cluster_free(cs.FindModel("H100")).free_gpus;

  std::vector<std::string> bound;
  int placed = 0, failed = 0, gangs = 0;
  for (int step = 0; step < 400; ++step) {
    bool release = !bound.empty() && std::uniform_int_distribution<int>(0, 2)(rng) == 0;
    if (release) {
      size_t i = std::uniform_int_distribution<size_t>(0, bound.size() - 1)(rng);
      ASSERT_TRUE(s->Release(bound[i]).ok());
      bound.erase(bound.begin() + i);
    } else {
      model::Job j = RandomJob(rng, step);
      if (step % 17 == 0) j.gpu_models = {"A100"};
      int64_t before = cs.allocated_milli();
      size_t bound_before = cs.bound().size();
      ScheduleResult r = s->Schedule(j);
      if (r.placed()) {
        CheckPlacement(cs, j, r.placement);
        bound.push_back(j.key());
        ++placed;
        gangs += r.placement.members.size() > 1;
      } else {
        ASSERT_EQ(cs.allocated_milli(), before) << "a failed cycle must change nothing";
        ASSERT_EQ(cs.bound().size(), bound_before);
        ASSERT_FALSE(r.reason.empty());
        ++failed;
      }
    }
    absl::Status c = cs.CheckConsistency();
    ASSERT_TRUE(c.ok()) << "step " << step << ": " << c.message();
    // Occasionally fail and repair a GPU.
    if (step % 50 == 25) {
      NodeId n = std::uniform_int_distribution<NodeId>(0, cs.num_node_slots() - 1)(rng);
      std::vector<std::string> affected;
      ASSERT_TRUE(cs.SetGpuHealth(n, 0, false, &affected).ok());
      for (const auto& key : affected) {
        ASSERT_TRUE(s->Release(key).ok());
        bound.erase(std::find(bound.begin(), bound.end(), key));
      }
      ASSERT_TRUE(cs.SetGpuHealth(n, 0, true, nullptr).ok());
    }
  }
  // The stream must exercise both outcomes and real gangs, or it proves nothing.
  EXPECT_GT(placed, 50);
  EXPECT_GT(failed, 0);
  EXPECT_GT(gangs, 5);
  for (const std::string& key : bound) ASSERT_TRUE(s->Release(key).ok());
  EXPECT_EQ(cs.allocated_milli(), 0);
  EXPECT_EQ(cs.cluster_free(cs.FindModel("H100")).free_gpus, initial_free);
  for (NodeId id = 0; id < cs.num_node_slots(); ++id) {
    const NodeState& st = cs.state(id);
    EXPECT_EQ(st.whole_free, st.num_gpus);
    EXPECT_EQ(st.cpu_free, cs.node(id).cpu_milli);
    EXPECT_EQ(st.members, 0);
  }
  EXPECT_TRUE(cs.CheckConsistency().ok());
}

INSTANTIATE_TEST_SUITE_P(Seeds, PropertyTest, ::testing::Range(1, 25));

}  // namespace
}  // namespace tessera::sched
