// Internal to src/sim/replay: the replay simulator's state and its event
// handlers (simulator.h describes the simulation). simulator.cc holds the
// scheduling pass and the run loop; simulator_failures.cc the failures,
// repairs and samples; simulator_queues.cc the `queues` policy (driving a
// sched::QueueManager). Not part of the module's interface.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <queue>
#include <random>
#include <set>
#include <vector>

#include "sched/framework/cluster_state.h"
#include "sched/framework/scheduler.h"
#include "sched/pack/plugin_set.h"
#include "sched/queue/queue_manager.h"
#include "sim/replay/simulator.h"

namespace tessera::sim::replay::internal {

enum class Status : uint8_t { kFuture, kPending, kRunning, kDone, kRejected };
enum class Cause : uint8_t { kNone, kFailure, kPreempt };
enum EventKind : uint8_t {
  kComplete = 0,
  kRepair = 1,
  kFailure = 2,
  kNodeFailure = 3,
  kDemote = 4,
  kSample = 5,
  // The `queues` policy: a signalled victim has checkpointed and exits; a
  // victim's kill deadline (a Cycle must run then); an idle cycle.
  kVictimExit = 6,
  kDeadline = 7,
  kIdleCycle = 8
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
  double signal_at = -1;  // `queues`: checkpoint signal of the running segment
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
  // Ends the running segment. The progress kept is the later of the last
  // periodic checkpoint and a checkpoint written at `checkpoint_at` (if it
  // falls in the segment's run; -infinity: none).
  void Stop(int32_t i, Cause cause, double checkpoint_at = -INFINITY);
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
  absl::Status CheckInvariants() const;  // SimOptions::check_invariants

  // The `queues` policy (simulator_queues.cc). A job pending there is in the
  // manager only (status kPending, counted in pending_count_, not in pending_).
  absl::Status BuildQueueManager();
  sched::SubmitOptions QueueSubmitOptions(int32_t i) const;
  void QueueSubmit(int32_t i);
  // A gang killed by a failure: out of the manager and submitted again, as
  // the server's controller does for NodeLost (Finish, then Submit).
  void QueueRequeue(int32_t i);
  // One QueueManager::Cycle at the current instant and its events.
  void QueueCycle();
  void QueueEvent(const sched::QueueEvent& ev);
  void QueueVictimExit(int32_t i);
  // Tells the manager of the periodic checkpoints running jobs wrote up to
  // now (ReportCheckpoint), before each cycle: its victim choice weighs the
  // work since each victim's last checkpoint, as the controller's does.
  void QueueReportCheckpoints();
  void QueueMetrics();

  const Workload& w_;
  const SimOptions& opt_;
  const PolicySpec& policy_;
  std::vector<JobRt> rt_;
  std::mt19937_64 fail_rng_;

  sched::ClusterState state_;
  // The pack plugins' context (profiles may name any plugin a server can run,
  // sched/pack/plugin_set.h); declared before the schedulers that point into it.
  sched::pack::PluginSet plugins_;
  std::unique_ptr<sched::Scheduler> scheduler_;
  // `queues`: borrows state_ (declared after it, so destroyed first).
  std::unique_ptr<sched::QueueManager> qm_;
  bool idle_cycle_pending_ = false;
  double loan_wake_ = -1;     // the last loan end a cycle was pushed for
  absl::Status queue_error_;  // the first Submit the manager refused
  // `queues`: running jobs' next periodic checkpoint (time, job, epoch), earliest first.
  struct CheckpointDue {
    double t;
    int32_t job;
    uint32_t epoch;
    bool operator>(const CheckpointDue& o) const { return t != o.t ? t > o.t : job > o.job; }
  };
  std::priority_queue<CheckpointDue, std::vector<CheckpointDue>, std::greater<CheckpointDue>>
      checkpoints_due_;
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
  std::vector<double> q_contended_;  // GPU-seconds while >= 2 queues had jobs waiting
  std::vector<int64_t> q_pending_;   // jobs waiting per queue
  std::vector<int64_t> q_preemptions_;
  double jain_sum_ = 0;
  int64_t jain_n_ = 0;
  int64_t done_ = 0;
  double last_finish_ = 0;
  double restart_wait_sum_ = 0;
  int64_t restart_wait_n_ = 0;
  // Utilization while work waits (PolicyResult::util_waiting_*): time with
  // pending jobs, the allocated GPU-seconds in it, and that time by
  // utilization in steps of 0.1% (index 0..1000).
  double waiting_s_ = 0;
  double waiting_alloc_gpu_s_ = 0;
  std::vector<double> waiting_util_hist_;
  void WaitingMetrics();
  void WaitBySizeMetrics();
};

}  // namespace tessera::sim::replay::internal
