#include "server/gpu_samples.h"

#include <gtest/gtest.h>

namespace tessera::server {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1767225600);  // a minute boundary

TEST(GpuSamplesTest, VersionsChangeOnlyWithTheSamples) {
  GpuSamples s;
  EXPECT_TRUE(s.Report("a", {10, 20}, kT0));
  EXPECT_FALSE(s.Report("a", {10, 20}, kT0 + absl::Seconds(10)));
  EXPECT_EQ(s.version(), 1);
  EXPECT_TRUE(s.Report("a", {11, 20}, kT0 + absl::Seconds(20)));
  EXPECT_EQ(s.Since(1).nodes.size(), 1u);
  EXPECT_EQ(s.Get("a"), GpuSamples::Samples({11, 20}));
}

TEST(GpuSamplesTest, HistoryKeepsPerMinuteMeansOfTheLastHour) {
  GpuSamples s;
  EXPECT_TRUE(s.History("a", kT0).empty());
  // Minute 0: 10 and 30 on GPU 0 (mean 20), nothing reported for GPU 1 (-1).
  s.Report("a", {10, -1}, kT0);
  s.Report("a", {30, -1}, kT0 + absl::Seconds(30));  // unchanged or not, every report counts
  s.Report("a", {30, -1}, kT0 + absl::Seconds(40));
  // Minute 2: 90 / 50.
  s.Report("a", {90, 50}, kT0 + absl::Minutes(2));
  std::vector<std::vector<int>> h = s.History("a", kT0 + absl::Minutes(2) + absl::Seconds(5));
  ASSERT_EQ(h.size(), 2u);
  ASSERT_EQ(h[0].size(), 60u);
  EXPECT_EQ(h[0][57], 23);  // (10 + 30 + 30) / 3, rounded
  EXPECT_EQ(h[0][58], -1);  // minute 1: no heartbeat
  EXPECT_EQ(h[0][59], 90);
  EXPECT_EQ(h[1][57], -1);
  EXPECT_EQ(h[1][59], 50);
  // An hour later the old minutes are gone, and a slot reused for a new minute starts afresh.
  s.Report("a", {70, 70}, kT0 + absl::Minutes(62));
  h = s.History("a", kT0 + absl::Minutes(62));
  for (int k = 0; k < 59; ++k) EXPECT_EQ(h[0][k], -1) << k;
  EXPECT_EQ(h[0][59], 70);
}

}  // namespace
}  // namespace tessera::server
