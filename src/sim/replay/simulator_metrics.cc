// Metric helpers of the replay simulator that need no simulation state.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "sched/framework/checkpoint_cadence.h"
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

void AddJobMetrics(const Workload& w, const std::vector<double>& first_start,
                   const std::vector<double>& finish, const std::vector<double>& q_alloc,
                   bool keep_job_jcts, PolicyResult* res) {
  const int64_t n = static_cast<int64_t>(w.jobs.size());
  std::vector<double> jct, qd, sd;
  struct Cls {
    const char* name;
    int64_t lo, hi;  // milli-GPU
    std::vector<double> jct, qd, sd;
  };
  std::vector<Cls> classes = {{"<1", 1, 999, {}, {}, {}},
                              {"1", 1000, 1000, {}, {}, {}},
                              {"2-8", 2000, 8000, {}, {}, {}},
                              {"9-64", 9000, 64000, {}, {}, {}},
                              {"65-512", 65000, 512000, {}, {}, {}},
                              {"513+", 513000, INT64_MAX, {}, {}, {}}};
  std::vector<double> q_jct_sum(w.queues.size(), 0);
  std::vector<int64_t> q_jct_n(w.queues.size(), 0);
  std::vector<double> q_wait_sum(w.queues.size(), 0);
  if (keep_job_jcts) res->jct_by_job.assign(n, NAN);
  jct.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(finish[i])) continue;
    const SimJob& sj = w.jobs[i];
    double c = finish[i] - sj.submit_s;
    double q = first_start[i] - sj.submit_s;
    double s = c / std::max(sj.duration_s, 1.0);
    jct.push_back(c);
    qd.push_back(q);
    sd.push_back(s);
    if (keep_job_jcts) res->jct_by_job[i] = c;
    q_jct_sum[sj.queue] += c;
    q_wait_sum[sj.queue] += q;
    ++q_jct_n[sj.queue];
    for (Cls& k : classes) {
      if (sj.milli() >= k.lo && sj.milli() <= k.hi) {
        k.jct.push_back(c);
        k.qd.push_back(q);
        k.sd.push_back(s);
      }
    }
  }
  res->jct = MakeDist(jct);
  res->queue_delay = MakeDist(qd);
  res->slowdown = MakeDist(sd);
  for (Cls& k : classes) {
    if (k.jct.empty()) continue;
    res->by_size.push_back(
        {k.name, MakeDist(std::move(k.jct)), MakeDist(std::move(k.qd)), MakeDist(std::move(k.sd))});
  }
  std::sort(jct.begin(), jct.end());
  const size_t points = 2000;
  if (jct.size() <= points) {
    res->jct_sorted = jct;
  } else {
    for (size_t k = 0; k < points; ++k)
      res->jct_sorted.push_back(jct[k * (jct.size() - 1) / (points - 1)]);
  }
  double total_alloc = 0;
  for (double a : q_alloc) total_alloc += a;
  for (size_t q = 0; q < w.queues.size(); ++q) {
    QueueShare s;
    s.queue = w.queues[q];
    s.gpu_hours = q_alloc[q] / 3600;
    s.share = total_alloc > 0 ? q_alloc[q] / total_alloc : 0;
    s.entitlement = 1.0 / w.queues.size();
    s.mean_jct_s = q_jct_n[q] > 0 ? q_jct_sum[q] / q_jct_n[q] : 0;
    s.mean_wait_s = q_jct_n[q] > 0 ? q_wait_sum[q] / q_jct_n[q] : 0;
    res->queues.push_back(s);
  }
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
    // Writing the periodic checkpoints (none after the last piece of work).
    lost += j.gpu_units() * (RunTimeFor(j, j.duration_s) - j.duration_s);
  }
  return demand > 0 ? std::max(0.0, 1 - lost / demand) : 1;
}

double FleetGpuMtbfSeconds(const SimOptions& opt) {
  const double gpn = opt.cluster.gpus_per_node;
  const double nodes = opt.cluster.nodes + opt.hot_spare_nodes;
  const FailureSpec& f = opt.failures;
  double rate = 0;  // failures per GPU-second
  if (f.gpu_failure_interval_s > 0) rate += 1 / (f.gpu_failure_interval_s * nodes * gpn);
  if (f.node_failure_interval_s > 0) rate += 1 / (f.node_failure_interval_s * nodes * gpn);
  return rate > 0 ? 1 / rate : 0;
}

int64_t ApplyYoungDalyCadence(double gpu_mtbf_s, Workload* w) {
  int64_t changed = 0;
  if (!(gpu_mtbf_s > 0)) return 0;
  for (SimJob& j : w->jobs) {
    const int64_t t = sched::CheckpointIntervalSeconds(j.checkpoint_cost_s, gpu_mtbf_s, j.gpus);
    if (t <= 0) continue;
    j.checkpoint_s = static_cast<double>(t);
    ++changed;
  }
  return changed;
}

}  // namespace tessera::sim::replay
