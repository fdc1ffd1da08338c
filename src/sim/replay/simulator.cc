#include "sim/replay/simulator.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <queue>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "sched/framework/cluster_state.h"
#include "sched/framework/scheduler.h"

namespace tessera::sim::replay {

namespace {

enum class Status : uint8_t { kFuture, kPending, kRunning, kDone, kRejected };
enum class Cause : uint8_t { kNone, kFailure, kPreempt };
enum EventKind : uint8_t {
  kComplete = 0,
  kRepair = 1,
  kFailure = 2,
  kNodeFailure = 3,
  kDemote = 4,
  kSample = 5
};

struct JobRt {
  std::unique_ptr<model::Job> job;
  JobFacts facts;
  Status status = Status::kFuture;
  Cause restart_cause = Cause::kNone;
  uint32_t epoch = 0;
  int32_t running_pos = -1;
  double seg_start = 0;
  double seg_overhead = 0;
  double progress0 = 0;
  double first_start = -1;
  double finish = -1;
  double killed_at = -1;
};

struct Event {
  double t;
  uint8_t kind;
  uint64_t seq;
  int64_t a;             // job index or node
  uint32_t b;            // epoch or GPU mask
  double repair_s = -1;  // failures: scripted repair time (< 0: none, random failure)
  bool operator>(const Event& o) const {
    if (t != o.t) return t > o.t;
    if (kind != o.kind) return kind > o.kind;
    return seq > o.seq;
  }
};

class Sim final : public JobFactsSource {
 public:
  Sim(const Workload& w, const SimOptions& opt, const PolicySpec& policy)
      : w_(w),
        opt_(opt),
        policy_(policy),
        rt_(w.jobs.size()),
        fail_rng_(opt.seed ^ 0x9e3779b97f4a7c15ULL) {}

  const JobFacts& Facts(const model::Job& job) const override {
    return rt_[SimJobIndex(job.name)].facts;
  }

  absl::StatusOr<PolicyResult> Run(const sched::PluginRegistry& base, Clock* wall);

 private:
  struct PendingLess {
    const Sim* sim;
    bool operator()(int32_t a, int32_t b) const {
      const model::Job& ja = *sim->rt_[a].job;
      const model::Job& jb = *sim->rt_[b].job;
      if (sim->sort_->Less(ja, jb)) return true;
      if (sim->sort_->Less(jb, ja)) return false;
      return a < b;
    }
  };

  absl::Status BuildCluster();
  void Push(double t, uint8_t kind, int64_t a, uint32_t b, double repair_s = -1) {
    events_.push({t, kind, seq_++, a, b, repair_s});
  }
  void Advance(double t);
  void Arrive(int32_t i);
  void AddPending(int32_t i);
  void RemovePending(int32_t i);
  bool TryPlace(int32_t i);
  bool TryPreempt(int32_t i);
  void Start(int32_t i);
  void Stop(int32_t i, Cause cause);
  void Complete(int32_t i);
  void Fail(sched::NodeId node, uint32_t mask, bool node_failure, double repair_s);
  void Repair(sched::NodeId node, uint32_t mask);
  void Demote(int32_t i);
  void TakeSample();
  void Pass(bool full);
  int64_t FreeGpus() const;
  // False only when no placement of `milli` milli-GPU can exist now: whole
  // GPUs need that many entirely free GPUs, a share needs some free share on
  // a schedulable node. An upper bound used to skip hopeless Schedule calls.
  bool MayFit(int64_t milli) const;
  // The same for job `i` with its gang shape: its members of whole GPUs must
  // fit on the nodes' whole free GPUs (the cluster's free histograms). Only
  // Schedule calls that must fail are skipped; results do not change.
  bool MayFitJob(int32_t i) const;
  void ScheduleNextFailure(bool node);

  const Workload& w_;
  const SimOptions& opt_;
  const PolicySpec& policy_;
  std::vector<JobRt> rt_;
  std::mt19937_64 fail_rng_;

  sched::ClusterState state_;
  std::unique_ptr<sched::Scheduler> scheduler_;
  const sched::QueueSortPlugin* sort_ = nullptr;
  ManualClock clock_;
  absl::Time epoch_ = absl::UnixEpoch();

  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  uint64_t seq_ = 0;
  double now_ = 0;
  double last_t_ = 0;

  // Pending jobs by milli-GPU demand, each bucket in policy order. A pass
  // merges the buckets smaller than the smallest demand that already failed,
  // so it never walks over jobs it would skip (a pending queue of 10^5 jobs
  // behind blocked gangs). Buckets are never erased (cursors stay valid);
  // the number of distinct demands is small.
  using PendingSet = std::set<int32_t, PendingLess>;
  std::map<int64_t, PendingSet> pending_;
  int64_t pending_count_ = 0;
  // Smallest pending demand (milli); INT64_MAX when none.
  int64_t MinPendingMilli() const;
  // First pending job in policy order; -1 when none.
  int32_t PendingHead() const;
  struct Cursor {
    int64_t milli;
    PendingSet* set;
    PendingSet::iterator it;
  };
  std::vector<Cursor> cursors_;  // Pass scratch
  // With preemption: running jobs by LAS band, as (segment start, index),
  // so victims (worst band, latest start first) come without a scan.
  std::vector<std::set<std::pair<double, int32_t>>> running_by_band_;
  void TrackRunning(int32_t i, bool add);
  std::vector<int32_t> new_arrivals_;
  double reserve_after_ = INFINITY;
  bool capacity_changed_ = false;
  std::vector<int32_t> running_;
  std::vector<int64_t> running_milli_by_band_;

  // Fleet.
  int32_t gpn_ = 8;
  int32_t total_nodes_ = 0;
  std::vector<uint32_t> down_mask_;  // per node: GPUs failed and not repaired
  std::vector<uint8_t> is_spare_;    // in the spare pool (cordoned, idle)
  std::vector<uint8_t> swapped_;     // failed and replaced by a spare
  std::vector<sched::NodeId> spare_pool_;
  int64_t capacity_gpus_ = 0;
  int32_t unhealthy_gpus_ = 0;

  // Accounting.
  PolicyResult res_;
  int64_t allocated_milli_ = 0;
  double alloc_integral_ = 0;
  double loss_total_ = 0;
  double last_sample_alloc_ = 0, last_sample_loss_ = 0;
  std::vector<int64_t> q_running_, q_demand_;  // milli-GPU
  std::vector<double> q_alloc_;
  double jain_sum_ = 0;
  int64_t jain_n_ = 0;
  int64_t done_ = 0;
  double last_finish_ = 0;
  double restart_wait_sum_ = 0;
  int64_t restart_wait_n_ = 0;
};

absl::Status Sim::BuildCluster() {
  model::SyntheticClusterSpec spec = opt_.cluster;
  spec.nodes = opt_.cluster.nodes + opt_.hot_spare_nodes;
  auto nodes = model::BuildSyntheticCluster(spec);
  if (!nodes.ok()) return nodes.status();
  gpn_ = spec.gpus_per_node;
  total_nodes_ = spec.nodes;
  down_mask_.assign(total_nodes_, 0);
  is_spare_.assign(total_nodes_, 0);
  swapped_.assign(total_nodes_, 0);
  for (auto& n : *nodes) {
    auto id = state_.AddNode(std::move(n));
    if (!id.ok()) return id.status();
  }
  // The last nodes are the spares: spread across racks would be nicer, but
  // any node may serve since a spare replaces a node, not a position.
  for (int32_t k = 0; k < opt_.hot_spare_nodes; ++k) {
    sched::NodeId id = opt_.cluster.nodes + k;
    if (auto s = state_.SetSchedulable(id, false); !s.ok()) return s;
    is_spare_[id] = 1;
    spare_pool_.push_back(id);
  }
  capacity_gpus_ = static_cast<int64_t>(opt_.cluster.nodes) * gpn_;
  return absl::OkStatus();
}

int64_t Sim::FreeGpus() const {
  int64_t f = 0;
  for (sched::ModelId m = 0; m < state_.num_models(); ++m) f += state_.cluster_free(m).free_gpus;
  return f;
}

bool Sim::MayFit(int64_t milli) const {
  if (milli >= model::kMilliPerGpu) return FreeGpus() * model::kMilliPerGpu >= milli;
  return !state_.class_infos(/*with_free_gpu=*/true).empty();
}

bool Sim::MayFitJob(int32_t i) const {
  const SimJob& sj = w_.jobs[i];
  if (sj.gpu_milli < model::kMilliPerGpu) return MayFit(sj.milli());
  const GangShape shape = ShapeFor(sj.gpus, gpn_);
  int64_t members = 0;
  for (sched::ModelId m = 0; m < state_.num_models() && members < shape.members; ++m) {
    members += state_.cluster_free(m).MembersThatFit(shape.per_member);
  }
  return members >= shape.members;
}

void Sim::Advance(double t) {
  if (t > now_) {
    alloc_integral_ += static_cast<double>(allocated_milli_) / model::kMilliPerGpu * (t - now_);
    now_ = t;
    clock_.SetTime(epoch_ + absl::Seconds(t));
  }
}

void Sim::AddPending(int32_t i) {
  JobRt& r = rt_[i];
  r.status = Status::kPending;
  pending_.try_emplace(w_.jobs[i].milli(), PendingLess{this}).first->second.insert(i);
  ++pending_count_;
}

void Sim::RemovePending(int32_t i) {
  pending_.find(w_.jobs[i].milli())->second.erase(i);
  --pending_count_;
}

int64_t Sim::MinPendingMilli() const {
  for (const auto& [milli, set] : pending_) {
    if (!set.empty()) return milli;
  }
  return INT64_MAX;
}

int32_t Sim::PendingHead() const {
  int32_t head = -1;
  PendingLess less{this};
  for (const auto& [milli, set] : pending_) {
    if (!set.empty() && (head < 0 || less(*set.begin(), head))) head = *set.begin();
  }
  return head;
}

void Sim::TrackRunning(int32_t i, bool add) {
  if (!policy_.preempt_lower_bands) return;
  const JobRt& r = rt_[i];
  if (static_cast<size_t>(r.facts.band) >= running_by_band_.size()) {
    running_by_band_.resize(r.facts.band + 1);
  }
  auto& set = running_by_band_[r.facts.band];
  if (add) {
    set.emplace(r.seg_start, i);
  } else {
    set.erase({r.seg_start, i});
  }
}

void Sim::Arrive(int32_t i) {
  const SimJob& sj = w_.jobs[i];
  JobRt& r = rt_[i];
  r.facts.index = i;
  r.facts.submit_s = sj.submit_s;
  r.facts.duration_s = sj.duration_s;
  r.facts.band = opt_.las.Band(0);
  if (sj.milli() > capacity_gpus_ * model::kMilliPerGpu) {
    r.status = Status::kRejected;
    ++res_.rejected;
    ++done_;
    return;
  }
  auto job = std::make_unique<model::Job>();
  job->name = SimJobName(i);
  job->queue = w_.queues[sj.queue];
  job->priority = sj.priority;
  job->creation_time = epoch_ + absl::Seconds(sj.submit_s);
  GangShape shape = ShapeFor(sj.gpus, gpn_);
  model::MemberGroup g;
  g.name = "worker";
  g.count = shape.members;
  g.resources.gpus = shape.per_member;
  g.resources.gpu_milli = sj.gpu_milli;  // < 1000: a shared GPU (shape 1 x 1)
  g.resources.cpu_milli = 1000;
  g.resources.memory_mib = 1024;
  job->groups.push_back(std::move(g));
  if (opt_.topology_aware && shape.members > 1) {
    job->topology.required = false;
    job->topology.level = shape.members <= opt_.cluster.nodes_per_rack
                              ? model::TopologyLevel::kRack
                              : model::TopologyLevel::kBlock;
  }
  r.job = std::move(job);
  q_demand_[sj.queue] += sj.milli();
  AddPending(i);
  new_arrivals_.push_back(i);
}

bool Sim::TryPlace(int32_t i) {
  if (MayFitJob(i)) {
    ++res_.schedule_calls;
    sched::ScheduleResult r = scheduler_->Schedule(*rt_[i].job);
    if (r.placed()) {
      Start(i);
      return true;
    }
  }
  if (policy_.preempt_lower_bands) return TryPreempt(i);
  return false;
}

bool Sim::TryPreempt(int32_t i) {
  const int64_t g = w_.jobs[i].milli();
  const int32_t band = rt_[i].facts.band;
  int64_t reclaimable = 0;
  for (size_t b = band + 1; b < running_milli_by_band_.size(); ++b)
    reclaimable += running_milli_by_band_[b];
  // Whole GPUs: what is free plus what victims would free must cover the
  // gang. A share may also use a partly free GPU, so only victims are needed.
  if (reclaimable == 0) return false;
  if (g >= model::kMilliPerGpu && reclaimable + FreeGpus() * model::kMilliPerGpu < g) return false;
  // Victims: worst band first, then the most recently started (then the
  // highest index), taken from the back of each band's running set.
  for (int32_t vb = static_cast<int32_t>(running_by_band_.size()) - 1; vb > band; --vb) {
    while (!running_by_band_[vb].empty()) {
      const int32_t v = std::prev(running_by_band_[vb].end())->second;
      Stop(v, Cause::kPreempt);  // leaves running_by_band_
      ++res_.preemptions;
      AddPending(v);
      capacity_changed_ = true;
      if (!MayFitJob(i)) continue;
      ++res_.schedule_calls;
      if (scheduler_->Schedule(*rt_[i].job).placed()) {
        Start(i);
        return true;
      }
    }
  }
  return false;
}

void Sim::Start(int32_t i) {
  JobRt& r = rt_[i];
  const SimJob& sj = w_.jobs[i];
  RemovePending(i);
  ++res_.placements;
  r.status = Status::kRunning;
  ++r.epoch;
  r.seg_start = now_;
  r.seg_overhead = r.restart_cause != Cause::kNone ? sj.restart_s : 0;
  if (r.first_start < 0) r.first_start = now_;
  if (r.killed_at >= 0) {
    restart_wait_sum_ += now_ - r.killed_at;
    ++restart_wait_n_;
    res_.restart_wait_gpu_s += sj.gpu_units() * (now_ - r.killed_at);
    r.killed_at = -1;
  }
  double end = now_ + r.seg_overhead + (sj.duration_s - r.progress0);
  Push(end, kComplete, i, r.epoch);
  r.running_pos = static_cast<int32_t>(running_.size());
  running_.push_back(i);
  allocated_milli_ += sj.milli();
  q_running_[sj.queue] += sj.milli();
  if (static_cast<size_t>(r.facts.band) >= running_milli_by_band_.size()) {
    running_milli_by_band_.resize(r.facts.band + 1, 0);
  }
  running_milli_by_band_[r.facts.band] += sj.milli();
  TrackRunning(i, true);
  if (policy_.uses_las_bands) {
    double band_end = opt_.las.BandEnd(r.facts.band);
    if (std::isfinite(band_end)) {
      double t = now_ + (band_end - r.facts.attained_gpu_s) / sj.gpu_units();
      if (t < end) Push(std::max(t, now_), kDemote, i, r.epoch);
    }
  }
}

// Ends the running segment of `i`; accounting per the header's contract.
void Sim::Stop(int32_t i, Cause cause) {
  JobRt& r = rt_[i];
  const SimJob& sj = w_.jobs[i];
  const double seg = now_ - r.seg_start;
  const double overhead = std::min(seg, r.seg_overhead);
  const double run = seg - overhead;
  double kept = r.progress0;  // progress the next segment starts from
  if (cause == Cause::kNone) {
    kept = sj.duration_s;
  } else if (cause == Cause::kPreempt && opt_.preemption_checkpoints) {
    kept = r.progress0 + run;
  } else if (sj.checkpoint_s > 0) {
    kept = r.progress0 + std::floor(run / sj.checkpoint_s) * sj.checkpoint_s;
  }
  const double lost = cause == Cause::kNone ? 0 : r.progress0 + run - kept;
  const double g = sj.gpu_units();
  res_.allocated_gpu_s += g * seg;
  q_alloc_[sj.queue] += g * seg;
  double* restart_acc = r.restart_cause == Cause::kPreempt ? &res_.preempt_restart_gpu_s
                                                           : &res_.failure_restart_gpu_s;
  *restart_acc += g * overhead;
  if (cause == Cause::kFailure) res_.failure_lost_gpu_s += g * lost;
  if (cause == Cause::kPreempt) res_.preempt_lost_gpu_s += g * lost;
  loss_total_ += g * (overhead + lost);
  r.facts.attained_gpu_s += g * seg;
  running_milli_by_band_[r.facts.band] -= sj.milli();
  TrackRunning(i, false);  // before the band moves
  // Bands never go back: a demotion decided at a threshold crossing must
  // survive floating-point rounding of the attained service.
  r.facts.band = std::max(r.facts.band, opt_.las.Band(r.facts.attained_gpu_s));
  r.progress0 = kept;
  r.restart_cause = cause;
  ++r.epoch;
  // Swap-remove from running_.
  int32_t last = running_.back();
  running_[r.running_pos] = last;
  rt_[last].running_pos = r.running_pos;
  running_.pop_back();
  r.running_pos = -1;
  allocated_milli_ -= sj.milli();
  q_running_[sj.queue] -= sj.milli();
  (void)scheduler_->Release(r.job->key());
  capacity_changed_ = true;
}

void Sim::Complete(int32_t i) {
  Stop(i, Cause::kNone);
  JobRt& r = rt_[i];
  const SimJob& sj = w_.jobs[i];
  r.status = Status::kDone;
  r.finish = now_;
  last_finish_ = std::max(last_finish_, now_);
  q_demand_[sj.queue] -= sj.milli();
  res_.demand_gpu_s += sj.gpu_units() * sj.duration_s;
  ++res_.completed;
  ++done_;
  r.job.reset();
}

void Sim::Demote(int32_t i) {
  JobRt& r = rt_[i];
  const SimJob& sj = w_.jobs[i];
  // The event was scheduled at the crossing of this band's end.
  const int32_t last_band = static_cast<int32_t>(opt_.las.thresholds_gpu_s.size());
  if (r.facts.band >= last_band) return;
  const int32_t band = r.facts.band + 1;
  running_milli_by_band_[r.facts.band] -= sj.milli();
  TrackRunning(i, false);
  // The band is recorded for victim selection only; attained service itself
  // is settled when the segment stops. The job is running, so it is not in
  // the pending set whose order depends on it.
  r.facts.band = band;
  if (static_cast<size_t>(band) >= running_milli_by_band_.size())
    running_milli_by_band_.resize(band + 1, 0);
  running_milli_by_band_[band] += sj.milli();
  TrackRunning(i, true);
  capacity_changed_ = true;  // pending jobs of better bands may preempt it now
  double band_end = opt_.las.BandEnd(band);
  if (std::isfinite(band_end)) {
    double t = r.seg_start + (band_end - r.facts.attained_gpu_s) / sj.gpu_units();
    Push(std::max(t, now_), kDemote, i, r.epoch);
  }
}

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
  // before the queue, on the spare if one took over.
  if (opt_.restart_killed_first) {
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

void Sim::Pass(bool full) {
  if (pending_count_ == 0) {
    new_arrivals_.clear();
    return;
  }
  if (!full) {
    // Only new jobs can change anything: capacity did not grow.
    const int32_t head = PendingHead();
    const bool head_reserved = now_ - w_.jobs[head].submit_s >= reserve_after_;
    std::vector<int32_t> arrivals;
    arrivals.swap(new_arrivals_);
    std::sort(arrivals.begin(), arrivals.end(), PendingLess{this});
    for (int32_t i : arrivals) {
      if (rt_[i].status != Status::kPending) continue;
      const bool is_head = i == PendingHead();
      if (!is_head && (!policy_.backfill || head_reserved)) continue;
      TryPlace(i);
    }
    new_arrivals_.swap(arrivals);  // keeps the capacity
    new_arrivals_.clear();
    return;
  }
  new_arrivals_.clear();
  // The walk visits pending jobs in policy order, but only those smaller
  // than the smallest that failed in this pass (a larger one cannot fit
  // where a smaller one did not): a merge of the size buckets below
  // min_failed, each read through a cursor.
  cursors_.clear();
  for (auto& [milli, set] : pending_) cursors_.push_back({milli, &set, set.begin()});
  const PendingLess less{this};
  int64_t min_failed = INT64_MAX;  // milli-GPU
  bool blocked_seen = false;
  for (;;) {
    const int64_t min_pending = MinPendingMilli();
    if (min_failed <= min_pending) break;
    Cursor* next = nullptr;
    for (Cursor& c : cursors_) {
      if (c.milli >= min_failed || c.it == c.set->end()) continue;
      if (next == nullptr || less(*c.it, *next->it)) next = &c;
    }
    if (next == nullptr) break;
    const int32_t i = *next->it;
    const int64_t g = next->milli;
    if (!MayFit(min_pending)) {
      if (!policy_.preempt_lower_bands) break;
      // LAS order is by band: once no running job has a worse band than this
      // one, nothing later can preempt either.
      int32_t worst = static_cast<int32_t>(running_milli_by_band_.size()) - 1;
      while (worst >= 0 && running_milli_by_band_[worst] == 0) --worst;
      if (rt_[i].facts.band >= worst) break;
    }
    ++next->it;  // Start() erases i
    const int64_t preemptions = res_.preemptions;
    const bool placed = TryPlace(i);
    if (res_.preemptions != preemptions) {
      // Victims joined the queue behind i (worse bands): visit them too.
      cursors_.clear();
      for (auto& [milli, set] : pending_) cursors_.push_back({milli, &set, set.upper_bound(i)});
    }
    if (placed) continue;
    min_failed = g;
    if (!policy_.backfill) break;
    if (!blocked_seen && now_ - w_.jobs[i].submit_s >= reserve_after_) break;
    blocked_seen = true;
  }
}

absl::StatusOr<PolicyResult> Sim::Run(const sched::PluginRegistry& base, Clock* wall) {
  absl::Time wall0 = wall->Now();
  if (auto s = ValidateWorkload(w_); !s.ok()) return s;
  if (opt_.cluster.nodes <= 0) return absl::InvalidArgumentError("--nodes: must be > 0");
  if (auto s = BuildCluster(); !s.ok()) return s;
  sched::PluginRegistry registry = base;
  if (auto s = RegisterSimQueueSorts(this, &registry); !s.ok()) return s;
  auto sch = sched::Scheduler::Create(policy_.profile, registry, &state_);
  if (!sch.ok()) return sch.status();
  scheduler_ = std::move(*sch);
  sort_ = &scheduler_->queue_sort();
  reserve_after_ = opt_.reserve_after_s >= 0 ? opt_.reserve_after_s : policy_.reserve_after_s;

  const int64_t n = static_cast<int64_t>(w_.jobs.size());
  q_running_.assign(w_.queues.size(), 0);
  q_demand_.assign(w_.queues.size(), 0);
  q_alloc_.assign(w_.queues.size(), 0);
  res_.policy = policy_.name;
  res_.description = policy_.description;
  res_.jobs = n;
  res_.capacity_gpus = capacity_gpus_;
  res_.hot_spare_nodes = opt_.hot_spare_nodes;

  const double first = w_.FirstSubmit();
  const double last_submit = n > 0 ? w_.jobs.back().submit_s : 0;
  double sample_every = opt_.sample_interval_s > 0 ? opt_.sample_interval_s
                                                   : std::max(60.0, (last_submit - first) / 400);
  now_ = first;
  clock_.SetTime(epoch_ + absl::Seconds(std::max(0.0, first)));
  Push(first, kSample, 0, 0);
  ScheduleNextFailure(false);
  ScheduleNextFailure(true);
  const uint32_t all_gpus = (1u << gpn_) - 1;
  for (const ScriptedFailure& f : opt_.scripted_failures) {
    if (f.node < 0 || f.node >= total_nodes_ || f.gpu >= gpn_) {
      return absl::InvalidArgumentError(
          absl::StrCat("scripted failure: node ", f.node, " gpu ", f.gpu, " is not in the fleet"));
    }
    // A scripted repair time of 0 would read as "random"; keep it positive.
    double repair = f.repair_s >= 0 ? std::max(f.repair_s, 1e-9)
                    : f.gpu < 0     ? opt_.failures.node_repair_s
                                    : opt_.failures.gpu_repair_s;
    Push(f.t_s, f.gpu < 0 ? kNodeFailure : kFailure, f.node, f.gpu < 0 ? all_gpus : 1u << f.gpu,
         repair);
  }

  int64_t next_arrival = 0;
  int64_t pending_repairs = 0;
  while (done_ < n) {
    double t_heap = events_.empty() ? INFINITY : events_.top().t;
    double t_arr = next_arrival < n ? w_.jobs[next_arrival].submit_s : INFINITY;
    double t = std::min(t_heap, t_arr);
    if (!std::isfinite(t)) break;
    // Stuck: nothing runs, nothing arrives, nothing is being repaired.
    if (running_.empty() && next_arrival >= n && pending_repairs == 0 && t_arr == INFINITY &&
        pending_count_ > 0 && !capacity_changed_ && new_arrivals_.empty()) {
      break;
    }
    Advance(t);
    while (!events_.empty() && events_.top().t <= t) {
      Event e = events_.top();
      events_.pop();
      ++res_.events;
      switch (e.kind) {
        case kComplete:
          if (rt_[e.a].status == Status::kRunning && rt_[e.a].epoch == e.b) Complete(e.a);
          break;
        case kDemote:
          if (rt_[e.a].status == Status::kRunning && rt_[e.a].epoch == e.b) Demote(e.a);
          break;
        case kRepair:
          --pending_repairs;
          Repair(static_cast<sched::NodeId>(e.a), e.b);
          break;
        case kFailure:
        case kNodeFailure: {
          bool node = e.kind == kNodeFailure;
          uint64_t seq_before = seq_;
          Fail(static_cast<sched::NodeId>(e.a), e.b, node, e.repair_s);
          if (seq_ != seq_before) ++pending_repairs;
          if (e.repair_s < 0) ScheduleNextFailure(node);
          break;
        }
        case kSample:
          TakeSample();
          Push(now_ + sample_every, kSample, 0, 0);
          break;
      }
    }
    while (next_arrival < n && w_.jobs[next_arrival].submit_s <= t) {
      ++res_.events;
      Arrive(static_cast<int32_t>(next_arrival++));
    }
    if (capacity_changed_) {
      capacity_changed_ = false;
      Pass(/*full=*/true);
      // Preemptions inside the pass freed and re-queued work: one more look.
      if (capacity_changed_) {
        capacity_changed_ = false;
        Pass(/*full=*/true);
        capacity_changed_ = false;
      }
    } else if (!new_arrivals_.empty()) {
      Pass(/*full=*/false);
      capacity_changed_ = false;
    }
  }
  TakeSample();
  res_.unfinished = n - done_;

  // Metrics.
  {
    std::vector<double> first_start(n, NAN), finish(n, NAN);
    for (int64_t i = 0; i < n; ++i) {
      if (rt_[i].status != Status::kDone) continue;
      first_start[i] = rt_[i].first_start;
      finish[i] = rt_[i].finish;
    }
    AddJobMetrics(w_, first_start, finish, q_alloc_, opt_.keep_job_jcts, &res_);
  }
  res_.jain_mean = jain_n_ > 0 ? jain_sum_ / jain_n_ : 1;
  res_.useful_gpu_s = res_.allocated_gpu_s - res_.failure_lost_gpu_s - res_.failure_restart_gpu_s -
                      res_.preempt_lost_gpu_s - res_.preempt_restart_gpu_s;
  res_.goodput = res_.allocated_gpu_s > 0 ? res_.useful_gpu_s / res_.allocated_gpu_s : 1;
  res_.goodput_bound = GoodputBound(w_, opt_);
  res_.makespan_s = res_.completed > 0 ? last_finish_ - first : 0;
  res_.lower_bound_s = MakespanLowerBound(w_, capacity_gpus_);
  res_.makespan_ratio = res_.lower_bound_s > 0 ? res_.makespan_s / res_.lower_bound_s : 0;
  res_.utilization =
      res_.makespan_s > 0
          ? res_.allocated_gpu_s / (static_cast<double>(capacity_gpus_) * res_.makespan_s)
          : 0;
  res_.mean_restart_wait_s = restart_wait_n_ > 0 ? restart_wait_sum_ / restart_wait_n_ : 0;
  res_.effective_utilization =
      res_.makespan_s > 0
          ? res_.useful_gpu_s / (static_cast<double>(capacity_gpus_) * res_.makespan_s)
          : 0;
  res_.wall_s = absl::ToDoubleSeconds(wall->Now() - wall0);
  res_.decisions_per_s = res_.wall_s > 0 ? res_.schedule_calls / res_.wall_s : 0;
  return std::move(res_);
}

}  // namespace

absl::StatusOr<PolicyResult> RunReplay(const Workload& w, const SimOptions& opt,
                                       const PolicySpec& policy,
                                       const sched::PluginRegistry& registry, Clock* wall) {
  Sim sim(w, opt, policy);
  return sim.Run(registry, wall);
}

}  // namespace tessera::sim::replay
