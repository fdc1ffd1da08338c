#include "metrics/registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

namespace tessera::metrics {
namespace {

using ::testing::HasSubstr;

TEST(RegistryTest, RendersCountersGaugesHistograms) {
  Registry r;
  auto& attempts =
      r.AddCounter("tessera_scheduling_attempts_total", "Scheduling attempts.", {"result"});
  auto& pending = r.AddGauge("tessera_pending_jobs", "Pending jobs.", {"queue", "reason"});
  auto& lat = r.AddHistogram("tessera_scheduling_duration_seconds", "Cycle latency.", {"result"},
                             {0.001, 0.01});
  attempts.With({"scheduled"}).Inc();
  attempts.With({"scheduled"}).Inc(2);
  attempts.With({"scheduled"}).Inc(-5);  // ignored
  pending.With({"team-a", "quota \"x\"\n"}).Set(3);
  lat.With({"scheduled"}).Observe(0.0005);
  lat.With({"scheduled"}).Observe(0.005);
  lat.With({"scheduled"}).Observe(5);
  std::string text = r.Render();
  EXPECT_THAT(text, HasSubstr("# TYPE tessera_scheduling_attempts_total counter\n"));
  EXPECT_THAT(text, HasSubstr("tessera_scheduling_attempts_total{result=\"scheduled\"} 3\n"));
  EXPECT_THAT(
      text, HasSubstr("tessera_pending_jobs{queue=\"team-a\",reason=\"quota \\\"x\\\"\\n\"} 3\n"));
  EXPECT_THAT(
      text,
      HasSubstr(
          "tessera_scheduling_duration_seconds_bucket{result=\"scheduled\",le=\"0.001\"} 1\n"));
  EXPECT_THAT(
      text,
      HasSubstr(
          "tessera_scheduling_duration_seconds_bucket{result=\"scheduled\",le=\"0.01\"} 2\n"));
  EXPECT_THAT(
      text,
      HasSubstr(
          "tessera_scheduling_duration_seconds_bucket{result=\"scheduled\",le=\"+Inf\"} 3\n"));
  EXPECT_THAT(text,
              HasSubstr("tessera_scheduling_duration_seconds_count{result=\"scheduled\"} 3\n"));
  pending.Clear();
  EXPECT_THAT(r.Render(), ::testing::Not(HasSubstr("team-a")));
}

TEST(RegistryTest, UnlabelledCountersAndHistogramsExistAtZeroBeforeTheirFirstEvent) {
  Registry r;
  r.AddCounter("tessera_preemptions_total", "Jobs preempted.", {});
  r.AddHistogram("tessera_batch_size", "Batch size.", {}, {1, 2});
  r.AddCounter("tessera_requeues_total", "Requeues.", {"reason"});
  std::string text = r.Render();
  EXPECT_THAT(text, HasSubstr("\ntessera_preemptions_total 0\n"));
  EXPECT_THAT(text, HasSubstr("\ntessera_batch_size_count 0\n"));
  // A labelled family has no series until its label values are known.
  EXPECT_THAT(text, HasSubstr("# TYPE tessera_requeues_total counter\n"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("tessera_requeues_total{")));
}

TEST(RegistryTest, ConcurrentIncrementsAreNotLost) {
  Registry r;
  auto& c = r.AddCounter("c_total", "c", {});
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) c.With({}).Inc();
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(c.With({}).value(), 40000);
}

TEST(RegistryTest, ExponentialBuckets) {
  EXPECT_THAT(ExponentialBuckets(1, 2, 4), ::testing::ElementsAre(1, 2, 4, 8));
}

}  // namespace
}  // namespace tessera::metrics
