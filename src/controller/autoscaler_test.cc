// The InferenceService autoscaling policy (autoscaler.h): HPA's algorithm on
// the replicas' p99 latency, with a throughput floor, tolerance, a scale-up
// limit and a stabilized scale-down. Time is a fixed base plus offsets.
#include "controller/autoscaler.h"

#include <gtest/gtest.h>

#include <vector>

namespace tessera::controller {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1767225600);

ServiceSlo Slo(double p99, int min, int max) {
  ServiceSlo s;
  s.p99_latency_ms = p99;
  s.min_replicas = min;
  s.max_replicas = max;
  return s;
}

std::vector<ReplicaReading> Readings(std::vector<double> p99s, absl::Time at, double rps = -1) {
  std::vector<ReplicaReading> out;
  for (double p : p99s) {
    ReplicaReading r;
    r.p99_latency_ms = p;
    if (rps >= 0) r.rps = rps;
    r.time = at;
    out.push_back(r);
  }
  return out;
}

TEST(AutoscalerTest, ScalesUpAtOnceOnTheMeanP99) {
  Autoscaler a;
  // Mean p99 = (180 + 240) / 2 = 210 over 150: ratio 1.4, ceil(4 x 1.4) = 6.
  ScaleDecision d = a.Recommend(Slo(150, 1, 8), 4, Readings({180, 240, 210, 210}, kT0), kT0);
  EXPECT_EQ(d.desired, 6);
  EXPECT_NE(d.reason.find("p99 210 ms over target 150 ms"), std::string::npos) << d.reason;
}

TEST(AutoscalerTest, UsesTheMeanNotTheMaxOfReplicasP99) {
  Autoscaler a;
  // One slow replica (400 ms) among three fast ones: mean 137.5 under 150,
  // within tolerance: no scale-up (the max would have asked for 11).
  ScaleDecision d = a.Recommend(Slo(150, 1, 16), 4, Readings({400, 50, 50, 50}, kT0), kT0);
  EXPECT_EQ(d.desired, 4);
}

TEST(AutoscalerTest, ScaleUpIsAtMostADoublingPerStep) {
  Autoscaler a;
  ScaleDecision d = a.Recommend(Slo(100, 1, 64), 3, Readings({1000, 1000, 1000}, kT0), kT0);
  EXPECT_EQ(d.desired, 6);  // ceil(3 x 10) = 30, capped at 2 x 3
  EXPECT_NE(d.reason.find("scale-up limit"), std::string::npos) << d.reason;
  d = a.Recommend(Slo(100, 1, 64), 1, Readings({1000}, kT0), kT0 + absl::Seconds(1));
  EXPECT_EQ(d.desired, 2);
}

TEST(AutoscalerTest, ToleranceBandHoldsWithinTenPercent) {
  Autoscaler a;
  EXPECT_EQ(a.Recommend(Slo(100, 1, 8), 4, Readings({109, 109}, kT0), kT0).desired, 4);
  EXPECT_EQ(a.Recommend(Slo(100, 1, 8), 4, Readings({91, 91}, kT0), kT0).desired, 4);
  // Just outside the band moves: ceil(4 x 1.12) = 5.
  EXPECT_EQ(a.Recommend(Slo(100, 1, 8), 4, Readings({112, 112}, kT0), kT0).desired, 5);
}

TEST(AutoscalerTest, ScaleDownWaitsForTheStabilizationWindowMax) {
  Autoscaler a;
  const ServiceSlo slo = Slo(100, 1, 8);
  // t=0: at target with 4 replicas.
  EXPECT_EQ(a.Recommend(slo, 4, Readings({100, 100, 100, 100}, kT0), kT0).desired, 4);
  // Load falls: raw ceil(4 x 0.5) = 2, but no window watched yet: hold 4.
  absl::Time t = kT0 + absl::Minutes(1);
  EXPECT_EQ(a.Recommend(slo, 4, Readings({50, 50, 50, 50}, t), t).desired, 4);
  // Past 5 minutes of history, the t=0 recommendation (4) drops out of the
  // window: the largest left is the t=1min one... at t=5min30 it is 2.
  for (int s = 90; s <= 300; s += 30) {
    t = kT0 + absl::Seconds(s);
    EXPECT_EQ(a.Recommend(slo, 4, Readings({50, 50, 50, 50}, t), t).desired, 4) << s;
  }
  t = kT0 + absl::Seconds(330);
  ScaleDecision d = a.Recommend(slo, 4, Readings({50, 50, 50, 50}, t), t);
  EXPECT_EQ(d.desired, 2);
  // A spike inside the window then keeps the count up for 5 more minutes.
  Autoscaler b;
  EXPECT_EQ(b.Recommend(slo, 2, Readings({100, 100}, kT0), kT0).desired, 2);
  t = kT0 + absl::Minutes(5);
  EXPECT_EQ(b.Recommend(slo, 2, Readings({200, 200}, t), t).desired, 4);  // up at once
  t += absl::Minutes(1);
  d = b.Recommend(slo, 4, Readings({25, 25, 25, 25}, t), t);
  EXPECT_EQ(d.desired, 4);  // raw 1, the window's max is 4
  EXPECT_NE(d.reason.find("stabilization window"), std::string::npos) << d.reason;
  t += absl::Minutes(4) + absl::Seconds(1);
  EXPECT_EQ(b.Recommend(slo, 4, Readings({25, 25, 25, 25}, t), t).desired, 1);
}

TEST(AutoscalerTest, ClampsToMinAndMax) {
  Autoscaler a;
  // min 0 means 1; max 5 caps a doubling of 4.
  EXPECT_EQ(a.Recommend(Slo(100, 0, 5), 4, Readings({300, 300, 300, 300}, kT0), kT0).desired, 5);
  Autoscaler b;
  // Below min (a lost replica): back to min even without readings.
  EXPECT_EQ(b.Recommend(Slo(100, 3, 5), 2, {}, kT0).desired, 3);
  // Above a lowered max: down at once.
  Autoscaler c;
  EXPECT_EQ(c.Recommend(Slo(100, 1, 2), 4, {}, kT0).desired, 2);
}

TEST(AutoscalerTest, StaleOrMissingReadingsHoldTheCurrentCount) {
  Autoscaler a;
  const ServiceSlo slo = Slo(100, 1, 8);
  ScaleDecision d = a.Recommend(slo, 3, {}, kT0);
  EXPECT_EQ(d.desired, 3);
  EXPECT_NE(d.reason.find("no fresh readings"), std::string::npos) << d.reason;
  // 31 s old readings far over target do not count.
  const absl::Time now = kT0 + absl::Seconds(31);
  EXPECT_EQ(a.Recommend(slo, 3, Readings({900, 900, 900}, kT0), now).desired, 3);
  // 30 s old ones do.
  EXPECT_EQ(a.Recommend(slo, 3, Readings({900, 900, 900}, kT0 + absl::Seconds(1)), now).desired, 6);
  // Fresh ones from some replicas only: the mean of those.
  std::vector<ReplicaReading> mixed = Readings({900}, kT0);
  std::vector<ReplicaReading> fresh = Readings({200}, now);
  mixed.insert(mixed.end(), fresh.begin(), fresh.end());
  Autoscaler b;
  EXPECT_EQ(b.Recommend(slo, 2, mixed, now).desired, 4);  // ceil(2 x 2.0)
}

TEST(AutoscalerTest, ReadingsFromBeforeTheLastResizeDoNotCountAgain) {
  Autoscaler a;
  const ServiceSlo slo = Slo(100, 1, 16);
  EXPECT_EQ(a.Recommend(slo, 1, Readings({400}, kT0), kT0).desired, 2);
  // Resized to 2 at t=1s; the same (older) reading must not double it again.
  const absl::Time resized = kT0 + absl::Seconds(1);
  const absl::Time now = kT0 + absl::Seconds(2);
  ScaleDecision d = a.Recommend(slo, 2, Readings({400}, kT0), now, resized);
  EXPECT_EQ(d.desired, 2);
  EXPECT_NE(d.reason.find("holding"), std::string::npos) << d.reason;
  // A reading written after the resize does.
  EXPECT_EQ(a.Recommend(slo, 2, Readings({400, 400}, now), now, resized).desired, 4);
}

TEST(AutoscalerTest, ThroughputFloorScalesUpUnderTarget) {
  ServiceSlo slo = Slo(100, 1, 16);
  slo.min_throughput_rps = 400;
  Autoscaler a;
  // 2 replicas at p99 50 ms serving 50 rps each (100 total): one replica at
  // the target would take 50 x 100/50 = 100 rps; 400 rps needs 4.
  ScaleDecision d = a.Recommend(slo, 2, Readings({50, 50}, kT0, 50), kT0);
  EXPECT_EQ(d.desired, 4);
  EXPECT_NE(d.reason.find("minThroughputRps 400"), std::string::npos) << d.reason;
  // Serving more than the floor: latency alone decides (ratio 0.5 -> hold
  // until the window is watched).
  Autoscaler b;
  EXPECT_EQ(b.Recommend(slo, 2, Readings({50, 50}, kT0, 300), kT0).desired, 2);
  // No traffic: no capacity estimate, no floor.
  Autoscaler c;
  EXPECT_EQ(c.Recommend(slo, 2, Readings({100, 100}, kT0, 0), kT0).desired, 2);
  // minThroughputRps without a latency target holds.
  ServiceSlo only_rps;
  only_rps.min_throughput_rps = 400;
  only_rps.min_replicas = 1;
  only_rps.max_replicas = 8;
  Autoscaler e;
  d = e.Recommend(only_rps, 2, Readings({50, 50}, kT0, 10), kT0);
  EXPECT_EQ(d.desired, 2);
  EXPECT_NE(d.reason.find("holding"), std::string::npos) << d.reason;
}

}  // namespace
}  // namespace tessera::controller
