// Checks the shipped Grafana dashboard: valid JSON, every panel has a query,
// and it queries the panels it must (that every series it queries exists is checked against
// real processes by observability_test).
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>

#include "nlohmann/json.hpp"

namespace {

TEST(DeployArtifactsTest, GrafanaDashboardQueriesKnownSeries) {
  std::ifstream in(TESSERA_SOURCE_DIR "/deploy/grafana/tessera-fleet.json");
  ASSERT_TRUE(in.good());
  nlohmann::json d = nlohmann::json::parse(in);
  ASSERT_TRUE(d.contains("panels"));
  ASSERT_GE(d["panels"].size(), 8u);
  const std::regex metric(R"(\b(tessera_[a-z_]+|DCGM_FI_[A-Z_]+)\b)");
  std::set<std::string> seen;
  for (const auto& p : d["panels"]) {
    ASSERT_TRUE(p.contains("targets")) << p["title"];
    ASSERT_FALSE(p["targets"].empty()) << p["title"];
    for (const auto& t : p["targets"]) {
      std::string expr = t["expr"];
      for (auto it = std::sregex_iterator(expr.begin(), expr.end(), metric);
           it != std::sregex_iterator(); ++it) {
        seen.insert((*it)[1]);
      }
    }
  }
  // Utilization heatmap, allocation by queue, health, scheduling latency.
  for (const char* must : {"DCGM_FI_DEV_GPU_UTIL", "tessera_queue_gpus_allocated",
                           "tessera_gpus_healthy", "tessera_scheduling_duration_seconds_bucket"}) {
    EXPECT_TRUE(seen.count(must)) << must;
  }
}

}  // namespace
