#include "controller/autoscaler.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "api/store_layout.h"

namespace tessera::controller {
namespace {

std::optional<double> NumberOf(const nlohmann::json& o, const char* key) {
  auto it = o.find(key);
  if (it == o.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

int64_t IntOf(const nlohmann::json& o, const char* key, int64_t dflt) {
  auto it = o.find(key);
  return it != o.end() && it->is_number_integer() ? it->get<int64_t>() : dflt;
}

std::string Ms(double v) { return absl::StrFormat("%.0f", v); }

}  // namespace

ScaleDecision Autoscaler::Recommend(const ServiceSlo& slo, int32_t current,
                                    const std::vector<ReplicaReading>& readings, absl::Time now,
                                    absl::Time since) {
  if (first_ == absl::InfiniteFuture()) first_ = now;
  const int32_t lo = std::max<int32_t>(1, slo.min_replicas);
  const int32_t hi = std::max(lo, slo.max_replicas);
  current = std::max<int32_t>(current, 0);

  // 1. Fresh readings.
  int n = 0, n_rps = 0;
  double p99_sum = 0, rps_sum = 0;
  for (const ReplicaReading& r : readings) {
    if (now - r.time > options_.freshness || r.time < since || !r.p99_latency_ms ||
        *r.p99_latency_ms < 0) {
      continue;
    }
    ++n;
    p99_sum += *r.p99_latency_ms;
    if (r.rps && *r.rps >= 0) {
      ++n_rps;
      rps_sum += *r.rps;
    }
  }
  int32_t raw = current;
  std::string reason;
  if (!slo.p99_latency_ms || *slo.p99_latency_ms <= 0) {
    reason = "no spec.slo.p99LatencyMs: holding";
  } else if (n == 0) {
    reason =
        absl::StrCat("no fresh readings (none within ", absl::FormatDuration(options_.freshness),
                     " and since the last resize)", ": holding");
  } else {
    // 2. Latency ratio over the mean p99.
    const double target = *slo.p99_latency_ms;
    const double mean = p99_sum / n;
    double ratio = mean / target;
    reason = absl::StrCat("p99 ", Ms(mean), " ms ", mean > target ? "over" : "under", " target ",
                          Ms(target), " ms (mean of ", n, " replica", n == 1 ? "" : "s", ")");
    // 3. Throughput floor.
    if (slo.min_throughput_rps && n_rps > 0 && rps_sum > 0 && *slo.min_throughput_rps > rps_sum) {
      const double scaled = ratio * (*slo.min_throughput_rps / rps_sum);
      if (scaled > ratio) {
        ratio = scaled;
        absl::StrAppend(&reason, "; minThroughputRps ", Ms(*slo.min_throughput_rps), " over the ",
                        Ms(rps_sum), " rps served");
      }
    }
    // 4. Tolerance.
    if (std::abs(ratio - 1.0) <= options_.tolerance) {
      absl::StrAppend(&reason, ": within tolerance");
    } else {
      raw = static_cast<int32_t>(
          std::min<double>(std::ceil(std::max(current, 1) * ratio - 1e-9), 1e6));
    }
  }
  raw = std::clamp(raw, lo, hi);
  // 6. History for the stabilization window.
  history_.emplace_back(now, raw);
  while (!history_.empty() && now - history_.front().first > options_.stabilization) {
    history_.pop_front();
  }
  int32_t desired = raw;
  if (raw > current) {
    // 5. Up at once, at most doubling.
    const int32_t cap = static_cast<int32_t>(
        std::max<double>(current + 1, std::floor(current * options_.max_scale_up_factor)));
    if (current > 0 && raw > cap) {
      desired = cap;
      absl::StrAppend(&reason, "; at most ", cap, " this step (scale-up limit)");
    }
  } else if (raw < current) {
    int32_t window_max = raw;
    for (const auto& [t, v] : history_) window_max = std::max(window_max, v);
    if (now - first_ < options_.stabilization) window_max = std::max(window_max, current);
    desired = std::min(current, window_max);
    if (desired > raw) {
      absl::StrAppend(&reason, "; held at ", desired, " by the ",
                      absl::FormatDuration(options_.stabilization), " stabilization window");
    }
  }
  // 7. Clamp.
  desired = std::clamp(desired, lo, hi);
  return {desired, reason};
}

std::optional<ServiceSlo> ServiceSloOf(const nlohmann::json& spec) {
  if (!spec.is_object()) return std::nullopt;
  auto slo_it = spec.find("slo");
  if (slo_it == spec.end() || !slo_it->is_object()) return std::nullopt;
  ServiceSlo s;
  s.p99_latency_ms = NumberOf(*slo_it, "p99LatencyMs");
  s.min_throughput_rps = NumberOf(*slo_it, "minThroughputRps");
  static const nlohmann::json kEmpty = nlohmann::json::object();
  auto rep = spec.find("replicas");
  const nlohmann::json& r = rep != spec.end() && rep->is_object() ? *rep : kEmpty;
  s.max_replicas = static_cast<int32_t>(IntOf(r, "max", 1));
  s.min_replicas = static_cast<int32_t>(std::max<int64_t>(1, IntOf(r, "min", s.max_replicas)));
  if ((s.p99_latency_ms && *s.p99_latency_ms > 0) ||
      (s.min_throughput_rps && *s.min_throughput_rps > 0)) {
    return s;
  }
  return std::nullopt;
}

std::optional<ReplicaReading> ReplicaReadingOf(const nlohmann::json& entry) {
  if (!entry.is_object()) return std::nullopt;
  auto t = entry.find("time");
  ReplicaReading r;
  if (t == entry.end() || !t->is_string() || !api::ParseTimestamp(t->get<std::string>(), &r.time)) {
    return std::nullopt;
  }
  r.p99_latency_ms = NumberOf(entry, "p99LatencyMs");
  r.rps = NumberOf(entry, "rps");
  return r;
}

}  // namespace tessera::controller
