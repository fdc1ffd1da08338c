// status.checkpointIntervalSeconds: the Young/Daly interval the controller
// chooses for a TrainingJob that declares its checkpoint cost.
#include <gtest/gtest.h>

#include "controller/controller_test_fixture.h"
#include "controller/scheduling_controller.h"
#include "sched/framework/checkpoint_cadence.h"

namespace tessera::controller {
namespace {

TEST_F(ControllerTest, ChoosesTheCheckpointIntervalFromTheCost) {
  for (int i = 0; i < 4; ++i) AddNode("gpu-" + std::to_string(i), 8);
  AddJob("chosen", 2, 8, {{"checkpoint", {{"costSeconds", 60}, {"path", "/ckpt"}}}});
  AddJob("own", 1, 8, {{"checkpoint", {{"costSeconds", 60}, {"intervalSeconds", 600}}}});
  AddJob("none", 1, 8);
  Step();
  Json chosen = Job("chosen");
  ASSERT_EQ(chosen["status"]["phase"], "Scheduled");
  // 16 GPUs at the default per-GPU MTBF (50,000 h): sqrt(2 x 60 s x 11.25 M s) = 36,742 s.
  const int64_t want = sched::CheckpointIntervalSeconds(60, sched::kDefaultGpuMtbfSeconds, 16);
  EXPECT_EQ(want, 36742);
  EXPECT_EQ(chosen["status"]["checkpointIntervalSeconds"], want);
  // A job that sets its own interval, or declares no cost, gets none.
  EXPECT_EQ(Job("own")["status"]["phase"], "Scheduled");
  EXPECT_FALSE(Job("own")["status"].contains("checkpointIntervalSeconds"));
  EXPECT_EQ(Job("none")["status"]["phase"], "Scheduled");
  EXPECT_FALSE(Job("none")["status"].contains("checkpointIntervalSeconds"));
}

TEST_F(ControllerTest, CheckpointIntervalFollowsTheConfiguredGpuMtbf) {
  ControllerOptions opts = base_options_;
  opts.checkpoint_gpu_mtbf = absl::Hours(1000);
  Restart(opts);
  AddNode("gpu-0", 8);
  AddJob("chosen", 1, 4, {{"checkpoint", {{"costSeconds", 30}}}});
  Step();
  // 4 GPUs of 1,000 h each fail every 250 h: sqrt(2 x 30 x 900,000 s) = 7,348 s.
  EXPECT_EQ(Job("chosen")["status"]["checkpointIntervalSeconds"], 7348);
}

}  // namespace
}  // namespace tessera::controller
