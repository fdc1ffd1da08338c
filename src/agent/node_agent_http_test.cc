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
#include "api/store_layout.h"
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

  // Writes `obj`, status included, straight to the store, as the controller writes a binding
  // (the API takes no placement from anyone). Creates it or replaces it, keeping the members'
  // reports the agent wrote.
  void WriteBound(const Json& obj) {
    const std::string plural =
        obj["kind"] == "InferenceService" ? "inferenceservices" : "trainingjobs";
    const std::string key = api::ObjectKey(plural, obj["metadata"]["namespace"].get<std::string>(),
                                           obj["metadata"]["name"].get<std::string>());
    for (int attempt = 0; attempt < 50; ++attempt) {
      Json next = obj;
      absl::StatusOr<store::KeyValue> cur = store_.Get(key);
      if (!cur.ok()) {
        if (store_.Create(key, api::ToStored(next)).ok()) return;
        continue;
      }
      const Json old = Json::parse(cur->value);
      if (old["status"].contains("members")) next["status"]["members"] = old["status"]["members"];
      next["metadata"]["uid"] = old["metadata"].value("uid", "");
      if (store_.Put(key, api::ToStored(next), cur->mod_revision).ok()) return;
    }
    FAIL() << "could not write " << key;
  }
  // The member's report as the agent wrote it, or null.
  Json MemberReport(const std::string& path, const std::string& member) {
    absl::StatusOr<ApiResponse> cur = admin_->Get(path);
    if (!cur.ok() || cur->code != 200) return nullptr;
    for (const Json& m : cur->body["status"].value("members", Json::array())) {
      if (m.value("member", "") == member) return m;
    }
    return nullptr;
  }

  store::MemoryStore memory_;
  store::MeteredStore store_{memory_, clock_};
};

TEST_F(NodeAgentHttpTest, SyncsOnlyItsOwnBindingsAmongAThousandJobs) {
  const std::string& dir = dir_;
  ApiClient& admin = *admin_;
  // 1,000 jobs bound to 100 other nodes, created 50 per batch.
  for (int n = 0; n < 1000; ++n) {
    ASSERT_NO_FATAL_FAILURE(WriteBound(
        BoundJob(absl::StrCat("other-", n), absl::StrCat("node-", n % 100), 1, "sleep 1", n % 8)));
  }
  ASSERT_NO_FATAL_FAILURE(
      WriteBound(BoundJob("mine", "n1", 1, absl::StrCat("touch ", dir, "/gen1; sleep 100"), 2)));
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
  // The member reported itself running, stamped with this node.
  EXPECT_TRUE(WaitFor(
      [&] {
        Json m = MemberReport("/api/v1/namespaces/team/trainingjobs/mine", "w-0");
        return m.is_object() && m.value("state", "") == "Running" && m.value("node", "") == "n1";
      },
      absl::Seconds(20)));
  // The scheduler moves the member to GPU 5 with generation 2: the watch delivers it.
  const absl::Time bound_at = absl::Now();
  ASSERT_NO_FATAL_FAILURE(
      WriteBound(BoundJob("mine", "n1", 2, absl::StrCat("touch ", dir, "/gen2; sleep 100"), 5)));
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
// the agent passes the checkpoint signal on at once and reports the member's exit; the phase is
// the controller's to decide (it requeues the victim as Preempted).
TEST_F(NodeAgentHttpTest, APreemptionVictimIsSignalledWhileBoundAndItsExitIsNotSuccess) {
  Json job = BoundJob("victim", "n1", 1,
                      absl::StrCat("trap 'echo ckpt > ", dir_, "/ckpt; exit 0' USR1; touch ", dir_,
                                   "/up; while true; do sleep 0.05; done"),
                      3);
  ASSERT_NO_FATAL_FAILURE(WriteBound(job));
  ASSERT_NO_FATAL_FAILURE(StartAgent());
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(dir_ + "/up"); }, absl::Seconds(20)));
  const std::string path = "/api/v1/namespaces/team/trainingjobs/victim";
  // As the controller marks a victim.
  job["status"]["conditions"] = {{{"type", "PreemptionPending"},
                                  {"status", "True"},
                                  {"reason", "Preempting"},
                                  {"message", "checkpoint now"}}};
  job["status"]["preemption"] = {{"preemptor", "team/urgent"},
                                 {"deadline", "2026-12-01T00:00:30Z"},
                                 {"dropping", Json::array()}};
  ASSERT_NO_FATAL_FAILURE(WriteBound(job));
  Json report;
  EXPECT_TRUE(WaitFor(
      [&] {
        report = MemberReport(path, "w-0");
        return report.is_object() && report.value("state", "") == "Exited" &&
               report.value("generation", 0) == 1;
      },
      absl::Seconds(20)))
      << report.dump();
  EXPECT_EQ(report.value("exitCode", -1), 0);
  const Json st = admin_->Get(path)->body["status"];
  EXPECT_EQ(Slurp(dir_ + "/ckpt"), "ckpt\n");
  EXPECT_EQ(st.value("phase", ""), "Scheduled");  // the agent never writes a phase
  EXPECT_EQ(st["preemption"].value("preemptor", ""), "team/urgent");
  EXPECT_EQ(agent_->stats().checkpoint_requests, 1);
  EXPECT_EQ(agent_->stats().started, 1);
}

// An InferenceService does not finish: a replica that exits is reported Failed, started again
// after its backoff, and reported Running again (the controller derives Ready / Degraded from
// these reports: member_phase.h).
TEST_F(NodeAgentHttpTest, AnExitedReplicaIsReportedAndStartedAgain) {
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
  ASSERT_NO_FATAL_FAILURE(WriteBound(svc));
  ASSERT_NO_FATAL_FAILURE(StartAgent());
  const std::string path = "/api/v1/namespaces/team/inferenceservices/chat";
  auto state = [&] {
    Json m = MemberReport(path, "replica-0");
    return m.is_object() ? m.value("state", "") : "";
  };
  EXPECT_TRUE(WaitFor([&] { return state() == "Running"; }, absl::Seconds(20))) << state();
  std::ofstream(dir_ + "/crash") << "now";
  EXPECT_TRUE(WaitFor([&] { return state() == "Failed"; }, absl::Seconds(20))) << state();
  Json failed = MemberReport(path, "replica-0");
  EXPECT_EQ(failed.value("exitCode", -1), 1);
  EXPECT_EQ(failed.value("reason", ""), "exited with code 1");
  EXPECT_TRUE(WaitFor([&] { return std::filesystem::exists(dir_ + "/up2"); }, absl::Seconds(20)));
  EXPECT_TRUE(WaitFor([&] { return state() == "Running"; }, absl::Seconds(20))) << state();
  // The phase (Ready, Degraded) is the controller's; none ran here.
  EXPECT_EQ(admin_->Get(path)->body["status"].value("phase", ""), "Scheduled");
  EXPECT_EQ(agent_->stats().replica_restarts, 1);
}

// The checkpoint interval reaches the member through its environment: the one the controller
// chose (status.checkpointIntervalSeconds, Young/Daly) over the job's own spec.checkpoint.
TEST_F(NodeAgentHttpTest, MembersGetTheCheckpointIntervalInTheirEnvironment) {
  Json chosen =
      BoundJob("chosen", "n1", 1,
               absl::StrCat("echo \"$TESSERA_CHECKPOINT_INTERVAL_SECONDS\" > ", dir_,
                            "/chosen.tmp; mv ", dir_, "/chosen.tmp ", dir_, "/chosen; sleep 100"),
               1);
  chosen["spec"]["checkpoint"] = {{"costSeconds", 60}};
  chosen["status"]["checkpointIntervalSeconds"] = 2567;
  Json own = BoundJob("own", "n1", 1,
                      absl::StrCat("echo \"$TESSERA_CHECKPOINT_INTERVAL_SECONDS\" > ", dir_,
                                   "/own.tmp; mv ", dir_, "/own.tmp ", dir_, "/own; sleep 100"),
                      2);
  own["spec"]["checkpoint"] = {{"intervalSeconds", 600}};
  ASSERT_NO_FATAL_FAILURE(WriteBound(chosen));
  ASSERT_NO_FATAL_FAILURE(WriteBound(own));
  ASSERT_NO_FATAL_FAILURE(StartAgent());
  ASSERT_TRUE(
      WaitFor([&] { return std::filesystem::exists(dir_ + "/chosen"); }, absl::Seconds(20)));
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(dir_ + "/own"); }, absl::Seconds(20)));
  EXPECT_EQ(Slurp(dir_ + "/chosen"), "2567\n");
  EXPECT_EQ(Slurp(dir_ + "/own"), "600\n");
}

}  // namespace
}  // namespace tessera::agent
