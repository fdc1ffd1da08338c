// Restart in place after a member failure (spec.maxRestarts, job_restart.cc):
// the gang keeps its GPUs and restarts at a new generation from its
// checkpoint until its restarts are used up.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "controller/controller_test_fixture.h"
#include "controller/scheduling_controller.h"

namespace tessera::controller {
namespace {

class JobRestartTest : public ControllerTest {
 protected:
  // gpu-0 and gpu-1, a 2 x 8-GPU job on both, Running, with a Ready checkpoint.
  void StartJob(Json extra) {
    AddNode("gpu-0", 8);
    AddNode("gpu-1", 8);
    AddJob("train", 2, 8, std::move(extra));
    Step();
    ASSERT_EQ(Job("train")["status"]["phase"], "Scheduled");
    ReportJob("train", api::MemberState::kRunning);
    Create("checkpoints", "team-a",
           {{"kind", "Checkpoint"},
            {"metadata", {{"name", "train-step-40"}}},
            {"spec", {{"jobName", "train"}, {"step", 40}, {"path", "s3://ckpt/40"}}},
            {"status", {{"phase", "Ready"}}}});
    Step();
    ASSERT_EQ(Job("train")["status"]["phase"], "Running");
  }

  // worker-1 exits with `code` at the current generation (its node agent's report); worker-0
  // keeps running.
  void FailMember1(int code) {
    Report("trainingjobs", "team-a", "train",
           code == 0 ? api::MemberState::kExited : api::MemberState::kFailed, code, {"worker-1"});
    Step();
  }

  static std::string Placement(const Json& job) {
    std::string out;
    for (const Json& m : job["status"]["placement"]) {
      absl::StrAppend(&out, m["node"].get<std::string>(), ":", m["gpus"].dump(), ";");
    }
    return out;
  }
};

TEST_F(JobRestartTest, AFailedMemberRestartsTheGangInPlaceUntilRestartsAreUsedUp) {
  StartJob({{"maxRestarts", 2}});
  const Json before = Job("train");
  const std::string placement = Placement(before);
  const int64_t gen = before["status"]["generation"];

  FailMember1(137);
  Json j = Job("train");
  EXPECT_EQ(j["status"]["phase"], "Scheduled");
  EXPECT_EQ(j["status"]["generation"], gen + 1);
  EXPECT_EQ(j["status"]["restarts"], 1);
  EXPECT_EQ(Placement(j), placement);  // the same GPUs
  for (const Json& m : j["status"]["placement"]) EXPECT_EQ(m["generation"], gen + 1);
  EXPECT_EQ(j["status"]["resumeFrom"]["checkpoint"], "train-step-40");
  EXPECT_TRUE(j["status"].contains("lastRestartTime"));
  EXPECT_NE(j["status"]["message"].get<std::string>().find(
                "member worker-1 killed by signal 9 (SIGKILL) on node gpu-1"),
            std::string::npos)
      << j["status"]["message"];
  EXPECT_EQ(BoundGpus(), 16);
  EXPECT_EQ(ctl_->stats().restarts, 1);
  const std::vector<std::string> reasons = EventReasons("train");
  EXPECT_EQ(std::count(reasons.begin(), reasons.end(), "Restarting"), 1);

  // The same report again (an agent retrying) is of an old generation: nothing more.
  Step();
  EXPECT_EQ(Job("train")["status"]["generation"], gen + 1);

  // The second failure, at the new generation, is the last restart.
  FailMember1(1);
  j = Job("train");
  EXPECT_EQ(j["status"]["generation"], gen + 2);
  EXPECT_EQ(j["status"]["restarts"], 2);
  // The third is not restarted: the job is Failed, naming the member and its exit, and the
  // GPUs come back.
  FailMember1(1);
  j = Job("train");
  EXPECT_EQ(j["status"]["generation"], gen + 2);
  EXPECT_EQ(j["status"]["restarts"], 2);
  EXPECT_EQ(ctl_->stats().restarts, 2);
  EXPECT_EQ(j["status"]["phase"], "Failed");
  EXPECT_EQ(j["status"]["reason"], "Error");  // a non-zero exit, as kubectl says of a container
  EXPECT_THAT(j["status"]["message"].get<std::string>(),
              ::testing::HasSubstr("member worker-1 exited with code 1 on node gpu-1"));
  EXPECT_FALSE(j["status"].contains("placement"));
  EXPECT_EQ(BoundGpus(), 0);
  EXPECT_EQ(EventReasons("train").back(), "Failed");
}

TEST_F(JobRestartTest, WithoutMaxRestartsOrOnSuccessNothingRestarts) {
  StartJob(Json::object());
  const int64_t gen = Job("train")["status"]["generation"];
  FailMember1(2);
  Json j = Job("train");
  EXPECT_EQ(j["status"]["generation"], gen);
  EXPECT_FALSE(j["status"].contains("restarts"));
  EXPECT_EQ(ctl_->stats().restarts, 0);
}

TEST_F(JobRestartTest, ExitCodeZeroIsNotAFailure) {
  StartJob({{"maxRestarts", 3}});
  const int64_t gen = Job("train")["status"]["generation"];
  FailMember1(0);
  EXPECT_EQ(Job("train")["status"]["generation"], gen);
  EXPECT_EQ(ctl_->stats().restarts, 0);
}

TEST_F(JobRestartTest, AFailureReportedWhileNoControllerRanIsRestartedAfterItStarts) {
  StartJob({{"maxRestarts", 1}});
  const int64_t gen = Job("train")["status"]["generation"];
  ctl_.reset();
  Report("trainingjobs", "team-a", "train", api::MemberState::kFailed, 3, {"worker-1"});
  Restart();
  Step();
  Json j = Job("train");
  EXPECT_EQ(j["status"]["generation"], gen + 1);
  EXPECT_EQ(j["status"]["restarts"], 1);
  EXPECT_EQ(BoundGpus(), 16);
}

}  // namespace
}  // namespace tessera::controller
