#include "agent/node_agent.h"

#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/fake/fake_backend.h"
#include "gtest/gtest.h"

namespace tessera::agent {
namespace {

// Records what the agent sends and answers from fields the test sets.
class FakeControlPlane final : public ControlPlaneClient {
 public:
  absl::Status RegisterNode(const NodeRegistration& node) override {
    if (!up) return absl::UnavailableError("connection refused");
    registered.push_back(node);
    return absl::OkStatus();
  }
  absl::Status Heartbeat(const std::string&, const std::vector<GpuHealthReport>& gpus,
                         absl::Time) override {
    if (!up) return absl::UnavailableError("connection refused");
    heartbeats.push_back(gpus);
    return absl::OkStatus();
  }
  absl::StatusOr<BindingSet> ListBindings(const std::string&) override {
    if (!up) return absl::UnavailableError("connection refused");
    ++lists;
    return BindingSet{revision, true, bindings};
  }
  absl::StatusOr<BindingSet> WatchBindings(const std::string& node, int64_t,
                                           absl::Duration) override {
    return ListBindings(node);
  }
  absl::Status ReportMembers(const std::string&, const std::vector<MemberReport>& m) override {
    if (!up) return absl::UnavailableError("connection refused");
    reports.insert(reports.end(), m.begin(), m.end());
    return absl::OkStatus();
  }
  bool up = true;
  int lists = 0;
  int64_t revision = 1;
  std::vector<NodeRegistration> registered;
  std::vector<std::vector<GpuHealthReport>> heartbeats;
  std::vector<Binding> bindings;
  std::vector<MemberReport> reports;
};

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class NodeAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = "/tmp/node_agent_test_XXXXXX";
    ASSERT_NE(mkdtemp(dir_.data()), nullptr);
    auto fb = FakeBackend::FromFile(
        std::string(TESSERA_SOURCE_DIR) + "/deploy/fake-gpus/h100-nvswitch-8.yaml", clock_);
    ASSERT_TRUE(fb.ok()) << fb.status();
    backend_ = *std::move(fb);
    ASSERT_TRUE(backend_->Init().ok());
    lo_.state_dir = dir_ + "/state";
    lo_.cgroup_parent = "";
    launcher_ = std::make_unique<Launcher>(lo_, clock_);
    ASSERT_TRUE(launcher_->Init().ok());
    options_.node_name = "n1";
    options_.rack = "r1";
    options_.block = "b1";
    options_.heartbeat_interval = absl::Seconds(10);
    options_.sync_interval = absl::ZeroDuration();  // every Step lists bindings
  }
  void TearDown() override {
    for (const MemberStatus& m : launcher_->List()) (void)launcher_->Stop(m.spec.Id(), false);
    absl::SleepFor(absl::Milliseconds(50));
    launcher_->Poll();
    std::filesystem::remove_all(dir_);
  }
  Binding Bind(const std::string& script, int64_t gen, std::vector<int> gpus) {
    Binding b;
    b.namespace_name = "team-a";
    b.job = "train";
    b.group = "worker";
    b.index = 0;
    b.generation = gen;
    b.gpus = std::move(gpus);
    b.command = {"/bin/sh", "-c", script};
    b.working_dir = dir_;
    b.grace = absl::Seconds(20);
    return b;
  }
  // Steps the agent until `pred` holds (real time, at most 20 s).
  template <typename Pred>
  bool StepUntil(NodeAgent& a, Pred pred) {
    absl::Time end = absl::Now() + absl::Seconds(20);
    while (absl::Now() < end) {
      a.Step();
      if (pred()) return true;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return false;
  }
  std::string dir_;
  RealClock clock_;
  std::unique_ptr<FakeBackend> backend_;
  Launcher::Options lo_;
  std::unique_ptr<Launcher> launcher_;
  HealthTracker tracker_;
  FakeControlPlane cp_;
  NodeAgentOptions options_;
};

TEST_F(NodeAgentTest, RegistersGpusTopologyAndRackThenHeartbeatsHealth) {
  NodeAgent a(*backend_, tracker_, *launcher_, cp_, clock_, options_);
  ASSERT_TRUE(a.Init().ok());
  a.Step();
  ASSERT_EQ(cp_.registered.size(), 1u);
  const NodeRegistration& r = cp_.registered[0];
  ASSERT_EQ(r.gpus.size(), 8u);
  EXPECT_EQ(r.rack, "r1");
  EXPECT_EQ(r.block, "b1");
  EXPECT_FALSE(r.gpus[0].uuid.empty());
  EXPECT_GT(r.gpus[0].memory_mib, 0);
  ASSERT_EQ(r.links.size(), 8u);
  EXPECT_EQ(r.links[0][0], "X");
  EXPECT_EQ(r.links[0][7], "NVSWITCH");
  ASSERT_EQ(cp_.heartbeats.size(), 1u);
  EXPECT_TRUE(cp_.heartbeats[0][3].healthy);

  // An XID 79 turns GPU 3 unhealthy; the very next step heartbeats it (not 10 s later).
  GpuEvent e;
  e.kind = GpuEventKind::kXid;
  e.xid = 79;
  e.gpu_uuid = r.gpus[3].uuid;
  e.time = clock_.Now();
  tracker_.AddListener([&a](const HealthTransition&) { a.Wake(); });
  tracker_.OnEvent(e);
  a.Step();
  ASSERT_EQ(cp_.heartbeats.size(), 2u);
  EXPECT_FALSE(cp_.heartbeats[1][3].healthy);
  EXPECT_NE(cp_.heartbeats[1][3].message.find("XID 79"), std::string::npos);
  EXPECT_TRUE(cp_.heartbeats[1][2].healthy);
}

TEST_F(NodeAgentTest, HeartbeatsCarryEachGpusMeasuredUtilization) {
  // GPU 2 reads 63 %, the others the file's 0 %; a GPU the driver cannot sample reports none.
  absl::StatusOr<FakeConfig> cfg =
      LoadFakeConfig(std::string(TESSERA_SOURCE_DIR) + "/deploy/fake-gpus/h100-nvswitch-8.yaml");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  cfg->events.clear();
  cfg->gpus[2].metrics.gpu_util_percent = 63;
  cfg->gpus[5].metrics.gpu_util_percent.reset();
  FakeBackend fb(*std::move(cfg), clock_);
  ASSERT_TRUE(fb.Init().ok());
  NodeAgent a(fb, tracker_, *launcher_, cp_, clock_, options_);
  ASSERT_TRUE(a.Init().ok());
  a.Step();
  ASSERT_EQ(cp_.heartbeats.size(), 1u);
  const std::vector<GpuHealthReport>& h = cp_.heartbeats[0];
  ASSERT_EQ(h.size(), 8u);
  EXPECT_EQ(h[2].utilization_percent, std::optional<uint32_t>(63));
  EXPECT_EQ(h[0].utilization_percent, std::optional<uint32_t>(0));
  EXPECT_FALSE(h[5].utilization_percent.has_value());
}

TEST_F(NodeAgentTest, StartsOnlyBoundMembersWithTheirGpus) {
  NodeAgent a(*backend_, tracker_, *launcher_, cp_, clock_, options_);
  ASSERT_TRUE(a.Init().ok());
  a.Step();
  EXPECT_TRUE(launcher_->List().empty());  // nothing bound: nothing runs
  cp_.bindings = {
      Bind("echo $CUDA_VISIBLE_DEVICES $NVIDIA_VISIBLE_DEVICES > env; exit 0", 1, {2, 5})};
  ASSERT_TRUE(StepUntil(a, [&] {
    return !cp_.reports.empty() && cp_.reports.back().state != api::MemberState::kRunning;
  }));
  const std::string uuids = a.registration().gpus[2].uuid + "," + a.registration().gpus[5].uuid;
  EXPECT_EQ(Slurp(dir_ + "/env"), "2,5 " + uuids + "\n");
  EXPECT_EQ(cp_.reports.back().exit_code, 0);
  EXPECT_EQ(cp_.reports.back().generation, 1);
  // An exited member of the current binding is not started again.
  a.Step();
  a.Step();
  EXPECT_EQ(a.stats().started, 1);
}

TEST_F(NodeAgentTest, AMemberThatCannotStartIsReportedFailedOnceAndNotRetried) {
  NodeAgent a(*backend_, tracker_, *launcher_, cp_, clock_, options_);
  ASSERT_TRUE(a.Init().ok());
  Binding b = Bind("", 1, {0});
  b.command.clear();  // a job with no command: the launcher refuses it
  cp_.bindings = {b};
  ASSERT_TRUE(StepUntil(a, [&] { return !cp_.reports.empty(); }));
  EXPECT_EQ(cp_.reports.back().state, api::MemberState::kFailed);
  EXPECT_EQ(cp_.reports.back().reason, "could not start");
  EXPECT_THAT(cp_.reports.back().message, ::testing::HasSubstr("command: must not be empty"));
  EXPECT_EQ(cp_.reports.back().generation, 1);
  const size_t n = cp_.reports.size();
  a.Step();
  a.Step();
  EXPECT_EQ(cp_.reports.size(), n) << "said once";
  EXPECT_TRUE(launcher_->List().empty());
  // A new binding of the member (a fixed spec) starts.
  Binding fixed = Bind("exit 0", 2, {0});
  cp_.bindings = {fixed};
  ASSERT_TRUE(StepUntil(a, [&] { return a.stats().started == 1; }));
}

TEST_F(NodeAgentTest, DoesNotStartAMemberOnAnUnhealthyGpu) {
  NodeAgent a(*backend_, tracker_, *launcher_, cp_, clock_, options_);
  ASSERT_TRUE(a.Init().ok());
  GpuEvent e;
  e.kind = GpuEventKind::kXid;
  e.xid = 79;
  e.gpu_uuid = a.registration().gpus[1].uuid;
  tracker_.OnEvent(e);
  cp_.bindings = {Bind("sleep 100", 1, {0, 1})};
  a.Step();
  a.Step();
  EXPECT_TRUE(launcher_->List().empty());
}

TEST_F(NodeAgentTest, UnboundWhileConnectedGetsTheCheckpointSignal) {
  NodeAgent a(*backend_, tracker_, *launcher_, cp_, clock_, options_);
  ASSERT_TRUE(a.Init().ok());
  cp_.bindings = {Bind(
      "trap 'echo ckpt > ckpt; exit 0' USR1; touch up; while true; do sleep 0.05; done", 1, {0})};
  ASSERT_TRUE(StepUntil(a, [&] { return std::filesystem::exists(dir_ + "/up"); }));
  cp_.bindings.clear();  // preempted
  ASSERT_TRUE(StepUntil(a, [&] { return launcher_->List().empty(); }));
  EXPECT_EQ(Slurp(dir_ + "/ckpt"), "ckpt\n");
  EXPECT_EQ(a.stats().stopped, 1);
  EXPECT_EQ(a.stats().fenced, 0);
}

TEST_F(NodeAgentTest, APreemptionVictimGetsTheCheckpointSignalWhileStillBound) {
  NodeAgent a(*backend_, tracker_, *launcher_, cp_, clock_, options_);
  ASSERT_TRUE(a.Init().ok());
  cp_.bindings = {Bind(
      "trap 'echo ckpt > ckpt; exit 0' USR1; touch up; while true; do sleep 0.05; done", 1, {0})};
  ASSERT_TRUE(StepUntil(a, [&] { return std::filesystem::exists(dir_ + "/up"); }));
  cp_.bindings[0].checkpoint_requested = true;  // PreemptionPending: still bound
  ASSERT_TRUE(StepUntil(a, [&] {
    return !cp_.reports.empty() && cp_.reports.back().state != api::MemberState::kRunning;
  }));
  EXPECT_EQ(Slurp(dir_ + "/ckpt"), "ckpt\n");
  EXPECT_EQ(cp_.reports.back().exit_code, 0);  // reported, for the controller to act on
  EXPECT_EQ(a.stats().checkpoint_requests, 1);
  EXPECT_EQ(a.stats().stopped, 0);
  // Still bound and exited: not started again, not signalled again.
  a.Step();
  a.Step();
  EXPECT_EQ(a.stats().started, 1);
  EXPECT_EQ(a.stats().checkpoint_requests, 1);
}

TEST_F(NodeAgentTest, AServingReplicaThatExitsIsStartedAgainAfterABackoffATrainingMemberIsNot) {
  options_.replica_restart_backoff = absl::Milliseconds(200);
  options_.max_replica_restart_backoff = absl::Milliseconds(400);
  NodeAgent a(*backend_, tracker_, *launcher_, cp_, clock_, options_);
  ASSERT_TRUE(a.Init().ok());
  Binding replica = Bind("date +%s%N >> replica-runs; exit 3", 1, {0});
  replica.kind = "InferenceService";
  replica.job = "chat";
  replica.group = "replica";
  Binding member = Bind("echo x >> train-runs; exit 3", 1, {1});
  cp_.bindings = {replica, member};
  auto lines = [&](const std::string& f) {
    std::string s = Slurp(dir_ + "/" + f);
    return std::count(s.begin(), s.end(), '\n');
  };
  const absl::Time t0 = absl::Now();
  ASSERT_TRUE(StepUntil(a, [&] { return lines("replica-runs") >= 4; }));
  const absl::Duration took = absl::Now() - t0;
  EXPECT_GE(a.stats().replica_restarts, 3);
  // Waits of 200, 400 and 400 ms (doubled, capped) before the three restarts.
  EXPECT_GE(took, absl::Milliseconds(1000));
  EXPECT_EQ(lines("train-runs"), 1);  // the controller restarts training gangs, not the agent
  // Every exit was reported before the replica started again.
  int exits = 0;
  for (const MemberReport& r : cp_.reports) {
    if (r.job == "chat" && (r.state != api::MemberState::kRunning)) ++exits;
  }
  EXPECT_GE(exits, 3);
  // Unbound: not started again.
  cp_.bindings.clear();
  a.Step();
  const int64_t restarts = a.stats().replica_restarts;
  absl::SleepFor(absl::Milliseconds(500));
  a.Step();
  a.Step();
  EXPECT_EQ(a.stats().replica_restarts, restarts);
}

TEST_F(NodeAgentTest, AfterAPartitionStaleGenerationsAreFencedAndTheNewOneStarts) {
  NodeAgent a(*backend_, tracker_, *launcher_, cp_, clock_, options_);
  ASSERT_TRUE(a.Init().ok());
  cp_.bindings = {
      Bind("trap '' USR1; echo $TESSERA_GENERATION >> gens; touch up$TESSERA_GENERATION; "
           "while true; do sleep 0.05; done",
           1, {0})};
  ASSERT_TRUE(StepUntil(a, [&] { return std::filesystem::exists(dir_ + "/up1"); }));
  pid_t old_pid = launcher_->List()[0].pid;
  // Partition: the server is unreachable; the member keeps running meanwhile.
  cp_.up = false;
  a.Step();
  EXPECT_FALSE(a.registered());
  EXPECT_EQ(kill(old_pid, 0), 0);
  // The server rebound the member with generation 2 while we were away.
  cp_.bindings[0].generation = 2;
  cp_.up = true;
  ASSERT_TRUE(StepUntil(a, [&] { return std::filesystem::exists(dir_ + "/up2"); }));
  EXPECT_EQ(a.stats().fenced, 1);  // killed at once, not after a 20 s grace
  EXPECT_EQ(a.stats().registrations, 2);
  EXPECT_EQ(Slurp(dir_ + "/gens"), "1\n2\n");
}

TEST_F(NodeAgentTest, ARestartedAgentAdoptsBoundMembersAndKillsUnboundOnes) {
  {
    NodeAgent a(*backend_, tracker_, *launcher_, cp_, clock_, options_);
    ASSERT_TRUE(a.Init().ok());
    Binding keep = Bind("touch up-a; while true; do sleep 0.05; done", 3, {0});
    keep.job = "keep";
    Binding drop = Bind("touch up-b; while true; do sleep 0.05; done", 3, {1});
    drop.job = "drop";
    cp_.bindings = {keep, drop};
    ASSERT_TRUE(StepUntil(a, [&] {
      return std::filesystem::exists(dir_ + "/up-a") && std::filesystem::exists(dir_ + "/up-b");
    }));
  }
  std::vector<MemberStatus> before = launcher_->List();
  ASSERT_EQ(before.size(), 2u);
  // A new agent process: a fresh launcher over the same state dir.
  cp_.bindings.erase(cp_.bindings.begin() + 1);  // "drop" was rebound elsewhere meanwhile
  Launcher l2(lo_, clock_);
  ASSERT_TRUE(l2.Init().ok());
  NodeAgent b(*backend_, tracker_, l2, cp_, clock_, options_);
  ASSERT_TRUE(b.Init().ok());
  ASSERT_EQ(l2.List().size(), 2u);
  ASSERT_TRUE(StepUntil(b, [&] { return l2.List().size() == 1; }));
  std::vector<MemberStatus> after = l2.List();
  EXPECT_EQ(after[0].spec.job, "keep");
  EXPECT_TRUE(after[0].adopted);
  EXPECT_EQ(after[0].state, MemberState::kRunning);
  EXPECT_EQ(b.stats().started, 0);  // adopted, not restarted
  EXPECT_EQ(b.stats().fenced, 1);
  (void)l2.Stop(after[0].spec.Id(), false);
}

TEST_F(NodeAgentTest, BacksOffExponentiallyWhileTheServerIsDown) {
  cp_.up = false;
  options_.initial_backoff = absl::Seconds(1);
  options_.max_backoff = absl::Seconds(8);
  ManualClock mc(absl::FromUnixSeconds(1000));
  NodeAgent a(*backend_, tracker_, *launcher_, cp_, mc, options_);
  ASSERT_TRUE(a.Init().ok());
  std::vector<absl::Duration> waits;
  for (int i = 0; i < 6; ++i) {
    absl::Duration w = a.Step();
    waits.push_back(w);
    mc.Advance(w);
  }
  EXPECT_EQ(a.stats().failures, 6);
  for (int i = 0; i < 6; ++i) {
    absl::Duration nominal = std::min(absl::Seconds(1) * (1 << i), absl::Seconds(8));
    EXPECT_GE(waits[i], nominal * 0.79) << i;
    EXPECT_LE(waits[i], nominal * 1.21) << i;
  }
  cp_.up = true;
  a.Step();
  EXPECT_TRUE(a.registered());
}

}  // namespace
}  // namespace tessera::agent

namespace tessera::agent {
namespace {

TEST_F(NodeAgentTest, OfferedBindingsAreSyncedWithoutAListAndStaleOnesAreIgnored) {
  options_.sync_interval = absl::Hours(1);  // only the first (fencing) sync lists
  NodeAgent a(*backend_, tracker_, *launcher_, cp_, clock_, options_);
  ASSERT_TRUE(a.Init().ok());
  // An offer that arrives before registration is not trusted for the fencing sync.
  a.OfferBindings(BindingSet{5, true, {Bind("sleep 100", 1, {0})}});
  cp_.revision = 10;
  a.Step();
  EXPECT_EQ(cp_.lists, 1);
  EXPECT_TRUE(launcher_->List().empty());  // the fresh list (empty) won
  // A newer offer starts its member without another list.
  a.OfferBindings(BindingSet{11, true, {Bind("touch started; sleep 100", 1, {0})}});
  ASSERT_TRUE(StepUntil(a, [&] { return std::filesystem::exists(dir_ + "/started"); }));
  EXPECT_EQ(cp_.lists, 1);
  EXPECT_EQ(a.stats().offers, 1);
  // An older set (a poll that lost the race with a newer one) changes nothing.
  a.OfferBindings(BindingSet{7, true, {}});
  a.Step();
  EXPECT_EQ(launcher_->List().size(), 1u);
  EXPECT_EQ(a.stats().offers, 1);
  // The next generation arrives: the old member is stopped (checkpoint signal).
  a.OfferBindings(BindingSet{12, true, {Bind("sleep 100", 2, {1})}});
  ASSERT_TRUE(StepUntil(a, [&] {
    for (const MemberStatus& m : launcher_->List()) {
      if (m.spec.generation == 2 && m.state == MemberState::kRunning) return true;
    }
    return false;
  }));
  EXPECT_EQ(a.stats().stopped, 1);
  EXPECT_EQ(cp_.lists, 1);
}

}  // namespace
}  // namespace tessera::agent

namespace tessera::agent {
namespace {

class ServingReplicaTest : public NodeAgentTest {
 protected:
  Binding Replica(const std::string& script, int64_t gen, std::vector<int> gpus, int world) {
    Binding b = Bind(script, gen, std::move(gpus));
    b.kind = "InferenceService";
    b.job = "svc";
    b.group = "replica";
    b.env["TESSERA_WORLD_SIZE"] = absl::StrCat(world);
    b.env["TESSERA_RANK"] = "0";
    return b;
  }
  static constexpr const char* kId = "team-a.svc.replica-0";
  pid_t Pid() {
    absl::StatusOr<MemberStatus> m = launcher_->Get(kId);
    return m.ok() && m->state == MemberState::kRunning ? m->pid : -1;
  }
};

TEST_F(ServingReplicaTest, KeepsItsProcessWhenAResizeLeavesTheReplicaUnchanged) {
  NodeAgent a(*backend_, tracker_, *launcher_, cp_, clock_, options_);
  ASSERT_TRUE(a.Init().ok());
  cp_.bindings = {Replica("exec sleep 60", 1, {2}, 1)};
  ASSERT_TRUE(StepUntil(a, [&] { return Pid() > 0; }));
  const pid_t pid = Pid();
  // The service grew to 3 replicas: a new generation, a new world size; this
  // replica's GPUs and command are the same.
  cp_.bindings = {Replica("exec sleep 60", 2, {2}, 3)};
  ++cp_.revision;
  ASSERT_TRUE(StepUntil(a, [&] {
    return std::any_of(cp_.reports.begin(), cp_.reports.end(), [](const MemberReport& r) {
      return r.generation == 2 && r.state == api::MemberState::kRunning;
    });
  }));
  EXPECT_EQ(Pid(), pid);  // not restarted
  EXPECT_EQ(launcher_->Get(kId)->spec.generation, 2);
  EXPECT_EQ(a.stats().generations_adopted, 1);
  EXPECT_EQ(a.stats().started, 1);
  // The record says so: an agent restarted now adopts it at generation 2.
  EXPECT_NE(Slurp(dir_ + "/state/members/" + kId + "/member.json").find("\"generation\": 2"),
            std::string::npos);
  // Moved to another GPU: that is a new replica, the old process goes.
  cp_.bindings = {Replica("exec sleep 60", 3, {5}, 3)};
  ++cp_.revision;
  ASSERT_TRUE(StepUntil(a, [&] {
    absl::StatusOr<MemberStatus> m = launcher_->Get(kId);
    return m.ok() && m->spec.generation == 3 && m->state == MemberState::kRunning;
  }));
  EXPECT_NE(Pid(), pid);
  EXPECT_EQ(a.stats().generations_adopted, 1);
}

TEST_F(ServingReplicaTest, ReportsTheMetricsFileAndIgnoresAMalformedOne) {
  const std::string log = dir_ + "/agent.log";
  absl::StatusOr<obs::Logger> logger = obs::Logger::File(log, obs::LogFormat::kText);
  ASSERT_TRUE(logger.ok());
  options_.log = *logger;
  options_.metrics_interval = absl::ZeroDuration();
  NodeAgent a(*backend_, tracker_, *launcher_, cp_, clock_, options_);
  ASSERT_TRUE(a.Init().ok());
  cp_.bindings = {
      Replica("printf '{\"p99LatencyMs\": 140.5, \"rps\": 32}' > \"$TESSERA_METRICS_PATH.tmp\" && "
              "mv \"$TESSERA_METRICS_PATH.tmp\" \"$TESSERA_METRICS_PATH\"; exec sleep 60",
              1, {1}, 1)};
  auto with_metrics = [&] {
    return std::count_if(cp_.reports.begin(), cp_.reports.end(),
                         [](const MemberReport& r) { return r.metrics.has_value(); });
  };
  ASSERT_TRUE(StepUntil(a, [&] { return with_metrics() > 0; }));
  const MemberReport& r =
      *std::find_if(cp_.reports.begin(), cp_.reports.end(),
                    [](const MemberReport& r) { return r.metrics.has_value(); });
  EXPECT_DOUBLE_EQ(*r.metrics->p99_latency_ms, 140.5);
  EXPECT_DOUBLE_EQ(*r.metrics->rps, 32);
  EXPECT_EQ(r.state, api::MemberState::kRunning);
  EXPECT_EQ(launcher_->MetricsPath(kId), dir_ + "/state/members/" + kId + "/metrics.json");
  // The same reading is not sent twice.
  for (int i = 0; i < 5; ++i) a.Step();
  EXPECT_EQ(with_metrics(), 1);
  // A malformed file: ignored, logged with the field, the replica runs on.
  { std::ofstream(launcher_->MetricsPath(kId)) << R"({"p99LatencyMs": "slow"})"; }
  ASSERT_TRUE(StepUntil(a, [&] {
    return Slurp(log).find("p99LatencyMs: must be a non-negative number") != std::string::npos;
  }));
  EXPECT_EQ(with_metrics(), 1);
  EXPECT_GT(Pid(), 0);
}

}  // namespace
}  // namespace tessera::agent
