// The node agent against a real in-process `tessera server` API (HTTP on loopback) holding 1,000
// jobs of other nodes: its binding syncs read only its own bindings (no store List at all after
// the server's start), and a bind or a new generation reaches it through the long-poll watch.
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "agent/api_client.h"
#include "agent/binding_watcher.h"
#include "agent/fake/fake_backend.h"
#include "agent/http_control_plane.h"
#include "agent/node_agent.h"
#include "gtest/gtest.h"
#include "server/api_server.h"
#include "store/memory_store.h"
#include "store/metered_store.h"

namespace tessera::agent {
namespace {

using Json = nlohmann::json;

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

bool WaitFor(const std::function<bool()>& pred, absl::Duration limit) {
  const absl::Time end = absl::Now() + limit;
  while (absl::Now() < end) {
    if (pred()) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return pred();
}

TEST(NodeAgentHttpTest, SyncsOnlyItsOwnBindingsAmongAThousandJobs) {
  std::string dir = "/tmp/node_agent_http_test_XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  RealClock clock;
  store::MemoryStore memory;
  store::MeteredStore store(memory, clock);
  server::ApiServerOptions so;
  so.threads = 8;
  server::ApiServer server(store, clock, server::Authenticator::AllowAll(), so);
  absl::StatusOr<int> port = server.Start("127.0.0.1", 0);
  ASSERT_TRUE(port.ok()) << port.status();
  const std::string url = absl::StrCat("http://127.0.0.1:", *port);
  ApiClient admin(url, "");
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
  const store::StoreMetrics before = store.Metrics();

  auto backend = FakeBackend::FromFile(
      std::string(TESSERA_SOURCE_DIR) + "/deploy/fake-gpus/h100-nvswitch-8.yaml", clock);
  ASSERT_TRUE(backend.ok()) << backend.status();
  ASSERT_TRUE((*backend)->Init().ok());
  Launcher::Options lo;
  lo.state_dir = dir + "/state";
  lo.cgroup_parent = "";
  Launcher launcher(lo, clock);
  ASSERT_TRUE(launcher.Init().ok());
  HealthTracker tracker;
  NodeAgentOptions ao;
  ao.node_name = "n1";
  ao.heartbeat_interval = absl::Seconds(1);
  ao.sync_interval = absl::Hours(1);  // no periodic re-list: the watch must carry every change
  HttpControlPlaneClient client(url, "");
  NodeAgent agent(**backend, tracker, launcher, client, clock, ao);
  ASSERT_TRUE(agent.Init().ok());
  HttpControlPlaneClient watch_client(url, "", absl::Seconds(30));
  BindingWatcher watcher(
      watch_client, agent, "n1", absl::Seconds(10), [&] { watch_client.Cancel(); }, 7);
  watcher.Start();
  std::thread run([&] { agent.Run(); });

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

  agent.Stop();
  run.join();
  watcher.Stop();
  const store::StoreMetrics after = store.Metrics();
  // Not one store List: no job list, neither by the agent nor by the server on its behalf.
  EXPECT_EQ(after.lists - before.lists, 0);
  // One ListBindings (the fencing sync at registration); the rest came from the watch.
  EXPECT_EQ(agent.stats().lists, 1);
  EXPECT_GE(agent.stats().offers, 1);
  EXPECT_GT(watcher.polls(), 1);
  // Store reads are O(own bindings + heartbeats), nowhere near the 1,001 jobs.
  EXPECT_LT(after.gets - before.gets, 200);
  for (const MemberStatus& m : launcher.List()) (void)launcher.Stop(m.spec.Id(), false);
  absl::SleepFor(absl::Milliseconds(100));
  launcher.Poll();
  server.Stop();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessera::agent
