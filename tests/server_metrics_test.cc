// The real server's /metrics after it scheduled a job: the scheduling and
// fleet series are there, and `promtool check metrics` (Debian's prometheus
// package) finds nothing to complain about.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

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
  int port = server.Start({"--data-dir", dir + "/data"});
  ASSERT_GT(port, 0) << server.error();
  httplib::Client c("127.0.0.1", port);
  nlohmann::json node = {{"apiVersion", "tessera.dev/v1"},
                         {"kind", "Node"},
                         {"metadata", {{"name", "n1"}}},
                         {"spec", {{"gpuType", "H100"}, {"gpuCount", 8}}}};
  ASSERT_EQ(c.Post("/api/v1/nodes", node.dump(), "application/json")->status, 201);
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

}  // namespace
}  // namespace tessera::testing
