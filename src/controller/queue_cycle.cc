// The queueing half of SchedulingController: Queue objects -> the live queue
// tree, job membership in the QueueManager, one queue cycle per step and the
// writes its events ask for, per-queue status and metrics
// (see scheduling_controller.h).
#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "api/job_accounting.h"
#include "controller/controller_internal.h"
#include "controller/decision_spans.h"
#include "controller/job_codec.h"
#include "controller/queue_codec.h"
#include "controller/scheduling_controller.h"

namespace tessera::controller {

using namespace internal;  // NOLINT: the module's own helpers

// --- Queue objects and checkpoints ------------------------------------------

void SchedulingController::OnQueue(const Json& obj, bool deleted) {
  const std::string name = Str(obj["metadata"], "name");
  if (deleted) {
    queue_objects_.erase(name);
    queue_specs_.erase(name);
    queue_status_written_.erase(name);
    queues_dirty_ = true;
    return;
  }
  // Only a spec change rebuilds the tree; our own status writes come back
  // as events too.
  const std::string spec = obj.contains("spec") ? obj["spec"].dump() : "{}";
  queue_objects_[name] = obj;
  auto [it, inserted] = queue_specs_.try_emplace(name, spec);
  if (inserted || it->second != spec) {
    it->second = spec;
    queues_dirty_ = true;
  }
}

void SchedulingController::OnCheckpoint(const Json& obj) {
  // A Ready checkpoint lowers the work a preemption of its job would lose.
  if (Str(StatusOf(obj), "phase") != "Ready" || !obj.contains("spec")) return;
  const std::string ns = Str(obj["metadata"], "namespace", "default");
  auto it = jobs_.find(ObjectKey("trainingjobs", ns, Str(obj["spec"], "jobName")));
  if (it == jobs_.end() || !it->second->bound) return;
  // When it was written (the API server stamps creationTimestamp), not when
  // this controller saw it: at a start, every stored checkpoint is seen at once.
  const absl::Time now = clock_.Now();
  absl::Time at;
  if (!ParseTimestamp(Str(obj["metadata"], "creationTimestamp"), &at) || at > now) at = now;
  JobRec& rec = *it->second;
  if (!rec.in_qm) {
    rec.restored_checkpoint = std::max(rec.restored_checkpoint, at);  // Restore passes it on
    return;
  }
  (void)qm_->ReportCheckpoint(rec.job->key(), at);
}

// --- Membership -------------------------------------------------------------

void SchedulingController::Enqueue(JobRec& rec) {
  if (!rec.job) return;
  to_submit_.push_back(rec.key);
  if (qm_->tree().Find(rec.job->queue) < 0) queues_dirty_ = true;  // a new implicit queue
}

void SchedulingController::ReleaseMemory(JobRec& rec, bool completed) {
  if (rec.job && rec.in_qm) {
    // Returns its GPUs when it ran.
    (void)(completed ? qm_->Completed(rec.job->key(), clock_.Now())
                     : qm_->Finish(rec.job->key(), clock_.Now()));
  } else if (rec.job && rec.bound) {
    (void)cluster_->Release(rec.job->key());
  }
  rec.in_qm = false;
  rec.bound = false;
}

void SchedulingController::ArmRuntimeLimit(JobRec& rec, absl::Time since) {
  rec.bound_since = since;
  if (rec.max_runtime > absl::ZeroDuration()) {
    runtime_deadlines_.insert({since + rec.max_runtime, rec.key});
  }
}

void SchedulingController::RuntimeLimits() {
  const absl::Time now = clock_.Now();
  while (!runtime_deadlines_.empty() && runtime_deadlines_.begin()->first <= now) {
    const auto [deadline, key] = *runtime_deadlines_.begin();
    runtime_deadlines_.erase(runtime_deadlines_.begin());
    auto it = jobs_.find(key);
    if (it == jobs_.end()) continue;
    JobRec& rec = *it->second;
    if (!rec.bound || Terminal(rec.phase) || rec.max_runtime <= absl::ZeroDuration() ||
        rec.bound_since + rec.max_runtime != deadline) {
      continue;  // unbound, finished or rebound since
    }
    const std::string msg = absl::StrCat(
        "ran ", absl::FormatDuration(now - rec.bound_since), " since it was scheduled, past its ",
        "maxRuntimeSeconds (", absl::ToInt64Seconds(rec.max_runtime), "): stopped");
    // The store first (the agents stop the members), then the GPUs in memory.
    if (absl::Status s = SetJobPhase(rec, "Failed", {"DeadlineExceeded", msg, true, true}, true);
        !s.ok()) {
      options_.log.Error(
          "runtime limit not written; retrying",
          {{"job", rec.name}, {"namespace", rec.ns}, {"error", std::string(s.message())}});
      runtime_deadlines_.insert({deadline, key});
      return;
    }
    ReleaseMemory(rec);
    ++stats_.deadline_exceeded;
    cycle_needed_ = true;
  }
}

void SchedulingController::RebuildQueues() {
  queues_dirty_ = false;
  std::set<std::string> used;
  for (const auto& [key, rec] : jobs_) {
    if (rec->job && !Terminal(rec->phase)) used.insert(rec->job->queue);
  }
  std::vector<Json> objs;
  std::vector<std::string> names;
  for (const auto& [name, obj] : queue_objects_) names.push_back(name);
  std::sort(names.begin(), names.end());  // deterministic tree order
  objs.reserve(names.size());
  for (const std::string& n : names) objs.push_back(queue_objects_.at(n));
  std::vector<std::string> problems;
  sched::QueueManagerConfig c = BuildQueueConfig(options_.queues, objs, used, &problems);
  absl::Status s = qm_->Reconfigure(std::move(c));
  if (!s.ok()) problems.push_back(std::string(s.message()));
  queue_problem_ = absl::StrJoin(problems, "; ");
  if (!queue_problem_.empty()) {
    options_.log.Warn(s.ok() ? "queue tree has problems" : "queue tree refused; previous kept",
                      {{"error", queue_problem_}});
  }
  ++stats_.queue_rebuilds;
  if (s.ok() && seed_fair_share_) {
    // After a restart: resume each queue's fair-share history where the
    // previous controller last wrote it (WriteQueueStatus), rather than
    // from zero, so a restart does not forgive a team's recent usage.
    seed_fair_share_ = false;
    for (const auto& [name, obj] : queue_objects_) {
      const Json& st = obj.contains("status") ? obj["status"] : Json::object();
      if (!st.contains("decayedUsage") || !st["decayedUsage"].is_number()) continue;
      const double credit = st.contains("burstCredit") && st["burstCredit"].is_number()
                                ? st["burstCredit"].get<double>()
                                : 0.0;
      (void)qm_->SetFairShareHistory(name, st["decayedUsage"].get<double>(), credit);
    }
  }
  queue_status_time_.clear();  // every Queue's status is rewritten
  // Jobs the previous tree refused may fit this one.
  for (const auto& [key, rec] : jobs_) {
    if (!rec->queue_error.empty()) to_submit_.push_back(key);
  }
}

void SchedulingController::FlushSubmissions(absl::Time now) {
  std::vector<std::string> victims;  // restored with a preemption in flight
  for (const std::string& key : to_restore_) {
    auto it = jobs_.find(key);
    if (it == jobs_.end() || !it->second->bound || !it->second->job || it->second->in_qm) continue;
    JobRec& rec = *it->second;
    const sched::Placement* p = cluster_->FindPlacement(rec.job->key());
    absl::Status s = p == nullptr ? absl::NotFoundError("no placement")
                                  : qm_->Restore(*rec.job, *p,
                                                 {.expected_runtime = rec.max_runtime,
                                                  .started = rec.last_resize,
                                                  .last_checkpoint = rec.restored_checkpoint},
                                                 now);
    if (s.ok()) {
      rec.in_qm = true;
      if (rec.inflight_preemption) victims.push_back(key);
    } else {
      rec.inflight_preemption.reset();  // nothing to carry on without the job in memory
      // Still bound (the GPUs stay taken), but not charged to a queue.
      options_.log.Warn("bound job not charged to its queue",
                        {{"job", rec.name},
                         {"namespace", rec.ns},
                         {"queue", rec.job->queue},
                         {"error", std::string(s.message())}});
    }
  }
  to_restore_.clear();
  std::vector<std::string> keys;
  keys.swap(to_submit_);
  std::set<std::string> seen;
  for (const std::string& key : keys) {
    if (!seen.insert(key).second) continue;
    auto it = jobs_.find(key);
    if (it == jobs_.end()) continue;
    JobRec& rec = *it->second;
    if (!rec.job || rec.bound || rec.in_qm || rec.blocked || Terminal(rec.phase) ||
        (rec.phase == "Suspended" && !QueuedButNotWritten(key))) {
      continue;
    }
    // A runtime limit is also the backfill's estimate: a job that must end by
    // then may start in a reservation's shadow (Slurm's time limits).
    // A gang stopped by a lost node or GPU keeps its place (ahead of the fair-share order).
    model::Job job = *rec.job;
    if (job.gang.start_members > 0 && rec.desired_written > job.gang.start_members) {
      // An autoscaled service placed again (after a lost node, a preemption,
      // a suspension) starts with the replicas its autoscaler last wanted,
      // not replicas.min: the load it served has not gone away, and growing
      // back a doubling per round of readings would take minutes.
      job.gang.start_members =
          static_cast<int32_t>(std::min<int64_t>(rec.desired_written, job.total_members()));
    }
    absl::Status s = qm_->Submit(std::move(job),
                                 {.expected_runtime = rec.max_runtime,
                                  .restart = rec.phase == "NodeLost",
                                  .checkpoints = rec.checkpoints},
                                 now);
    if (s.ok()) {
      rec.in_qm = true;
      if (!rec.queue_error.empty()) {
        // The refusal no longer holds (a queue or GPU model appeared, the spec was fixed): say so
        // now, not only once the job is placed, so that no stale QueueRejected condition stays.
        rec.queue_error.clear();
        (void)SetJobPhase(
            rec, rec.phase,
            {"QueueAccepted", absl::StrCat("waiting: accepted by queue ", rec.job->queue), false,
             false},
            false);
      }
      continue;
    }
    // Waits until the queue tree or the fleet changes (RebuildQueues and new
    // nodes resubmit it).
    rec.queue_error = std::string(s.message());
    const std::string msg = absl::StrCat("waiting: ", rec.queue_error);
    if (msg != rec.last_message) {
      // A Warning Event too (once per distinct reason): `describe` and `get events` show it.
      (void)SetJobPhase(rec, rec.phase, {"QueueRejected", msg, true, true}, false);
    }
  }
  // Preemptions in flight when the previous controller stopped, now that
  // their preemptors are pending again: they complete as decided.
  for (const std::string& key : victims) RestoreInflightPreemption(*jobs_.at(key), now);
}

void SchedulingController::RestoreInflightPreemption(JobRec& rec, absl::Time now) {
  InflightPreemption inflight = *std::move(rec.inflight_preemption);
  rec.inflight_preemption.reset();
  const std::string victim = rec.job->key();
  absl::Status s =
      qm_->RestoreVictim(victim, inflight.preemptor, inflight.deadline, inflight.dropping);
  if (s.ok()) ++stats_.preemptions_resumed;
  if (s.ok() && inflight.exited) s = qm_->VictimExited(victim, now);
  if (s.ok()) {
    cycle_needed_ = true;
    return;
  }
  // The job runs on, spared as a cancelled preemptor's victims are; its
  // condition stays True, so an exit that answers the signal it got is
  // still a preemption (requeued from its checkpoint), not a success.
  options_.log.Info(
      "preemption in flight not restored",
      {{"job", rec.name}, {"namespace", rec.ns}, {"error", std::string(s.message())}});
}

// --- Scheduling -------------------------------------------------------------

void SchedulingController::RunCycles() {
  const absl::Time now = clock_.Now();
  if (queues_dirty_) RebuildQueues();
  if (capacity_dirty_) {
    capacity_dirty_ = false;
    qm_->RefreshCapacity();
    // New GPU models may make refused jobs valid.
    for (const auto& [key, rec] : jobs_) {
      if (!rec->queue_error.empty()) to_submit_.push_back(key);
    }
  }
  const bool submissions = !to_submit_.empty() || !to_restore_.empty();
  FlushSubmissions(now);
  if (!cycle_needed_ && !submissions && now < next_deadline_ &&
      now - last_cycle_ < options_.idle_cycle) {
    WriteAdmissions();
    WaitingReasons(now);  // gang timeouts
    WriteQueueStatus(now);
    return;
  }
  cycle_needed_ = false;
  last_cycle_ = now;
  next_deadline_ = absl::InfiniteFuture();
  const absl::Time cycle_start = clock_.Now();
  decision_mark_ = cycle_start;
  sched::CycleReport rep = qm_->Cycle(now);
  stats_.cycles += rep.attempts;
  if (metrics_) {
    metrics_->attempts.With({"scheduled"}).Inc(rep.started);
    metrics_->attempts.With({"unschedulable"}).Inc(rep.attempts - rep.started);
    if (rep.attempts > 0) {
      metrics_->duration.With({rep.started > 0 ? "scheduled" : "unschedulable"})
          .Observe(absl::ToDoubleSeconds(clock_.Now() - cycle_start));
    }
  }
  // Consecutive bindings are written together; any other write (an unbinding first of all)
  // waits until those before it are stored, so the store sees the cycle's writes in its order.
  std::vector<PendingBinding> bindings;
  for (const sched::QueueEvent& ev : rep.events) {
    JobRec* rec = JobBySchedKey(ev.job);
    if (rec == nullptr) continue;
    if (ev.kind != sched::QueueEvent::Kind::kStarted && !bindings.empty()) {
      WriteBindings(&bindings, now);
    }
    switch (ev.kind) {
      case sched::QueueEvent::Kind::kStarted:
        bindings.push_back({rec, ev.message});
        break;
      case sched::QueueEvent::Kind::kCheckpointSignal: {
        // A shrink plan takes only ev.dropped; the rest of the job runs on.
        double gpus = 0;
        sched::Placement taken;
        if (const sched::Placement* p = cluster_->FindPlacement(ev.job)) taken = *p;
        if (!ev.dropped.empty()) taken.members = ev.dropped;
        for (const auto& m : taken.members) {
          for (const auto& g : m.gpus) gpus += g.milli / 1000.0;
        }
        if (metrics_) {
          metrics_->preemptions.With({}).Inc();
          metrics_->preempted_gpus.With({}).Inc(gpus);
        }
        const std::string at =
            absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", ev.deadline, absl::UTCTimeZone());
        const std::string msg =
            ev.dropped.empty()
                ? absl::StrCat("checkpoint now: preempted for ", ev.other, "; stopped at ", at)
                : absl::StrCat("checkpoint now: ", ev.dropped.size(), " member(s) on ",
                               absl::StrJoin(NodeNames(taken, *cluster_), ", "), " preempted for ",
                               ev.other, "; elastic: shrunk at ", at);
        // What a restarted controller needs to carry this preemption on
        // (QueueManager::RestoreVictim): present while the condition is True.
        Json preemption = {{"preemptor", ev.other}, {"deadline", at}};
        if (!ev.dropped.empty() && rec->job) {
          Json& dropping = preemption["dropping"] = Json::array();
          for (const sched::MemberPlacement& m : ev.dropped) {
            dropping.push_back({{"group", rec->job->groups[m.group].name}, {"member", m.member}});
          }
        }
        int64_t base = 0;
        absl::StatusOr<int64_t> w = Update(
            rec->key, -1,
            [&](Json& o) {
              Json& st = StatusOf(o);
              if (Terminal(Str(st, "phase"))) return false;
              SetCondition(st, "PreemptionPending", "True", "Preempting", msg, now);
              st["preemption"] = preemption;
              return true;
            },
            {"Preempting", msg, true, true, {{"preemptor", ev.other}, {"gpus_evicted", gpus}}},
            &base);
        if (w.ok() && base == rec->revision) rec->revision = *w;
        break;
      }
      case sched::QueueEvent::Kind::kKilled: {
        // The QueueManager already released the victim in memory and holds
        // it as pending; write the unbinding before any binding that follows.
        Json resume = rec->kind == "TrainingJob" ? ResumePoint(*rec) : Json();
        std::string msg = absl::StrCat("preempted by ", ev.other, " (", ev.message, ")");
        if (resume.is_object()) {
          absl::StrAppend(&msg, "; will resume from checkpoint ", Str(resume, "checkpoint"),
                          " (step ", IntOr(resume, "step", 0), ")");
        }
        bool terminal = false;
        int64_t base = 0;
        absl::StatusOr<int64_t> w = Update(
            rec->key, -1,
            [&](Json& o) {
              Json& st = StatusOf(o);
              if (Terminal(Str(st, "phase"))) {
                terminal = true;
                return false;
              }
              st["phase"] = "Preempted";
              st["reason"] = "Preempted";
              st["message"] = msg;
              api::ReleasePlacement(st, now);
              if (resume.is_object()) st["resumeFrom"] = resume;
              SetCondition(st, "Scheduled", "False", "Preempted", msg, now);
              EndPreemption(st, "Preempted", msg, now);
              return true;
            },
            {"Preempted", msg, true}, &base);
        rec->bound = false;
        if (metrics_) metrics_->requeues.With({"Preempted"}).Inc();
        if (terminal) {
          ReleaseMemory(*rec);
          break;
        }
        if (!w.ok()) {
          options_.log.Error("preempted job's unbinding not written; re-listing",
                             {{"job", rec->name},
                              {"namespace", rec->ns},
                              {"error", std::string(w.status().message())}});
          resync_ = true;
          return;  // no binding of this cycle is written
        }
        rec->phase = "Preempted";
        rec->last_message = msg;
        if (base == rec->revision) rec->revision = *w;
        rec->queued_since = now;
        ++stats_.preempted;
        ++stats_.requeued;
        break;
      }
      case sched::QueueEvent::Kind::kShrunk:
        // As kKilled: memory already gave the dropped members' GPUs away;
        // the smaller binding is written before any binding that follows.
        if (!WritePreemptionShrink(*rec, ev, now)) return;
        break;
      case sched::QueueEvent::Kind::kNominated:
        if (absl::StrCat("waiting: ", ev.message) != rec->last_message) {
          (void)SetJobPhase(*rec, rec->phase, {"Nominated", absl::StrCat("waiting: ", ev.message)},
                            false);
        }
        break;
    }
  }
  WriteBindings(&bindings, now);
  // The jobs admitted since the last cycle that it did not bind: Queued now, before anything
  // else is written about them (their waiting reasons).
  WriteAdmissions();
  // Elastic jobs grow back only after pending work had its turn.
  GrowElastic(now);
  AutoscaleServices(now);
  // The next victim kill the QueueManager will carry out.
  const sched::RunningSet& running = qm_->running();
  for (int32_t slot = 0; slot < running.num_slots(); ++slot) {
    if (running.live(slot) && running.at(slot).terminating) {
      next_deadline_ = std::min(next_deadline_, running.at(slot).kill_at);
    }
  }
  // A loan of reserved room (backfill.lendReserved) ends: its lender may take the room back.
  next_deadline_ = std::min(next_deadline_, qm_->NextLoanEnd(now));
  WaitingReasons(now);
  WriteQueueStatus(now);
}

void SchedulingController::WaitingReasons(absl::Time now) {
  std::vector<JobRec*> waiting;
  for (const auto& [key, rec] : jobs_) {
    if (rec->in_qm && !rec->bound && !Terminal(rec->phase)) waiting.push_back(rec.get());
  }
  std::sort(waiting.begin(), waiting.end(),
            [](const JobRec* a, const JobRec* b) { return a->key < b->key; });
  // New waiting reasons are written together (SetJobPhases), as admissions are: a burst of
  // thousands of jobs that cannot be placed yet would otherwise cost one commit each, serially,
  // and hold up the next step's admissions.
  std::vector<PhaseWrite> writes;
  for (JobRec* rec : waiting) {
    const model::Job& job = *rec->job;
    const std::string reason = qm_->WaitingReason(job.key());
    if (job.gang.timeout > absl::ZeroDuration() && now - rec->queued_since > job.gang.timeout &&
        qm_->Phase(job.key()) == sched::JobPhase::kPending) {
      ReleaseMemory(*rec);
      (void)SetJobPhase(*rec, "Failed",
                        {"GangTimeout",
                         absl::StrCat("gang not placed within ",
                                      absl::FormatDuration(job.gang.timeout), ": ", reason),
                         true},
                        true);
      continue;
    }
    if (reason.empty() || reason == "not tried yet") continue;
    const std::string msg = absl::StrCat("waiting: ", reason);
    const sched::WaitReason cls = qm_->WaitingReasonClass(job.key());
    if (msg != rec->last_message) {
      // A job no placement can ever hold (more GPUs than the fleet has, a member larger than any
      // node) gets one Warning Event when it turns so, not one per cycle: it will wait forever.
      const bool never = cls == sched::WaitReason::kUnschedulable && rec->wait_class != cls;
      // The backfill reservation's start is the job's start estimate (squeue's START).
      Json extra = {{"estimatedStartTime", nullptr}};
      const sched::Reservation* res =
          cls == sched::WaitReason::kReserved ? qm_->ReservationOf(job.key()) : nullptr;
      if (res != nullptr) {
        extra["estimatedStartTime"] = Timestamp(res->start);
      }
      PhaseWrite w;
      w.rec = rec;
      w.phase = rec->phase;
      w.why = {"Unschedulable", msg, never, never};
      w.status_reason = std::string(sched::WaitReasonName(cls));
      w.extra_status = std::move(extra);
      writes.push_back(std::move(w));
    }
    rec->wait_class = cls;
  }
  SetJobPhases(writes);
}

// --- Queue status and metrics -----------------------------------------------

namespace {

double Round3(double v) { return static_cast<double>(std::llround(v * 1000)) / 1000; }
double Round6(double v) { return static_cast<double>(std::llround(v * 1e6)) / 1e6; }

}  // namespace

void SchedulingController::WriteQueueStatus(absl::Time now) {
  if (queue_objects_.empty()) return;
  const sched::QueueTree& tree = qm_->tree();
  std::map<std::string, std::pair<int64_t, int64_t>> jobs;  // queue -> (pending, admitted)
  for (const auto& [key, rec] : jobs_) {
    if (!rec->in_qm) continue;
    auto& c = jobs[rec->job->queue];
    ++(rec->bound ? c.second : c.first);
  }
  std::vector<std::string> names;
  for (const auto& [name, obj] : queue_objects_) names.push_back(name);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    auto t = queue_status_time_.find(name);
    if (t != queue_status_time_.end() && now - t->second < options_.queue_status_period) continue;
    queue_status_time_[name] = now;
    const int q = tree.Find(name);
    Json st = {{"phase", "Active"}};
    if (q < 0) {
      st["message"] = absl::StrCat("not in the queue tree: ", queue_problem_);
    } else {
      sched::QueueStatus qs = tree.Status(q);
      Json gpus = Json::object();
      for (size_t r = 0; r < tree.resources().size(); ++r) {
        const std::string& res = tree.resources()[r];
        if (res.rfind("gpu/", 0) == 0) gpus[res.substr(4)] = Round3(tree.usage(q, r) / 1000.0);
      }
      int64_t pending = 0, admitted = 0;
      for (const auto& [qn, c] : jobs) {
        const int leaf = tree.Find(qn);
        if (leaf >= 0 && tree.IsAncestor(q, leaf)) {
          pending += c.first;
          admitted += c.second;
        }
      }
      st["gpusAllocated"] = gpus;
      st["pendingJobs"] = pending;
      st["admittedJobs"] = admitted;
      st["entitlement"] = Round3(qs.entitlement);
      st["fairShare"] = Round3(qs.fair_share);
      st["dominantShare"] = Round3(qs.usage);
      st["burstCreditGpuSeconds"] = Round3(qs.credit_gpu_seconds);
      // The fair-share history a restarted controller resumes from: decayed
      // dominant share and burst credit in share-seconds of the fleet.
      st["decayedUsage"] = Round6(qs.decayed_usage);
      st["burstCredit"] = Round3(qs.credit);
      st["borrowing"] = qs.borrowing;
      st["message"] =
          queue_problem_.empty() ? "" : absl::StrCat("previous tree in force: ", queue_problem_);
    }
    const std::string dump = st.dump();
    if (queue_status_written_[name] == dump) continue;
    int64_t base = 0;
    absl::StatusOr<int64_t> w = Update(
        ObjectKey("queues", "", name), -1,
        [&](Json& o) {
          Json& s = StatusOf(o);
          Json conds = s.contains("conditions") ? s["conditions"] : Json::array();
          o["status"] = st;
          o["status"]["conditions"] = conds;
          return true;
        },
        {"", "", false, false}, &base);
    if (w.ok()) queue_status_written_[name] = dump;
  }
}

void SchedulingController::UpdateGauges() {
  if (!metrics_) return;
  const absl::Time now = clock_.Now();
  if (now - gauges_at_ < kGaugeEvery) return;
  gauges_at_ = now;
  // Pending jobs change with every cycle; they are few next to nodes.
  metrics_->pending.Clear();
  metrics_->job_pending.Clear();
  std::vector<const JobRec*> waiting;
  for (const auto& [key, rec] : jobs_) {
    if (rec->job && !rec->bound && !Terminal(rec->phase) &&
        (rec->in_qm || !rec->queue_error.empty()))
      waiting.push_back(rec.get());
  }
  std::sort(waiting.begin(), waiting.end(),
            [](const JobRec* a, const JobRec* b) { return a->queued_since < b->queued_since; });
  for (const sched::QueueSpec& q : qm_->config().tree.queues) {
    metrics_->pending.With({q.name}).Set(0);
  }
  int exported = 0;
  for (const JobRec* rec : waiting) {
    metrics_->pending.With({rec->job->queue}).Add(1);
    // Per-job series are capped so a flood of pending jobs cannot blow up
    // the scrape; the alert only needs the long waiters (oldest first).
    if (exported++ < 1000) {
      // The bounded class, not the prose: a label that changes with every cycle's wording
      // would make a new series each time (the prose is in the job's status).
      const std::string_view reason =
          rec->queue_error.empty() ? sched::WaitReasonName(qm_->WaitingReasonClass(rec->job->key()))
                                   : std::string_view("QueueRejected");
      metrics_->job_pending.With({rec->job->ns, rec->job->name, std::string(reason)})
          .Set(absl::ToDoubleSeconds(now - rec->queued_since));
    }
  }
  // Per queue: usage, quota, fair share, credit.
  const sched::QueueTree& tree = qm_->tree();
  for (auto* f : {&metrics_->queue_gpus_allocated, &metrics_->queue_gpu_guaranteed,
                  &metrics_->queue_gpu_borrowing_limit, &metrics_->queue_fair_share,
                  &metrics_->queue_entitlement, &metrics_->queue_dominant_share,
                  &metrics_->queue_credit, &metrics_->queue_borrowing}) {
    f->Clear();
  }
  for (const sched::QueueSpec& spec : qm_->config().tree.queues) {
    const int q = tree.Find(spec.name);
    if (q < 0) continue;
    sched::QueueStatus st = tree.Status(q);
    metrics_->queue_fair_share.With({spec.name}).Set(st.fair_share);
    metrics_->queue_entitlement.With({spec.name}).Set(st.entitlement);
    metrics_->queue_dominant_share.With({spec.name}).Set(st.usage);
    metrics_->queue_credit.With({spec.name}).Set(st.credit_gpu_seconds);
    metrics_->queue_borrowing.With({spec.name}).Set(st.borrowing ? 1 : 0);
    for (size_t r = 0; r < tree.resources().size(); ++r) {
      const std::string& res = tree.resources()[r];
      if (res.rfind("gpu/", 0) != 0) continue;
      const std::string model = res.substr(4);
      metrics_->queue_gpus_allocated.With({spec.name, model}).Set(tree.usage(q, r) / 1000.0);
      auto it = spec.quotas.find(res);
      if (it == spec.quotas.end()) continue;
      metrics_->queue_gpu_guaranteed.With({spec.name, model}).Set(it->second.guaranteed / 1000.0);
      if (it->second.borrowing_limit >= 0) {
        metrics_->queue_gpu_borrowing_limit.With({spec.name, model})
            .Set(it->second.borrowing_limit / 1000.0);
      }
    }
  }
  // Fleet gauges only when the cluster changed.
  if (cluster_->generation() == gauges_generation_) return;
  gauges_generation_ = cluster_->generation();
  const sched::ClusterState& cs = *cluster_;
  std::vector<int64_t> healthy(cs.num_models(), 0);
  for (sched::NodeId id = 0; id < cs.num_node_slots(); ++id) {
    const sched::NodeState& st = cs.state(id);
    if (!st.present) continue;
    healthy[st.model] += __builtin_popcount(st.healthy_mask);
  }
  for (sched::ModelId m = 0; m < cs.num_models(); ++m) {
    if (cs.model_name(m).empty()) continue;  // CPU-only nodes
    metrics_->gpus_total.With({cs.model_name(m)}).Set(static_cast<double>(cs.total_gpus(m)));
    metrics_->gpus_allocated.With({cs.model_name(m)}).Set(cs.allocated_milli(m) / 1000.0);
    metrics_->gpus_healthy.With({cs.model_name(m)}).Set(static_cast<double>(healthy[m]));
  }
  // By pool: a few (model, pool) pairs, summed here, then one Set each.
  std::map<std::pair<std::string, std::string>, std::pair<int64_t, int64_t>> pools;
  for (const auto& [key, node] : nodes_) {
    if (node->id == sched::kNoNode) continue;
    const sched::NodeState& st = cs.state(node->id);
    if (!st.present || st.model == sched::kNoModel) continue;
    auto& [total, milli] = pools[{cs.model_name(st.model), node->pool}];
    total += st.num_gpus;
    for (int g = 0; g < st.num_gpus; ++g) milli += model::kMilliPerGpu - st.free_milli[g];
  }
  metrics_->pool_total.Clear();
  metrics_->pool_allocated.Clear();
  for (const auto& [k, v] : pools) {
    metrics_->pool_total.With({k.first, k.second}).Set(static_cast<double>(v.first));
    metrics_->pool_allocated.With({k.first, k.second}).Set(v.second / 1000.0);
  }
  // Node readiness and GPU health change rarely while the cluster generation
  // changes on every bind: touch a node's series only when its value changed.
  // After the loop every live node is exported, so more exported names than
  // nodes means some node went away: then rebuild the families.
  auto export_nodes = [&] {
    for (const auto& [key, node] : nodes_) {
      auto [it, inserted] = exported_ready_.try_emplace(node->name, node->ready);
      if (inserted || it->second != node->ready) {
        it->second = node->ready;
        metrics_->node_ready.With({node->name}).Set(node->ready ? 1 : 0);
      }
      auto [u, fresh] = exported_unhealthy_.try_emplace(node->name, node->unhealthy);
      if (fresh || u->second != node->unhealthy) {
        u->second = node->unhealthy;
        metrics_->node_unhealthy.With({node->name}).Set(__builtin_popcount(node->unhealthy));
      }
    }
  };
  export_nodes();
  if (exported_ready_.size() > nodes_.size()) {
    metrics_->node_ready.Clear();
    metrics_->node_unhealthy.Clear();
    exported_ready_.clear();
    exported_unhealthy_.clear();
    export_nodes();
  }
}

void SchedulingController::RecordDecision(const model::Job& job, const sched::ScheduleResult& r) {
  DecisionContext dc;
  dc.sort_start = decision_mark_;
  dc.cycle_start = decision_mark_;
  dc.end = clock_.Now();
  dc.queue_length = static_cast<int64_t>(qm_->pending_size());
  if (const JobRec* rec = JobBySchedKey(job.key())) dc.waited = dc.end - rec->queued_since;
  dc.result = r.placed()                                            ? "scheduled"
              : r.outcome == sched::ScheduleResult::Outcome::kError ? "error"
                                                                    : "unschedulable";
  dc.nodes = NodeNames(r.placement, *cluster_);
  options_.on_decision(DecisionSpans(job, r, dc));
  decision_mark_ = dc.end;
}

}  // namespace tessera::controller
