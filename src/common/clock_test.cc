#include "common/clock.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(ManualClockTest, AdvancesOnlyWhenTold) {
  ManualClock clock(absl::FromUnixSeconds(100));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(100));
  clock.Advance(absl::Seconds(5));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(105));
  clock.Sleep(absl::Seconds(1));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(106));
}

TEST(ManualClockTest, NeverRunsBackwards) {
  ManualClock clock(absl::FromUnixSeconds(100));
  clock.SetTime(absl::FromUnixSeconds(50));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(100));
  clock.Advance(absl::Seconds(-3));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(100));
  clock.SetTime(absl::FromUnixSeconds(200));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(200));
}

TEST(RealClockTest, MovesForward) {
  RealClock clock;
  absl::Time a = clock.Now();
  clock.Sleep(absl::Milliseconds(1));
  EXPECT_GT(clock.Now(), a);
}

}  // namespace
}  // namespace tessera
