// Slurm's habits in `tessera`, against a real server with users (issue 23): USER and START in
// `get jobs -o wide`, `cancel` by name and by user (the job stays, CANCELLED, for history),
// `hold`/`release`, and `history` with state, GPUs, GPU-hours, wait and run time.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "cli_process_fixture.h"

namespace tessera::testing {
namespace {

using ::testing::HasSubstr;

class CliSlurmTest : public CliProcessTest {
 protected:
  void SetUp() override {
    if (TesseraBin().empty()) GTEST_SKIP() << "TESSERA_BIN is not set";
    tokens_dir_ = MakeTempDir("tessera_tokens");
    const std::string tokens = tokens_dir_ + "/tokens";
    std::ofstream(tokens) << "admintoken1 * admin\n"
                             "alicetoken1 default user alice\n"
                             "bobtoken123 default user bob\n";
    chmod(tokens.c_str(), 0600);
    extra_args_ = {"--tokens-file", tokens};
    admin_token_ = "admintoken1";
    CliProcessTest::SetUp();
    if (IsSkipped()) return;
    ASSERT_EQ(Run("apply -f " + Example("nodes.yaml")).rc, 0);
  }
  void TearDown() override { std::filesystem::remove_all(tokens_dir_); }

  // Submits a job of two 8-GPU members as `token`.
  void Submit(const std::string& name, const std::string& token) {
    Result r =
        Run("apply -f - --token " + token +
            " <<'EOF'\napiVersion: tessera.dev/v1\nkind: TrainingJob\nmetadata: {name: " + name +
            "}\nspec:\n  groups: [{name: w, count: 2, gpusPerReplica: 8}]\nEOF\n");
    ASSERT_EQ(r.rc, 0) << r.out;
  }
  Json History(const std::string& args = "") {
    Result r = Run("history -o json " + args);
    EXPECT_EQ(r.rc, 0) << r.out;
    return Json::parse(r.out, nullptr, false);
  }
  static const Json* Row(const Json& h, const std::string& name) {
    for (const Json& r : h["items"]) {
      if (r["name"] == name) return &r;
    }
    return nullptr;
  }

  std::string tokens_dir_;
};

TEST_F(CliSlurmTest, UsersStartEstimatesCancelHoldReleaseAndHistory) {
  ASSERT_NO_FATAL_FAILURE(Submit("a-1", "alicetoken1"));
  ASSERT_NO_FATAL_FAILURE(Submit("a-2", "alicetoken1"));
  WaitFor("jobs", "a-1", Scheduled);
  WaitFor("jobs", "a-2", Scheduled);
  // The fleet's four 8-GPU H100 nodes are taken: bob's gang waits behind a reservation.
  ASSERT_NO_FATAL_FAILURE(Submit("b-1", "bobtoken123"));
  WaitFor("jobs", "b-1", [](const Json& j) { return j["status"].contains("estimatedStartTime"); });
  Result r = Run("get jobs -o wide");
  EXPECT_THAT(r.out, HasSubstr("USER"));
  EXPECT_THAT(r.out, HasSubstr("START"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("a-1 .* alice .* 20[0-9-]+T"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("b-1 .* bob .* ~20[0-9-]+T"));
  EXPECT_EQ(Run("get jobs -o custom-columns=U:.metadata.annotations.tessera\\.dev/submitted-by "
                "--no-headers")
                .rc,
            0);

  // alice cancels her first job: it stays, CANCELLED, its GPUs go to bob's gang.
  r = Run("cancel a-1 --reason 'wrong dataset' --token alicetoken1");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("trainingjob.tessera.dev/a-1 cancelled"));
  Json job =
      WaitFor("jobs", "a-1", [](const Json& j) { return !j["status"].contains("placement"); });
  EXPECT_EQ(job["status"]["reason"], "Cancelled");
  EXPECT_EQ(job["status"]["message"], "cancelled by alice: wrong dataset");
  WaitFor("jobs", "b-1", Scheduled);
  EXPECT_EQ(Run("cancel a-1 --token alicetoken1").out,
            "trainingjob.tessera.dev/a-1 already finished\n");
  EXPECT_NE(Run("cancel no-such --token alicetoken1").rc, 0);
  EXPECT_NE(Run("cancel").rc, 0) << "cancelling everything takes a filter";

  // hold suspends, release lets it run again.
  r = Run("hold a-2 --token alicetoken1");
  ASSERT_EQ(r.rc, 0) << r.out;
  WaitFor("jobs", "a-2",
          [](const Json& j) { return j["status"].value("phase", "") == "Suspended"; });
  EXPECT_EQ(Run("release a-2 --token alicetoken1").rc, 0);
  WaitFor("jobs", "a-2", [](const Json& j) { return j["spec"].value("suspend", true) == false; });

  // An admin cancels by user and state.
  r = Run("cancel --user bob --state running");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("b-1 cancelled"));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("a-2")));

  Json h = History();
  ASSERT_EQ(h["items"].size(), 3u) << h.dump();
  const Json* a1 = Row(h, "a-1");
  ASSERT_NE(a1, nullptr);
  EXPECT_EQ((*a1)["state"], "CANCELLED");
  EXPECT_EQ((*a1)["user"], "alice");
  EXPECT_EQ((*a1)["gpus"], 16);
  EXPECT_GT((*a1)["gpuHours"].get<double>(), 0) << "16 GPUs were held until the cancellation";
  EXPECT_FALSE((*a1)["end"].get<std::string>().empty());
  EXPECT_EQ(Row(h, "b-1")->at("user"), "bob");
  EXPECT_EQ(History("--state cancelled")["items"].size(), 2u);
  EXPECT_EQ(History("--user alice")["items"].size(), 2u);
  r = Run("history");
  EXPECT_THAT(r.out, HasSubstr("GPU-HOURS"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("a-1 +alice +default +CANCELLED"));
}

}  // namespace
}  // namespace tessera::testing
