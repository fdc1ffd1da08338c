// Metric helpers of the replay simulator that need no simulation state.
#include <algorithm>
#include <cmath>

#include "sim/replay/simulator.h"  // IWYU pragma: associated

namespace tessera::sim::replay {

Dist MakeDist(std::vector<double> v) {
  Dist d;
  d.n = static_cast<int64_t>(v.size());
  if (v.empty()) return d;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  d.mean = sum / v.size();
  auto pct = [&](double q) {
    size_t i = static_cast<size_t>(std::ceil(q * v.size()));
    return v[std::min(v.size() - 1, i == 0 ? 0 : i - 1)];
  };
  d.p50 = pct(0.5);
  d.p99 = pct(0.99);
  d.max = v.back();
  return d;
}

double MakespanLowerBound(const Workload& w, int64_t capacity_gpus) {
  if (w.jobs.empty() || capacity_gpus <= 0) return 0;
  double first = w.jobs.front().submit_s;
  double lb = 0;
  for (const SimJob& j : w.jobs) lb = std::max(lb, j.submit_s + j.duration_s);
  double suffix = 0;
  for (size_t i = w.jobs.size(); i-- > 0;) {
    suffix += w.jobs[i].gpu_units() * w.jobs[i].duration_s;
    lb = std::max(lb, w.jobs[i].submit_s + suffix / capacity_gpus);
  }
  return lb - first;
}

double GoodputBound(const Workload& w, const SimOptions& opt) {
  const double gpn = opt.cluster.gpus_per_node;
  const double nodes = opt.cluster.nodes + opt.hot_spare_nodes;
  const double fleet_gpus = nodes * gpn;
  const FailureSpec& f = opt.failures;
  double demand = 0, lost = 0;
  for (const SimJob& j : w.jobs) {
    if (j.gpus > opt.cluster.nodes * gpn) continue;
    double rate = 0;
    if (f.gpu_failure_interval_s > 0) rate += j.gpus / (f.gpu_failure_interval_s * fleet_gpus);
    if (f.node_failure_interval_s > 0) {
      rate += std::ceil(j.gpus / gpn) / (f.node_failure_interval_s * nodes);
    }
    double c = j.checkpoint_s > 0 ? std::min(j.checkpoint_s, j.duration_s) : j.duration_s;
    // A share fails with its whole GPU (rate above) but weighs its share.
    double gp = j.gpu_units() * j.duration_s;
    demand += gp;
    lost += gp * rate * (c / 2 + j.restart_s);
  }
  return demand > 0 ? std::max(0.0, 1 - lost / demand) : 1;
}

}  // namespace tessera::sim::replay
