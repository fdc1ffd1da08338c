// Autoscaler: the replica count an InferenceService with spec.slo should run,
// from its replicas' own latency and throughput readings (docs/control-plane.md,
// "Autoscaling"). The Kubernetes HPA algorithm, adapted to a latency SLO.
//
// Algorithm (Recommend, once per controller cycle, per service):
//  1. Readings: each replica's latest {p99LatencyMs, rps, time} as its node
//     agent reported it (status.replicaMetrics). Only fresh ones count
//     (now - time <= options.freshness, 30 s), and only those written after
//     the service's last resize (`since`): an older one measured the load
//     over another replica count, and acting on it again would scale twice
//     for one observation (HPA likewise skips pods not yet ready). So a
//     "step" below is one round of readings. None fresh, or none with a
//     p99: the raw recommendation is `current` (hold: no signal is no reason
//     to move, as HPA does with missing metrics).
//  2. Latency ratio r = mean(p99 of fresh readings) / slo.p99LatencyMs.
//     The mean, not the max: the count is scaled by r on HPA's model that a
//     replica's latency follows its share of the load, and the load balancer
//     spreads load evenly, so the mean over replicas estimates that effect;
//     one slow replica (a bad GPU, a noisy neighbour) is not a capacity
//     problem, and following the max would double the fleet for it.
//  3. Throughput floor: slo.minThroughputRps is the load the service must be
//     able to take, whatever it gets now. On the same linear model, a
//     replica at the latency target serves c = (total fresh rps / fresh
//     readings) x target / mean p99; the service needs minThroughputRps / c
//     replicas. That is r scaled by minThroughputRps / total rps, so the
//     ratio used is r x max(1, minThroughputRps / total rps) (only when
//     total rps > 0; without traffic there is no capacity estimate, and
//     without p99LatencyMs no model: minThroughputRps alone holds).
//  4. Tolerance: |ratio - 1| <= options.tolerance (10%) -> current, else
//     raw = ceil(current x ratio) (current = replicas bound now).
//  5. Scale up at once, at most options.max_scale_up_factor (2x) per step.
//  6. Scale down stabilized: the result is the largest raw recommendation
//     of the last options.stabilization (5 min, HPA's default), and never
//     below current until this autoscaler has watched a whole window (after
//     a controller restart or a new binding it knows no history).
//  7. Clamp to [max(1, replicas.min), replicas.max].
// Pure and deterministic: time is passed in. One instance per service (it
// holds that service's recommendation history). Not thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace tessera::controller {

struct ReplicaReading {
  std::optional<double> p99_latency_ms;
  std::optional<double> rps;
  absl::Time time;  // when the replica wrote it
};

struct ServiceSlo {
  std::optional<double> p99_latency_ms;      // spec.slo.p99LatencyMs
  std::optional<double> min_throughput_rps;  // spec.slo.minThroughputRps
  int32_t min_replicas = 1;                  // max(1, spec.replicas.min)
  int32_t max_replicas = 1;                  // spec.replicas.max
};

struct AutoscalerOptions {
  absl::Duration freshness = absl::Seconds(30);
  double tolerance = 0.1;
  absl::Duration stabilization = absl::Minutes(5);
  double max_scale_up_factor = 2.0;
};

struct ScaleDecision {
  int32_t desired = 0;
  // Why, for status and the ScaledUp / ScaledDown Event: "p99 210 ms over
  // target 150 ms (mean of 3 replicas)".
  std::string reason;
};

// An InferenceService's spec as the autoscaler reads it: nullopt without a usable spec.slo (no
// positive p99LatencyMs or minThroughputRps), else the SLO with min = max(1, replicas.min) and
// max = replicas.max. Both modes (the standalone controller and `tessera operator`) call this.
std::optional<ServiceSlo> ServiceSloOf(const nlohmann::json& spec);
// One replica's report, {"p99LatencyMs": N, "rps": N, "time": RFC 3339}: the standalone agent's
// status.replicaMetrics entry and, on Kubernetes, the Pod annotation tessera.dev/replica-metrics.
// nullopt without a valid time.
std::optional<ReplicaReading> ReplicaReadingOf(const nlohmann::json& entry);

class Autoscaler {
 public:
  explicit Autoscaler(AutoscalerOptions options = {}) : options_(options) {}

  // The replica count for a service running `current` replicas now, resized
  // last at `since` (readings written before it do not count).
  ScaleDecision Recommend(const ServiceSlo& slo, int32_t current,
                          const std::vector<ReplicaReading>& readings, absl::Time now,
                          absl::Time since = absl::InfinitePast());

 private:
  AutoscalerOptions options_;
  absl::Time first_ = absl::InfiniteFuture();           // first Recommend call
  std::deque<std::pair<absl::Time, int32_t>> history_;  // (time, raw recommendation)
};

}  // namespace tessera::controller
