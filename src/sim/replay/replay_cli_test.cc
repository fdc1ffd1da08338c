// `tessera sim replay` end to end: the binary (env TESSERA_BIN) on a small
// synthetic load with failures prints one JSON object with a section per
// policy, writes its artifacts, and rejects bad flags naming them.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "nlohmann/json.hpp"

namespace {

std::string Bin() {
  const char* b = std::getenv("TESSERA_BIN");
  return b != nullptr && std::filesystem::exists(b) ? b : "";
}

int RunCapture(const std::string& cmd, std::string* out) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out->append(buf, n);
  return pclose(p);
}

TEST(ReplayCli, JsonSectionPerPolicyAndArtifacts) {
  std::string bin = Bin();
  if (bin.empty()) GTEST_SKIP() << "TESSERA_BIN is not set or missing; build the tessera target";
  std::string dir = ::testing::TempDir() + "/replay_cli";
  std::string out;
  int rc = RunCapture(bin +
                          " sim replay --workload synthetic --jobs 300 --span 1d --nodes 8 "
                          "--size-mix 1:0.6,8:0.3,32:0.1 --gpu-failure-interval 1h "
                          "--hot-spares 1 --json --out " +
                          dir,
                      &out);
  ASSERT_EQ(rc, 0) << out;
  nlohmann::json j = nlohmann::json::parse(out);
  ASSERT_EQ(j["policies"].size(), 4u);
  for (const char* p : {"fifo", "sjf", "las", "default"}) {
    EXPECT_EQ(j["policies"][p]["jobs"]["completed"], 300) << p;
    EXPECT_GT(j["policies"][p]["goodput"]["achieved"].get<double>(), 0.5) << p;
  }
  for (const char* f :
       {"utilization.svg", "jct_cdf.svg", "goodput_lost.svg", "timeseries.csv", "result.json"}) {
    EXPECT_TRUE(std::filesystem::exists(dir + "/" + f)) << f;
  }
}

TEST(ReplayCli, BadFlagsAreNamed) {
  std::string bin = Bin();
  if (bin.empty()) GTEST_SKIP() << "TESSERA_BIN is not set or missing; build the tessera target";
  std::string out;
  EXPECT_NE(RunCapture(bin + " sim replay --workload synthetic --checkpoint soon", &out), 0);
  EXPECT_NE(out.find("--checkpoint"), std::string::npos) << out;
  out.clear();
  EXPECT_NE(RunCapture(bin + " sim replay --workload synthetic --policies fifo,nope", &out), 0);
  EXPECT_NE(out.find("nope"), std::string::npos) << out;
}

TEST(ReplayCli, QueuesPolicyWithAQueueConfigFile) {
  std::string bin = Bin();
  if (bin.empty()) GTEST_SKIP() << "TESSERA_BIN is not set or missing; build the tessera target";
  const std::string good = ::testing::TempDir() + "/replay_cli_queues.yaml";
  std::ofstream(good) << "queues:\n"
                         "  - {name: q0, weight: 2, quotas: {gpu/H100: {guaranteed: 32}}}\n"
                         "  - {name: q1, quotas: {gpu/H100: {guaranteed: 16}}}\n"
                         "  - {name: q2, quotas: {gpu/H100: {guaranteed: 16}}}\n";
  std::string out;
  int rc = RunCapture(bin +
                          " sim replay --workload synthetic --jobs 200 --span 1d --nodes 8 "
                          "--queues 3 --size-mix 1:0.6,8:0.4 --gpu-failure-interval 2h "
                          "--policies queues,fifo --queue-config " +
                          good + " --json",
                      &out);
  ASSERT_EQ(rc, 0) << out;
  nlohmann::json j = nlohmann::json::parse(out);
  const nlohmann::json& q = j["policies"]["queues"];
  EXPECT_EQ(q["jobs"]["completed"], 200);
  ASSERT_EQ(q["fairness"]["queues"].size(), 3u);
  EXPECT_DOUBLE_EQ(q["fairness"]["queues"][0]["entitlement"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(q["fairness"]["queues"][1]["entitlement"].get<double>(), 0.25);

  const std::string bad = ::testing::TempDir() + "/replay_cli_bad_queues.yaml";
  std::ofstream(bad) << "queues:\n  - {name: q0, quotas: {gpu/H100: {guaranteed: lots}}}\n";
  out.clear();
  EXPECT_NE(RunCapture(bin +
                           " sim replay --workload synthetic --jobs 10 --policies queues "
                           "--queue-config " +
                           bad,
                       &out),
            0);
  EXPECT_NE(out.find("--queue-config " + bad), std::string::npos) << out;
  EXPECT_NE(out.find("queues[0].quotas"), std::string::npos) << out;
}

}  // namespace
