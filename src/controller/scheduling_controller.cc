#include "controller/scheduling_controller.h"

#include <algorithm>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/job_accounting.h"
#include "common/status_macros.h"
#include "controller/controller_internal.h"
#include "controller/decision_spans.h"
#include "controller/events.h"
#include "controller/job_codec.h"
#include "controller/member_phase.h"
#include "controller/node_codec.h"
#include "controller/queue_codec.h"
#include "sched/plugins/default_registry.h"

namespace tessera::controller {

using namespace internal;  // NOLINT: the module's own helpers

namespace {

// The preemption in flight a stored victim records (status.preemption, written
// with PreemptionPending True); nullopt when there is none or it does not
// parse (a controller before status.preemption existed wrote only the
// condition: that preemption is searched again).
std::optional<InflightPreemption> InflightPreemptionOf(const Json& st, const model::Job& job) {
  if (!ConditionTrue(st, "PreemptionPending")) return std::nullopt;
  const Json& p = st.contains("preemption") ? st["preemption"] : Json();
  InflightPreemption out;
  out.preemptor = Str(p, "preemptor");
  if (out.preemptor.empty() || !ParseTimestamp(Str(p, "deadline"), &out.deadline)) {
    return std::nullopt;
  }
  if (p.contains("dropping") && p["dropping"].is_array()) {
    for (const Json& d : p["dropping"]) {
      const std::string group = Str(d, "group");
      auto g = std::find_if(job.groups.begin(), job.groups.end(),
                            [&](const model::MemberGroup& mg) { return mg.name == group; });
      if (g == job.groups.end()) return std::nullopt;
      sched::MemberPlacement& m = out.dropping.emplace_back();
      m.group = static_cast<int32_t>(g - job.groups.begin());
      m.member = static_cast<int32_t>(IntOr(d, "member", -1));
    }
  }
  out.exited = AllMembersExited(st);
  return out;
}

}  // namespace

SchedulingController::SchedulingController(store::Store& store, Clock& clock,
                                           ControllerOptions options)
    : store_(store),
      clock_(clock),
      options_(std::move(options)),
      events_gc_(store_, options_.event_ttl, options_.log) {
  if (options_.metrics != nullptr)
    metrics_ = std::make_unique<ControllerMetrics>(*options_.metrics);
}

SchedulingController::~SchedulingController() { Stop(); }

absl::StatusOr<std::unique_ptr<SchedulingController>> SchedulingController::Create(
    store::Store& store, Clock& clock, ControllerOptions options) {
  RETURN_IF_ERROR(sched::ValidateProfile(options.profile, sched::pack::PluginSet().Registry()));
  options.queues.profile = options.profile;
  RETURN_IF_ERROR(sched::ValidateQueueManagerConfig(options.queues));
  std::unique_ptr<SchedulingController> c(
      new SchedulingController(store, clock, std::move(options)));
  c->Reset();
  if (c->qm_ == nullptr) return absl::InternalError("cannot build the scheduler");
  return c;
}

void SchedulingController::Reset() {
  qm_.reset();
  cluster_ = std::make_unique<sched::ClusterState>();
  plugins_ = std::make_unique<sched::pack::PluginSet>();
  sched::QueueManagerConfig qc = options_.queues;
  qc.extra_plugins = [p = plugins_.get()](sched::PluginRegistry* r) { return p->Register(r); };
  absl::StatusOr<std::unique_ptr<sched::QueueManager>> m =
      sched::QueueManager::Create(std::move(qc), cluster_.get());
  if (m.ok()) {
    qm_ = *std::move(m);
    // Decision traces: spans timed by the controller's clock and an
    // explanation of every placement ("placed ... on rack r012 ... because").
    qm_->scheduler().set_clock(&clock_);
    qm_->scheduler().set_explain(true);
    if (options_.on_decision) {
      qm_->set_attempt_observer([this](const model::Job& job, const sched::ScheduleResult& r) {
        RecordDecision(job, r);
      });
    }
  } else {
    options_.log.Error("queue configuration refused",
                       {{"error", std::string(m.status().message())}});
  }
  to_restore_.clear();
  to_submit_.clear();
  queue_objects_.clear();
  queue_specs_.clear();
  queue_problem_.clear();
  queues_dirty_ = true;
  pools_.clear();
  pools_dirty_ = true;
  pools_synced_ = absl::InfinitePast();
  queue_pool_nodes_.clear();
  service_lineage_.clear();
  model_versions_dirty_ = true;
  seed_fair_share_ = true;
  capacity_dirty_ = true;
  resync_ = false;
  cycle_needed_ = true;
  next_deadline_ = absl::InfiniteFuture();
  runtime_deadlines_.clear();
  last_cycle_ = absl::InfinitePast();
  jobs_.clear();
  by_sched_key_.clear();
  pending_phases_.clear();      // re-derived from the stored reports by Start()
  pending_admissions_.clear();  // likewise from the stored Pending jobs
  nodes_.clear();
  priority_classes_.clear();
  revision_ = 0;
  started_ = false;
}

absl::Status SchedulingController::Step() {
  if (!started_ || resync_) RETURN_IF_ERROR(Start());
  // Catch up to the revision current when the step began, not beyond: under
  // a steady stream of writes (and the controller's own admission writes)
  // there is always another page, and chasing it would starve scheduling.
  const int64_t target = store_.CurrentRevision();
  while (revision_ < target) {
    absl::StatusOr<store::EventsResult> evs = store_.Events("/registry/", revision_, options_.page);
    if (absl::IsOutOfRange(evs.status())) {
      options_.log.Warn("history compacted past our revision; re-listing",
                        {{"revision", revision_}});
      RETURN_IF_ERROR(Start());
      continue;
    }
    if (!evs.ok()) return evs.status();
    for (const store::Event& e : evs->events) RETURN_IF_ERROR(ApplyEvent(e));
    WritePhases();
    // Admissions wait for the cycle, which writes a job it binds at once with its admission (one
    // write, no read); a long catch-up writes them per page, so that memory stays bounded.
    if (pending_admissions_.size() >= kMaxPendingAdmissions) WriteAdmissions();
    WriteRegistrations();
    if (!evs->events.empty()) cycle_needed_ = true;
    revision_ = evs->revision;
    if (evs->events.empty()) break;
  }
  {
    // GPU-time the fleet was watched, for the observed failure rate.
    const absl::Time now = clock_.Now();
    if (gpu_time_mark_ != absl::InfinitePast() && now > gpu_time_mark_) {
      gpu_seconds_seen_ +=
          static_cast<double>(cluster_->total_gpus()) * absl::ToDoubleSeconds(now - gpu_time_mark_);
    }
    gpu_time_mark_ = now;
  }
  NodeTimers();
  RuntimeLimits();
  SyncPools(clock_.Now());
  RunCycles();
  SyncModelVersions();
  stats_.events_collected += events_gc_.Step(clock_.Now());
  UpdateGauges();
  ++stats_.steps;
  return absl::OkStatus();
}

absl::Status SchedulingController::ApplyEvent(const store::Event& e) {
  const std::string& key = e.kv.key;
  const bool del = e.type == store::Event::Type::kDelete;
  const bool is_job =
      absl::StartsWith(key, kTrainingJobsPrefix) || absl::StartsWith(key, kInferenceServicesPrefix);
  const bool is_node = absl::StartsWith(key, kNodesPrefix);
  const bool is_pc = absl::StartsWith(key, kPriorityClassesPrefix);
  const bool is_queue = absl::StartsWith(key, kQueuesPrefix);
  const bool is_ckpt = absl::StartsWith(key, kCheckpointsPrefix);
  const bool is_pool = absl::StartsWith(key, kGpuPoolsPrefix);
  if (absl::StartsWith(key, kModelVersionsPrefix) || is_ckpt) model_versions_dirty_ = true;
  if (absl::StartsWith(key, kInferenceServicesPrefix)) {
    // What a ModelVersion's servedBy depends on: the service's modelVersion, phase, deletion.
    std::string lineage;
    if (!del) {
      if (absl::StatusOr<Json> o = ParseStored(e.kv.value); o.ok()) {
        lineage = absl::StrCat((*o)["spec"].is_object() ? Str((*o)["spec"], "modelVersion") : "",
                               "|", Str(StatusOf(*o), "phase"), "|",
                               (*o)["metadata"].contains("deletionTimestamp") ? "d" : "");
      }
    }
    auto [it, added] = service_lineage_.try_emplace(key, lineage);
    if (added || it->second != lineage) model_versions_dirty_ = true;
    if (del) {
      service_lineage_.erase(it);
    } else {
      it->second = lineage;
    }
  }
  if (is_pool) {
    absl::StatusOr<Json> obj = del ? absl::StatusOr<Json>(Json()) : ParseStored(e.kv.value);
    OnPool(key, del || !obj.ok() ? nullptr : &*obj);
    return absl::OkStatus();
  }
  if (!is_job && !is_node && !is_pc && !is_queue && !is_ckpt) return absl::OkStatus();
  // The phases noted so far are written before anything that could requeue a job is applied:
  // a finished job must be released before a node's loss or a deletion could requeue it. A
  // Node's update flushes them only where it evicts (OnNodePut): a heartbeat or cordon requeues
  // nothing, so the phases of a busy fleet's reports are not cut into a commit per heartbeat.
  if (del || is_pc || is_queue || is_ckpt) WritePhases();
  if (del) {
    if (is_job) OnJobDelete(key);
    if (is_node) {
      OnNodeDelete(key);
      pools_dirty_ = true;
    }
    if (is_pc || is_queue) {
      if (absl::StatusOr<Json> obj = ParseStored(e.kv.value); obj.ok()) {
        if (is_pc) OnPriorityClass(*obj, true);
        if (is_queue) OnQueue(*obj, true);
      }
    }
    return absl::OkStatus();
  }
  if (is_job) {
    // The echo of the controller's own write (or anything older than what it holds): OnJobPut
    // would drop it, so it is not parsed. Most job events at load are such echoes.
    if (auto it = jobs_.find(key); it != jobs_.end() && e.kv.mod_revision <= it->second->revision) {
      return absl::OkStatus();
    }
  }
  absl::StatusOr<Json> obj = ParseStored(e.kv.value);
  if (!obj.ok()) {
    options_.log.Warn("stored object does not parse",
                      {{"key", key}, {"error", std::string(obj.status().message())}});
    return absl::OkStatus();
  }
  if (is_job) OnJobPut(key, *obj, e.kv.mod_revision, false);
  if (is_node) {
    OnNodePut(key, *obj, e.kv.mod_revision, false);
    if (auto n = nodes_.find(key); n != nodes_.end()) NotePoolFacts(*n->second, *obj);
  }
  if (is_pc) OnPriorityClass(*obj, false);
  if (is_queue) OnQueue(*obj, false);
  if (is_ckpt) {
    OnCheckpoint(*obj);
    ApplyRetention(*obj);
  }
  return absl::OkStatus();
}

// --- Writes -------------------------------------------------------------

absl::StatusOr<SchedulingController::PreparedWrite> SchedulingController::PrepareUpdate(
    const std::string& key, int64_t expected, const std::function<bool(Json&)>& mutate,
    const Change& event, const Json* current) {
  store::KeyValue kv;
  if (current != nullptr && expected > 0) {
    kv.key = key;
    kv.mod_revision = expected;
  } else {
    ASSIGN_OR_RETURN(kv, store_.Get(key));
  }
  if (expected > 0 && kv.mod_revision != expected) {
    return absl::FailedPreconditionError(
        absl::StrCat(key, " changed: revision ", kv.mod_revision, ", decided on ", expected));
  }
  PreparedWrite w;
  w.base = kv.mod_revision;
  if (current != nullptr && expected > 0) {
    w.obj = *current;
  } else {
    ASSIGN_OR_RETURN(w.obj, ParseStored(kv.value));
  }
  if (!mutate(w.obj)) return absl::CancelledError(absl::StrCat(key, ": update abandoned"));
  w.ops.push_back(store::Op::Put(key, ToStoredValue(w.obj), kv.mod_revision));
  if (event.record && !event.reason.empty())
    w.ops.push_back(EventOp(w.obj, kv.mod_revision, event));
  return w;
}


absl::StatusOr<int64_t> SchedulingController::Update(const std::string& key, int64_t expected,
                                                     const std::function<bool(Json&)>& mutate,
                                                     const Change& event, int64_t* base) {
  for (int attempt = 0;; ++attempt) {
    ASSIGN_OR_RETURN(PreparedWrite w, PrepareUpdate(key, expected, mutate, event));
    absl::StatusOr<int64_t> rev = store_.Txn(w.ops);
    if (rev.ok()) {
      *base = w.base;
      LogChange(w.obj, event);
      return rev;
    }
    if (!absl::IsFailedPrecondition(rev.status()) || expected > 0 || attempt >= 5) {
      return rev.status();
    }
  }
}

bool SchedulingController::WriteGeneration(JobRec& rec, const sched::Placement& p, Change why,
                                           absl::Time now,
                                           const std::function<bool(Json& status)>& also) {
  const int64_t gen = rec.generation + 1;
  const Json placement = PlacementToJson(p, *rec.job, *cluster_, gen);
  const Json resume = ResumePoint(rec);
  absl::StrAppend(&why.message, " (generation ", gen, ")");
  if (resume.is_object()) {
    absl::StrAppend(&why.message, "; members restart from checkpoint ", Str(resume, "checkpoint"),
                    " (step ", IntOr(resume, "step", 0), ")");
  }
  why.fields.emplace_back("generation", gen);
  // Only the binding this controller knows may be re-placed.
  absl::StatusOr<int64_t> w = UpdateBinding(
      rec,
      [&](Json& st) {
        api::AccrueOpenBinding(st, now);  // the old placement's GPU time, up to its replacement
        NoteLogNodes(st, NodeNames(p, *cluster_));
        st["placement"] = placement;
        st["generation"] = gen;
        if (resume.is_object()) st["resumeFrom"] = resume;
        st["reason"] = why.reason;
        st["message"] = why.message.substr(0, 4096);
        SetCondition(st, "Scheduled", "True", why.reason, why.message, now);
        return also(st);
      },
      why);
  if (!w.ok()) {
    if (!absl::IsCancelled(w.status())) {  // cancelled: the store moved on, nothing to say
      options_.log.Warn("new generation not written",
                        {{"job", rec.name},
                         {"namespace", rec.ns},
                         {"reason", why.reason},
                         {"error", std::string(w.status().message())}});
    }
    return false;
  }
  rec.generation = gen;
  rec.last_message = why.message;
  return true;
}

std::function<bool(Json& obj)> SchedulingController::OnBinding(
    int64_t generation, std::function<bool(Json& status)> mutate) {
  return [generation, mutate = std::move(mutate)](Json& obj) {
    Json& st = StatusOf(obj);
    if (!BoundPhase(Str(st, "phase")) || IntOr(st, "generation", 0) != generation) return false;
    return mutate(st);
  };
}

absl::StatusOr<int64_t> SchedulingController::UpdateBinding(
    JobRec& rec, const std::function<bool(Json& status)>& mutate, const Change& event) {
  int64_t base = 0;
  absl::StatusOr<int64_t> w = Update(rec.key, -1, OnBinding(rec.generation, mutate), event, &base);
  if (w.ok() && base == rec.revision) rec.revision = *w;
  return w;
}

bool SchedulingController::ApplyPhase(Json& obj, const std::string& phase, const Change& why,
                                      bool clear_placement, const std::string& status_reason,
                                      const Json* extra_status, absl::Time now) {
  Json& st = StatusOf(obj);
  std::string cur = Str(st, "phase");
  if (Terminal(cur) && cur != phase) return false;
  st["phase"] = phase;
  st["reason"] = status_reason.empty() ? why.reason : status_reason;
  st["message"] = why.message.substr(0, 4096);
  auto [type, value] = PhaseCondition(phase);
  SetCondition(st, type, value, why.reason, why.message, now);
  if (clear_placement) api::ReleasePlacement(st, now);
  if (Terminal(phase)) api::StampCompletion(st, now);
  if (extra_status != nullptr) {
    for (auto it = extra_status->begin(); it != extra_status->end(); ++it) {
      if (it->is_null()) {
        st.erase(it.key());
      } else {
        st[it.key()] = *it;
      }
    }
  }
  return true;
}

absl::Status SchedulingController::SetJobPhase(JobRec& rec, const std::string& phase,
                                               const Change& why, bool clear_placement,
                                               const std::string& status_reason,
                                               const Json* extra_status) {
  WriteAdmissions(&rec.key);
  const absl::Time now = clock_.Now();
  int64_t base = 0;
  absl::StatusOr<int64_t> rev = Update(
      rec.key, -1,
      [&](Json& obj) {
        return ApplyPhase(obj, phase, why, clear_placement, status_reason, extra_status, now);
      },
      why, &base);
  if (!rev.ok()) return rev.status();
  rec.phase = phase;
  rec.last_message = why.message;
  if (base == rec.revision) rec.revision = *rev;
  return absl::OkStatus();
}

absl::Status SchedulingController::Requeue(JobRec& rec, const std::string& phase,
                                           const Change& why_in) {
  const absl::Time now = clock_.Now();
  // By the cause (GpuUnhealthy after an XID, not the phase NodeLost it shares with a lost node).
  if (metrics_) metrics_->requeues.With({why_in.reason.empty() ? phase : why_in.reason}).Inc();
  Json resume = rec.kind == "TrainingJob" ? ResumePoint(rec) : Json();
  Change why = why_in;
  if (resume.is_object()) {
    absl::StrAppend(&why.message, "; will resume from checkpoint ", Str(resume, "checkpoint"),
                    " (step ", IntOr(resume, "step", 0), ")");
  }
  bool terminal = false;
  int64_t base = 0;
  absl::StatusOr<int64_t> rev = Update(
      rec.key, -1,
      [&](Json& obj) {
        Json& st = StatusOf(obj);
        if (Terminal(Str(st, "phase"))) {
          terminal = true;
          return false;
        }
        st["phase"] = phase;
        st["reason"] = why.reason;
        st["message"] = why.message.substr(0, 4096);
        api::ReleasePlacement(st, now);
        if (resume.is_object()) st["resumeFrom"] = resume;
        SetCondition(st, "Scheduled", "False", why.reason, why.message, now);
        return true;
      },
      why, &base);
  if (!rev.ok() && !terminal) return rev.status();
  ReleaseMemory(rec);
  if (terminal) return absl::OkStatus();
  rec.phase = phase;
  rec.last_message = why.message;
  if (base == rec.revision) rec.revision = *rev;
  rec.queued_since = now;
  Enqueue(rec);
  ++stats_.requeued;
  return absl::OkStatus();
}

SchedulingController::JobRec* SchedulingController::JobBySchedKey(const std::string& k) {
  auto it = by_sched_key_.find(k);
  return it == by_sched_key_.end() ? nullptr : it->second;
}

// --- Priority classes -----------------------------------------------------

void SchedulingController::OnPriorityClass(const Json& obj, bool deleted) {
  std::string name = Str(obj["metadata"], "name");
  if (deleted) {
    priority_classes_.erase(name);
    return;
  }
  if (obj.contains("spec")) {
    priority_classes_[name] = static_cast<int32_t>(IntOr(obj["spec"], "value", 0));
  }
  if (!started_) return;
  // Jobs that waited for this class may be admitted now.
  std::vector<JobRec*> blocked;
  for (auto& [k, rec] : jobs_) {
    if (rec->blocked) blocked.push_back(rec.get());
  }
  for (JobRec* rec : blocked) {
    absl::StatusOr<store::KeyValue> kv = store_.Get(rec->key);
    if (!kv.ok()) continue;
    absl::StatusOr<Json> o = ParseStored(kv->value);
    if (!o.ok()) continue;
    rec->revision = kv->mod_revision;
    Admit(*rec, *o, false);
  }
}

// --- Jobs -----------------------------------------------------------------

void SchedulingController::Admit(JobRec& rec, const Json& obj, bool at_start) {
  const Json& meta = obj["metadata"];
  const Json& st = StatusOf(obj);
  rec.kind = Str(obj, "kind");
  rec.ns = Str(meta, "namespace", "default");
  rec.name = Str(meta, "name");
  rec.phase = Str(st, "phase", "Pending");
  rec.spec_dump = obj.contains("spec") ? obj["spec"].dump() : "";
  rec.generation = IntOr(st, "generation", 0);
  rec.attempts = IntOr(st, "attempts", 0);
  rec.last_message = Str(st, "message");
  rec.blocked = false;
  rec.max_runtime = obj["spec"].is_object()
                        ? absl::Seconds(IntOr(obj["spec"], "maxRuntimeSeconds", 0))
                        : absl::ZeroDuration();
  rec.max_restarts = obj["spec"].is_object() ? IntOr(obj["spec"], "maxRestarts", 0) : 0;
  rec.checkpoints = rec.kind == "TrainingJob" && obj["spec"].is_object() &&
                    obj["spec"].contains("checkpoint") && obj["spec"]["checkpoint"].is_object();
  rec.queue_error.clear();
  if (Terminal(rec.phase)) return;
  absl::StatusOr<model::Job> job = JobFromObject(obj, [this](absl::string_view pc) {
    auto it = priority_classes_.find(pc);
    return it == priority_classes_.end() ? std::nullopt : std::optional<int32_t>(it->second);
  });
  if (absl::IsNotFound(job.status())) {
    rec.blocked = true;
    std::string msg = absl::StrCat("waiting: ", job.status().message());
    if (msg != rec.last_message) {
      (void)SetJobPhase(rec, rec.phase, {"UnknownPriorityClass", msg, true, false}, false);
    }
    return;
  }
  if (!job.ok()) {
    (void)SetJobPhase(rec, "Failed",
                      {"InvalidSpec", std::string(job.status().message()), true, true}, true);
    return;
  }
  if (rec.job) by_sched_key_.erase(rec.job->key());
  ConfineToPools(*job);  // a queue some GPUPools name runs only on their nodes
  rec.job = std::make_shared<const model::Job>(*std::move(job));
  by_sched_key_[rec.job->key()] = &rec;
  rec.queued_since = clock_.Now();
  if (!at_start && BoundPhase(rec.phase) && st.contains("placement")) {
    // A placement this controller did not write (it adopts stored ones only while it starts):
    // whoever wrote it went past the scheduler and the job's queue, so it is removed before an
    // agent acts on it, and the job is scheduled like any other.
    const Change why{"PlacementIgnored",
                     "a placement the controller did not write appeared in the job's status; "
                     "it was removed and the job waits for the scheduler",
                     true};
    int64_t base = 0;
    absl::StatusOr<int64_t> w = Update(
        rec.key, -1,
        [&why](Json& o) {
          Json& s = StatusOf(o);
          if (!BoundPhase(Str(s, "phase"))) return false;
          // Not a binding the controller made: nothing to account for.
          s.erase("placement");
          s.erase("replicas");
          s["phase"] = "Pending";
          s["reason"] = why.reason;
          return true;
        },
        why, &base);
    if (!w.ok()) {
      options_.log.Error(
          "foreign placement not removed",
          {{"job", rec.name}, {"namespace", rec.ns}, {"error", std::string(w.status().message())}});
      return;
    }
    if (base == rec.revision) rec.revision = *w;
    rec.phase = "Pending";
  }
  if (BoundPhase(rec.phase) && StatusOf(obj).contains("placement")) {
    absl::StatusOr<sched::Placement> p = PlacementFromJson(st["placement"], *rec.job, *cluster_);
    absl::Status s = p.status();
    std::vector<const sched::MemberPlacement*> assumed;
    if (p.ok()) {
      for (const sched::MemberPlacement& m : p->members) {
        s = cluster_->Assume(m);
        if (!s.ok()) break;
        assumed.push_back(&m);
      }
      if (s.ok()) s = cluster_->Bind(*p);
      if (!s.ok()) {
        for (const sched::MemberPlacement* m : assumed) cluster_->Forget(*m);
      }
    }
    if (s.ok()) {
      rec.bound = true;
      absl::Time since;
      ArmRuntimeLimit(rec, ParseTimestamp(Str(st, "scheduledTime"), &since) ? since : clock_.Now());
      rec.last_resize = ParseTimestamp(Str(st, "lastResizeTime"), &since) ? since : rec.bound_since;
      ++stats_.restored;
      to_restore_.push_back(rec.key);  // charged to its queue before the next cycle
      rec.inflight_preemption = InflightPreemptionOf(st, *rec.job);
      return;
    }
    (void)Requeue(
        rec, "NodeLost",
        {"PlacementLost", absl::StrCat("stored placement no longer holds: ", s.message()), true});
    return;
  }
  if (obj["spec"].is_object() && obj["spec"].value("suspend", false)) {
    // Suspended jobs are not queued; clearing spec.suspend admits them.
    if (rec.phase != "Suspended") {
      pending_admissions_[rec.key] = {
          rec.phase, "Suspended", rec.revision, obj, {"Suspended", "spec.suspend is true"}};
    } else {
      pending_admissions_.erase(rec.key);  // resumed and suspended again: nothing to write
    }
    return;
  }
  if (rec.phase == "Pending" || rec.phase == "Suspended") {
    std::string msg =
        absl::StrCat("admitted to queue ", rec.job->queue, " at priority ", rec.job->priority);
    // Phase Queued: waiting in its queue (Kueue's "Admitted" means quota reserved, which a
    // waiting job has not); the Admitted condition and Event say it entered the queue. Written
    // with its binding when the next cycle binds it (WriteBindings), else with the other
    // admissions after that cycle (WriteAdmissions).
    pending_admissions_[rec.key] = {rec.phase, "Queued", rec.revision, obj, {"Admitted", msg}};
  }
  Enqueue(rec);
}

void SchedulingController::OnJobPut(const std::string& key, const Json& obj, int64_t rev,
                                    bool at_start) {
  auto it = jobs_.find(key);
  if (it == jobs_.end()) {
    auto rec = std::make_unique<JobRec>();
    rec->key = key;
    rec->revision = rev;
    JobRec& r = *rec;
    jobs_.emplace(key, std::move(rec));
    Admit(r, obj, at_start);
    ObserveService(r, obj);
    MaybeRestart(r, obj);  // a member may have failed while no controller ran
    ApplyMemberReports(r, obj);
    return;
  }
  JobRec& rec = *it->second;
  if (rev <= rec.revision) return;
  rec.revision = rev;
  const std::string phase = Str(StatusOf(obj), "phase", "Pending");
  if (Terminal(phase)) {
    if (!Terminal(rec.phase)) {
      // Reported by an agent or a user: the gang's resources come back.
      ReleaseMemory(rec);
      rec.phase = phase;
      // The binding ends with the job: clear status.placement (so the store
      // never shows a GPU bound to two live-looking jobs) and record why.
      const Change why{phase, absl::StrCat("job ", phase == "Succeeded" ? "succeeded" : "failed",
                                           ": ", Str(StatusOf(obj), "message"))};
      int64_t base = 0;
      absl::StatusOr<int64_t> w = Update(
          key, -1,
          [now = clock_.Now()](Json& o) {
            Json& st = StatusOf(o);
            if (!Terminal(Str(st, "phase"))) return false;
            api::ReleasePlacement(st, now);
            api::StampCompletion(st, now);
            return true;
          },
          why, &base);
      if (w.ok() && base == rec.revision) rec.revision = *w;
    }
    return;
  }
  rec.phase = phase;
  ObserveService(rec, obj);
  MaybeRestart(rec, obj);
  ApplyMemberReports(rec, obj);
  if (rec.bound && rec.in_qm && rec.job && ConditionTrue(StatusOf(obj), "PreemptionPending") &&
      AllMembersExited(StatusOf(obj))) {
    // The agents passed the preemption's checkpoint signal on and every
    // member has exited: the victim hands its GPUs over now, not at its
    // deadline. One whose preemptor went away meanwhile cannot continue
    // either, so it is requeued to resume from its checkpoint.
    if (qm_->Phase(rec.job->key()) == sched::JobPhase::kTerminating) {
      if (qm_->VictimExited(rec.job->key(), clock_.Now()).ok()) cycle_needed_ = true;
    } else if (absl::Status s = Requeue(
                   rec, "Preempted", {"Preempted", "every member exited on a checkpoint signal"});
               !s.ok()) {
      options_.log.Error(
          "requeue after members exited not written",
          {{"job", rec.name}, {"namespace", rec.ns}, {"error", std::string(s.message())}});
    }
  }
  const std::string spec = obj.contains("spec") ? obj["spec"].dump() : "";
  if (spec != rec.spec_dump && !rec.bound) {
    ReleaseMemory(rec);
    Admit(rec, obj, false);
  } else if (spec != rec.spec_dump && obj["spec"].is_object() &&
             obj["spec"].value("suspend", false)) {
    // Suspending a bound job unbinds it (store first, then memory) and keeps
    // it out of the queue. Other spec changes of a bound job wait for a requeue.
    rec.spec_dump = spec;
    if (Requeue(rec, "Suspended", {"Suspended", "spec.suspend is true"}).ok()) {
      ReleaseMemory(rec);
    }
  }
}

void SchedulingController::OnJobDelete(const std::string& key) {
  auto it = jobs_.find(key);
  if (it == jobs_.end()) return;
  JobRec& rec = *it->second;
  ReleaseMemory(rec);
  if (rec.job) by_sched_key_.erase(rec.job->key());
  jobs_.erase(it);
}

// --- Background loop ------------------------------------------------------

void SchedulingController::RunInBackground() {
  stop_ = false;
  thread_ = std::thread([this] {
    bool announced = false;
    while (!stop_) {
      absl::Status s = Step();
      if (!s.ok()) {
        options_.log.Error("step failed", {{"error", std::string(s.message())}});
        absl::SleepFor(options_.tick);
        continue;
      }
      if (!announced) {
        announced = true;
        options_.log.Info("controller resumed",
                          {{"revision", revision_},
                           {"nodes", static_cast<int64_t>(cluster_->num_nodes())},
                           {"jobs", static_cast<int64_t>(jobs_.size())},
                           {"restored", stats_.restored},
                           {"preemptions_resumed", stats_.preemptions_resumed},
                           {"start_ms", absl::ToDoubleMilliseconds(stats_.start_time)}});
      }
      (void)store_.WaitForRevision(revision_ + 1, absl::Now() + options_.tick);
    }
  });
}

void SchedulingController::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

}  // namespace tessera::controller