// The real server's /metrics after it scheduled a job: the scheduling and
// fleet series are there, and `promtool check metrics` (Debian's prometheus
// package) finds nothing to complain about.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <memory>

#include "httplib.h"
#include "nlohmann/json.hpp"
#include "server_process.h"

namespace tessera::testing {
namespace {

using ::testing::HasSubstr;

TEST(ServerMetricsTest, SchedulerMetricsPassPromtool) {
  if (TesseraBin().empty()) GTEST_SKIP() << "TESSERA_BIN is not set";
  const std::string dir = MakeTempDir("tessera_metrics");
  ServerProcess server;
  int port = server.Start({"--data-dir", dir + "/data", "--insecure-no-auth"});
  ASSERT_GT(port, 0) << server.error();
  httplib::Client c("127.0.0.1", port);
  nlohmann::json node = {{"apiVersion", "tessera.dev/v1"},
                         {"kind", "Node"},
                         {"metadata", {{"name", "n1"}}},
                         {"spec", {{"gpuType", "H100"}, {"gpuCount", 8}}}};
  ASSERT_EQ(c.Post("/api/v1/nodes", node.dump(), "application/json")->status, 201);
  nlohmann::json queue = {{"apiVersion", "tessera.dev/v1"},
                          {"kind", "Queue"},
                          {"metadata", {{"name", "default"}}},
                          {"spec", {{"gpuQuota", {{"H100", 6}}}, {"weight", 2}}}};
  ASSERT_EQ(c.Post("/api/v1/queues", queue.dump(), "application/json")->status, 201);
  nlohmann::json job = {
      {"apiVersion", "tessera.dev/v1"},
      {"kind", "TrainingJob"},
      {"metadata", {{"name", "j1"}}},
      {"spec", {{"groups", {{{"name", "w"}, {"count", 1}, {"gpusPerReplica", 4}}}}}}};
  ASSERT_EQ(
      c.Post("/api/v1/namespaces/default/trainingjobs", job.dump(), "application/json")->status,
      201);
  std::string text;
  for (int i = 0; i < 100; ++i) {
    auto r = c.Get("/metrics");
    ASSERT_TRUE(r);
    text = r->body;
    if (text.find("tessera_gpus_allocated{model=\"H100\"} 4") != std::string::npos) break;
    usleep(50 * 1000);
  }
  EXPECT_THAT(text, HasSubstr("tessera_gpus_allocated{model=\"H100\"} 4\n"));
  EXPECT_THAT(text, HasSubstr("tessera_scheduling_attempts_total{result=\"scheduled\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("tessera_node_ready{node=\"n1\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("tessera_store_commit_latency_seconds_count"));
  // fsyncs, which group commit makes fewer than the store's transactions.
  EXPECT_THAT(text, HasSubstr("# TYPE tessera_store_durable_commits_total counter\n"));
  EXPECT_THAT(text,
              ::testing::ContainsRegex("\ntessera_store_durable_commits_total [1-9][0-9]*\n"));
  // Per queue (issue 8 item 1).
  EXPECT_THAT(text,
              HasSubstr("tessera_queue_gpus_allocated{queue=\"default\",model=\"H100\"} 4\n"));
  EXPECT_THAT(
      text, HasSubstr("tessera_queue_gpu_quota_guaranteed{queue=\"default\",model=\"H100\"} 6\n"));
  EXPECT_THAT(text, HasSubstr("tessera_queue_gpu_quota_borrowing_limit{queue=\"default\""));
  EXPECT_THAT(text, HasSubstr("tessera_queue_fair_share{queue=\"default\"}"));
  EXPECT_THAT(text, HasSubstr("tessera_queue_burst_credit_gpu_seconds{queue=\"default\"}"));
  EXPECT_THAT(text, HasSubstr("tessera_pending_jobs{queue=\"default\"} 0\n"));
  // API requests by verb, resource and code; allocation by pool; GPU health per node.
  EXPECT_THAT(
      text,
      HasSubstr("tessera_api_requests_total{verb=\"create\",resource=\"nodes\",code=\"201\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("tessera_api_request_duration_seconds_count{verb=\"create\","
                              "resource=\"trainingjobs\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("tessera_pool_gpus_allocated{model=\"H100\",pool=\"\"} 4\n"));
  EXPECT_THAT(text, HasSubstr("tessera_node_gpus_unhealthy{node=\"n1\"} 0\n"));

  // Not a skip: CI installs promtool (scripts/setup.sh), and a missing one must show.
  ASSERT_EQ(system("command -v promtool >/dev/null 2>&1"), 0)
      << "promtool not installed (scripts/setup.sh installs Debian's prometheus)";
  const std::string path = dir + "/metrics.txt";
  std::ofstream(path) << text;
  const std::string cmd = "promtool check metrics < " + path + " > " + dir + "/lint.txt 2>&1";
  int rc = system(cmd.c_str());
  std::ifstream lint(dir + "/lint.txt");
  std::string findings((std::istreambuf_iterator<char>(lint)), std::istreambuf_iterator<char>());
  EXPECT_EQ(rc, 0) << findings;
  EXPECT_EQ(findings, "");
}

// Queues over real HTTP: an invalid Queue is refused naming the field and
// changes nothing; a job over its queue's quota waits and says so; raising
// the quota with a PUT lets it run without a restart; after a restart the
// quota still holds.
TEST(ServerQueueTest, QueueObjectsDriveAdmissionLive) {
  if (TesseraBin().empty()) GTEST_SKIP() << "TESSERA_BIN is not set";
  const std::string dir = MakeTempDir("tessera_queues");
  auto server = std::make_unique<ServerProcess>();
  int port = server->Start({"--data-dir", dir + "/data", "--insecure-no-auth"});
  ASSERT_GT(port, 0) << server->error();
  auto c = std::make_unique<httplib::Client>("127.0.0.1", port);
  auto post = [&](const std::string& path, const nlohmann::json& o) {
    auto r = c->Post(path, o.dump(), "application/json");
    return r ? std::make_pair(r->status, r->body) : std::make_pair(-1, std::string());
  };
  auto get = [&](const std::string& path) {
    auto r = c->Get(path);
    return r && r->status == 200 ? nlohmann::json::parse(r->body) : nlohmann::json();
  };
  auto queue = [](const std::string& name, nlohmann::json spec) {
    return nlohmann::json{{"apiVersion", "tessera.dev/v1"},
                          {"kind", "Queue"},
                          {"metadata", {{"name", name}}},
                          {"spec", std::move(spec)}};
  };
  ASSERT_EQ(post("/api/v1/nodes", {{"apiVersion", "tessera.dev/v1"},
                                   {"kind", "Node"},
                                   {"metadata", {{"name", "n1"}}},
                                   {"spec", {{"gpuType", "H100"}, {"gpuCount", 8}}}})
                .first,
            201);
  ASSERT_EQ(post("/api/v1/queues", queue("org", {{"gpuQuota", {{"H100", 8}}}})).first, 201);
  // Invalid: unknown parent, children above the parent's guarantee.
  auto bad = post("/api/v1/queues", queue("team-a", {{"parent", "nope"}}));
  EXPECT_EQ(bad.first, 422);
  EXPECT_THAT(bad.second, HasSubstr("spec.parent: unknown queue"));
  bad = post("/api/v1/queues", queue("team-a", {{"parent", "org"}, {"gpuQuota", {{"H100", 9}}}}));
  EXPECT_EQ(bad.first, 422);
  EXPECT_THAT(bad.second, HasSubstr("gpu/H100"));
  EXPECT_TRUE(get("/api/v1/queues/team-a").is_null());  // nothing written
  ASSERT_EQ(
      post("/api/v1/queues", queue("team-a", {{"parent", "org"}, {"gpuQuota", {{"H100", 4}}}}))
          .first,
      201);
  // Deleting a parent with children is refused.
  EXPECT_EQ(c->Delete("/api/v1/queues/org")->status, 422);
  auto job = [](const std::string& name) {
    return nlohmann::json{{"apiVersion", "tessera.dev/v1"},
                          {"kind", "TrainingJob"},
                          {"metadata", {{"name", name}}},
                          {"spec",
                           {{"queue", "team-a"},
                            {"groups", {{{"name", "w"}, {"count", 1}, {"gpusPerReplica", 4}}}}}}};
  };
  const std::string jobs = "/api/v1/namespaces/default/trainingjobs/";
  ASSERT_EQ(post("/api/v1/namespaces/default/trainingjobs", job("a")).first, 201);
  ASSERT_EQ(post("/api/v1/namespaces/default/trainingjobs", job("b")).first, 201);
  auto wait_for = [&](const std::string& name, const std::string& text) {
    nlohmann::json j;
    for (int i = 0; i < 200; ++i) {
      j = get(jobs + name);
      if (j.is_object() && j["status"].dump().find(text) != std::string::npos) break;
      usleep(50 * 1000);
    }
    return j;
  };
  nlohmann::json a = wait_for("a", "Scheduled");
  nlohmann::json b = wait_for("b", "over quota");
  int scheduled = (a["status"]["phase"] == "Scheduled") + (b["status"]["phase"] == "Scheduled");
  EXPECT_EQ(scheduled, 1);
  EXPECT_THAT(b["status"].value("message", ""),
              HasSubstr("waiting: queue team-a over quota: 4 H100 GPUs of 4 H100 GPUs"));
  // Raise the quota: the waiting job runs, no restart.
  nlohmann::json q = get("/api/v1/queues/team-a");
  q["spec"]["gpuQuota"]["H100"] = 8;
  auto put = c->Put("/api/v1/queues/team-a", q.dump(), "application/json");
  ASSERT_TRUE(put);
  ASSERT_EQ(put->status, 200) << put->body;
  b = wait_for("b", "Scheduled");
  EXPECT_EQ(b["status"]["phase"], "Scheduled");
  // The Queue's status shows its usage.
  for (int i = 0; i < 200; ++i) {
    q = get("/api/v1/queues/team-a");
    if (q["status"].value("admittedJobs", 0) == 2) break;
    usleep(50 * 1000);
  }
  EXPECT_EQ(q["status"]["gpusAllocated"]["H100"], 8.0) << q.dump();
  // `tessera top queues` shows usage, quota and fair share.
  {
    const std::string cmd = "HOME=" + dir + " " + TesseraBin() +
                            " top queues --server http://127.0.0.1:" + std::to_string(port) +
                            " 2>&1";
    std::string out;
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    EXPECT_EQ(pclose(p), 0) << out;
    EXPECT_THAT(out, HasSubstr("FAIR SHARE"));
    EXPECT_THAT(out, ::testing::ContainsRegex("team-a +2 +0 +8 +0 +H100:8 +[0-9.]+%"));
  }
  // Restart: the tree comes back from the store; a third job waits.
  c.reset();
  server.reset();
  server = std::make_unique<ServerProcess>();
  port = server->Start({"--data-dir", dir + "/data", "--insecure-no-auth"});
  ASSERT_GT(port, 0) << server->error();
  c = std::make_unique<httplib::Client>("127.0.0.1", port);
  nlohmann::json big = job("c");
  big["spec"]["groups"][0]["gpusPerReplica"] = 1;
  ASSERT_EQ(post("/api/v1/namespaces/default/trainingjobs", big).first, 201);
  nlohmann::json cj = wait_for("c", "over quota");
  EXPECT_THAT(cj["status"].value("message", ""), HasSubstr("queue team-a over quota"));
}

}  // namespace
}  // namespace tessera::testing
