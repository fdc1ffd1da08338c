#include "sim/pack/pack_sim.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "config/profile_yaml.h"
#include "nlohmann/json.hpp"
#include "sched/pack/plugin_set.h"
#include "sim/pack/openb_test_util.h"
#include "sim/pack/report.h"

namespace tessera::sim::pack {
namespace {

using ::testing::HasSubstr;

std::vector<model::Node> SmallCluster() {
  std::vector<model::Node> nodes;
  for (int i = 0; i < 6; ++i) {
    nodes.push_back(
        trace::ToNode({absl::StrCat("n", i), 32000, 131072, i % 2 ? 8 : 2, i % 2 ? "G2" : "T4"}));
  }
  nodes.push_back(trace::ToNode({"cpu", 64000, 131072, 0, ""}));
  return nodes;
}

PackTrace SmallTrace() {
  PackTrace t;
  t.name = "small";
  int milli[] = {1000, 500, 250, 810, 1000, 1000};
  for (int i = 0; i < 30; ++i) {
    trace::OpenbPod p;
    p.name = absl::StrCat("p", i);
    p.cpu_milli = 1000 + (i % 4) * 1000;
    p.memory_mib = 1024;
    p.num_gpu = i % 10 == 9 ? 0 : (i % 10 == 8 ? 2 : 1);
    p.gpu_milli = p.num_gpu == 2 ? 1000 : (p.num_gpu == 0 ? 0 : milli[i % 6]);
    if (i % 7 == 0 && p.num_gpu > 0) p.gpu_spec = "T4";
    t.pods.push_back(p);
  }
  return t;
}

TEST(PackSimTest, ParseSeeds) {
  EXPECT_EQ(*ParseSeeds("42-44"), (std::vector<uint64_t>{42, 43, 44}));
  EXPECT_EQ(*ParseSeeds("1,5,7-8"), (std::vector<uint64_t>{1, 5, 7, 8}));
  for (const char* bad : {"", "x", "5-3", "4-"}) {
    auto r = ParseSeeds(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("--seeds")) << bad;
  }
}

TEST(PackSimTest, ParseLookahead) {
  EXPECT_EQ(*ParseLookahead("0"), 0);
  EXPECT_DOUBLE_EQ(*ParseLookahead("50"), 0.5);
  EXPECT_EQ(*ParseLookahead("all"), kLookaheadAll);
  for (const char* bad : {"", "x", "-5", "2000", "nan"}) {
    auto r = ParseLookahead(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("--lookahead")) << bad;
  }
}

// Ten one-GPU nodes; half the pods ask 810 milli (their 190-milli leftover
// fits no pod), half a whole GPU. Knowing the stream, tessera holds 810-milli
// pods while the whole-GPU pods still to come would take every free GPU,
// and ends with more of the cluster allocated on every seed.
TEST(PackSimTest, LookaheadHoldsStrandingPodsForArrivingWholeGpus) {
  std::vector<model::Node> nodes;
  for (int i = 0; i < 10; ++i) {
    nodes.push_back(trace::ToNode({absl::StrCat("n", i), 32000, 131072, 1, "T4"}));
  }
  PackTrace t;
  t.name = "mix";
  for (int i = 0; i < 8; ++i) {
    trace::OpenbPod p;
    p.name = absl::StrCat("p", i);
    p.cpu_milli = 4000;
    p.memory_mib = 1024;
    p.num_gpu = 1;
    p.gpu_milli = i % 2 ? 1000 : 810;
    t.pods.push_back(p);
  }
  PackConfig off, all;
  all.lookahead = kLookaheadAll;
  double gain = 0;
  int64_t held = 0;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    auto a = RunPack(nodes, t, "tessera", seed, off);
    auto b = RunPack(nodes, t, "tessera", seed, all);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->held, 0);
    EXPECT_LE(b->held_failed, b->held);
    EXPECT_LE(b->held_failed, b->failed);
    EXPECT_GE(b->alloc_pct[kMaxArrivalPct], a->alloc_pct[kMaxArrivalPct]) << "seed " << seed;
    for (int k = 1; k <= kMaxArrivalPct; ++k) EXPECT_GE(b->alloc_pct[k], b->alloc_pct[k - 1]);
    gain += b->alloc_pct[kMaxArrivalPct] - a->alloc_pct[kMaxArrivalPct];
    held += b->held;
  }
  EXPECT_GT(held, 0);
  EXPECT_GT(gain, 0);
  // A window of 0% of capacity knows nothing arrives: the same as none.
  PackConfig tiny;
  tiny.lookahead = 1e-9;
  auto c = RunPack(nodes, t, "tessera", 1, tiny);
  auto d = RunPack(nodes, t, "tessera", 1, off);
  ASSERT_TRUE(c.ok() && d.ok());
  EXPECT_EQ(c->alloc_pct, d->alloc_pct);
  EXPECT_EQ(c->held, 0);
}

TEST(PackSimTest, SmallRunFollowsTheProtocol) {
  PackConfig cfg;
  cfg.policies = {"random", "fgd", "tessera"};
  cfg.seeds = {1, 2};
  cfg.inflate = 1.3;
  cfg.threads = 2;
  auto runs = RunPackSweep(SmallCluster(), {SmallTrace()}, cfg);
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 6u);
  const double cap = 3 * 2 + 3 * 8;
  for (const PackRunResult& r : *runs) {
    EXPECT_GE(r.pods, 30);
    EXPECT_GT(r.failed, 0);  // inflated past capacity
    EXPECT_LE(r.arrived_pct, 130.0 + 1e-9);
    EXPECT_GT(r.arrived_pct, 100.0);
    for (int k = 0; k <= kMaxArrivalPct; ++k) {
      EXPECT_GE(r.alloc_pct[k], 0);
      EXPECT_LE(r.alloc_pct[k], 100.0);
      if (k > 0) {
        EXPECT_GE(r.alloc_pct[k], r.alloc_pct[k - 1]);  // nothing leaves
      }
    }
    EXPECT_LE(r.alloc_pct[kMaxArrivalPct], r.arrived_pct + 1e-9);  // never more than arrived
    EXPECT_NEAR(r.unallocated_gpus, cap * (1 - r.alloc_pct[kMaxArrivalPct] / 100), 1e-6);
    // Every idle GPU share has exactly one cause (all GPUs are healthy).
    EXPECT_GT(r.idle.total(), 0);
    EXPECT_NEAR(r.idle.total(), r.unallocated_gpus, 1e-6);
    EXPECT_EQ(r.idle.memory, 0);  // memory not enforced
  }
  // Same seed, same result.
  auto again = RunPack(SmallCluster(), SmallTrace(), "fgd", 1, cfg);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->alloc_pct, (*runs)[2].alloc_pct);

  std::vector<PackSummary> sums = Summarize(*runs);
  ASSERT_EQ(sums.size(), 3u);
  EXPECT_EQ(sums[1].policy, "fgd");
  EXPECT_EQ(sums[1].runs, 2);
  auto j = nlohmann::json::parse(FormatJson(sums, 1.0));
  EXPECT_TRUE(j.contains("fgd"));
  EXPECT_TRUE(j["tessera"].contains("alloc_pct_at_130"));
  EXPECT_TRUE(j["tessera"]["idle_gpus_by_cause"].contains("fraction"));
  EXPECT_THAT(FormatSvg(sums), HasSubstr("<svg"));
  EXPECT_THAT(FormatSvg(sums), HasSubstr("polyline"));
  EXPECT_THAT(FormatRunsCsv(*runs), HasSubstr("trace,policy,seed"));
  EXPECT_THAT(FormatTable(sums, 1.0), HasSubstr("tessera"));
}

// A two-GPU node: GPU 0 has 190 milli free, GPU 1 is free.
sched::NodeState IdleNode(int64_t cpu_free, int64_t memory_free) {
  sched::NodeState st;
  st.present = st.schedulable = true;
  st.model = 0;
  st.num_gpus = 2;
  st.healthy_mask = 0b11;
  st.cpu_free = cpu_free;
  st.memory_free = memory_free;
  st.free_milli[0] = 190;
  st.free_milli[1] = 1000;
  return st;
}

IdleShape Shape(int64_t cpu, int32_t milli, int32_t gpus, uint64_t mask = 0, int64_t mem = 0) {
  return IdleShape{{.cpu_milli = cpu, .gpu_milli = milli, .gpus = gpus, .model_mask = mask}, mem};
}

TEST(PackSimTest, ClassifyIdleNamesTheCause) {
  const std::vector<IdleShape> shapes = {Shape(4000, 810, 1), Shape(8000, 1000, 1),
                                         Shape(2000, 0, 0), Shape(1000, 1000, 2)};
  IdleGpus open;
  ClassifyIdle(IdleNode(8000, 0), shapes, &open);
  EXPECT_DOUBLE_EQ(open.fraction, 0.19);  // nothing asks <= 190 milli
  EXPECT_DOUBLE_EQ(open.whole, 1.0);
  EXPECT_DOUBLE_EQ(open.partial, 0);
  EXPECT_DOUBLE_EQ(open.cpu + open.memory + open.model, 0);

  IdleGpus cpu;
  ClassifyIdle(IdleNode(3000, 0), shapes, &cpu);  // fits neither 4000 nor 8000 milli-CPU
  EXPECT_DOUBLE_EQ(cpu.cpu, 1.0);                 // the CPU-only and 2-GPU shapes do not count
  EXPECT_DOUBLE_EQ(cpu.fraction, 0.19);
  EXPECT_DOUBLE_EQ(cpu.whole, 0);

  IdleGpus model;
  ClassifyIdle(IdleNode(8000, 0), {Shape(4000, 810, 1, /*mask=*/0b10)}, &model);
  EXPECT_DOUBLE_EQ(model.model, 1.0);

  IdleGpus mem;
  ClassifyIdle(IdleNode(8000, 1024), {Shape(4000, 810, 1, 0, /*mem=*/4096)}, &mem);
  EXPECT_DOUBLE_EQ(mem.memory, 1.0);

  // A small pod makes the leftover usable; an unhealthy GPU is not idle capacity.
  sched::NodeState st = IdleNode(8000, 0);
  st.healthy_mask = 0b01;
  IdleGpus small;
  ClassifyIdle(st, {Shape(1000, 160, 1)}, &small);
  EXPECT_DOUBLE_EQ(small.partial, 0.19);
  EXPECT_DOUBLE_EQ(small.total(), 0.19);
}

// A profile file runs as a policy under its own name. Written out as YAML,
// the tessera policy's profile reproduces `--policy tessera` exactly: what the
// simulator measures for a profile is what `tessera server --profile` runs.
TEST(PackSimTest, AProfileFileRunsAsThePolicyDoes) {
  auto yaml = config::ParseProfileYaml(R"(
name: tessera-as-yaml
gpuChooser: pack-gpu-tessera
nodesToScore: 0
dedupeEquivalentNodes: true
tieBreak: lowestNodeId
plugins:
  - name: resource-fit
  - name: pack-tessera
  - name: pack-lookahead
)",
                                       sched::pack::PluginSet().Registry());
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  PackConfig cfg;
  cfg.profiles = {*yaml};
  for (uint64_t seed : {1, 2, 3}) {
    auto a = RunPack(SmallCluster(), SmallTrace(), "tessera", seed, cfg);
    auto b = RunPack(SmallCluster(), SmallTrace(), "tessera-as-yaml", seed, cfg);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(b->policy, "tessera-as-yaml");
    EXPECT_EQ(a->alloc_pct, b->alloc_pct) << "seed " << seed;
    EXPECT_EQ(a->failed, b->failed);
  }
  // The shipped server profile learns its typical pods (pack-observe) and runs whole.
  auto server = config::LoadProfileFile(TESSERA_SOURCE_DIR "/deploy/profiles/tessera.yaml",
                                        sched::pack::PluginSet().Registry());
  ASSERT_TRUE(server.ok()) << server.status();
  cfg.profiles = {*server};
  auto r = RunPack(SmallCluster(), SmallTrace(), "tessera", 1, cfg);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->alloc_pct[kMaxArrivalPct], 50.0);
  EXPECT_LT(r->failed, r->pods);
}

TEST(PackSimTest, RejectsBadInput) {
  PackConfig cfg;
  auto r = RunPack(SmallCluster(), SmallTrace(), "worst-fit", 1, cfg);
  EXPECT_FALSE(r.ok());
  PackTrace empty{"empty", {}};
  EXPECT_FALSE(RunPack(SmallCluster(), empty, "fgd", 1, cfg).ok());
}

// A small run on the real openb trace: one seed, two policies.
TEST(PackSimTest, SharedTraceDefault) {
  std::string dir = OpenbDir();
  if (dir.empty()) GTEST_SKIP() << kNoTrace;
  std::vector<model::Node> nodes;
  PackTrace t;
  ASSERT_NO_FATAL_FAILURE(LoadDefault(dir, &nodes, &t));
  PackConfig cfg;
  auto fgd = RunPack(nodes, t, "fgd", 42, cfg);
  auto tes = RunPack(nodes, t, "tessera", 42, cfg);
  ASSERT_TRUE(fgd.ok() && tes.ok());
  // The authors' mean for FGD at 130% is 95.39; one seed lands near it.
  EXPECT_NEAR(fgd->alloc_pct[130], 95.39, 1.0);
  EXPECT_GT(tes->alloc_pct[130], fgd->alloc_pct[130]);
  // Where the idle GPUs are: tessera strands fewer by CPU than FGD, and what
  // remains is mostly shared-GPU leftovers (docs/sim-pack.md).
  EXPECT_NEAR(tes->idle.total(), tes->unallocated_gpus, 1e-6);
  EXPECT_LT(tes->idle.cpu, fgd->idle.cpu);
  EXPECT_GT(tes->idle.partial, tes->unallocated_gpus / 2);
}

}  // namespace
}  // namespace tessera::sim::pack
