// End to end, in one process but with every real part: an API server on loopback, the scheduling
// controller on its store, and a node agent (fake 8 x H100 backend, real launcher, real
// processes) syncing over HTTP. An InferenceService with spec.slo whose replica script writes
// its latency to TESSERA_METRICS_PATH is scaled up by the controller's autoscaler, then down
// once the latency falls, and the replicas that survive each scale event keep their processes.
#include <signal.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/api_client.h"
#include "agent/binding_watcher.h"
#include "agent/fake/fake_backend.h"
#include "agent/http_control_plane.h"
#include "agent/node_agent.h"
#include "controller/node_leases.h"
#include "controller/scheduling_controller.h"
#include "gtest/gtest.h"
#include "server/api_server.h"
#include "store/memory_store.h"

namespace tessera::agent {
namespace {

using Json = nlohmann::json;

bool WaitFor(const std::function<bool()>& pred, absl::Duration limit) {
  const absl::Time end = absl::Now() + limit;
  while (absl::Now() < end) {
    if (pred()) return true;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return pred();
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The shell PIDs a replica's script recorded, one line per start.
std::vector<std::string> Pids(const std::string& dir, int index) {
  return absl::StrSplit(Slurp(absl::StrCat(dir, "/pids-", index)), '\n', absl::SkipEmpty());
}

class AutoscaleHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = "/tmp/autoscale_http_test_XXXXXX";
    ASSERT_NE(mkdtemp(dir_.data()), nullptr);
    server::ApiServerOptions so;
    so.threads = 8;
    so.node_leases = &leases_;
    server_ =
        std::make_unique<server::ApiServer>(store_, clock_, server::Authenticator::AllowAll(), so);
    absl::StatusOr<int> port = server_->Start("127.0.0.1", 0);
    ASSERT_TRUE(port.ok()) << port.status();
    url_ = absl::StrCat("http://127.0.0.1:", *port);
    admin_ = std::make_unique<ApiClient>(url_, "");

    controller::ControllerOptions co;
    co.leases = &leases_;
    co.tick = absl::Milliseconds(50);
    co.idle_cycle = absl::Milliseconds(500);
    // A short scale-down window so the test sees one; scale-up is immediate anyway.
    co.autoscaler.stabilization = absl::Seconds(3);
    auto ctl = controller::SchedulingController::Create(store_, clock_, co);
    ASSERT_TRUE(ctl.ok()) << ctl.status();
    controller_ = *std::move(ctl);
    controller_->RunInBackground();

    auto backend = FakeBackend::FromFile(
        std::string(TESSERA_SOURCE_DIR) + "/deploy/fake-gpus/h100-nvswitch-8.yaml", clock_);
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = std::move(*backend);
    ASSERT_TRUE(backend_->Init().ok());
    Launcher::Options lo;
    lo.state_dir = dir_ + "/state";
    lo.cgroup_parent = "";
    launcher_ = std::make_unique<Launcher>(lo, clock_);
    ASSERT_TRUE(launcher_->Init().ok());
    NodeAgentOptions ao;
    ao.node_name = "n1";
    ao.heartbeat_interval = absl::Seconds(1);
    ao.sync_interval = absl::Seconds(1);
    ao.metrics_interval = absl::Milliseconds(300);
    client_ = std::make_unique<HttpControlPlaneClient>(url_, "");
    agent_ = std::make_unique<NodeAgent>(*backend_, tracker_, *launcher_, *client_, clock_, ao);
    ASSERT_TRUE(agent_->Init().ok());
    watch_client_ = std::make_unique<HttpControlPlaneClient>(url_, "", absl::Seconds(30));
    watcher_ = std::make_unique<BindingWatcher>(
        *watch_client_, *agent_, "n1", absl::Seconds(10), [this] { watch_client_->Cancel(); }, 7);
    watcher_->Start();
    run_ = std::thread([this] { agent_->Run(); });
  }
  void TearDown() override {
    if (agent_ != nullptr) {
      agent_->Stop();
      run_.join();
      watcher_->Stop();
    }
    if (controller_ != nullptr) controller_->Stop();
    if (launcher_ != nullptr) {
      for (const MemberStatus& m : launcher_->List()) (void)launcher_->Stop(m.spec.Id(), false);
      absl::SleepFor(absl::Milliseconds(100));
      launcher_->Poll();
    }
    server_->Stop();
    std::filesystem::remove_all(dir_);
  }

  Json Service() {
    absl::StatusOr<ApiResponse> r = admin_->Get("/api/v1/namespaces/team/inferenceservices/svc");
    return r.ok() && r->code == 200 ? r->body : Json();
  }
  size_t Placed() {
    Json s = Service();
    return s.is_object() && s["status"].contains("placement") ? s["status"]["placement"].size() : 0;
  }
  void SetLatency(int ms) {
    std::ofstream(dir_ + "/p99.tmp") << ms;
    std::filesystem::rename(dir_ + "/p99.tmp", dir_ + "/p99");
  }

  std::string dir_;
  RealClock clock_;
  controller::NodeLeases leases_;
  store::MemoryStore store_;
  std::unique_ptr<server::ApiServer> server_;
  std::string url_;
  std::unique_ptr<ApiClient> admin_;
  std::unique_ptr<controller::SchedulingController> controller_;
  std::unique_ptr<FakeBackend> backend_;
  std::unique_ptr<Launcher> launcher_;
  HealthTracker tracker_;
  std::unique_ptr<HttpControlPlaneClient> client_;
  std::unique_ptr<NodeAgent> agent_;
  std::unique_ptr<HttpControlPlaneClient> watch_client_;
  std::unique_ptr<BindingWatcher> watcher_;
  std::thread run_;
};

TEST_F(AutoscaleHttpTest, ReplicaMetricsScaleTheServiceAndSurvivorsKeepTheirProcesses) {
  SetLatency(300);
  // Each replica records its shell's PID once per start, then writes its p99 (the test's file)
  // to TESSERA_METRICS_PATH every 0.2 s, by rename as the contract asks.
  const std::string script =
      absl::StrCat("echo $$ >> ", dir_, "/pids-$TESSERA_MEMBER_INDEX; while true; do ",
                   "printf '{\"p99LatencyMs\": %s, \"rps\": 10}' \"$(cat ", dir_,
                   "/p99)\" > \"$TESSERA_METRICS_PATH.tmp\" && ",
                   "mv \"$TESSERA_METRICS_PATH.tmp\" \"$TESSERA_METRICS_PATH\"; sleep 0.2; done");
  Json svc = {{"apiVersion", "tessera.dev/v1"},
              {"kind", "InferenceService"},
              {"metadata",
               {{"name", "svc"},
                {"namespace", "team"},
                {"annotations",
                 {{"tessera.dev/command", Json::array({"/bin/sh", "-c", script}).dump()},
                  {"tessera.dev/grace-seconds", "1"}}}}},
              {"spec",
               {{"modelVersion", "llama-v1"},
                {"replicas", {{"min", 1}, {"max", 4}}},
                {"gpusPerReplica", 1},
                {"slo", {{"p99LatencyMs", 100}}}}}};
  absl::StatusOr<ApiResponse> created =
      admin_->Post("/api/v1/namespaces/team/inferenceservices", svc);
  ASSERT_TRUE(created.ok() && created->code == 201)
      << (created.ok() ? created->body.dump() : created.status().ToString());

  // p99 300 ms over the 100 ms target: 1 -> 2 -> 4 (at most doubling per step).
  ASSERT_TRUE(
      WaitFor([&] { return Placed() == 4 && Pids(dir_, 3).size() == 1; }, absl::Seconds(60)))
      << Service().dump(2);
  Json s = Service();
  EXPECT_EQ(s["status"]["desiredReplicas"], 4);
  EXPECT_GE(s["status"]["generation"].get<int>(), 3);  // two scale events at least
  ASSERT_TRUE(
      WaitFor([&] { return Service()["status"].value("phase", "") == "Ready"; }, absl::Seconds(30)))
      << Service().dump(2);
  // Replica 0 (there from the start) and replica 1 (added by the first scale-up) were never
  // restarted by the later generations: one PID each.
  EXPECT_EQ(Pids(dir_, 0).size(), 1u) << Slurp(dir_ + "/pids-0");
  EXPECT_EQ(Pids(dir_, 1).size(), 1u) << Slurp(dir_ + "/pids-1");
  EXPECT_GE(agent_->stats().generations_adopted, 2);
  EXPECT_GT(agent_->stats().metrics_reports, 0);
  const std::string pid0 = Pids(dir_, 0)[0];

  // Latency falls to 20 ms: ceil(4 x 0.2) = 1 once the (3 s) stabilization window agrees.
  SetLatency(20);
  ASSERT_TRUE(WaitFor([&] { return Placed() == 1; }, absl::Seconds(60))) << Service().dump(2);
  s = Service();
  EXPECT_EQ(s["status"]["desiredReplicas"], 1);
  EXPECT_EQ(s["status"]["placement"][0]["member"], 0);
  // The dropped replicas are stopped; replica 0 runs on in the same process.
  EXPECT_TRUE(WaitFor(
      [&] {
        int running = 0;
        for (const MemberStatus& m : launcher_->List()) running += m.state != MemberState::kExited;
        return running == 1;
      },
      absl::Seconds(20)));
  EXPECT_EQ(Pids(dir_, 0), std::vector<std::string>{pid0});
  EXPECT_EQ(kill(std::stoi(pid0), 0), 0);
  controller_->Stop();  // its introspection is read after Stop
  EXPECT_EQ(controller_->cluster().allocated_milli(), 1000);
}

}  // namespace
}  // namespace tessera::agent
