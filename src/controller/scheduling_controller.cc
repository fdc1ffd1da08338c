#include "controller/scheduling_controller.h"

#include <algorithm>
#include <iostream>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "controller/controller_internal.h"
#include "controller/job_codec.h"
#include "controller/node_codec.h"
#include "sched/plugins/default_registry.h"

namespace tessera::controller {

using namespace internal;  // NOLINT: the module's own helpers

SchedulingController::SchedulingController(store::Store& store, Clock& clock,
                                           ControllerOptions options)
    : store_(store), clock_(clock), options_(std::move(options)) {
  if (options_.metrics != nullptr)
    metrics_ = std::make_unique<ControllerMetrics>(*options_.metrics);
}

SchedulingController::~SchedulingController() { Stop(); }

absl::StatusOr<std::unique_ptr<SchedulingController>> SchedulingController::Create(
    store::Store& store, Clock& clock, ControllerOptions options) {
  RETURN_IF_ERROR(sched::ValidateProfile(options.profile, sched::DefaultRegistry()));
  std::unique_ptr<SchedulingController> c(
      new SchedulingController(store, clock, std::move(options)));
  c->Reset();
  if (c->scheduler_ == nullptr) return absl::InternalError("cannot build the scheduler");
  return c;
}

void SchedulingController::Reset() {
  queue_.reset();
  scheduler_.reset();
  cluster_ = std::make_unique<sched::ClusterState>();
  absl::StatusOr<std::unique_ptr<sched::Scheduler>> s =
      sched::Scheduler::Create(options_.profile, sched::DefaultRegistry(), cluster_.get());
  if (s.ok()) {
    scheduler_ = *std::move(s);
    // Decision traces: spans timed by the controller's clock and an
    // explanation of every placement ("placed ... on rack r012 ... because").
    scheduler_->set_clock(&clock_);
    scheduler_->set_explain(true);
    queue_ = std::make_unique<sched::SchedulingQueue>(&scheduler_->queue_sort());
  }
  jobs_.clear();
  by_sched_key_.clear();
  nodes_.clear();
  priority_classes_.clear();
  revision_ = 0;
  started_ = false;
}

absl::Status SchedulingController::ListPrefix(const char* prefix, int64_t* revision,
                                              std::vector<store::KeyValue>* out) {
  store::ListOptions opts;
  opts.limit = options_.page;
  while (true) {
    ASSIGN_OR_RETURN(store::ListResult page, store_.List(prefix, opts));
    *revision = std::min(*revision, page.revision);
    for (store::KeyValue& kv : page.kvs) out->push_back(std::move(kv));
    if (!page.more) return absl::OkStatus();
    opts.continue_after = page.next_key;
  }
}

absl::Status SchedulingController::Start() {
  const absl::Time t0 = absl::Now();
  Reset();
  int64_t rev = std::numeric_limits<int64_t>::max();
  std::vector<store::KeyValue> kvs;
  RETURN_IF_ERROR(ListPrefix(kPriorityClassesPrefix, &rev, &kvs));
  for (const store::KeyValue& kv : kvs) {
    if (absl::StatusOr<Json> obj = ParseStored(kv.value); obj.ok()) OnPriorityClass(*obj, false);
  }
  kvs.clear();
  RETURN_IF_ERROR(ListPrefix(kNodesPrefix, &rev, &kvs));
  for (const store::KeyValue& kv : kvs) {
    if (absl::StatusOr<Json> obj = ParseStored(kv.value); obj.ok()) {
      OnNodePut(kv.key, *obj, kv.mod_revision, /*at_start=*/true);
    }
  }
  kvs.clear();
  RETURN_IF_ERROR(ListPrefix(kTrainingJobsPrefix, &rev, &kvs));
  RETURN_IF_ERROR(ListPrefix(kInferenceServicesPrefix, &rev, &kvs));
  started_ = true;
  revision_ = rev == std::numeric_limits<int64_t>::max() ? 0 : rev;
  // Decoding runs on this thread: parsing on several threads measured slower
  // on a 2-core machine (objects allocated in one malloc arena and freed from
  // another cost more CPU than the parallelism saved).
  for (const store::KeyValue& kv : kvs) {
    if (absl::StatusOr<Json> obj = ParseStored(kv.value); obj.ok()) {
      OnJobPut(kv.key, *obj, kv.mod_revision, /*at_start=*/true);
    }
  }
  stats_.start_time = absl::Now() - t0;
  return absl::OkStatus();
}

absl::Status SchedulingController::Step() {
  if (!started_) RETURN_IF_ERROR(Start());
  // Catch up to the revision current when the step began, not beyond: under
  // a steady stream of writes (and the controller's own admission writes)
  // there is always another page, and chasing it would starve scheduling.
  const int64_t target = store_.CurrentRevision();
  while (revision_ < target) {
    absl::StatusOr<store::EventsResult> evs = store_.Events("/registry/", revision_, options_.page);
    if (absl::IsOutOfRange(evs.status())) {
      std::cerr << "controller: history compacted past revision " << revision_ << "; re-listing\n";
      RETURN_IF_ERROR(Start());
      continue;
    }
    if (!evs.ok()) return evs.status();
    for (const store::Event& e : evs->events) RETURN_IF_ERROR(ApplyEvent(e));
    revision_ = evs->revision;
    if (evs->events.empty()) break;
  }
  NodeTimers();
  RunCycles();
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
  if (!is_job && !is_node && !is_pc) return absl::OkStatus();
  if (del) {
    if (is_job) OnJobDelete(key);
    if (is_node) OnNodeDelete(key);
    if (is_pc) {
      if (absl::StatusOr<Json> obj = ParseStored(e.kv.value); obj.ok()) OnPriorityClass(*obj, true);
    }
    return absl::OkStatus();
  }
  absl::StatusOr<Json> obj = ParseStored(e.kv.value);
  if (!obj.ok()) {
    std::cerr << "controller: " << key << ": " << obj.status().message() << "\n";
    return absl::OkStatus();
  }
  if (is_job) OnJobPut(key, *obj, e.kv.mod_revision, false);
  if (is_node) OnNodePut(key, *obj, e.kv.mod_revision, false);
  if (is_pc) OnPriorityClass(*obj, false);
  return absl::OkStatus();
}

// --- Writes -------------------------------------------------------------

Json SchedulingController::EventObject(const Json& obj, int64_t base, const Change& why) const {
  const Json& meta = obj["metadata"];
  std::string name = Str(meta, "name");
  std::string ns = Str(meta, "namespace", "default");
  std::string prefix = name.substr(0, 40);
  while (!prefix.empty() && prefix.back() == '-') prefix.pop_back();
  Json involved = {{"kind", Str(obj, "kind")}, {"name", name}};
  if (meta.contains("namespace")) involved["namespace"] = ns;
  if (meta.contains("uid") && meta["uid"].is_string()) involved["uid"] = meta["uid"];
  const std::string now = Timestamp(clock_.Now());
  Json ev = {
      {"apiVersion", kApiVersion},
      {"kind", "Event"},
      {"metadata",
       {{"name", absl::StrCat(prefix, "-", absl::Hex(base), "-", absl::Hex(event_seq_ & 0xfff))},
        {"namespace", ns},
        {"creationTimestamp", now},
        {"labels",
         {{"involved-kind", absl::AsciiStrToLower(Str(obj, "kind"))},
          {"involved-name", name.substr(0, 63)}}}}},
      {"spec",
       {{"involvedObject", involved},
        {"reason", why.reason},
        {"message", why.message.substr(0, 4096)},
        {"type", why.warning ? "Warning" : "Normal"},
        {"eventTime", now}}},
      {"status", {{"phase", "Recorded"}}}};
  return ev;
}

void SchedulingController::RecordEvent(const Json& obj, int64_t rev, const Change& why) {
  ++event_seq_;
  Json ev = EventObject(obj, rev, why);
  std::string key =
      ObjectKey("events", Str(ev["metadata"], "namespace"), Str(ev["metadata"], "name"));
  absl::StatusOr<int64_t> r = store_.Put(key, ToStoredValue(ev));
  if (!r.ok()) std::cerr << "controller: event " << key << ": " << r.status().message() << "\n";
}

absl::StatusOr<int64_t> SchedulingController::Update(const std::string& key, int64_t expected,
                                                     const std::function<bool(Json&)>& mutate,
                                                     const Change& event, int64_t* base) {
  for (int attempt = 0;; ++attempt) {
    ASSIGN_OR_RETURN(store::KeyValue kv, store_.Get(key));
    if (expected > 0 && kv.mod_revision != expected) {
      return absl::FailedPreconditionError(
          absl::StrCat(key, " changed: revision ", kv.mod_revision, ", decided on ", expected));
    }
    ASSIGN_OR_RETURN(Json obj, ParseStored(kv.value));
    if (!mutate(obj)) return absl::CancelledError(absl::StrCat(key, ": update abandoned"));
    std::vector<store::Op> ops;
    ops.push_back(store::Op::Put(key, ToStoredValue(obj), kv.mod_revision));
    if (event.record && !event.reason.empty()) {
      ++event_seq_;
      Json ev = EventObject(obj, kv.mod_revision, event);
      ops.push_back(store::Op::Put(
          ObjectKey("events", Str(ev["metadata"], "namespace"), Str(ev["metadata"], "name")),
          ToStoredValue(ev)));
    }
    absl::StatusOr<int64_t> rev = store_.Txn(ops);
    if (rev.ok()) {
      *base = kv.mod_revision;
      return rev;
    }
    if (!absl::IsFailedPrecondition(rev.status()) || expected > 0 || attempt >= 5) {
      return rev.status();
    }
  }
}

absl::Status SchedulingController::SetJobPhase(JobRec& rec, const std::string& phase,
                                               const Change& why, bool clear_placement) {
  const absl::Time now = clock_.Now();
  int64_t base = 0;
  absl::StatusOr<int64_t> rev = Update(
      rec.key, -1,
      [&](Json& obj) {
        Json& st = StatusOf(obj);
        std::string cur = Str(st, "phase");
        if (Terminal(cur) && cur != phase) return false;
        st["phase"] = phase;
        st["message"] = why.message.substr(0, 4096);
        auto [type, value] = PhaseCondition(phase);
        SetCondition(st, type, value, why.reason, why.message, now);
        if (clear_placement) st.erase("placement");
        return true;
      },
      why, &base);
  if (!rev.ok()) return rev.status();
  rec.phase = phase;
  rec.last_message = why.message;
  if (base == rec.revision) rec.revision = *rev;
  return absl::OkStatus();
}

Json SchedulingController::ResumePoint(const JobRec& rec) {
  int64_t rev = std::numeric_limits<int64_t>::max();
  std::vector<store::KeyValue> kvs;
  if (!ListPrefix(absl::StrCat(kCheckpointsPrefix, rec.ns, "/").c_str(), &rev, &kvs).ok()) {
    return Json();
  }
  Json best;
  int64_t best_step = -1;
  for (const store::KeyValue& kv : kvs) {
    absl::StatusOr<Json> cp = ParseStored(kv.value);
    if (!cp.ok() || !cp->contains("spec")) continue;
    const Json& spec = (*cp)["spec"];
    if (Str(spec, "jobName") != rec.name || Str(StatusOf(*cp), "phase") != "Ready") continue;
    int64_t step = IntOr(spec, "step", 0);
    if (step > best_step) {
      best_step = step;
      best = {{"checkpoint", Str((*cp)["metadata"], "name")},
              {"step", step},
              {"path", Str(spec, "path")}};
    }
  }
  return best;
}

absl::Status SchedulingController::Requeue(JobRec& rec, const std::string& phase,
                                           const Change& why_in) {
  const absl::Time now = clock_.Now();
  if (metrics_) metrics_->requeues.With({phase}).Inc();
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
        st["message"] = why.message.substr(0, 4096);
        st.erase("placement");
        if (resume.is_object()) st["resumeFrom"] = resume;
        SetCondition(st, "Scheduled", "False", why.reason, why.message, now);
        return true;
      },
      why, &base);
  if (!rev.ok() && !terminal) return rev.status();
  if (rec.bound) {
    (void)scheduler_->Release(rec.job->key());
    rec.bound = false;
    queue_->MoveAllToActive();
  }
  if (terminal) return absl::OkStatus();
  rec.phase = phase;
  rec.last_message = why.message;
  if (base == rec.revision) rec.revision = *rev;
  rec.queued_since = now;
  if (rec.job) queue_->Add(rec.job);
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
  rec.job = std::make_shared<const model::Job>(*std::move(job));
  by_sched_key_[rec.job->key()] = &rec;
  rec.queued_since = clock_.Now();
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
      ++stats_.restored;
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
      (void)SetJobPhase(rec, "Suspended", {"Suspended", "spec.suspend is true"}, true);
    }
    return;
  }
  if (rec.phase == "Pending" || rec.phase == "Suspended") {
    std::string msg =
        absl::StrCat("admitted to queue ", rec.job->queue, " at priority ", rec.job->priority);
    if (absl::Status s = SetJobPhase(rec, "Admitted", {"Admitted", msg}, false); !s.ok()) {
      std::cerr << "controller: admit " << rec.key << ": " << s.message() << "\n";
    }
  }
  (void)at_start;
  queue_->Add(rec.job);
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
    return;
  }
  JobRec& rec = *it->second;
  if (rev <= rec.revision) return;
  rec.revision = rev;
  const std::string phase = Str(StatusOf(obj), "phase", "Pending");
  if (Terminal(phase)) {
    if (!Terminal(rec.phase)) {
      // Reported by an agent or a user: the gang's resources come back.
      if (rec.job) {
        queue_->Remove(rec.job->key());
        if (rec.bound) {
          (void)scheduler_->Release(rec.job->key());
          rec.bound = false;
          queue_->MoveAllToActive();
        }
      }
      rec.phase = phase;
      // The binding ends with the job: clear status.placement (so the store
      // never shows a GPU bound to two live-looking jobs) and record why.
      const Change why{phase, absl::StrCat("job ", phase == "Succeeded" ? "succeeded" : "failed",
                                           ": ", Str(StatusOf(obj), "message"))};
      int64_t base = 0;
      absl::StatusOr<int64_t> w = Update(
          key, -1,
          [](Json& o) {
            Json& st = StatusOf(o);
            if (!Terminal(Str(st, "phase"))) return false;
            st.erase("placement");
            return true;
          },
          why, &base);
      if (w.ok() && base == rec.revision) rec.revision = *w;
    }
    return;
  }
  if (phase == "Running" && rec.phase != "Running" && rec.bound) {
    RecordEvent(obj, rev, {"Started", "every member reported running"});
  }
  rec.phase = phase;
  const std::string spec = obj.contains("spec") ? obj["spec"].dump() : "";
  if (spec != rec.spec_dump && !rec.bound) {
    if (rec.job) queue_->Remove(rec.job->key());
    Admit(rec, obj, false);
  } else if (spec != rec.spec_dump && obj["spec"].is_object() &&
             obj["spec"].value("suspend", false)) {
    // Suspending a bound job unbinds it (store first, then memory) and keeps
    // it out of the queue. Other spec changes of a bound job wait for a requeue.
    rec.spec_dump = spec;
    if (Requeue(rec, "Suspended", {"Suspended", "spec.suspend is true"}).ok() && rec.job) {
      queue_->Remove(rec.job->key());
    }
  }
}

void SchedulingController::OnJobDelete(const std::string& key) {
  auto it = jobs_.find(key);
  if (it == jobs_.end()) return;
  JobRec& rec = *it->second;
  if (rec.job) {
    queue_->Remove(rec.job->key());
    if (rec.bound) {
      (void)scheduler_->Release(rec.job->key());
      queue_->MoveAllToActive();
    }
    by_sched_key_.erase(rec.job->key());
  }
  jobs_.erase(it);
}

// --- Scheduling -----------------------------------------------------------

void SchedulingController::RunCycles() {
  const absl::Time now = clock_.Now();
  for (int i = 0; i < options_.max_cycles_per_step; ++i) {
    std::optional<sched::QueuedJob> qj = queue_->Pop(now);
    if (!qj) break;
    JobRec* rec = JobBySchedKey(qj->job->key());
    if (rec == nullptr || rec->bound || Terminal(rec->phase) || rec->job != qj->job) continue;
    const model::Job& job = *rec->job;
    if (job.gang.timeout > absl::ZeroDuration() && now - rec->queued_since > job.gang.timeout) {
      (void)SetJobPhase(
          *rec, "Failed",
          {"GangTimeout",
           absl::StrCat("gang not placed within ", absl::FormatDuration(job.gang.timeout), ": ",
                        qj->last_reason),
           true},
          true);
      continue;
    }
    ++stats_.cycles;
    const absl::Time cycle_start = clock_.Now();
    sched::ScheduleResult r = scheduler_->Schedule(job);
    if (metrics_) {
      const char* result = r.placed()                                            ? "scheduled"
                           : r.outcome == sched::ScheduleResult::Outcome::kError ? "error"
                                                                                 : "unschedulable";
      metrics_->attempts.With({result}).Inc();
      metrics_->duration.With({result}).Observe(absl::ToDoubleSeconds(clock_.Now() - cycle_start));
    }
    if (r.placed()) {
      const int64_t gen = rec->generation + 1;
      Json placement = PlacementToJson(r.placement, job, *cluster_, gen);
      std::vector<std::string> nodes;
      for (const sched::MemberPlacement& m : r.placement.members) {
        nodes.push_back(cluster_->node(m.node).name);
      }
      std::sort(nodes.begin(), nodes.end());
      nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
      // The scheduler's explanation says where and why; keep the node list
      // and generation so the message stands on its own.
      const std::string msg =
          absl::StrCat("bound ", r.placement.members.size(), " members to ", nodes.size(),
                       " node(s): ", absl::StrJoin(nodes, ", "), " (generation ", gen, ")",
                       r.trace.explanation.empty() ? "" : "; ", r.trace.explanation);
      int64_t base = 0;
      absl::StatusOr<int64_t> rev = Update(
          rec->key, rec->revision,
          [&](Json& obj) {
            Json& st = StatusOf(obj);
            if (Terminal(Str(st, "phase"))) return false;
            st["phase"] = "Scheduled";
            st["placement"] = placement;
            st["generation"] = gen;
            st["attempts"] = rec->attempts + 1;
            st["priority"] = job.priority;
            st["scheduledTime"] = Timestamp(now);
            st["message"] = msg;
            SetCondition(st, "Scheduled", "True", "Scheduled", msg, now);
            return true;
          },
          {"Scheduled", msg}, &base);
      if (rev.ok()) {
        rec->bound = true;
        rec->generation = gen;
        ++rec->attempts;
        rec->phase = "Scheduled";
        rec->last_message = msg;
        rec->revision = *rev;
        ++stats_.bound;
      } else {
        // Memory must never hold less than the store: undo, retry later.
        (void)scheduler_->Release(job.key());
        ++stats_.bind_conflicts;
        queue_->Requeue(*std::move(qj), now,
                        absl::StrCat("binding not written: ", rev.status().message()));
      }
      continue;
    }
    for (const std::string& v : r.victims) {
      if (JobRec* victim = JobBySchedKey(v); victim != nullptr && victim->bound) {
        if (metrics_) {
          metrics_->preemptions.With({}).Inc();
          if (const sched::Placement* p = cluster_->FindPlacement(v)) {
            double gpus = 0;
            for (const auto& m : p->members) {
              for (const auto& g : m.gpus) gpus += g.milli / 1000.0;
            }
            metrics_->preempted_gpus.With({}).Inc(gpus);
          }
        }
        (void)Requeue(
            *victim, "Preempted",
            {"Preempted",
             absl::StrCat("preempted by ", job.key(), " (priority ", job.priority, ")"), true});
      }
    }
    std::string reason = r.reason.empty() ? "no placement found" : r.reason;
    const std::string msg = absl::StrCat("waiting: ", reason);
    queue_->Requeue(*std::move(qj), now, reason);
    if (msg != rec->last_message) {
      (void)SetJobPhase(*rec, rec->phase, {"Unschedulable", msg, false, false}, false);
    }
  }
}

void SchedulingController::UpdateGauges() {
  if (!metrics_) return;
  // Pending jobs change with every cycle; they are few next to nodes.
  metrics_->pending.Clear();
  metrics_->job_pending.Clear();
  const absl::Time now = clock_.Now();
  int exported = 0;
  for (const sched::QueuedJob* q : queue_->Waiting()) {
    metrics_->pending.With({q->job->queue}).Add(1);
    // Per-job series are capped so a flood of pending jobs cannot blow up
    // the scrape; the alert only needs the long waiters.
    if (exported++ < 1000) {
      const JobRec* rec = JobBySchedKey(q->job->key());
      absl::Time since = rec != nullptr ? rec->queued_since : now;
      metrics_->job_pending.With({q->job->ns, q->job->name, q->last_reason})
          .Set(absl::ToDoubleSeconds(now - since));
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
  // Node readiness changes rarely while the cluster generation changes on
  // every bind: touch a node's series only when its value changed. After the
  // loop every live node is exported, so more exported names than nodes
  // means some node went away: then rebuild the family.
  auto export_ready = [&] {
    for (const auto& [key, node] : nodes_) {
      auto [it, inserted] = exported_ready_.try_emplace(node->name, node->ready);
      if (inserted || it->second != node->ready) {
        it->second = node->ready;
        metrics_->node_ready.With({node->name}).Set(node->ready ? 1 : 0);
      }
    }
  };
  export_ready();
  if (exported_ready_.size() > nodes_.size()) {
    metrics_->node_ready.Clear();
    exported_ready_.clear();
    export_ready();
  }
}

// --- Background loop ------------------------------------------------------

void SchedulingController::RunInBackground() {
  stop_ = false;
  thread_ = std::thread([this] {
    bool announced = false;
    while (!stop_) {
      absl::Status s = Step();
      if (!s.ok()) {
        std::cerr << "controller: " << s.message() << "\n";
        absl::SleepFor(options_.tick);
        continue;
      }
      if (!announced) {
        announced = true;
        std::cerr << "controller: resumed at revision " << revision_ << " with "
                  << cluster_->num_nodes() << " nodes, " << jobs_.size() << " jobs, "
                  << stats_.restored << " placements restored in "
                  << absl::ToDoubleMilliseconds(stats_.start_time) << " ms" << std::endl;
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