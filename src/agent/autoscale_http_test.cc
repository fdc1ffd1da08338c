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
#include "agent/agent_http_test_util.h"
#include "controller/node_leases.h"
#include "controller/scheduling_controller.h"
#include "gtest/gtest.h"
#include "server/api_server.h"
#include "store/memory_store.h"

namespace tessera::agent {
namespace {

using Json = nlohmann::json;
using testing::Slurp;
using testing::WaitFor;

// The shell PIDs a replica's script recorded, one line per start.
std::vector<std::string> Pids(const std::string& dir, int index) {
  return absl::StrSplit(Slurp(absl::StrCat(dir, "/pids-", index)), '\n', absl::SkipEmpty());
}

// The API server, the scheduling controller on its store, and agent "n1".
class AutoscaleHttpTest : public testing::AgentOverHttpTest {
 protected:
  void SetUp() override {
    server::ApiServerOptions so;
    so.node_leases = &leases_;
    StartServer(store_, "/tmp/autoscale_http_test_XXXXXX", so);
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
    NodeAgentOptions ao;
    ao.heartbeat_interval = absl::Seconds(1);
    ao.sync_interval = absl::Seconds(1);
    ao.metrics_interval = absl::Milliseconds(300);
    StartAgent(ao);
  }
  void TearDown() override {
    StopAgent();
    if (controller_ != nullptr) controller_->Stop();
    StopMembersAndServer();
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

  controller::NodeLeases leases_;
  store::MemoryStore store_;
  std::unique_ptr<controller::SchedulingController> controller_;
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
