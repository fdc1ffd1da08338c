#include "sched/framework/checkpoint_cadence.h"

#include <cmath>

#include "gtest/gtest.h"

namespace tessera::sched {
namespace {

TEST(YoungDaly, SqrtTwoCostMtbfOfTheGpuSet) {
  // 25,000 GPUs, a failure every 2.5 h: per-GPU MTBF 62,500 h. A 4,096-GPU
  // gang fails every 15.26 h; a 60 s checkpoint gives sqrt(2 x 60 x 54,931 s).
  const double gpu_mtbf = 25000 * 2.5 * 3600;
  const double set = gpu_mtbf / 4096;
  EXPECT_DOUBLE_EQ(YoungDalyIntervalSeconds(60, gpu_mtbf, 4096), std::sqrt(2 * 60 * set));
  EXPECT_NEAR(YoungDalyIntervalSeconds(60, gpu_mtbf, 4096), 2567.4, 0.1);
  // One GPU of the same fleet: the interval grows with sqrt(gpus).
  EXPECT_NEAR(YoungDalyIntervalSeconds(60, gpu_mtbf, 1) / YoungDalyIntervalSeconds(60, gpu_mtbf, 4),
              2.0, 1e-12);
}

TEST(YoungDaly, MinimisesTheFirstOrderOverhead) {
  const double cost = 30, mtbf = 40000;
  const double t = YoungDalyIntervalSeconds(cost, mtbf * 8, 8);
  auto overhead = [&](double interval) { return cost / interval + interval / (2 * mtbf); };
  EXPECT_LT(overhead(t), overhead(t * 1.05));
  EXPECT_LT(overhead(t), overhead(t * 0.95));
}

TEST(YoungDaly, CostNearTheMtbfUsesTheMtbf) {
  EXPECT_DOUBLE_EQ(YoungDalyIntervalSeconds(600, 1000, 1), 1000);
  EXPECT_DOUBLE_EQ(YoungDalyIntervalSeconds(500, 1000, 1), 1000);
  EXPECT_DOUBLE_EQ(YoungDalyIntervalSeconds(499, 1000, 1), std::sqrt(2 * 499 * 1000.0));
}

TEST(YoungDaly, NoIntervalFromNonsense) {
  EXPECT_EQ(YoungDalyIntervalSeconds(0, 1e6, 8), 0);
  EXPECT_EQ(YoungDalyIntervalSeconds(-1, 1e6, 8), 0);
  EXPECT_EQ(YoungDalyIntervalSeconds(60, 0, 8), 0);
  EXPECT_EQ(YoungDalyIntervalSeconds(60, 1e6, 0), 0);
  EXPECT_EQ(YoungDalyIntervalSeconds(NAN, 1e6, 8), 0);
  EXPECT_EQ(YoungDalyIntervalSeconds(60, INFINITY, 8), 0);
}

TEST(YoungDaly, WholeSecondsForTheJob) {
  EXPECT_EQ(CheckpointIntervalSeconds(60, 25000 * 2.5 * 3600, 4096), 2567);
  EXPECT_EQ(CheckpointIntervalSeconds(1e-9, 1, 1), 1);  // never 0 once an interval exists
  EXPECT_EQ(CheckpointIntervalSeconds(0, 1e6, 8), 0);
}

TEST(GpuMtbf, ObservedRateOnlyWithEnoughFailures) {
  EXPECT_EQ(GpuMtbfSeconds(0, 1e9, kDefaultGpuMtbfSeconds), kDefaultGpuMtbfSeconds);
  EXPECT_EQ(GpuMtbfSeconds(kMinObservedGpuFailures - 1, 1e9, 7), 7);
  EXPECT_EQ(GpuMtbfSeconds(4, 1e9, 7), 2.5e8);
  EXPECT_EQ(GpuMtbfSeconds(4, 0, 7), 7);
}

}  // namespace
}  // namespace tessera::sched
