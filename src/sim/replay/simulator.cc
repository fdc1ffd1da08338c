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
#include "sim/replay/simulator_internal.h"

namespace tessera::sim::replay {

namespace internal {

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
    const double alloc = static_cast<double>(allocated_milli_) / model::kMilliPerGpu;
    alloc_integral_ += alloc * (t - now_);
    if (pending_count_ > 0 && capacity_gpus_ > 0) {
      waiting_s_ += t - now_;
      waiting_alloc_gpu_s_ += alloc * (t - now_);
      const double u = std::clamp(alloc / static_cast<double>(capacity_gpus_), 0.0, 1.0);
      waiting_util_hist_[static_cast<size_t>(std::floor(u * 1000))] += t - now_;
    }
    int waiting = 0;
    for (int64_t n : q_pending_) waiting += n > 0;
    if (waiting >= 2) {
      for (size_t q = 0; q < q_running_.size(); ++q) {
        q_contended_[q] += static_cast<double>(q_running_[q]) / model::kMilliPerGpu * (t - now_);
      }
    }
    now_ = t;
    clock_.SetTime(epoch_ + absl::Seconds(t));
  }
}

void Sim::AddPending(int32_t i) {
  JobRt& r = rt_[i];
  r.status = Status::kPending;
  ++q_pending_[w_.jobs[i].queue];
  if (qm_ != nullptr) {  // pending in the manager only
    ++pending_count_;
    return;
  }
  pending_.try_emplace(w_.jobs[i].milli(), PendingLess{this}).first->second.insert(i);
  ++pending_count_;
}

void Sim::RemovePending(int32_t i) {
  --q_pending_[w_.jobs[i].queue];
  if (qm_ != nullptr) {
    --pending_count_;
    return;
  }
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
  if (qm_ != nullptr) QueueSubmit(i);
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
      // Leaves running_by_band_.
      Stop(v, Cause::kPreempt, opt_.preemption_checkpoints ? now_ : -INFINITY);
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
  double end = now_ + r.seg_overhead + RunTimeFor(sj, sj.duration_s - r.progress0);
  Push(end, kComplete, i, r.epoch);
  if (qm_ != nullptr && sj.checkpoint_s > 0) {
    checkpoints_due_.push(
        {now_ + r.seg_overhead + sj.checkpoint_s + sj.checkpoint_cost_s, i, r.epoch});
  }
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
void Sim::Stop(int32_t i, Cause cause, double checkpoint_at) {
  JobRt& r = rt_[i];
  const SimJob& sj = w_.jobs[i];
  const double seg = now_ - r.seg_start;
  const double overhead = std::min(seg, r.seg_overhead);
  const double run = seg - overhead;
  double kept = r.progress0;  // progress the next segment starts from
  double lost = 0, writing = 0;
  if (cause == Cause::kNone) {
    kept = sj.duration_s;
    writing = std::max(0.0, run - (sj.duration_s - r.progress0));
  } else {
    const RunSplit split = SplitRun(sj, run);
    kept = r.progress0 + split.saved;
    writing = split.writing;
    if (checkpoint_at >= r.seg_start) {
      const double upto = std::clamp(checkpoint_at - r.seg_start - overhead, 0.0, run);
      kept = std::max(kept, r.progress0 + SplitRun(sj, upto).done);
    }
    lost = r.progress0 + split.done - kept;
  }
  const double g = sj.gpu_units();
  res_.checkpoint_write_gpu_s += g * writing;
  res_.allocated_gpu_s += g * seg;
  q_alloc_[sj.queue] += g * seg;
  double* restart_acc = r.restart_cause == Cause::kPreempt ? &res_.preempt_restart_gpu_s
                                                           : &res_.failure_restart_gpu_s;
  *restart_acc += g * overhead;
  if (cause == Cause::kFailure) res_.failure_lost_gpu_s += g * lost;
  if (cause == Cause::kPreempt) {
    res_.preempt_lost_gpu_s += g * lost;
    ++q_preemptions_[sj.queue];
  }
  loss_total_ += g * (overhead + lost + writing);
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
  r.signal_at = -1;
  // Under `queues` the manager releases the placement (Finish, or a kill).
  if (qm_ == nullptr) (void)scheduler_->Release(r.job->key());
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
  if (qm_ != nullptr) (void)qm_->Completed(r.job->key(), clock_.Now());
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

absl::Status Sim::CheckInvariants() const {
  auto fail = [&](const std::string& what) {
    return absl::InternalError(absl::StrCat("invariant broken at t=", now_, ": ", what));
  };
  if (auto s = state_.CheckConsistency(); !s.ok()) return fail(std::string(s.message()));
  if (state_.bound().size() != running_.size()) {
    return fail(absl::StrCat(state_.bound().size(), " placements bound for ", running_.size(),
                             " running jobs"));
  }
  int64_t held = 0;
  std::map<std::pair<sched::NodeId, int>, int64_t> per_gpu;
  for (int32_t i : running_) {
    const sched::Placement* p = state_.FindPlacement(rt_[i].job->key());
    if (p == nullptr) return fail(absl::StrCat(rt_[i].job->name, " runs without a placement"));
    for (const sched::MemberPlacement& m : p->members) {
      for (const sched::GpuGrant& g : m.gpus) {
        held += g.milli;
        if ((per_gpu[{m.node, int{g.gpu}}] += g.milli) > model::kMilliPerGpu) {
          return fail(absl::StrCat("node ", m.node, " GPU ", int{g.gpu}, " given out twice"));
        }
      }
    }
  }
  // The total given out must be exactly what the running jobs hold and what
  // the simulator counts.
  if (held != state_.allocated_milli() || held != allocated_milli_) {
    return fail(absl::StrCat("running jobs hold ", held, " milli-GPU; cluster ",
                             state_.allocated_milli(), ", simulator ", allocated_milli_));
  }
  if (qm_ != nullptr) {
    if (qm_->running().size() != running_.size()) {
      return fail(absl::StrCat("manager runs ", qm_->running().size(), " jobs, simulator ",
                               running_.size()));
    }
    if (auto s = qm_->tree().CheckInvariants(); !s.ok()) return fail(std::string(s.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<PolicyResult> Sim::Run(const sched::PluginRegistry& base, Clock* wall) {
  absl::Time wall0 = wall->Now();
  if (auto s = ValidateWorkload(w_); !s.ok()) return s;
  if (opt_.cluster.nodes <= 0) return absl::InvalidArgumentError("--nodes: must be > 0");
  if (auto s = BuildCluster(); !s.ok()) return s;
  if (policy_.queue_manager) {
    if (auto s = BuildQueueManager(); !s.ok()) return s;
  } else {
    sched::PluginRegistry registry = base;
    if (auto s = plugins_.Register(&registry); !s.ok()) return s;
    if (auto s = RegisterSimQueueSorts(this, &registry); !s.ok()) return s;
    auto sch = sched::Scheduler::Create(policy_.profile, registry, &state_);
    if (!sch.ok()) return sch.status();
    scheduler_ = std::move(*sch);
    sort_ = &scheduler_->queue_sort();
  }
  reserve_after_ = opt_.reserve_after_s >= 0 ? opt_.reserve_after_s : policy_.reserve_after_s;

  const int64_t n = static_cast<int64_t>(w_.jobs.size());
  q_running_.assign(w_.queues.size(), 0);
  q_demand_.assign(w_.queues.size(), 0);
  q_alloc_.assign(w_.queues.size(), 0);
  q_contended_.assign(w_.queues.size(), 0);
  q_pending_.assign(w_.queues.size(), 0);
  q_preemptions_.assign(w_.queues.size(), 0);
  waiting_util_hist_.assign(1001, 0);
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
    if (!queue_error_.ok()) return queue_error_;
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
        case kVictimExit:
          if (rt_[e.a].status == Status::kRunning && rt_[e.a].epoch == e.b) QueueVictimExit(e.a);
          break;
        case kDeadline:
          capacity_changed_ = true;  // the manager kills the victim in this instant's cycle
          break;
        case kIdleCycle:
          idle_cycle_pending_ = false;
          capacity_changed_ = true;
          break;
      }
    }
    while (next_arrival < n && w_.jobs[next_arrival].submit_s <= t) {
      ++res_.events;
      Arrive(static_cast<int32_t>(next_arrival++));
    }
    if (qm_ != nullptr) {
      if (capacity_changed_ || !new_arrivals_.empty()) QueueCycle();
      capacity_changed_ = false;
      new_arrivals_.clear();
    } else if (capacity_changed_) {
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
    if (opt_.check_invariants) {
      if (auto s = CheckInvariants(); !s.ok()) return s;
    }
  }
  if (!queue_error_.ok()) return queue_error_;
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
  {
    double contended = 0;
    for (double c : q_contended_) contended += c;
    for (size_t q = 0; q < res_.queues.size(); ++q) {
      res_.queues[q].preemptions = q_preemptions_[q];
      res_.queues[q].contended_gpu_hours = q_contended_[q] / 3600;
      res_.queues[q].contended_share = contended > 0 ? q_contended_[q] / contended : 0;
    }
  }
  if (qm_ != nullptr) QueueMetrics();
  WaitingMetrics();
  WaitBySizeMetrics();
  res_.jain_mean = jain_n_ > 0 ? jain_sum_ / jain_n_ : 1;
  res_.useful_gpu_s = res_.allocated_gpu_s - res_.failure_lost_gpu_s - res_.failure_restart_gpu_s -
                      res_.preempt_lost_gpu_s - res_.preempt_restart_gpu_s -
                      res_.checkpoint_write_gpu_s;
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

}  // namespace internal

absl::StatusOr<PolicyResult> RunReplay(const Workload& w, const SimOptions& opt,
                                       const PolicySpec& policy,
                                       const sched::PluginRegistry& registry, Clock* wall) {
  internal::Sim sim(w, opt, policy);
  return sim.Run(registry, wall);
}

}  // namespace tessera::sim::replay
