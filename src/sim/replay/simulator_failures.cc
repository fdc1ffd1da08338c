// The replay simulator's GPU and node failures, repairs and periodic samples
// (see simulator.h, "Failures and checkpoints"), and the run-level figures
// taken from its state at the end (utilization while work waits, wait by
// gang size).
#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>

#include "sim/replay/simulator_internal.h"

namespace tessera::sim::replay::internal {

void Sim::Fail(sched::NodeId node, uint32_t mask, bool node_failure, double repair_s) {
  node_failure ? ++res_.node_failures : ++res_.gpu_failures;
  uint32_t newly = 0;
  std::vector<std::string> affected;
  for (int gpu = 0; gpu < gpn_; ++gpu) {
    if (!((mask >> gpu) & 1u) || ((down_mask_[node] >> gpu) & 1u)) continue;
    (void)state_.SetGpuHealth(node, gpu, false, &affected);
    newly |= 1u << gpu;
  }
  if (newly == 0) return;  // already down: the draw hit a failed GPU
  down_mask_[node] |= newly;
  unhealthy_gpus_ += __builtin_popcount(newly);
  std::vector<int32_t> killed;
  std::sort(affected.begin(), affected.end());
  affected.erase(std::unique(affected.begin(), affected.end()), affected.end());
  for (const std::string& key : affected) {
    size_t slash = key.find('/');
    int64_t idx = SimJobIndex(absl::string_view(key).substr(slash + 1));
    if (idx < 0 || rt_[idx].status != Status::kRunning) continue;
    Stop(static_cast<int32_t>(idx), Cause::kFailure);
    rt_[idx].killed_at = now_;
    ++res_.gang_kills;
    AddPending(static_cast<int32_t>(idx));
    if (qm_ != nullptr) QueueRequeue(static_cast<int32_t>(idx));
    killed.push_back(static_cast<int32_t>(idx));
  }
  if (is_spare_[node]) {
    // An idle spare failed: out of the pool until repaired.
    is_spare_[node] = 0;
    spare_pool_.erase(std::find(spare_pool_.begin(), spare_pool_.end(), node));
    swapped_[node] = 1;
  } else if (!swapped_[node] && !spare_pool_.empty()) {
    sched::NodeId spare = spare_pool_.back();
    spare_pool_.pop_back();
    is_spare_[spare] = 0;
    (void)state_.SetSchedulable(node, false);
    (void)state_.SetSchedulable(spare, true);
    swapped_[node] = 1;
    ++res_.spare_swaps;
  }
  // The job controller recreates a killed gang's pods at once: it is tried
  // before the queue, on the spare if one took over. (Under `queues` the
  // manager decides, as in the server: the gang was submitted again above.)
  if (opt_.restart_killed_first && qm_ == nullptr) {
    for (int32_t i : killed) {
      if (rt_[i].status == Status::kPending && MayFitJob(i)) {
        ++res_.schedule_calls;
        if (scheduler_->Schedule(*rt_[i].job).placed()) Start(i);
      }
    }
  }
  if (repair_s < 0)
    repair_s = node_failure ? opt_.failures.node_repair_s : opt_.failures.gpu_repair_s;
  Push(now_ + repair_s, kRepair, node, newly);
  capacity_changed_ = true;
}

void Sim::Repair(sched::NodeId node, uint32_t mask) {
  for (int gpu = 0; gpu < gpn_; ++gpu) {
    if (!((mask >> gpu) & 1u)) continue;
    (void)state_.SetGpuHealth(node, gpu, true, nullptr);
  }
  down_mask_[node] &= ~mask;
  unhealthy_gpus_ -= __builtin_popcount(mask);
  if (down_mask_[node] == 0 && swapped_[node]) {
    swapped_[node] = 0;
    is_spare_[node] = 1;
    spare_pool_.push_back(node);
  }
  capacity_changed_ = true;
}

void Sim::ScheduleNextFailure(bool node) {
  double interval =
      node ? opt_.failures.node_failure_interval_s : opt_.failures.gpu_failure_interval_s;
  if (!(interval > 0)) return;
  std::exponential_distribution<double> gap(1.0 / interval);
  double t = now_ + gap(fail_rng_);
  sched::NodeId n = static_cast<sched::NodeId>(fail_rng_() % total_nodes_);
  uint32_t mask = node ? ((gpn_ >= 32) ? ~0u : ((1u << gpn_) - 1)) : (1u << (fail_rng_() % gpn_));
  Push(t, node ? kNodeFailure : kFailure, n, mask);
}

void Sim::TakeSample() {
  Sample s;
  s.t_s = now_;
  s.allocated_gpus = static_cast<double>(allocated_milli_) / model::kMilliPerGpu;
  s.capacity_gpus = static_cast<double>(capacity_gpus_);
  s.unhealthy_gpus = unhealthy_gpus_;
  s.running = static_cast<int64_t>(running_.size());
  s.pending = pending_count_;
  double alloc = alloc_integral_ - last_sample_alloc_;
  double loss = loss_total_ - last_sample_loss_;
  s.goodput = alloc > 0 ? std::clamp(1 - loss / alloc, 0.0, 1.0) : 1.0;
  last_sample_alloc_ = alloc_integral_;
  last_sample_loss_ = loss_total_;
  s.cum_failure_lost_gpu_h = (res_.failure_lost_gpu_s + res_.failure_restart_gpu_s) / 3600;
  s.cum_preempt_lost_gpu_h = (res_.preempt_lost_gpu_s + res_.preempt_restart_gpu_s) / 3600;
  double sx = 0, sxx = 0;
  int n = 0;
  for (size_t q = 0; q < q_demand_.size(); ++q) {
    if (q_demand_[q] <= 0) continue;
    double x = static_cast<double>(q_running_[q]) / q_demand_[q];
    sx += x;
    sxx += x * x;
    ++n;
  }
  s.jain = (n > 0 && sxx > 0) ? sx * sx / (n * sxx) : 1.0;
  if (n > 0) {
    jain_sum_ += s.jain;
    ++jain_n_;
  }
  res_.series.push_back(s);
}

void Sim::WaitingMetrics() {
  const double makespan = last_finish_ - w_.FirstSubmit();
  res_.waiting_fraction = makespan > 0 ? std::min(1.0, waiting_s_ / makespan) : 0;
  if (!(waiting_s_ > 0)) return;
  res_.util_waiting_mean =
      waiting_alloc_gpu_s_ / (waiting_s_ * static_cast<double>(capacity_gpus_));
  // Percentile q: the lowest utilization step below which (inclusive) q of the waiting time lies.
  auto pct = [&](double q) {
    double acc = 0;
    for (size_t k = 0; k < waiting_util_hist_.size(); ++k) {
      acc += waiting_util_hist_[k];
      if (acc >= q * waiting_s_) return static_cast<double>(k) / 1000;
    }
    return 1.0;
  };
  res_.util_waiting_p5 = pct(0.05);
  res_.util_waiting_p50 = pct(0.5);
  for (size_t k = 0; k < waiting_util_hist_.size(); ++k) {
    if (waiting_util_hist_[k] > 0) {
      res_.util_waiting_min = static_cast<double>(k) / 1000;
      break;
    }
  }
}

void Sim::WaitBySizeMetrics() {
  // Buckets: the distinct GPU counts (whole-GPU jobs; shares count as "<1")
  // when few, else SizeClass's classes.
  std::set<int32_t> sizes;
  for (const SimJob& j : w_.jobs) sizes.insert(j.gpu_milli < model::kMilliPerGpu ? 0 : j.gpus);
  const bool exact = sizes.size() <= kMaxWaitSizes;
  struct Bucket {
    std::string name;
    int64_t lo, hi;  // GPUs; 0: a share of one
    std::vector<double> waits;
    int64_t never = 0;
  };
  std::vector<Bucket> buckets;
  if (exact) {
    for (int32_t g : sizes) buckets.push_back({g == 0 ? "<1" : std::to_string(g), g, g, {}, 0});
  } else {
    buckets = {{"<1", 0, 0, {}, 0},    {"1", 1, 1, {}, 0},         {"2-8", 2, 8, {}, 0},
               {"9-64", 9, 64, {}, 0}, {"65-512", 65, 512, {}, 0}, {"513+", 513, INT32_MAX, {}, 0}};
  }
  const double end = now_;
  for (size_t i = 0; i < w_.jobs.size(); ++i) {
    const SimJob& sj = w_.jobs[i];
    const JobRt& r = rt_[i];
    if (r.status == Status::kRejected || r.status == Status::kFuture) continue;
    const int64_t g = sj.gpu_milli < model::kMilliPerGpu ? 0 : sj.gpus;
    for (Bucket& b : buckets) {
      if (g < b.lo || g > b.hi) continue;
      if (r.first_start >= 0) {
        b.waits.push_back(r.first_start - sj.submit_s);
      } else {
        b.waits.push_back(end - sj.submit_s);
        ++b.never;
      }
      break;
    }
  }
  for (Bucket& b : buckets) {
    if (b.waits.empty()) continue;
    const Dist d = MakeDist(std::move(b.waits));
    res_.wait_by_gpus.push_back({b.name, d.n, b.never, d.mean, d.p99, d.max});
  }
}

}  // namespace tessera::sim::replay::internal
