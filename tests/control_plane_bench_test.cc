// `tessera bench control-plane`, small: a real server with auth and its controller, 64 simulated
// agents with node tokens. Every submitted job is bound and reported running, the counts agree,
// no GPU is bound twice, and the temporary directory is gone afterwards. `tessera bench agents`,
// small: every job its binder submits is bound (by the server's scheduler) and seen by the one
// agent it was pinned to. Timings are printed by the benchmarks, not checked here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "nlohmann/json.hpp"
#include "server_process.h"

namespace tessera::testing {
namespace {

using Json = nlohmann::json;
using ::testing::HasSubstr;

// stdout of `tessera ARGS` (stderr to `err_path`) and its exit code.
CliResult RunStdout(const std::string& env, const std::string& args, const std::string& err_path) {
  CliResult r;
  FILE* p = popen((env + " " + TesseraBin() + " " + args + " 2>" + err_path).c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

class ControlPlaneBenchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (TesseraBin().empty()) GTEST_SKIP() << "TESSERA_BIN is not set";
    dir_ = MakeTempDir("tessera_cp_bench_test");
    ASSERT_FALSE(dir_.empty());
    std::filesystem::create_directories(dir_ + "/tmp");
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  // `tessera bench ARGS` with its temporary files under dir_/tmp: its one JSON object, or a
  // failure (with its stdout and stderr) and a discarded value.
  Json RunBench(const std::string& args) {
    CliResult r = RunStdout("TMPDIR=" + dir_ + "/tmp", "bench " + args, dir_ + "/stderr");
    EXPECT_EQ(r.rc, 0) << r.out << Slurp(dir_ + "/stderr");
    Json j = Json::parse(r.out, nullptr, false);
    EXPECT_TRUE(j.is_object()) << r.out << Slurp(dir_ + "/stderr");
    return r.rc == 0 && j.is_object() ? j : Json(Json::value_t::discarded);
  }
  std::string dir_;
};

TEST_F(ControlPlaneBenchTest, SmallRunBindsAndRunsEveryJob) {
  // 64 nodes x 8 GPUs = 512; the jobs take 100 + 20 x 8 + 2 x 64 = 388.
  Json j = RunBench(
      "control-plane --nodes 64 --single 100 --eight 20 --gangs 2 --clients 4 --heartbeat 1 "
      "--seconds 240");
  ASSERT_FALSE(j.is_discarded());
  SCOPED_TRACE(j.dump(2) + Slurp(dir_ + "/stderr"));
  EXPECT_EQ(j["benchmark"], "control-plane");
  EXPECT_EQ(j["complete"], true);
  EXPECT_EQ(j["nodes"], 64);
  EXPECT_EQ(j["gpus"], 512);
  EXPECT_EQ(j["jobs"], 122);
  EXPECT_EQ(j["submitted"], 122);
  EXPECT_EQ(j["submit_errors"], 0);
  EXPECT_EQ(j["bound"], 122);
  EXPECT_EQ(j["running"], 122);
  const std::pair<const char*, int> sizes[] = {
      {"single_gpu", 100}, {"eight_gpu", 20}, {"gang_64_gpu", 2}};
  for (const auto& [name, count] : sizes) {
    const Json& s = j["by_size"][name];
    EXPECT_EQ(s["jobs"], count) << name;
    EXPECT_EQ(s["bound"], count) << name;
    EXPECT_EQ(s["running"], count) << name;
    for (const char* k : {"submit_to_bound_ms", "submit_to_running_ms"}) {
      EXPECT_TRUE(s[k]["p50"].is_number()) << name << " " << k;
      EXPECT_TRUE(s[k]["p99"].is_number()) << name << " " << k;
      EXPECT_LE(s[k]["p50"].get<double>(), s[k]["p99"].get<double>()) << name << " " << k;
    }
    EXPECT_GT(s["bound_per_s"].get<double>(), 0) << name;
    EXPECT_GT(s["running_per_s"].get<double>(), 0) << name;
  }
  EXPECT_GT(j["bound_per_s"].get<double>(), 0);
  // The server's own metrics: every binding written, each durably.
  EXPECT_GE(j["store"]["bindings"].get<double>(), 122);
  EXPECT_GT(j["store"]["durable_commits"].get<double>(), 0);
  EXPECT_GE(j["store"]["txns"].get<double>(), j["store"]["durable_commits"].get<double>());
  EXPECT_GT(j["store"]["scheduling_cycles_that_bound"].get<double>(), 0);
  EXPECT_GT(j["server"]["peak_rss_mib"].get<double>(), 0);
  EXPECT_GE(j["server"]["cpu_s"].get<double>(), 0);
  EXPECT_EQ(j["server"]["stopped_cleanly"], true);
  // The agents: every node registered with its token; one report per job and node (a gang's 8
  // members are on 8 nodes), each accepted.
  EXPECT_EQ(j["agents"]["registered"], 64);
  EXPECT_EQ(j["agents"]["members_seen"], 100 + 20 + 2 * 8);
  EXPECT_EQ(j["agents"]["reports_ok"], 100 + 20 + 2 * 8);
  EXPECT_EQ(j["agents"]["report_errors"], 0);
  EXPECT_EQ(j["agents"]["nodes_double_booked"], 0);
  EXPECT_GT(j["agents"]["heartbeats"].get<int64_t>(), 0);
  // The stored placements, listed after the run.
  EXPECT_EQ(j["placements"]["listed"], true);
  EXPECT_EQ(j["placements"]["jobs"], 122);
  EXPECT_EQ(j["placements"]["running"], 122);
  EXPECT_EQ(j["placements"]["gpus_bound"], 100 + 20 * 8 + 2 * 64);
  EXPECT_EQ(j["placements"]["gpus_double_booked"], 0);
  EXPECT_EQ(j["placements"]["jobs_misplaced"], 0);
  // Its temporary directory (store, tokens, log) is removed.
  EXPECT_TRUE(std::filesystem::is_empty(dir_ + "/tmp"));
}

TEST_F(ControlPlaneBenchTest, BadFlagsAreNamedAllAtOnce) {
  CliResult r = RunStdout("", "bench control-plane --nodes 0 --clients 0 --rate -1", dir_ + "/err");
  EXPECT_EQ(r.rc, 2);
  const std::string err = Slurp(dir_ + "/err");
  EXPECT_THAT(err, HasSubstr("--nodes"));
  EXPECT_THAT(err, HasSubstr("--clients"));
  EXPECT_THAT(err, HasSubstr("--rate"));
  CliResult big =
      RunStdout("", "bench control-plane --nodes 2 --single 0 --eight 0 --gangs 1", dir_ + "/err2");
  EXPECT_EQ(big.rc, 2);
  EXPECT_THAT(Slurp(dir_ + "/err2"), HasSubstr("the jobs need 64 GPUs"));
}

TEST_F(ControlPlaneBenchTest, AgentsBenchSeesEveryBindingOnItsOwnAgent) {
  Json j = RunBench(
      "agents --agents 16 --heartbeat 1 --seconds 5 --binds-per-second 4 --poll-timeout 5");
  ASSERT_FALSE(j.is_discarded());
  SCOPED_TRACE(j.dump(2) + Slurp(dir_ + "/stderr"));
  EXPECT_EQ(j["benchmark"], "agents");
  EXPECT_GT(j["binds"].get<int64_t>(), 0);
  // Before the fix the binder wrote status.placement on create, which the server ignores: 0 seen.
  EXPECT_EQ(j["binds_seen"], j["binds"]);
  EXPECT_EQ(j["foreign_bindings_seen"], 0);
  EXPECT_GT(j["heartbeats"].get<int64_t>(), 0);
}

}  // namespace
}  // namespace tessera::testing
