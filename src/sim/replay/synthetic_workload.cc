#include "sim/replay/synthetic_workload.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace tessera::sim::replay {

absl::StatusOr<std::vector<std::pair<int32_t, double>>> ParseSizeMix(absl::string_view s) {
  std::vector<std::pair<int32_t, double>> out;
  for (absl::string_view part : absl::StrSplit(s, ',', absl::SkipEmpty())) {
    std::vector<absl::string_view> kv = absl::StrSplit(part, ':');
    int32_t g;
    double w;
    if (kv.size() != 2 || !absl::SimpleAtoi(absl::StripAsciiWhitespace(kv[0]), &g) || g <= 0 ||
        !absl::SimpleAtod(absl::StripAsciiWhitespace(kv[1]), &w) || !(w > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--size-mix: \"", part, "\" is not GPUS:WEIGHT with GPUS > 0, WEIGHT > 0"));
    }
    out.push_back({g, w});
  }
  if (out.empty()) return absl::InvalidArgumentError("--size-mix: empty");
  return out;
}

absl::StatusOr<Workload> GenerateSyntheticWorkload(const SyntheticWorkloadSpec& spec) {
  if (spec.jobs <= 0) return absl::InvalidArgumentError("--jobs: must be > 0");
  if (!(spec.span_s > 0)) return absl::InvalidArgumentError("--span: must be > 0");
  if (spec.size_mix.empty()) return absl::InvalidArgumentError("--size-mix: empty");
  if (spec.queues <= 0) return absl::InvalidArgumentError("--queues: must be > 0");
  if (!(spec.duration_median_s > 0) || spec.duration_sigma < 0) {
    return absl::InvalidArgumentError("--duration-median/--duration-sigma: must be > 0 / >= 0");
  }
  for (const auto& [c, wt] : spec.checkpoint_mix) {
    if (!(c >= 0) || !(wt > 0)) {
      return absl::InvalidArgumentError("--checkpoint-mix: intervals >= 0 and weights > 0");
    }
  }
  std::mt19937_64 rng(spec.seed);
  std::mt19937_64 ckpt_rng(spec.seed ^ 0x5851f42d4c957f2dULL);
  std::vector<double> ckpt_w;
  for (const auto& [c, wt] : spec.checkpoint_mix) ckpt_w.push_back(wt);
  std::discrete_distribution<int> ckpt_d(ckpt_w.begin(), ckpt_w.end());
  Workload w;
  w.source = "synthetic";
  for (int32_t q = 0; q < spec.queues; ++q) w.queues.push_back(absl::StrCat("q", q));

  std::vector<double> size_w, queue_w;
  for (auto& [g, wt] : spec.size_mix) size_w.push_back(wt);
  for (int32_t q = 0; q < spec.queues; ++q)
    queue_w.push_back(1.0 / std::pow(q + 1, spec.queue_skew));
  std::discrete_distribution<int> size_d(size_w.begin(), size_w.end());
  std::discrete_distribution<int> queue_d(queue_w.begin(), queue_w.end());
  std::exponential_distribution<double> gap(static_cast<double>(spec.jobs) / spec.span_s);
  std::normal_distribution<double> norm(0.0, 1.0);
  std::uniform_real_distribution<double> unit(0.0, 1.0);

  w.jobs.reserve(spec.jobs);
  double t = 0;
  for (int64_t i = 0; i < spec.jobs; ++i) {
    SimJob j;
    t += gap(rng);
    j.submit_s = t;
    j.gpus = spec.size_mix[size_d(rng)].first;
    double d = spec.duration_median_s * std::exp(spec.duration_sigma * norm(rng));
    j.duration_s = std::round(std::clamp(d, spec.duration_min_s, spec.duration_max_s));
    j.queue = queue_d(rng);
    j.priority = unit(rng) < spec.high_priority_fraction ? spec.high_priority : 0;
    j.checkpoint_s = spec.checkpoint_mix.empty() ? spec.checkpoint_s
                                                 : spec.checkpoint_mix[ckpt_d(ckpt_rng)].first;
    j.restart_s = spec.restart_s;
    w.jobs.push_back(j);
  }
  return w;
}

}  // namespace tessera::sim::replay
