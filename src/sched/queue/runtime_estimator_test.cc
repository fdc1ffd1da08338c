#include "sched/queue/runtime_estimator.h"

#include <gtest/gtest.h>

namespace tessera::sched {
namespace {

TEST(RuntimeEstimator, NoneUntilEnoughRunsThenTheQuantileWithTheMargin) {
  RuntimeEstimator e({.window = 10, .min_samples = 5, .quantile = 0.8, .margin = 1.5});
  for (int i = 1; i <= 4; ++i) e.Observe("q", "team", 8, absl::Hours(i));
  EXPECT_FALSE(e.Estimate("q", "team", 8).has_value());
  e.Observe("q", "team", 8, absl::Hours(5));
  // Runs 1..5 h: the 0.8 quantile is the 5th of 5 (index 4), times 1.5.
  ASSERT_TRUE(e.Estimate("q", "team", 8).has_value());
  EXPECT_EQ(*e.Estimate("q", "team", 8), absl::Minutes(450));
}

TEST(RuntimeEstimator, TheMostSpecificFullLevelAnswers) {
  RuntimeEstimator e({.window = 64, .min_samples = 3, .quantile = 0.5, .margin = 1.0});
  // Big gangs of another namespace run 10 h; 1-GPU jobs of "a" run 1 h.
  for (int i = 0; i < 3; ++i) e.Observe("q", "b", 4096, absl::Hours(10));
  for (int i = 0; i < 3; ++i) e.Observe("q", "a", 1, absl::Hours(1));
  EXPECT_EQ(*e.Estimate("q", "a", 1), absl::Hours(1));      // (queue, ns, size)
  EXPECT_EQ(*e.Estimate("q", "c", 4000), absl::Hours(10));  // (queue, size): 4,000 ~ 4,096
  EXPECT_EQ(*e.Estimate("q", "c", 64), absl::Hours(10));    // (queue): median of 6
  EXPECT_FALSE(e.Estimate("other", "a", 1).has_value());    // nothing learned there
}

TEST(RuntimeEstimator, ForgetsRunsOlderThanTheWindowAndNeverGoesBelowAMinute) {
  RuntimeEstimator e({.window = 3, .min_samples = 3, .quantile = 0.0, .margin = 1.0});
  for (int i = 0; i < 3; ++i) e.Observe("q", "a", 1, absl::Hours(5));
  EXPECT_EQ(*e.Estimate("q", "a", 1), absl::Hours(5));
  for (int i = 0; i < 3; ++i) e.Observe("q", "a", 1, absl::Seconds(2));
  EXPECT_EQ(*e.Estimate("q", "a", 1), absl::Minutes(1));
}

}  // namespace
}  // namespace tessera::sched
