// Replay simulator: a discrete-event simulation of a fleet running one
// policy over a workload, driving the real sched::Scheduler.
//
// Virtual time is a ManualClock moved from event to event (arrivals,
// completions, GPU/node failures and repairs, LAS demotions, samples); a
// scheduling pass runs after each instant's events. Every placement, release
// and GPU health change goes through sched::Scheduler / sched::ClusterState,
// the code the server runs; the simulator adds no placement logic of its own.
//
// Pass (the hot loop): pending jobs are kept ordered by the policy's
// QueueSort plugin. Work is retried only when it can help: if only new jobs
// arrived since the last pass, only they are tried; after capacity was
// freed, the queue is walked in order, skipping jobs no smaller than one
// that already failed in this pass and stopping when the free GPUs (from the
// cluster's free histograms) cannot hold the smallest pending job. Without
// backfill the pass stops at the first blocked job; with backfill it stops
// at a blocked head that has waited longer than the policy's reserve_after_s (so large
// gangs are not starved forever).
//
// Under the `queues` policy there is no such loop: each instant's pass is one
// sched::QueueManager::Cycle, whose events the simulator carries out as the
// server's controller does (simulator_queues.cc).
//
// Failures and checkpoints: a GPU failure picks a uniformly random GPU of the
// fleet (a Poisson process with the fleet-wide mean interval), marks it
// unhealthy, kills every gang using it and schedules the repair. A killed
// job restarts from its last checkpoint (one every checkpoint_s of run since
// its segment started) and first pays restart_s. Allocated GPU-seconds are
// exactly runtime + lost work + restart overhead, per job. With hot spares,
// a node that fails is cordoned and an idle spare node takes its place at
// once; the repaired node becomes a spare. A killed gang is retried at once,
// ahead of the queue (restart_killed_first), as a job controller would. Preemption (LAS)
// checkpoints the victim (no lost work unless disabled) and it pays restart_s when it runs again.
//
// Deterministic: the same workload, options and seed give the same result
// (failures draw from their own seeded std::mt19937_64, identical across
// policies). Not thread-safe; independent runs may go on separate threads.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "model/synthetic_cluster.h"
#include "sched/queue/queue_manager.h"
#include "sim/replay/policy.h"
#include "sim/replay/workload.h"

namespace tessera::sim::replay {

struct FailureSpec {
  // Fleet-wide mean time between GPU (node) failures; 0: none.
  double gpu_failure_interval_s = 0;
  double node_failure_interval_s = 0;
  double gpu_repair_s = 4 * 3600.0;
  double node_repair_s = 12 * 3600.0;
};

// A failure at a fixed time (tests, what-if studies), besides the random ones.
struct ScriptedFailure {
  double t_s = 0;
  int32_t node = 0;      // node index (spares follow the --nodes regular nodes)
  int32_t gpu = -1;      // -1: the whole node
  double repair_s = -1;  // < 0: FailureSpec's repair time
};

struct SimOptions {
  model::SyntheticClusterSpec cluster;  // nodes, GPUs per node, racks, blocks, layout
  int32_t hot_spare_nodes = 0;          // extra nodes held idle for failures
  FailureSpec failures;
  std::vector<ScriptedFailure> scripted_failures;
  LasConfig las;
  uint64_t seed = 1;
  double sample_interval_s = 0;  // 0: the submit span / 400
  // Overrides PolicySpec::reserve_after_s when >= 0.
  double reserve_after_s = -1;
  bool preemption_checkpoints = true;
  // A gang killed by a failure is tried again at once, ahead of the queue.
  bool restart_killed_first = true;
  // Multi-node gangs prefer one rack (or block when larger than a rack).
  bool topology_aware = true;
  bool keep_job_jcts = true;  // PolicyResult::jct_by_job
  // The `queues` policy (simulator_queues.cc): the QueueManager's
  // configuration (the server's --queue-config); unset: one leaf per
  // workload queue with equal guaranteed GPU shares, borrowing allowed
  // (DefaultReplayQueueConfig).
  std::optional<sched::QueueManagerConfig> queue_config;
  // queues policy: backfill.reservations over the config's (0: the config's).
  int32_t reservations = 0;
  // queues policy: jobs are submitted without runtime estimates and the
  // manager learns them from completed jobs (backfill.learnRuntimes); else
  // each job's remaining duration is its estimate (an oracle).
  bool learned_estimates = false;
  // queues policy: backfill.lendReserved over the config's (jobs checkpoint
  // when signalled as long as preemption_checkpoints holds).
  bool lend_reserved = false;
  std::optional<absl::Duration> min_loan;  // backfill.minLoan over the config's
  // A victim signalled to checkpoint takes this long to write its checkpoint
  // and exit. Past its grace period it is killed at its deadline instead and
  // keeps only its periodic checkpoints (so does every victim without
  // preemption_checkpoints).
  double preempt_exit_s = 20;
  // While jobs wait, the manager cycles at least this often (the server's
  // idle cycle): preemption may become possible as victims pass minRuntime.
  double queue_idle_cycle_s = 300;
  // Tests: after every pass, check that the cluster's indexes are consistent,
  // that exactly the running jobs hold placements and their GPUs (no GPU
  // given twice) and, under `queues`, the quota invariant; a violation ends
  // the run with an Internal error. O(fleet) per pass.
  bool check_invariants = false;
};

struct Dist {
  int64_t n = 0;
  double mean = 0, p50 = 0, p99 = 0, max = 0;
};
Dist MakeDist(std::vector<double> v);

struct Sample {
  double t_s = 0;
  double allocated_gpus = 0;
  double capacity_gpus = 0;  // GPUs of schedulable nodes (healthy or not)
  int32_t unhealthy_gpus = 0;
  int64_t running = 0;
  int64_t pending = 0;
  double goodput = 1;                 // in the interval ending here: 1 - lost / allocated
  double cum_failure_lost_gpu_h = 0;  // lost work + restart overhead after failures
  double cum_preempt_lost_gpu_h = 0;
  double jain = 1;
};

struct SizeClass {
  std::string name;
  Dist jct, queue_delay, slowdown;
};

// Wait (first start - submit) of the jobs of one gang size: the workload's
// distinct GPU counts when there are at most kMaxWaitSizes of them (e.g. a
// --size-mix), else the size classes of SizeClass. A job that never started
// counts with its wait up to the end of the run, so a starved gang shows.
struct WaitBySize {
  std::string gpus;  // "4096", or a class "513+"
  int64_t jobs = 0;
  int64_t never_started = 0;
  double mean_s = 0, p99_s = 0, max_s = 0;
};
inline constexpr size_t kMaxWaitSizes = 16;

struct QueueShare {
  std::string queue;
  double gpu_hours = 0;
  double share = 0;  // of all allocated GPU-hours
  // Equal share; under `queues`, the queue's entitlement in the manager's
  // tree (its weighted share of the fleet).
  double entitlement = 0;
  double mean_jct_s = 0;
  double mean_wait_s = 0;   // first start - submit, over completed jobs
  int64_t preemptions = 0;  // times its jobs were stopped to make room
  // GPU-hours and share of those allocated while at least two queues had
  // jobs waiting: what the policy decides between queues (over a whole run
  // every queue gets its demand). 0 when never contended.
  double contended_gpu_hours = 0;
  double contended_share = 0;
};

struct PolicyResult {
  std::string policy;
  std::string description;
  int64_t jobs = 0;
  int64_t completed = 0;
  int64_t rejected = 0;    // larger than the fleet
  int64_t unfinished = 0;  // stuck when the simulation ended
  Dist jct, queue_delay, slowdown;
  std::vector<SizeClass> by_size;
  double jain_mean = 1;
  std::vector<QueueShare> queues;

  // GPU-seconds. allocated == useful + failure_lost + failure_restart +
  // preempt_lost + preempt_restart + checkpoint_write (conservation).
  double allocated_gpu_s = 0;
  double useful_gpu_s = 0;
  double failure_lost_gpu_s = 0;
  double failure_restart_gpu_s = 0;
  double preempt_lost_gpu_s = 0;
  double preempt_restart_gpu_s = 0;
  double checkpoint_write_gpu_s =
      0;                     // periodic checkpoints' write time (SimJob::checkpoint_cost_s)
  double demand_gpu_s = 0;   // sum of gpus * duration over completed jobs
  double goodput = 1;        // useful / allocated
  double goodput_bound = 1;  // what checkpoint interval and restart overhead allow
  double utilization = 0;    // allocated / (capacity * makespan)
  // Utilization (allocated / capacity) over the time at least one job waited
  // (pending > 0), time-weighted: mean, 5th percentile, median and minimum
  // (0.1% resolution), and the share of the run during which work waited.
  // Capacity that work could use but did not is what these show: a gang
  // draining room for itself, fragmentation, repairs.
  double util_waiting_mean = 0;
  double util_waiting_p5 = 0;
  double util_waiting_p50 = 0;
  double util_waiting_min = 0;
  double waiting_fraction = 0;
  std::vector<WaitBySize> wait_by_gpus;

  int64_t gpu_failures = 0;
  int64_t node_failures = 0;
  int64_t gang_kills = 0;
  int64_t preemptions = 0;
  int64_t loans = 0;  // queues policy: jobs started on reserved room lent (lend_reserved)
  int64_t spare_swaps = 0;
  // After a failure kill: time until the gang runs again (waiting for
  // capacity or a repair; hot spares shorten it), and GPUs x that time.
  double mean_restart_wait_s = 0;
  double restart_wait_gpu_s = 0;
  // Useful GPU time over capacity x makespan.
  double effective_utilization = 0;

  double makespan_s = 0;  // last finish - first submit
  double lower_bound_s = 0;
  double makespan_ratio = 0;
  int64_t capacity_gpus = 0;
  int32_t hot_spare_nodes = 0;

  int64_t schedule_calls = 0;
  int64_t placements = 0;
  int64_t events = 0;
  double wall_s = 0;
  double decisions_per_s = 0;

  std::vector<Sample> series;
  std::vector<double> jct_by_job;  // by workload index; NaN when not completed
  std::vector<double> jct_sorted;  // for CDFs (subsampled to <= 2000 points)
};

// Runs one policy. `wall` measures the run's own duration (decisions/s);
// `registry` is the plugin registry to build the scheduler from (the sim
// queue sorts are added to a copy).
absl::StatusOr<PolicyResult> RunReplay(const Workload& w, const SimOptions& opt,
                                       const PolicySpec& policy,
                                       const sched::PluginRegistry& registry, Clock* wall);

// Fills the per-job metrics of `res` (JCT, queueing delay, slowdown overall
// and by size, the JCT CDF, queue shares) from each job's first start and
// finish (NaN: not completed) and the GPU-seconds allocated per queue.
void AddJobMetrics(const Workload& w, const std::vector<double>& first_start,
                   const std::vector<double>& finish, const std::vector<double>& q_alloc,
                   bool keep_job_jcts, PolicyResult* res);

// The `queues` policy's configuration when none is given: every workload
// queue a top-level leaf of weight 1 guaranteed an equal share (rounded down,
// milli-GPU) of each GPU model's `gpus_by_model` (name -> GPUs), borrowing
// without limit; everything else as the server's defaults.
sched::QueueManagerConfig DefaultReplayQueueConfig(
    const Workload& w, const std::vector<std::pair<std::string, int64_t>>& gpus_by_model);
// Reads a queue configuration file (the server's --queue-config YAML,
// config/queue_config.h). Errors start with "<flag> <path>: " and name the field.
absl::StatusOr<sched::QueueManagerConfig> LoadReplayQueueConfig(const std::string& flag,
                                                                const std::string& path);

// Makespan lower bound (traces README): with capacity C,
// LB = max(max_j (a_j + p_j), max_t [t + sum_{a_j >= t} g_j p_j / C]) - min_j a_j.
double MakespanLowerBound(const Workload& w, int64_t capacity_gpus);

// Goodput allowed by checkpoints and restarts: a job of g GPUs on n nodes
// fails at rate g / (I_gpu * fleet GPUs) + n / (I_node * fleet nodes) and
// loses on average min(C, p) / 2 + R per failure, so the lost fraction is
// sum_j g_j p_j rate_j (C_j/2 + R_j) / sum_j g_j p_j (first order; no wait
// for capacity after a failure).
double GoodputBound(const Workload& w, const SimOptions& opt);

// Per-GPU mean time between failures implied by the failure options: GPU
// failures at 1 / (I_gpu x fleet GPUs) per GPU plus node failures at
// 1 / (I_node x fleet nodes) per node, shared by its GPUs. 0 without failures.
double FleetGpuMtbfSeconds(const SimOptions& opt);

// Checkpoint cadence chosen by Tessera (--cadence young-daly): every job
// with a checkpoint cost gets sched::CheckpointIntervalSeconds(cost,
// gpu_mtbf_s, gpus), the interval the server's controller writes in
// status.checkpointIntervalSeconds; jobs without a cost keep theirs.
// Returns how many jobs were changed. gpu_mtbf_s <= 0 changes nothing.
int64_t ApplyYoungDalyCadence(double gpu_mtbf_s, Workload* w);

}  // namespace tessera::sim::replay
