// The node agent against a real in-process `tessera server` API (HTTP on loopback) holding 1,000
// jobs of other nodes: its binding syncs read only its own bindings (no store List at all after
// the server's start), and a bind or a new generation reaches it through the long-poll watch.
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/agent_http_test_util.h"
#include "gtest/gtest.h"
#include "server/api_server.h"
#include "store/memory_store.h"
#include "store/metered_store.h"

namespace tessera::agent {
namespace {

using Json = nlohmann::json;
using testing::Slurp;
using testing::WaitFor;

Json BoundJob(const std::string& name, const std::string& node, int generation,
              const std::string& script, int gpu) {
  return {{"apiVersion", "tessera.dev/v1"},
          {"kind", "TrainingJob"},
          {"metadata", {{"name", name}, {"namespace", "team"}}},
          {"spec",
           {{"command", {"/bin/sh", "-c", script}},
            {"groups", {{{"name", "w"}, {"count", 1}, {"gpusPerReplica", 1}}}}}},
          {"status",
           {{"phase", "Scheduled"},
            {"generation", generation},
            {"placement",
             {{{"group", "w"},
               {"member", 0},
               {"node", node},
               {"gpus", {gpu}},
               {"generation", generation}}}}}}};
}

// A real in-process API server on loopback (over a store that counts its
// Lists) and one node agent "n1" syncing through the long-poll watch.
class NodeAgentHttpTest : public testing::AgentOverHttpTest {
 protected:
  void SetUp() override { StartServer(store_, "/tmp/node_agent_http_test_XXXXXX"); }
  void TearDown() override {
    StopAgent();
    StopMembersAndServer();
  }
  // Starts the agent; no periodic re-list: the watch must carry every change.
  void StartAgent() {
    NodeAgentOptions ao;
    ao.heartbeat_interval = absl::Seconds(1);
    ao.sync_interval = absl::Hours(1);
    ao.replica_restart_backoff = absl::Milliseconds(300);
    AgentOverHttpTest::StartAgent(ao);
  }

  store::MemoryStore memory_;
  store::MeteredStore store_{memory_, clock_};
};

TEST_F(NodeAgentHttpTest, SyncsOnlyItsOwnBindingsAmongAThousandJobs) {
  const std::string& dir = dir_;
  ApiClient& admin = *admin_;
  // 1,000 jobs bound to 100 other nodes, created 50 per batch.
  for (int b = 0; b < 20; ++b) {
    Json items = Json::array();
    for (int i = 0; i < 50; ++i) {
      const int n = b * 50 + i;
      items.push_back(
          BoundJob(absl::StrCat("other-", n), absl::StrCat("node-", n % 100), 1, "sleep 1", n % 8));
    }
    absl::StatusOr<ApiResponse> r = admin.Post("/api/v1/batch", {{"items", items}});
    ASSERT_TRUE(r.ok() && r->code == 201) << (r.ok() ? r->body.dump() : r.status().ToString());
  }
  ASSERT_EQ(admin
                .Post("/api/v1/namespaces/team/trainingjobs",
                      BoundJob("mine", "n1", 1, absl::StrCat("touch ", dir, "/gen1; sleep 100"), 2))
                ->code,
            201);
  const store::StoreMetrics before = store_.Metrics();
  ASSERT_NO_FATAL_FAILURE(StartAgent());
  NodeAgent& agent = *agent_;

  EXPECT_TRUE(WaitFor([&] { return std::filesystem::exists(dir + "/gen1"); }, absl::Seconds(20)));
  // The heartbeat's one write carries each GPU's measured utilization (the file's 0 % for GPU 1)
  // into the Node's status, beside its health.
  absl::StatusOr<ApiResponse> node = admin.Get("/api/v1/nodes/n1");
  ASSERT_TRUE(node.ok() && node->code == 200);
  const Json& gpus = node->body["status"]["gpus"];
  ASSERT_TRUE(gpus.is_array() && gpus.size() == 8u) << node->body.dump();
  EXPECT_EQ(gpus[1].value("utilization", -1), 0) << gpus.dump();
  EXPECT_EQ(gpus[1].value("health", ""), "Healthy");
  // The scheduler moves the member to GPU 5 with generation 2: the watch delivers it.
  // The agent reports member status on the same object, so a stale
  // resourceVersion (409) is retried from a fresh read, as any API client does.
  const absl::Time bound_at = absl::Now();
  absl::StatusOr<ApiResponse> put;
  for (int attempt = 0; attempt < 20; ++attempt) {
    absl::StatusOr<ApiResponse> cur = admin.Get("/api/v1/namespaces/team/trainingjobs/mine");
    if (!cur.ok() || cur->code != 200) break;
    Json next = BoundJob("mine", "n1", 2, absl::StrCat("touch ", dir, "/gen2; sleep 100"), 5);
    next["metadata"]["resourceVersion"] = cur->body["metadata"]["resourceVersion"];
    next["status"]["observed"] = cur->body["status"].value("observed", Json::object());
    put = admin.Put("/api/v1/namespaces/team/trainingjobs/mine", next);
    if (!put.ok() || put->code != 409) break;
  }
  EXPECT_TRUE(put.ok() && put->code == 200) << (put.ok() ? put->body.dump() : "");
  EXPECT_TRUE(WaitFor([&] { return std::filesystem::exists(dir + "/gen2"); }, absl::Seconds(30)));
  std::cout << "bind -> generation 2 running: " << absl::FormatDuration(absl::Now() - bound_at)
            << " (includes the generation-1 member's checkpoint stop)" << std::endl;

  const store::StoreMetrics after = store_.Metrics();
  // Not one store List: no job list, neither by the agent nor by the server on its behalf.
  EXPECT_EQ(after.lists - before.lists, 0);
  // One ListBindings (the fencing sync at registration); the rest came from the watch.
  EXPECT_EQ(agent.stats().lists, 1);
  EXPECT_GE(agent.stats().offers, 1);
  EXPECT_GT(watcher_->polls(), 1);
  // Store reads are O(own bindings + heartbeats), nowhere near the 1,001 jobs.
  EXPECT_LT(after.gets - before.gets, 200);
}

// The controller marks a victim with the PreemptionPending condition while it is still bound:
// the agent passes the checkpoint signal on at once, and the member's exit is reported without
// calling the job Succeeded (the controller requeues it as Preempted).
TEST_F(NodeAgentHttpTest, APreemptionVictimIsSignalledWhileBoundAndItsExitIsNotSuccess) {
  Json job = BoundJob("victim", "n1", 1,
                      absl::StrCat("trap 'echo ckpt > ", dir_, "/ckpt; exit 0' USR1; touch ", dir_,
                                   "/up; while true; do sleep 0.05; done"),
                      3);
  ASSERT_EQ(admin_->Post("/api/v1/namespaces/team/trainingjobs", job)->code, 201);
  ASSERT_NO_FATAL_FAILURE(StartAgent());
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(dir_ + "/up"); }, absl::Seconds(20)));
  const std::string path = "/api/v1/namespaces/team/trainingjobs/victim";
  absl::StatusOr<ApiResponse> put;
  for (int attempt = 0; attempt < 20; ++attempt) {  // the agent writes the same object
    absl::StatusOr<ApiResponse> cur = admin_->Get(path);
    ASSERT_TRUE(cur.ok() && cur->code == 200);
    Json next = cur->body;
    next["status"]["conditions"] = {{{"type", "PreemptionPending"},
                                     {"status", "True"},
                                     {"reason", "Preempting"},
                                     {"message", "checkpoint now"}}};
    // As the controller writes it; the agent's own writes of the job carry it back.
    next["status"]["preemption"] = {{"preemptor", "team/urgent"},
                                    {"deadline", "2026-12-01T00:00:30Z"},
                                    {"dropping", Json::array()}};
    put = admin_->Put(path, next);
    if (!put.ok() || put->code != 409) break;
  }
  ASSERT_TRUE(put.ok() && put->code == 200) << (put.ok() ? put->body.dump() : "");
  Json st;
  EXPECT_TRUE(WaitFor(
      [&] {
        absl::StatusOr<ApiResponse> cur = admin_->Get(path);
        if (!cur.ok() || cur->code != 200) return false;
        st = cur->body["status"];
        // Until the agent's first report there is no status.observed.
        return st.contains("observed") && st["observed"].is_object() &&
               absl::StartsWith(st["observed"].value("w-0", ""), "Exited code=0 gen=1 ");
      },
      absl::Seconds(20)))
      << st.dump();
  EXPECT_EQ(Slurp(dir_ + "/ckpt"), "ckpt\n");
  EXPECT_EQ(st.value("phase", ""), "Running");  // not Succeeded
  EXPECT_EQ(st["preemption"].value("preemptor", ""), "team/urgent");
  EXPECT_EQ(agent_->stats().checkpoint_requests, 1);
  EXPECT_EQ(agent_->stats().started, 1);
}

// An InferenceService does not finish: its agent derives Deploying, then Ready once every
// placed replica serves; a replica that exits makes it Degraded (never Failed) and is started
// again after its backoff, and the service is Ready again.
TEST_F(NodeAgentHttpTest, AServiceIsReadyThenDegradedWhileAnExitedReplicaIsRestarted) {
  const std::string script =
      absl::StrCat("cd ", dir_, "; echo x >> runs; if [ $(wc -l < runs) -eq 1 ]; then ",
                   "touch up1; while [ ! -e crash ]; do sleep 0.05; done; exit 1; fi; ",
                   "touch up2; while true; do sleep 0.05; done");
  Json svc = {
      {"apiVersion", "tessera.dev/v1"},
      {"kind", "InferenceService"},
      {"metadata",
       {{"name", "chat"},
        {"namespace", "team"},
        {"annotations", {{"tessera.dev/command", Json::array({"/bin/sh", "-c", script}).dump()}}}}},
      {"spec",
       {{"modelVersion", "v1"}, {"replicas", {{"min", 1}, {"max", 1}}}, {"gpusPerReplica", 1}}},
      {"status",
       {{"phase", "Scheduled"},
        {"generation", 1},
        {"placement",
         {{{"group", "replica"},
           {"member", 0},
           {"node", "n1"},
           {"gpus", {2}},
           {"generation", 1}}}}}}};
  ASSERT_EQ(admin_->Post("/api/v1/namespaces/team/inferenceservices", svc)->code, 201);
  ASSERT_NO_FATAL_FAILURE(StartAgent());
  const std::string path = "/api/v1/namespaces/team/inferenceservices/chat";
  auto phase = [&] {
    absl::StatusOr<ApiResponse> cur = admin_->Get(path);
    return cur.ok() && cur->code == 200 ? cur->body["status"].value("phase", "") : "";
  };
  EXPECT_TRUE(WaitFor([&] { return phase() == "Ready"; }, absl::Seconds(20))) << phase();
  std::ofstream(dir_ + "/crash") << "now";
  EXPECT_TRUE(WaitFor([&] { return phase() == "Degraded"; }, absl::Seconds(20))) << phase();
  EXPECT_TRUE(WaitFor([&] { return std::filesystem::exists(dir_ + "/up2"); }, absl::Seconds(20)));
  EXPECT_TRUE(WaitFor([&] { return phase() == "Ready"; }, absl::Seconds(20))) << phase();
  EXPECT_EQ(agent_->stats().replica_restarts, 1);
}

}  // namespace
}  // namespace tessera::agent
