// Tests of the replay simulator: hand-computed JCTs per policy, checkpoint
// restarts after a failure, hot spares, conservation of GPU time and
// determinism.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "common/clock.h"
#include "sched/plugins/default_registry.h"
#include "sim/replay/policy.h"
#include "sim/replay/replay_command.h"
#include "sim/replay/simulator.h"
#include "sim/replay/synthetic_workload.h"

namespace tessera::sim::replay {
namespace {

SimJob J(double submit, double duration, int gpus, int priority = 0) {
  SimJob j;
  j.submit_s = submit;
  j.duration_s = duration;
  j.gpus = gpus;
  j.priority = priority;
  return j;
}

SimOptions Fleet(int nodes, int gpus_per_node) {
  SimOptions o;
  o.cluster.nodes = nodes;
  o.cluster.gpus_per_node = gpus_per_node;
  return o;
}

PolicyResult RunOne(const Workload& w, const SimOptions& o, const std::string& policy) {
  auto spec = PolicyRegistry::Builtin().Lookup(policy);
  EXPECT_TRUE(spec.ok()) << spec.status();
  ManualClock wall;
  auto r = RunReplay(w, o, *spec, sched::DefaultRegistry(), &wall);
  EXPECT_TRUE(r.ok()) << r.status();
  return std::move(*r);
}

// One node of 4 GPUs. j0: 4 GPUs x 100 s at 0; j1: 2 x 50 at 10; j2: 2 x 10
// at 20; j3: 1 x 20 at 30 with a higher priority.
Workload Tiny() {
  Workload w;
  w.queues = {"a"};
  w.jobs = {J(0, 100, 4), J(10, 50, 2), J(20, 10, 2), J(30, 20, 1, /*priority=*/10)};
  return w;
}

void ExpectJcts(const PolicyResult& r, std::vector<double> want) {
  ASSERT_EQ(r.jct_by_job.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_DOUBLE_EQ(r.jct_by_job[i], want[i]) << r.policy << " job " << i;
  }
}

TEST(ReplayTinyTrace, FifoIsStrictArrivalOrder) {
  // j0 0-100; at 100 j1 (100-150) and j2 (100-110) start, j3 waits: 110-130.
  ExpectJcts(RunOne(Tiny(), Fleet(1, 4), "fifo"), {100, 140, 90, 100});
}

TEST(ReplayTinyTrace, SjfRunsShortestFirst) {
  // At 100: j2 (10 s) 100-110, j3 (20 s) 100-120; j1 needs 2, 1 free: 110-160.
  ExpectJcts(RunOne(Tiny(), Fleet(1, 4), "sjf"), {100, 150, 90, 90});
}

TEST(ReplayTinyTrace, DefaultHonoursPriority) {
  // At 100: j3 (priority 10) 100-120, j1 100-150; j2 waits for j3: 120-130.
  ExpectJcts(RunOne(Tiny(), Fleet(1, 4), "default"), {100, 140, 110, 90});
}

TEST(ReplayTinyTrace, LasPreemptsDemotedJob) {
  // Band limit 100 GPU-s. j0 reaches it at t=25 and is demoted; j1 (band 0)
  // preempts it (checkpointed at 25 s of progress) and runs 25-75; j2 25-35;
  // j3 35-55; j0 resumes at 75 with its 75 s left: done at 150.
  SimOptions o = Fleet(1, 4);
  o.las.thresholds_gpu_s = {100};
  PolicyResult r = RunOne(Tiny(), o, "las");
  ExpectJcts(r, {150, 65, 15, 25});
  EXPECT_EQ(r.preemptions, 1);
  EXPECT_DOUBLE_EQ(r.preempt_lost_gpu_s, 0);
}

TEST(ReplayFailure, GangRestartsFromLastCheckpoint) {
  // 8-GPU gang, 10000 s, checkpoint every 1800 s, restart overhead 300 s.
  // GPU 3 of node 0 fails at 4000: checkpoints at 1800 and 3600, so 400 s of
  // work are lost; the gang restarts on node 1 at once and finishes at
  // 4000 + 300 + (10000 - 3600) = 10700.
  Workload w;
  w.queues = {"a"};
  w.jobs = {J(0, 10000, 8)};
  w.jobs[0].checkpoint_s = 1800;
  w.jobs[0].restart_s = 300;
  SimOptions o = Fleet(2, 8);
  o.scripted_failures = {{.t_s = 4000, .node = 0, .gpu = 3}};
  for (std::string p : {"fifo", "sjf", "las", "default"}) {
    PolicyResult r = RunOne(w, o, p);
    ASSERT_EQ(r.completed, 1) << p;
    EXPECT_DOUBLE_EQ(r.jct_by_job[0], 10700) << p;
    EXPECT_EQ(r.gang_kills, 1) << p;
    EXPECT_DOUBLE_EQ(r.failure_lost_gpu_s, 8 * 400.0) << p;
    EXPECT_DOUBLE_EQ(r.failure_restart_gpu_s, 8 * 300.0) << p;
    EXPECT_DOUBLE_EQ(r.allocated_gpu_s, 8 * 10700.0) << p;
    EXPECT_DOUBLE_EQ(r.useful_gpu_s, 8 * 10000.0) << p;
  }
}

TEST(ReplayCheckpointCost, SplitRunAndRunTime) {
  SimJob j = J(0, 10000, 8);
  j.checkpoint_s = 1800;
  j.checkpoint_cost_s = 100;
  // 4000 s of run: two cycles of 1800 + 100, then 200 s of work.
  RunSplit s = SplitRun(j, 4000);
  EXPECT_DOUBLE_EQ(s.saved, 3600);
  EXPECT_DOUBLE_EQ(s.done, 3800);
  EXPECT_DOUBLE_EQ(s.writing, 200);
  // Inside a write: the work is done, the checkpoint not yet saved.
  s = SplitRun(j, 1850);
  EXPECT_DOUBLE_EQ(s.saved, 0);
  EXPECT_DOUBLE_EQ(s.done, 1800);
  EXPECT_DOUBLE_EQ(s.writing, 50);
  // No write after the last piece of work.
  EXPECT_DOUBLE_EQ(RunTimeFor(j, 3600), 3600 + 100);
  EXPECT_DOUBLE_EQ(RunTimeFor(j, 3601), 3601 + 200);
  j.checkpoint_cost_s = 0;
  EXPECT_DOUBLE_EQ(SplitRun(j, 4000).done, 4000);
  EXPECT_DOUBLE_EQ(SplitRun(j, 4000).saved, 3600);
  EXPECT_DOUBLE_EQ(RunTimeFor(j, 4000), 4000);
}

TEST(ReplayCheckpointCost, WritesCostRunTimeAndCountInGoodput) {
  // As GangRestartsFromLastCheckpoint, with each checkpoint taking 100 s to
  // write. The failure at 4000 finds two checkpoints saved (3600 s of work)
  // and 200 s of work since; the restart at 4000 pays 300 s, then 6400 s of
  // work with three writes: done at 4000 + 300 + 6700 = 11000.
  Workload w;
  w.queues = {"a"};
  w.jobs = {J(0, 10000, 8)};
  w.jobs[0].checkpoint_s = 1800;
  w.jobs[0].checkpoint_cost_s = 100;
  w.jobs[0].restart_s = 300;
  SimOptions o = Fleet(2, 8);
  o.scripted_failures = {{.t_s = 4000, .node = 0, .gpu = 3}};
  for (std::string p : {"fifo", "sjf", "las", "default", "queues"}) {
    PolicyResult r = RunOne(w, o, p);
    ASSERT_EQ(r.completed, 1) << p;
    EXPECT_DOUBLE_EQ(r.jct_by_job[0], 11000) << p;
    EXPECT_DOUBLE_EQ(r.failure_lost_gpu_s, 8 * 200.0) << p;
    EXPECT_DOUBLE_EQ(r.failure_restart_gpu_s, 8 * 300.0) << p;
    EXPECT_DOUBLE_EQ(r.checkpoint_write_gpu_s, 8 * 500.0) << p;
    EXPECT_DOUBLE_EQ(r.allocated_gpu_s, 8 * 11000.0) << p;
    EXPECT_DOUBLE_EQ(r.useful_gpu_s, 8 * 10000.0) << p;
  }
  // Without failures the bound is what the five writes cost: 1 - 500 / 10000.
  o.scripted_failures.clear();
  EXPECT_DOUBLE_EQ(GoodputBound(w, o), 0.95);
}

TEST(ReplayCheckpointCost, YoungDalyCadenceFromTheFleetsFailureRate) {
  SimOptions o = Fleet(3125, 8);
  o.failures.gpu_failure_interval_s = 2.5 * 3600;
  // 25,000 GPUs, one failure per 2.5 h: 62,500 h per GPU.
  EXPECT_DOUBLE_EQ(FleetGpuMtbfSeconds(o), 25000 * 2.5 * 3600);
  EXPECT_DOUBLE_EQ(FleetGpuMtbfSeconds(Fleet(4, 8)), 0);
  Workload w;
  w.queues = {"a"};
  w.jobs = {J(0, 100, 4096), J(0, 100, 8), J(0, 100, 8)};
  for (SimJob& j : w.jobs) j.checkpoint_s = 1800;
  w.jobs[0].checkpoint_cost_s = 60;
  w.jobs[1].checkpoint_cost_s = 60;
  EXPECT_EQ(ApplyYoungDalyCadence(FleetGpuMtbfSeconds(o), &w), 2);
  EXPECT_DOUBLE_EQ(w.jobs[0].checkpoint_s, 2567);  // sqrt(2 x 60 x 54,932 s)
  EXPECT_DOUBLE_EQ(w.jobs[1].checkpoint_s, 58095);
  EXPECT_DOUBLE_EQ(w.jobs[2].checkpoint_s, 1800);  // no cost declared: its own
}

TEST(ReplayReporting, UtilizationWhileWorkWaitsAndWaitBySize) {
  // One node of 8 GPUs: a 4-GPU job runs 0-100; an 8-GPU job submitted at 10
  // waits until 100 at 50% utilization, then runs 100-200 with nothing waiting.
  Workload w;
  w.queues = {"a"};
  w.jobs = {J(0, 100, 4), J(10, 100, 8)};
  for (std::string p : {"fifo", "default", "queues"}) {
    PolicyResult r = RunOne(w, Fleet(1, 8), p);
    EXPECT_DOUBLE_EQ(r.util_waiting_mean, 0.5) << p;
    EXPECT_DOUBLE_EQ(r.util_waiting_p5, 0.5) << p;
    EXPECT_DOUBLE_EQ(r.util_waiting_min, 0.5) << p;
    EXPECT_DOUBLE_EQ(r.waiting_fraction, 0.45) << p;
    ASSERT_EQ(r.wait_by_gpus.size(), 2u) << p;
    EXPECT_EQ(r.wait_by_gpus[0].gpus, "4");
    EXPECT_DOUBLE_EQ(r.wait_by_gpus[0].max_s, 0) << p;
    EXPECT_EQ(r.wait_by_gpus[1].gpus, "8");
    EXPECT_DOUBLE_EQ(r.wait_by_gpus[1].max_s, 90) << p;
    EXPECT_EQ(r.wait_by_gpus[1].never_started, 0) << p;
  }
}

TEST(ReplayFailure, FailureDuringRestartLosesOnlyOverhead) {
  Workload w;
  w.queues = {"a"};
  w.jobs = {J(0, 1000, 8)};
  w.jobs[0].checkpoint_s = 600;
  w.jobs[0].restart_s = 100;
  SimOptions o = Fleet(2, 8);
  // Node 0 fails at 700 (lost 100) and is repaired at 710; the gang restarts
  // on node 1 at 700, which fails at 750, inside the restart overhead (lost
  // 0, overhead 50); it restarts on node 0 at 750.
  o.scripted_failures = {{.t_s = 700, .node = 0, .gpu = 0, .repair_s = 10},
                         {.t_s = 750, .node = 1, .gpu = 0}};
  PolicyResult r = RunOne(w, o, "fifo");
  ASSERT_EQ(r.completed, 1);
  // Restart at 750: 100 overhead + 400 left -> 1250.
  EXPECT_DOUBLE_EQ(r.jct_by_job[0], 1250);
  EXPECT_DOUBLE_EQ(r.failure_lost_gpu_s, 8 * 100.0);
  EXPECT_DOUBLE_EQ(r.failure_restart_gpu_s, 8 * (50.0 + 100.0));
  EXPECT_DOUBLE_EQ(r.useful_gpu_s, 8 * 1000.0);
}

TEST(ReplayFailure, HotSpareTakesOverAtOnce) {
  Workload w;
  w.queues = {"a"};
  w.jobs = {J(0, 10000, 8)};
  w.jobs[0].checkpoint_s = 1800;
  w.jobs[0].restart_s = 300;
  SimOptions o = Fleet(1, 8);
  o.scripted_failures = {{.t_s = 4000, .node = 0, .gpu = 3, .repair_s = 1000}};
  // No spare: the gang waits for the repair (5000) then needs 300 + 6400.
  PolicyResult none = RunOne(w, o, "fifo");
  EXPECT_DOUBLE_EQ(none.jct_by_job[0], 11700);
  EXPECT_DOUBLE_EQ(none.mean_restart_wait_s, 1000);
  EXPECT_DOUBLE_EQ(none.restart_wait_gpu_s, 8 * 1000.0);
  o.hot_spare_nodes = 1;
  PolicyResult r = RunOne(w, o, "fifo");
  EXPECT_DOUBLE_EQ(r.jct_by_job[0], 10700);
  EXPECT_EQ(r.spare_swaps, 1);
  EXPECT_DOUBLE_EQ(r.mean_restart_wait_s, 0);
}

Workload SmallSynthetic(uint64_t seed) {
  SyntheticWorkloadSpec s;
  s.jobs = 1500;
  s.span_s = 2 * 86400.0;
  s.size_mix = {{1, 0.5}, {2, 0.1}, {4, 0.1}, {8, 0.2}, {32, 0.1}};
  s.duration_median_s = 1800;
  s.checkpoint_s = 900;
  s.restart_s = 120;
  s.seed = seed;
  auto w = GenerateSyntheticWorkload(s);
  EXPECT_TRUE(w.ok());
  return std::move(*w);
}

SimOptions FailingFleet() {
  SimOptions o = Fleet(16, 8);
  o.cluster.nodes_per_rack = 4;
  o.failures.gpu_failure_interval_s = 1800;
  o.failures.node_failure_interval_s = 6 * 3600;
  o.failures.gpu_repair_s = 3600;
  o.hot_spare_nodes = 1;
  return o;
}

TEST(ReplayConservation, AllocatedEqualsRuntimePlusLostPlusOverhead) {
  Workload w = SmallSynthetic(7);
  for (std::string p : {"fifo", "sjf", "las", "default"}) {
    PolicyResult r = RunOne(w, FailingFleet(), p);
    ASSERT_EQ(r.completed, static_cast<int64_t>(w.jobs.size())) << p;
    EXPECT_GT(r.gang_kills, 0) << p;
    double demand = w.GpuSeconds();
    double losses = r.failure_lost_gpu_s + r.failure_restart_gpu_s + r.preempt_lost_gpu_s +
                    r.preempt_restart_gpu_s;
    EXPECT_NEAR(r.allocated_gpu_s, demand + losses, 1e-6 * demand) << p;
    EXPECT_NEAR(r.demand_gpu_s, demand, 1e-6 * demand) << p;
    EXPECT_LE(r.goodput, 1.0);
    // JCT is never below the run time.
    for (size_t i = 0; i < w.jobs.size(); ++i) {
      EXPECT_GE(r.jct_by_job[i] + 1e-9, w.jobs[i].duration_s) << p << " job " << i;
    }
  }
}

TEST(ReplayDeterminism, SameSeedSameResult) {
  Workload w1 = SmallSynthetic(11), w2 = SmallSynthetic(11);
  ASSERT_EQ(w1.jobs.size(), w2.jobs.size());
  for (std::string p : {"las", "default"}) {
    PolicyResult a = RunOne(w1, FailingFleet(), p);
    PolicyResult b = RunOne(w2, FailingFleet(), p);
    EXPECT_EQ(a.jct_by_job, b.jct_by_job) << p;
    EXPECT_EQ(a.gang_kills, b.gang_kills);
    EXPECT_EQ(a.preemptions, b.preemptions);
    EXPECT_EQ(a.allocated_gpu_s, b.allocated_gpu_s);
  }
  SimOptions other = FailingFleet();
  other.seed = 2;
  EXPECT_NE(RunOne(w1, other, "fifo").jct_by_job, RunOne(w1, FailingFleet(), "fifo").jct_by_job);
}

TEST(ReplayMetrics, LowerBoundAndDistributions) {
  Workload w;
  w.queues = {"a"};
  w.jobs = {J(0, 100, 4), J(10, 100, 4)};
  // Capacity 4: max(a+p)=110; t=0: 0 + 800/4 = 200; t=10: 10 + 400/4 = 110.
  EXPECT_DOUBLE_EQ(MakespanLowerBound(w, 4), 200);
  Dist d = MakeDist({5, 1, 3, 2, 4});
  EXPECT_DOUBLE_EQ(d.mean, 3);
  EXPECT_DOUBLE_EQ(d.p50, 3);
  EXPECT_DOUBLE_EQ(d.max, 5);
  PolicyResult r = RunOne(w, Fleet(1, 4), "fifo");
  EXPECT_DOUBLE_EQ(r.makespan_s, 200);
  EXPECT_DOUBLE_EQ(r.makespan_ratio, 1);
  EXPECT_DOUBLE_EQ(r.utilization, 1);
}

TEST(ReplayMetrics, GoodputBoundFollowsCheckpointModel) {
  // One 8-GPU job on an 8-GPU fleet, a failure per 10000 s, C=1000, R=100:
  // loss fraction = (8 / (10000 * 8)) * (500 + 100) = 0.06.
  Workload w;
  w.queues = {"a"};
  w.jobs = {J(0, 100000, 8)};
  w.jobs[0].checkpoint_s = 1000;
  w.jobs[0].restart_s = 100;
  SimOptions o = Fleet(1, 8);
  o.failures.gpu_failure_interval_s = 10000;
  EXPECT_NEAR(GoodputBound(w, o), 0.94, 1e-12);
}

SimJob Share(double submit, double duration, int32_t milli) {
  SimJob j = J(submit, duration, 1);
  j.gpu_milli = milli;
  return j;
}

TEST(ReplaySharedGpu, SharesPackOntoOneGpuAndCountAsFractions) {
  // One GPU. A and B (0.5 each) share it 0-100; C (0.6, at 10) cannot join
  // them and runs 100-150; D (a whole GPU, at 20, 60 s) runs 150-210. Every
  // policy agrees here (no priorities; C is older and shorter than D).
  Workload w;
  w.queues = {"a"};
  w.jobs = {Share(0, 100, 500), Share(0, 100, 500), Share(10, 50, 600), J(20, 60, 1)};
  ASSERT_TRUE(ValidateWorkload(w).ok());
  EXPECT_DOUBLE_EQ(w.GpuSeconds(), 0.5 * 100 * 2 + 0.6 * 50 + 60);
  SimOptions o = Fleet(1, 1);
  o.sample_interval_s = 10;
  for (std::string p : {"fifo", "sjf", "las", "default"}) {
    PolicyResult r = RunOne(w, o, p);
    ASSERT_EQ(r.completed, 4) << p;
    ExpectJcts(r, {100, 100, 140, 190});
    EXPECT_DOUBLE_EQ(r.allocated_gpu_s, 190) << p;  // GPU-fraction seconds
    EXPECT_DOUBLE_EQ(r.demand_gpu_s, 190) << p;
    EXPECT_DOUBLE_EQ(r.makespan_s, 210) << p;
    EXPECT_DOUBLE_EQ(r.utilization, 190.0 / 210) << p;
    double peak = 0;
    for (const Sample& s : r.series) peak = std::max(peak, s.allocated_gpus);
    EXPECT_DOUBLE_EQ(peak, 1.0) << p;  // two halves, never more than the GPU
    ASSERT_FALSE(r.by_size.empty());
    EXPECT_EQ(r.by_size[0].name, "<1") << p;
    EXPECT_EQ(r.by_size[0].jct.n, 3) << p;
  }
  // As whole GPUs the same pods would serialise: B would end at 200.
  Workload whole = w;
  for (SimJob& j : whole.jobs) j.gpu_milli = 1000;
  EXPECT_DOUBLE_EQ(RunOne(whole, o, "fifo").jct_by_job[1], 200);
}

TEST(ReplaySharedGpu, FailureKillsEverySharerWithAccountingInFractions) {
  // Two 0.5 shares on GPU 0 of the only node, checkpoint 30 s, restart 10 s.
  // GPU 0 fails at 45 (repaired at 55): both lose 15 s of work; they restart
  // at 55 and need 10 + 70 s more: done at 135.
  Workload w;
  w.queues = {"a"};
  w.jobs = {Share(0, 100, 500), Share(0, 100, 500)};
  for (SimJob& j : w.jobs) {
    j.checkpoint_s = 30;
    j.restart_s = 10;
  }
  SimOptions o = Fleet(1, 1);
  o.scripted_failures = {{.t_s = 45, .node = 0, .gpu = 0, .repair_s = 10}};
  PolicyResult r = RunOne(w, o, "default");
  ExpectJcts(r, {135, 135});
  EXPECT_EQ(r.gang_kills, 2);
  EXPECT_DOUBLE_EQ(r.failure_lost_gpu_s, 2 * 0.5 * 15);
  EXPECT_DOUBLE_EQ(r.failure_restart_gpu_s, 2 * 0.5 * 10);
  EXPECT_DOUBLE_EQ(r.useful_gpu_s, 100);
  EXPECT_DOUBLE_EQ(r.allocated_gpu_s, 2 * 0.5 * (45 + 80));
}

TEST(ReplayMetrics, JainIndexAcrossQueues) {
  // Two queues, one 2-GPU job each on 2 GPUs. FIFO runs a's job 0-100 (a
  // gets all, b none: Jain 0.5) then b's 100-200 (only b active: 1).
  // Samples every 10 s count while some queue has demand: 10..90 -> 0.5,
  // 100..190 -> 1 (at 100 a is done and b not yet started: one active queue).
  Workload w;
  w.queues = {"a", "b"};
  w.jobs = {J(0, 100, 2), J(0, 100, 2)};
  w.jobs[1].queue = 1;
  SimOptions o = Fleet(1, 2);
  o.sample_interval_s = 10;
  PolicyResult r = RunOne(w, o, "fifo");
  EXPECT_NEAR(r.jain_mean, (9 * 0.5 + 10 * 1.0) / 19, 1e-12);
  ASSERT_EQ(r.queues.size(), 2u);
  EXPECT_DOUBLE_EQ(r.queues[0].share, 0.5);
  EXPECT_DOUBLE_EQ(r.queues[1].share, 0.5);
  EXPECT_DOUBLE_EQ(r.queues[0].entitlement, 0.5);
  // Both at once on 4 GPUs: perfectly fair.
  EXPECT_DOUBLE_EQ(RunOne(w, Fleet(1, 4), "fifo").jain_mean, 1.0);
}

TEST(ReplayPolicies, RegistryAndErrors) {
  PolicyRegistry r = PolicyRegistry::Builtin();
  EXPECT_EQ(r.Names(), (std::vector<std::string>{"default", "fifo", "las", "queues", "sjf"}));
  EXPECT_FALSE(r.Lookup("nope").ok());
  PolicySpec dup;
  dup.name = "fifo";
  EXPECT_FALSE(r.Register(dup).ok());
  EXPECT_EQ(SimJobIndex("j42"), 42);
  EXPECT_EQ(SimJobIndex("x42"), -1);
  LasConfig las;
  las.thresholds_gpu_s = {10, 100};
  EXPECT_EQ(las.Band(0), 0);
  EXPECT_EQ(las.Band(10), 1);
  EXPECT_EQ(las.Band(1000), 2);
}

TEST(ReplayCommand, ParseSeconds) {
  EXPECT_DOUBLE_EQ(*ParseSeconds("--x", "90"), 90);
  EXPECT_DOUBLE_EQ(*ParseSeconds("--x", "2.5h"), 9000);
  EXPECT_DOUBLE_EQ(*ParseSeconds("--x", "30m"), 1800);
  EXPECT_DOUBLE_EQ(*ParseSeconds("--x", "1d"), 86400);
  auto bad = ParseSeconds("--checkpoint", "soon");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--checkpoint"), std::string::npos);
}

TEST(ReplayWorkload, ShapesAndValidation) {
  EXPECT_EQ(ShapeFor(4, 8).members, 1);
  EXPECT_EQ(ShapeFor(64, 8).members, 8);
  EXPECT_EQ(ShapeFor(12, 8).per_member, 6);
  EXPECT_EQ(ShapeFor(4096, 8).members, 512);
  Workload w;
  w.queues = {"a"};
  w.jobs = {J(0, 10, 0)};
  auto s = ValidateWorkload(w);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("jobs[0].gpus"), std::string::npos);
}

TEST(ReplayWorkload, SyntheticIsDeterministicAndShaped) {
  SyntheticWorkloadSpec s;
  s.jobs = 2000;
  s.size_mix = {{1, 1}, {4096, 1}};
  auto a = GenerateSyntheticWorkload(s);
  auto b = GenerateSyntheticWorkload(s);
  ASSERT_TRUE(a.ok() && b.ok());
  int big = 0;
  for (size_t i = 0; i < a->jobs.size(); ++i) {
    EXPECT_EQ(a->jobs[i].submit_s, b->jobs[i].submit_s);
    EXPECT_EQ(a->jobs[i].duration_s, b->jobs[i].duration_s);
    big += a->jobs[i].gpus == 4096;
  }
  EXPECT_GT(big, 800);
  EXPECT_LT(big, 1200);
  EXPECT_TRUE(ValidateWorkload(*a).ok());
  EXPECT_FALSE(ParseSizeMix("1:0.5,x").ok());
}

TEST(ReplayWorkload, PerJobCheckpointMixLeavesTheRestUnchanged) {
  SyntheticWorkloadSpec s;
  s.jobs = 3000;
  auto plain = GenerateSyntheticWorkload(s);
  auto mix = ParseDurationMix("--checkpoint-mix", "10m:1,1h:2,0:1");
  ASSERT_TRUE(mix.ok()) << mix.status();
  EXPECT_EQ(*mix, (std::vector<std::pair<double, double>>{{600, 1}, {3600, 2}, {0, 1}}));
  s.checkpoint_mix = *mix;
  auto mixed = GenerateSyntheticWorkload(s);
  ASSERT_TRUE(plain.ok() && mixed.ok());
  std::map<double, int> seen;
  for (size_t i = 0; i < mixed->jobs.size(); ++i) {
    EXPECT_EQ(mixed->jobs[i].submit_s, plain->jobs[i].submit_s);
    EXPECT_EQ(mixed->jobs[i].duration_s, plain->jobs[i].duration_s);
    EXPECT_EQ(mixed->jobs[i].gpus, plain->jobs[i].gpus);
    ++seen[mixed->jobs[i].checkpoint_s];
  }
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_NEAR(seen[3600] / 3000.0, 0.5, 0.05);
  EXPECT_NEAR(seen[0] / 3000.0, 0.25, 0.05);
  EXPECT_FALSE(ParseDurationMix("--checkpoint-mix", "10m").ok());
  EXPECT_FALSE(ParseDurationMix("--checkpoint-mix", "soon:1").ok());
  s.checkpoint_mix = {{-1, 1}};
  EXPECT_FALSE(GenerateSyntheticWorkload(s).ok());
}

}  // namespace
}  // namespace tessera::sim::replay
