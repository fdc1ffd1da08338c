#include "sim/replay/workload.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace tessera::sim::replay {

double Workload::GpuSeconds() const {
  double s = 0;
  for (const SimJob& j : jobs) s += j.gpu_units() * j.duration_s;
  return s;
}

absl::Status ValidateWorkload(const Workload& w) {
  if (w.queues.empty()) return absl::InvalidArgumentError("workload.queues: must not be empty");
  for (size_t i = 0; i < w.jobs.size(); ++i) {
    const SimJob& j = w.jobs[i];
    auto bad = [&](absl::string_view field, absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat("jobs[", i, "].", field, ": ", why));
    };
    if (!std::isfinite(j.submit_s)) return bad("submit", "must be finite");
    if (!(j.duration_s >= 0) || !std::isfinite(j.duration_s)) {
      return bad("duration", "must be >= 0");
    }
    if (j.gpus <= 0) return bad("gpus", "must be > 0");
    if (j.gpu_milli <= 0 || j.gpu_milli > 1000) return bad("gpu_milli", "must be in 1..1000");
    if (j.gpu_milli < 1000 && j.gpus != 1) {
      return bad("gpu_milli", "a share of a GPU (< 1000) needs gpus == 1");
    }
    if (j.queue < 0 || j.queue >= static_cast<int32_t>(w.queues.size())) {
      return bad("queue", "out of range");
    }
    if (j.priority_class < -1 ||
        j.priority_class >= static_cast<int32_t>(w.priority_classes.size())) {
      return bad("priority_class", "out of range");
    }
    if (j.checkpoint_s < 0) return bad("checkpoint", "must be >= 0");
    if (!(j.checkpoint_cost_s >= 0)) return bad("checkpoint_cost", "must be >= 0");
    if (j.restart_s < 0) return bad("restart", "must be >= 0");
    if (i > 0 && j.submit_s < w.jobs[i - 1].submit_s) return bad("submit", "not sorted");
  }
  return absl::OkStatus();
}

void SortBySubmit(Workload* w) {
  std::stable_sort(w->jobs.begin(), w->jobs.end(),
                   [](const SimJob& a, const SimJob& b) { return a.submit_s < b.submit_s; });
}

GangShape ShapeFor(int32_t gpus, int32_t gpus_per_node) {
  if (gpus <= gpus_per_node) return {1, gpus};
  for (int32_t d = gpus_per_node; d >= 1; --d) {
    if (gpus % d == 0) return {gpus / d, d};
  }
  return {gpus, 1};
}

void ApplyDefaults(const JobDefaults& d, Workload* w) {
  for (SimJob& j : w->jobs) {
    j.checkpoint_s = d.checkpoint_s;
    j.restart_s = d.restart_s;
    j.checkpoint_cost_s = d.checkpoint_cost_s;
  }
}

RunSplit SplitRun(const SimJob& j, double run) {
  RunSplit s;
  run = std::max(0.0, run);
  if (!(j.checkpoint_s > 0)) {
    s.done = run;
    return s;
  }
  const double cycle = j.checkpoint_s + j.checkpoint_cost_s;
  const double k = std::floor(run / cycle);
  const double rem = run - k * cycle;
  s.saved = k * j.checkpoint_s;
  s.done = s.saved + std::min(rem, j.checkpoint_s);
  s.writing = k * j.checkpoint_cost_s + std::max(0.0, rem - j.checkpoint_s);
  return s;
}

double RunTimeFor(const SimJob& j, double work) {
  if (!(work > 0)) return 0;
  if (!(j.checkpoint_s > 0) || !(j.checkpoint_cost_s > 0)) return work;
  const double writes = std::ceil(work / j.checkpoint_s) - 1;
  return work + std::max(0.0, writes) * j.checkpoint_cost_s;
}

}  // namespace tessera::sim::replay
