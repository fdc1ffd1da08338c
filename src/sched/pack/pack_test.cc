#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "sched/framework/scheduler.h"
#include "sched/pack/frag.h"
#include "sched/pack/lookahead.h"
#include "sched/pack/plugin_set.h"
#include "sched/pack/policies.h"
#include "sched/pack/tessera_score.h"
#include "sched/plugins/default_registry.h"

namespace tessera::sched::pack {
namespace {

model::Node MakeNode(const std::string& name, const std::string& gpu_model, int gpus,
                     int64_t cpu_milli) {
  model::Node n;
  n.name = name;
  n.cpu_milli = cpu_milli;
  n.memory_mib = 1 << 20;
  for (int i = 0; i < gpus; ++i) {
    model::Gpu g;
    g.index = i;
    g.model = gpu_model;
    n.gpus.push_back(g);
  }
  n.topology = model::NodeTopology::NvSwitch(gpus);
  return n;
}

model::Job MakePod(const std::string& name, int gpus, int milli, int64_t cpu,
                   std::vector<std::string> models = {}) {
  model::Job j;
  j.name = name;
  j.groups.push_back(
      {.name = "pod",
       .count = 1,
       .resources = {
           .gpus = gpus, .gpu_milli = gpus > 0 ? milli : model::kMilliPerGpu, .cpu_milli = cpu}});
  j.gpu_models = std::move(models);
  return j;
}

TypicalPod Typical(int gpus, int milli, int64_t cpu, double p, uint64_t mask = 0) {
  return TypicalPod{
      {.cpu_milli = cpu, .gpu_milli = gpus > 0 ? milli : 0, .gpus = gpus, .model_mask = mask}, p};
}

// A cluster, a policy's scheduler and its context.
struct Harness {
  ClusterState cs;
  std::mt19937_64 rng{7};
  std::shared_ptr<PackContext> ctx;
  std::unique_ptr<Scheduler> sched;

  Harness(const std::string& policy, const std::vector<model::Node>& nodes,
          std::vector<TypicalPod> typical) {
    for (const model::Node& n : nodes) {
      if (!cs.AddNode(n).ok()) abort();
    }
    ctx = std::make_shared<PackContext>(std::move(typical), &rng);
    PluginRegistry reg = DefaultRegistry();
    if (!RegisterPackPlugins(&reg, ctx).ok()) abort();
    auto prof = PackProfile(policy);
    if (!prof.ok()) abort();
    auto s = Scheduler::Create(*prof, reg, &cs);
    if (!s.ok()) abort();
    sched = std::move(*s);
    sched->SetRandom(&rng);
  }
  // Occupies `milli` of GPU `gpu` (and CPU) on `node` directly.
  void Occupy(NodeId node, int gpu, int milli, int64_t cpu = 0) {
    static int n = 0;
    MemberPlacement m;
    m.node = node;
    if (gpu >= 0) m.gpus.push_back(GpuGrant{static_cast<int8_t>(gpu), static_cast<int16_t>(milli)});
    m.cpu_milli = cpu;
    if (!cs.Assume(m).ok()) abort();
    Placement p;
    p.job_key = absl::StrCat("pre/", n++);
    p.members.push_back(m);
    if (!cs.Bind(p).ok()) abort();
  }
  MemberPlacement Place(const model::Job& j) {
    ScheduleResult r = sched->Schedule(j);
    EXPECT_TRUE(r.placed()) << r.reason;
    return r.placed() ? r.placement.members[0] : MemberPlacement{};
  }
};

TEST(FragTest, MatchesFgdDefinition) {
  NodeFree n;
  n.model = 0;
  n.num_gpus = 2;
  n.cpu_free = 8000;
  n.free[0] = 1000;
  n.free[1] = 300;
  // 500-milli share: fits (GPU 0); GPU 1's 300 is a fragment. Two whole
  // GPUs: cannot fit; all 1300 idle milli are fragments. CPU-only: all.
  std::vector<TypicalPod> t = {Typical(1, 500, 1000, 0.5), Typical(2, 1000, 1000, 0.25),
                               Typical(0, 0, 1000, 0.25)};
  EXPECT_DOUBLE_EQ(NodeFragmentation(n, t), 0.5 * 300 + 0.25 * 1300 + 0.25 * 1300);
  // Lacking CPU makes everything a fragment; a foreign model too.
  n.cpu_free = 500;
  EXPECT_DOUBLE_EQ(NodeFragmentation(n, {Typical(1, 500, 1000, 1)}), 1300);
  n.cpu_free = 8000;
  EXPECT_DOUBLE_EQ(NodeFragmentation(n, {Typical(1, 500, 1000, 1, /*mask=*/0b10)}), 1300);
  n.free = {};
  EXPECT_DOUBLE_EQ(NodeFragmentation(n, t), 0);
}

TEST(FragTest, TypicalPodsKeepThePopularShapes) {
  std::vector<PodShape> pods;
  for (int i = 0; i < 6; ++i) pods.push_back({.cpu_milli = 1000, .gpu_milli = 500, .gpus = 1});
  for (int i = 0; i < 3; ++i) pods.push_back({.cpu_milli = 2000, .gpu_milli = 1000, .gpus = 1});
  pods.push_back({.cpu_milli = 3000, .gpu_milli = 0, .gpus = 0});
  auto all = TypicalPods(pods, 1.0);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_DOUBLE_EQ(all[0].p, 0.6);
  EXPECT_EQ(all[0].shape.gpu_milli, 500);
  auto top = TypicalPods(pods, 0.85);  // 6 + 3 = 90% >= 85%: the rare one is dropped
  ASSERT_EQ(top.size(), 2u);
  EXPECT_DOUBLE_EQ(top[0].p + top[1].p, 1.0);
  EXPECT_DOUBLE_EQ(top[0].p, 6.0 / 9.0);
}

TEST(PolicyTest, CanonicalNames) {
  EXPECT_EQ(*CanonicalPolicy("GpuPacking"), "gpu-packing");
  EXPECT_EQ(*CanonicalPolicy("FGD"), "fgd");
  EXPECT_EQ(*CanonicalPolicy("best_fit"), "best-fit");
  EXPECT_EQ(*CanonicalPolicy("DotProd"), "dotprod");
  EXPECT_EQ(*CanonicalPolicy("tessera"), "tessera");
  auto bad = CanonicalPolicy("worst-fit");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr("choose from"));
  for (const std::string& p : PackPolicyNames()) EXPECT_TRUE(PackProfile(p).ok()) << p;
}

// Two 2-GPU nodes: node 0 empty, node 1 with GPU 0 half used. Policies that
// pack put a 300-milli share on node 1's used GPU.
std::vector<model::Node> TwoNodes(int64_t cpu0 = 32000, int64_t cpu1 = 32000) {
  return {MakeNode("a", "T4", 2, cpu0), MakeNode("b", "T4", 2, cpu1)};
}

TEST(PolicyTest, PackersPreferThePartlyUsedGpu) {
  for (const char* policy : {"best-fit", "gpu-packing", "fgd", "tessera"}) {
    Harness h(policy, TwoNodes(), {Typical(1, 1000, 1000, 1.0)});
    h.Occupy(1, 0, 500);
    MemberPlacement m = h.Place(MakePod("p", 1, 300, 1000));
    EXPECT_EQ(m.node, 1) << policy;
    ASSERT_EQ(m.gpus.size(), 1u) << policy;
    EXPECT_EQ(m.gpus[0].gpu, 0) << policy;
    EXPECT_EQ(h.cs.state(1).free_milli[0], 200) << policy;
  }
}

TEST(PolicyTest, DotProdPrefersTheLeastAlignedFreeResources) {
  // <free, request> over (CPU, GPU): node 1 has one free GPU left, node 0
  // eight; a whole-GPU pod scores 99 on node 1 and 93 on node 0.
  Harness h("dotprod", {MakeNode("a", "G2", 8, 96000), MakeNode("b", "G2", 8, 96000)},
            {Typical(1, 1000, 1000, 1.0)});
  for (int g = 0; g < 7; ++g) h.Occupy(1, g, 1000);
  EXPECT_EQ(h.Place(MakePod("p", 1, 1000, 4000)).node, 1);
}

TEST(PolicyTest, DotProdNormalisesCpuBy128Vcpu) {
  // The simulator divides CPU by its MaxSpecCpu, 128 vCPU, not by the
  // largest openb node (104 vCPU). A 4-GPU, 64-vCPU pod: node 0 has 117 vCPU
  // and 4 GPUs free, node 1 64 vCPU and 8 GPUs. Over 128 vCPU the dot
  // products are 0.707 and 0.75 (scores 64 and 62: node 0); over 104 vCPU
  // they would be 0.942 and 0.879 (scores 52 and 56: node 1).
  Harness h("dotprod", {MakeNode("a", "G2", 4, 117000), MakeNode("b", "G2", 8, 64000)},
            {Typical(1, 1000, 1000, 1.0)});
  EXPECT_EQ(h.Place(MakePod("p", 4, 1000, 64000)).node, 0);
}

TEST(PolicyTest, GpuClusteringJoinsPodsOfTheSameShape) {
  // Node 0 runs a whole-GPU pod, node 1 a shared-GPU pod: a new share joins
  // node 1, a new whole-GPU pod joins node 0.
  Harness h("gpu-clustering", {MakeNode("a", "T4", 4, 32000), MakeNode("b", "T4", 4, 32000)},
            {Typical(1, 1000, 1000, 1.0)});
  h.Occupy(0, 0, 1000);
  h.Occupy(1, 0, 200);
  EXPECT_EQ(h.Place(MakePod("s", 1, 300, 1000)).node, 1);
  EXPECT_EQ(h.Place(MakePod("w", 1, 1000, 1000)).node, 0);
}

TEST(PolicyTest, FgdScoresTheFragmentationGradient) {
  // Typical workload: whole GPUs only. A 300 share on node 1's half-used GPU
  // shrinks fragmentation (500 -> 200); on the empty node it grows it by 700.
  Harness h("fgd", TwoNodes(), {Typical(1, 1000, 1000, 1.0)});
  h.Occupy(1, 0, 500);
  NodeFree b = FromState(h.cs.state(1));
  PodShape s{.cpu_milli = 1000, .gpu_milli = 300, .gpus = 1};
  EXPECT_EQ(FgdScore(*h.ctx, b, s, 0), static_cast<int64_t>(100.0 / (1.0 + std::exp(-0.3))));
  NodeFree a = FromState(h.cs.state(0));
  EXPECT_EQ(FgdScore(*h.ctx, a, s, 0), static_cast<int64_t>(100.0 / (1.0 + std::exp(0.7))));
  EXPECT_EQ(h.Place(MakePod("p", 1, 300, 1000)).node, 1);
}

TEST(PolicyTest, TiesGoToTheLowestNodeId) {
  // Three identical empty nodes: every deterministic policy fills node 0
  // first (the FGD simulator's fixed node order).
  for (const char* policy : {"dotprod", "gpu-packing", "gpu-clustering", "fgd", "tessera"}) {
    Harness h(policy,
              {MakeNode("a", "G2", 8, 96000), MakeNode("b", "G2", 8, 96000),
               MakeNode("c", "G2", 8, 96000)},
              {Typical(1, 1000, 1000, 1.0)});
    EXPECT_EQ(h.Place(MakePod("p", 1, 1000, 1000)).node, 0) << policy;
  }
}

TEST(PolicyTest, RandomIsSeededAndSpreads) {
  std::vector<model::Node> nodes;
  for (int i = 0; i < 8; ++i) nodes.push_back(MakeNode(absl::StrCat("n", i), "G2", 8, 96000));
  std::vector<NodeId> first, second;
  for (std::vector<NodeId>* out : {&first, &second}) {
    Harness h("random", nodes, {Typical(1, 1000, 1000, 1.0)});
    for (int i = 0; i < 16; ++i)
      out->push_back(h.Place(MakePod(absl::StrCat("p", i), 1, 1000, 1000)).node);
  }
  EXPECT_EQ(first, second);  // same seed, same placements
  EXPECT_GT(std::set<NodeId>(first.begin(), first.end()).size(), 3u);
}

TEST(PolicyTest, TesseraKeepsCpuForTheGpus) {
  // Node 0: 2 GPUs, 8 vCPU; node 1: 2 GPUs, 100 vCPU. GPU pods need 3 vCPU
  // per GPU. A 3-vCPU CPU-only pod fits both and leaves node 0's CPU enough
  // for FGD (3 >= 3), so FGD takes the lower node id; tessera sees node 0
  // would strand GPU share (2 GPUs need 6 vCPU, 5 left) and takes node 1.
  std::vector<model::Node> nodes = {MakeNode("a", "T4", 2, 8000), MakeNode("b", "T4", 2, 100000)};
  Harness fgd("fgd", nodes, {Typical(1, 1000, 3000, 1.0)});
  EXPECT_EQ(fgd.Place(MakePod("c", 0, 0, 3000)).node, 0);
  Harness tes("tessera", nodes, {Typical(1, 1000, 3000, 1.0)});
  EXPECT_GT(StrandedGpuMilli(*tes.ctx, Take(FromState(tes.cs.state(0)), {.cpu_milli = 3000}, -1)),
            0);
  EXPECT_EQ(tes.Place(MakePod("c", 0, 0, 3000)).node, 1);
}

TEST(PolicyTest, WholeGpusStayInsideAnNvlinkIsland) {
  // Four GPUs in NVLink-bridged pairs {0,1} {2,3}; GPU 0 is taken. A 2-GPU
  // member fits {1,2} in index order but only {2,3} shares an island: every
  // policy takes {2,3}, as the default chooser would.
  model::Node n = MakeNode("a", "A100", 4, 64000);
  n.topology = model::NodeTopology::NvLinkGroups(4, 2);
  for (const std::string& policy : PackPolicyNames()) {
    Harness h(policy, {n}, {Typical(2, 1000, 1000, 1.0)});
    h.Occupy(0, 0, model::kMilliPerGpu);
    MemberPlacement m = h.Place(MakePod("p", 2, 1000, 1000));
    ASSERT_EQ(m.gpus.size(), 2u) << policy;
    EXPECT_EQ(m.gpus[0].gpu, 2) << policy;
    EXPECT_EQ(m.gpus[1].gpu, 3) << policy;
  }
}

TEST(PluginSetTest, OneRegistryForEveryPluginAServerRuns) {
  PluginSet set;
  PluginRegistry r = set.Registry();
  for (const char* name :
       {"resource-fit", "gang", "topology", "pack-spread", "nvlink-aware", "pack-tessera",
        "pack-fgd", "pack-gpu-tessera", kLookaheadPlugin, kObservePlugin}) {
    EXPECT_TRUE(r.Contains(name)) << name;
  }
  // Every canonical policy's profile validates against it.
  for (const std::string& policy : PackPolicyNames()) {
    auto p = PackProfile(policy);
    ASSERT_TRUE(p.ok());
    EXPECT_TRUE(ValidateProfile(*p, r).ok()) << policy;
    EXPECT_TRUE(ProfileUses(*p, "resource-fit"));
    EXPECT_FALSE(ProfileUses(*p, kObservePlugin));
  }
  // The pack names are taken once: registering them again is refused.
  EXPECT_FALSE(set.Register(&r).ok());
}

TEST(PluginSetTest, ObserveLearnsTheTypicalPodsFromTheJobsScheduled) {
  // A server knows no trace: with pack-observe in its profile the context
  // starts with no typical pods and learns them from the jobs it tries,
  // each job once however often it is retried.
  ClusterState cs;
  ASSERT_TRUE(cs.AddNode(MakeNode("a", "T4", 2, 64000)).ok());
  PluginSet set;
  auto prof = PackProfile("tessera");
  ASSERT_TRUE(prof.ok());
  prof->plugins.insert(prof->plugins.begin() + 1, PluginConfig{.name = kObservePlugin});
  auto sched = Scheduler::Create(*prof, set.Registry(), &cs);
  ASSERT_TRUE(sched.ok()) << sched.status();
  EXPECT_TRUE(set.context().typical().empty());
  EXPECT_TRUE((*sched)->Schedule(MakePod("half", 1, 500, 2000)).placed());
  EXPECT_TRUE((*sched)->Schedule(MakePod("whole", 1, 1000, 4000)).placed());
  model::Job big = MakePod("big", 2, 1000, 4000);  // does not fit now: retried
  EXPECT_FALSE((*sched)->Schedule(big).placed());
  EXPECT_FALSE((*sched)->Schedule(big).placed());
  EXPECT_EQ(set.context().observed(), 3);
  ASSERT_FALSE(set.context().typical().empty());
  double share = 0;
  for (const TypicalPod& t : set.context().typical()) share += t.p;
  EXPECT_NEAR(share, 1.0, 1e-9);
}

// The look-ahead admission (lookahead.h). The mix: 810-milli pods, whose
// 190-milli leftover no pod of the mix fits, 400-milli pods and whole GPUs
// asking 8 vCPU each.
std::vector<TypicalPod> LookaheadMix() {
  return {Typical(1, 810, 2000, 0.3), Typical(1, 400, 2000, 0.2), Typical(1, 1000, 8000, 0.5)};
}

TEST(LookaheadTest, HoldsAPodThatWouldStrandAGpuArrivingWorkWants) {
  std::vector<model::Node> nodes = {MakeNode("a", "T4", 2, 64000)};
  Harness h("tessera", nodes, LookaheadMix());
  EXPECT_DOUBLE_EQ(h.ctx->ShareFitting(190), 0);
  EXPECT_DOUBLE_EQ(h.ctx->whole_cpu_per_gpu(), 8000);
  // Without a forecast nothing is held.
  model::Job pod = MakePod("p810", 1, 810, 2000);
  ScheduleResult r = h.sched->Schedule(pod);
  ASSERT_TRUE(r.placed());
  ASSERT_TRUE(h.cs.Release(r.placement.job_key).ok());
  // Once the pod takes a GPU one is left wholly free; 1000 milli of
  // whole-GPU pods arriving would take it, so the pod is held and the
  // cluster is left as it was.
  h.ctx->set_forecast(ArrivalForecast{.whole_gpu_milli = 1000, .cpu_milli = 8000});
  r = h.sched->Schedule(pod);
  EXPECT_FALSE(r.placed());
  EXPECT_EQ(r.plugin, kLookaheadPlugin);
  EXPECT_THAT(r.reason, ::testing::HasSubstr("held: 810 milli would strand 190"));
  EXPECT_EQ(h.cs.allocated_milli(), 0);
  EXPECT_EQ(h.cs.free_cpu_milli(), 64000);
  EXPECT_TRUE(h.cs.CheckConsistency().ok());
  // Less than the free GPU arriving: placed.
  h.ctx->set_forecast(ArrivalForecast{.whole_gpu_milli = 999, .cpu_milli = 8000});
  r = h.sched->Schedule(pod);
  ASSERT_TRUE(r.placed());
  ASSERT_TRUE(h.cs.Release(r.placement.job_key).ok());
  // Enough GPU work arriving, but it asks four times the free CPU: only a
  // quarter of it could run, so the pod is placed.
  h.ctx->set_forecast(ArrivalForecast{.whole_gpu_milli = 2000, .cpu_milli = 4 * 64000});
  EXPECT_TRUE(HoldsSharedGpus(ArrivalForecast{.whole_gpu_milli = 2000, .cpu_milli = 64000}, h.cs));
  EXPECT_FALSE(
      HoldsSharedGpus(ArrivalForecast{.whole_gpu_milli = 2000, .cpu_milli = 4 * 64000}, h.cs));
  r = h.sched->Schedule(pod);
  ASSERT_TRUE(r.placed());
  ASSERT_TRUE(h.cs.Release(r.placement.job_key).ok());
  // Nothing arriving: never held, even with no free GPU to spare.
  EXPECT_FALSE(HoldsSharedGpus(ArrivalForecast{}, h.cs));
}

TEST(LookaheadTest, LetsThroughWhatStrandsNothingAWholeGpuPodCouldUse) {
  const ArrivalForecast flood{.whole_gpu_milli = 100000, .cpu_milli = 8000};
  {
    // A 400-milli pod leaves 600, which 400-milli pods fit.
    Harness h("tessera", {MakeNode("a", "T4", 2, 64000)}, LookaheadMix());
    h.ctx->set_forecast(flood);
    h.Place(MakePod("p400", 1, 400, 2000));
    // Whole GPUs are never held.
    h.Place(MakePod("w", 1, 1000, 8000));
  }
  {
    // An 810-milli pod on a GPU already partly used strands no free GPU.
    Harness h("tessera", {MakeNode("a", "T4", 1, 64000)}, LookaheadMix());
    h.Occupy(0, 0, 100);
    h.ctx->set_forecast(flood);
    EXPECT_EQ(h.Place(MakePod("p810", 1, 810, 2000)).gpus[0].gpu, 0);
  }
  {
    // A node with less CPU than a whole-GPU pod needs (7 of 8 vCPU): its
    // free GPU would idle anyway, so the pod takes it.
    Harness h("tessera", {MakeNode("a", "T4", 2, 7000)}, LookaheadMix());
    h.ctx->set_forecast(flood);
    h.Place(MakePod("p810", 1, 810, 2000));
  }
  {
    // Baselines do not look ahead.
    Harness h("fgd", {MakeNode("a", "T4", 2, 64000)}, LookaheadMix());
    h.ctx->set_forecast(flood);
    h.Place(MakePod("p810", 1, 810, 2000));
  }
}

// Invariants on random workloads for every policy: no GPU over 1000 milli,
// model constraints respected, a failed pod changes nothing.
TEST(PolicyTest, InvariantsHoldOnRandomWorkloads) {
  std::vector<model::Node> nodes;
  for (int i = 0; i < 6; ++i) {
    nodes.push_back(
        MakeNode(absl::StrCat("g", i), i % 2 ? "V100M16" : "V100M32", 1 + i % 4, 8000 + 4000 * i));
  }
  nodes.push_back(MakeNode("cpu", "", 0, 16000));
  for (const std::string& policy : PackPolicyNames()) {
    Harness h(policy, nodes,
              {Typical(1, 500, 2000, 0.4), Typical(1, 1000, 4000, 0.4), Typical(0, 0, 2000, 0.2)});
    std::mt19937_64 gen(42);
    int failed = 0;
    for (int i = 0; i < 200; ++i) {
      int kind = static_cast<int>(gen() % 5);
      int gpus = kind == 0 ? 0 : kind == 4 ? 2 : 1;
      int milli = kind == 1 ? 100 + static_cast<int>(gen() % 9) * 100 : 1000;
      std::vector<std::string> models;
      if (gen() % 3 == 0 && gpus > 0) models = {"V100M16"};
      model::Job j = MakePod(absl::StrCat("p", i), gpus, milli, 1000 + (gen() % 4) * 1000, models);
      std::vector<NodeState> before;
      for (NodeId id = 0; id < h.cs.num_node_slots(); ++id) before.push_back(h.cs.state(id));
      int64_t alloc = h.cs.allocated_milli();
      ScheduleResult r = h.sched->Schedule(j);
      if (!r.placed()) {
        ++failed;
        EXPECT_EQ(h.cs.allocated_milli(), alloc) << policy;
        for (NodeId id = 0; id < h.cs.num_node_slots(); ++id) {
          EXPECT_EQ(h.cs.state(id).free_milli, before[id].free_milli) << policy;
          EXPECT_EQ(h.cs.state(id).cpu_free, before[id].cpu_free) << policy;
        }
        continue;
      }
      const MemberPlacement& m = r.placement.members[0];
      if (!models.empty()) {
        EXPECT_EQ(h.cs.model_name(h.cs.state(m.node).model), "V100M16") << policy;
      }
      EXPECT_EQ(static_cast<int>(m.gpus.size()), gpus) << policy;
    }
    ASSERT_TRUE(h.cs.CheckConsistency().ok()) << policy << ": " << h.cs.CheckConsistency();
    for (NodeId id = 0; id < h.cs.num_node_slots(); ++id) {
      const NodeState& st = h.cs.state(id);
      for (int g = 0; g < st.num_gpus; ++g) {
        EXPECT_GE(st.free_milli[g], 0) << policy;
        EXPECT_LE(st.free_milli[g], 1000) << policy;
      }
      EXPECT_GE(st.cpu_free, 0) << policy;
    }
    EXPECT_GT(failed, 0) << policy << ": the workload should overfill the cluster";
  }
}

}  // namespace
}  // namespace tessera::sched::pack
