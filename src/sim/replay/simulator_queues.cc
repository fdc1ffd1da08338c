// The `queues` replay policy: the simulator drives the server's queueing
// layer, sched::QueueManager, instead of its own pending loop, and acts on
// the manager's events as the server's SchedulingController does
// (controller/queue_cycle.cc, node_lifecycle.cc):
//
//   arrival            Submit(job, {priority class, expected runtime}); the
//                      job's queue is its workload queue (a leaf).
//   each instant       one Cycle(now) after the instant's events when anything
//                      changed (arrival, completion, failure, repair, victim
//                      exit, kill deadline), and at least every
//                      SimOptions::queue_idle_cycle_s while jobs wait (the
//                      server's idle cycle: victims pass minRuntime).
//   kStarted           the job runs on the placement the manager bound in the
//                      ClusterState.
//   kCheckpointSignal  the victim writes a checkpoint and exits
//                      preempt_exit_s later (VictimExited) when that is before
//                      its deadline; a Cycle runs at the deadline either way.
//   kKilled            the victim's segment ends with preemption accounting:
//                      progress is kept up to its checkpoint at the signal
//                      when that checkpoint was complete (preemption_checkpoints
//                      and exited in time), else up to its last periodic
//                      checkpoint. It is pending in the manager again.
//   kNominated         nothing: the preemptor waits inside the manager.
//   kShrunk            cannot occur: a preemption shrinks only elastic jobs
//                      and trace jobs are rigid gangs (never gang.elastic).
//   completion         Finish.
//   failure kill       Finish, then Submit again: the controller's Requeue for
//                      NodeLost (the gang keeps its creation time and, with
//                      restart_killed_first, SubmitOptions::restart).
// GPU health goes through the ClusterState (simulator_failures.cc); the
// manager reads the fleet capacity when it is created, as the controller
// does at start (RefreshCapacity runs when nodes are added or removed, which
// the simulator never does).
//
// Expected runtimes (for backfill) are the oracle: the job's remaining run
// time plus its restart overhead. Periodic checkpoints are reported to the
// manager (ReportCheckpoint) before each cycle, as the controller reports
// Ready Checkpoint objects, so its victim choice weighs the work each victim
// would lose since its last checkpoint.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "config/queue_config.h"
#include "sim/replay/simulator_internal.h"

namespace tessera::sim::replay {

sched::QueueManagerConfig DefaultReplayQueueConfig(
    const Workload& w, const std::vector<std::pair<std::string, int64_t>>& gpus_by_model) {
  sched::QueueManagerConfig c;
  const int64_t n = std::max<int64_t>(1, static_cast<int64_t>(w.queues.size()));
  for (const std::string& name : w.queues) {
    sched::QueueSpec q;
    q.name = name;
    for (const auto& [model, gpus] : gpus_by_model) {
      q.quotas[absl::StrCat("gpu/", model)] = {.guaranteed = gpus * model::kMilliPerGpu / n};
    }
    c.tree.queues.push_back(std::move(q));
  }
  return c;
}

absl::StatusOr<sched::QueueManagerConfig> LoadReplayQueueConfig(const std::string& flag,
                                                                const std::string& path) {
  auto c = config::LoadQueueConfigFile(path);
  if (!c.ok())
    return absl::Status(c.status().code(), absl::StrCat(flag, " ", c.status().message()));
  return c;
}

namespace internal {

namespace {

int32_t JobIndexOfKey(absl::string_view key) {
  const size_t slash = key.find('/');
  return static_cast<int32_t>(
      SimJobIndex(slash == absl::string_view::npos ? key : key.substr(slash + 1)));
}

}  // namespace

absl::Status Sim::BuildQueueManager() {
  sched::QueueManagerConfig c;
  if (opt_.queue_config.has_value()) {
    c = *opt_.queue_config;
  } else {
    // Regular nodes only: hot spares are held back, not shared out.
    std::vector<std::pair<std::string, int64_t>> gpus;
    for (sched::NodeId id = 0; id < opt_.cluster.nodes; ++id) {
      const sched::NodeState& st = state_.state(id);
      if (st.model == sched::kNoModel) continue;
      const std::string& m = state_.model_name(st.model);
      auto it = std::find_if(gpus.begin(), gpus.end(), [&](const auto& p) { return p.first == m; });
      if (it == gpus.end()) {
        gpus.push_back({m, st.num_gpus});
      } else {
        it->second += st.num_gpus;
      }
    }
    c = DefaultReplayQueueConfig(w_, gpus);
  }
  if (opt_.reservations > 0) c.reservations = opt_.reservations;
  if (opt_.learned_estimates) c.learn_runtimes = true;
  if (opt_.lend_reserved) c.lend_reserved = true;
  if (opt_.min_loan) c.min_loan = *opt_.min_loan;
  c.profile = policy_.profile;
  c.extra_plugins = [this](sched::PluginRegistry* r) { return plugins_.Register(r); };
  for (const std::string& pc : w_.priority_classes) {
    if (!c.priority_classes.contains(pc)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "queue config: priorityClasses: the workload's class \"", pc,
          "\" is not defined (known: ",
          absl::StrJoin(c.priority_classes, ", ",
                        [](std::string* out, const auto& kv) { out->append(kv.first); }),
          ")"));
    }
  }
  auto qm = sched::QueueManager::Create(std::move(c), &state_);
  if (!qm.ok()) return qm.status();
  std::vector<bool> used(w_.queues.size(), false);
  for (const SimJob& j : w_.jobs) used[j.queue] = true;
  for (size_t q = 0; q < w_.queues.size(); ++q) {
    const int id = (*qm)->tree().Find(w_.queues[q]);
    if (used[q] && (id < 0 || !(*qm)->tree().IsLeaf(id))) {
      return absl::InvalidArgumentError(
          absl::StrCat("queue config: queues: the workload's queue \"", w_.queues[q], "\" is ",
                       id < 0 ? "not defined" : "not a leaf queue", "; every workload queue (",
                       absl::StrJoin(w_.queues, ", "), ") must be a leaf"));
    }
  }
  qm_ = std::move(*qm);
  // Submit treats a creation time at the Unix epoch as unset; keep every
  // virtual time clear of it.
  epoch_ = absl::FromUnixSeconds(1'600'000'000);
  return absl::OkStatus();
}

sched::SubmitOptions Sim::QueueSubmitOptions(int32_t i) const {
  const SimJob& sj = w_.jobs[i];
  const JobRt& r = rt_[i];
  sched::SubmitOptions o;
  if (sj.priority_class >= 0) o.priority_class = w_.priority_classes[sj.priority_class];
  const double remaining =
      sj.duration_s - r.progress0 + (r.restart_cause != Cause::kNone ? sj.restart_s : 0);
  o.expected_runtime = opt_.learned_estimates ? absl::ZeroDuration()
                                              : absl::Seconds(std::max(1.0, std::ceil(remaining)));
  // As the controller does for a NodeLost gang (restart_killed_first off: not).
  o.restart = opt_.restart_killed_first && r.restart_cause == Cause::kFailure;
  // Every replayed job checkpoints when signalled (when the run models that).
  o.checkpoints = opt_.preemption_checkpoints;
  return o;
}

void Sim::QueueSubmit(int32_t i) {
  absl::Status s = qm_->Submit(*rt_[i].job, QueueSubmitOptions(i), clock_.Now());
  if (!s.ok() && queue_error_.ok()) {
    queue_error_ = absl::Status(s.code(), absl::StrCat(rt_[i].job->name, ": ", s.message()));
  }
}

void Sim::QueueRequeue(int32_t i) {
  (void)qm_->Finish(rt_[i].job->key(), clock_.Now());
  QueueSubmit(i);
}

void Sim::QueueVictimExit(int32_t i) {
  if (qm_->VictimExited(rt_[i].job->key(), clock_.Now()).ok()) capacity_changed_ = true;
}

void Sim::QueueReportCheckpoints() {
  while (!checkpoints_due_.empty() && checkpoints_due_.top().t <= now_) {
    const CheckpointDue due = checkpoints_due_.top();
    checkpoints_due_.pop();
    const JobRt& r = rt_[due.job];
    if (r.status != Status::kRunning || r.epoch != due.epoch) continue;  // stopped since
    // The latest checkpoint up to now (Stop keeps progress up to the same one).
    // A checkpoint is complete checkpoint_s of progress and its write after the last one.
    const double every = w_.jobs[due.job].checkpoint_s + w_.jobs[due.job].checkpoint_cost_s;
    const double first = r.seg_start + r.seg_overhead;
    double last = first + std::floor((now_ - first) / every) * every;
    // At a checkpoint's very moment the division can round down a whole
    // period: that checkpoint is complete, and the next one is due after now
    // (else this loop would push the same due time forever).
    if (last + every <= now_) last += every;
    (void)qm_->ReportCheckpoint(r.job->key(), epoch_ + absl::Seconds(last));
    checkpoints_due_.push({last + every, due.job, due.epoch});
  }
}

void Sim::QueueCycle() {
  QueueReportCheckpoints();
  sched::CycleReport rep = qm_->Cycle(clock_.Now());
  res_.schedule_calls += rep.attempts;
  for (const sched::QueueEvent& ev : rep.events) QueueEvent(ev);
  res_.loans += rep.loans;
  // A loan of reserved room ends: its lender may take the room back then.
  if (const absl::Time end = qm_->NextLoanEnd(clock_.Now()); end != absl::InfiniteFuture()) {
    const double t = absl::ToDoubleSeconds(end - epoch_);
    if (t > now_ && t != loan_wake_) {
      loan_wake_ = t;
      Push(t, kDeadline, 0, 0);
    }
  }
  if (pending_count_ > 0 && !idle_cycle_pending_ && opt_.queue_idle_cycle_s > 0) {
    idle_cycle_pending_ = true;
    Push(now_ + opt_.queue_idle_cycle_s, kIdleCycle, 0, 0);
  }
}

void Sim::QueueEvent(const sched::QueueEvent& ev) {
  const int32_t i = JobIndexOfKey(ev.job);
  if (i < 0 || i >= static_cast<int32_t>(rt_.size())) return;
  JobRt& r = rt_[i];
  switch (ev.kind) {
    case sched::QueueEvent::Kind::kStarted:
      if (r.status == Status::kPending) Start(i);
      break;
    case sched::QueueEvent::Kind::kCheckpointSignal: {
      if (r.status != Status::kRunning) break;
      r.signal_at = now_;
      const double deadline = absl::ToDoubleSeconds(ev.deadline - epoch_);
      if (opt_.preemption_checkpoints && now_ + opt_.preempt_exit_s < deadline) {
        Push(now_ + opt_.preempt_exit_s, kVictimExit, i, r.epoch);
      }
      if (deadline > now_) Push(deadline, kDeadline, i, r.epoch);
      break;
    }
    case sched::QueueEvent::Kind::kKilled: {
      if (r.status != Status::kRunning) break;
      // The checkpoint written on the signal counts only if it was complete.
      const bool checkpointed = opt_.preemption_checkpoints && r.signal_at >= 0 &&
                                r.signal_at + opt_.preempt_exit_s <= now_;
      Stop(i, Cause::kPreempt, checkpointed ? r.signal_at : -INFINITY);
      ++res_.preemptions;
      AddPending(i);  // pending inside the manager already: not submitted again
      break;
    }
    case sched::QueueEvent::Kind::kNominated:
      break;
    case sched::QueueEvent::Kind::kShrunk:
      // Only elastic jobs (GangPolicy::elastic) are shrunk by preemption, and
      // the replay submits none (trace jobs are rigid gangs): it cannot occur.
      break;
  }
}

void Sim::QueueMetrics() {
  const sched::QueueTree& tree = qm_->tree();
  for (QueueShare& s : res_.queues) {
    const int id = tree.Find(s.queue);
    s.entitlement = id >= 0 ? tree.entitlement(id) : 0;
  }
}

}  // namespace internal
}  // namespace tessera::sim::replay
