#include "operator/operator.h"

#include <atomic>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "kube/api_error.h"
#include "kube/event_recorder.h"
#include "kube/informer.h"
#include "kube/work_queue.h"
#include "operator/training_plan.h"

namespace tessera::op {
namespace {

constexpr char kJobIndex[] = "job";
constexpr char kLastCheckpointAnnotation[] = "tessera.dev/last-checkpoint";

std::string Str(const Json& obj, const char* key, const std::string& dflt = "") {
  if (!obj.is_object()) return dflt;
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : dflt;
}
const Json& Meta(const Json& obj) {
  static const Json* const kEmpty = new Json(Json::object());
  auto it = obj.find("metadata");
  return it == obj.end() ? *kEmpty : *it;
}
std::string Annotation(const Json& obj, const char* key) {
  return Str(Meta(obj).value("annotations", Json::object()), key);
}
// "NS/JOB" of a child labelled with its TrainingJob.
std::vector<std::string> JobOfChild(const Json& obj) {
  const std::string job = Str(Meta(obj).value("labels", Json::object()), kJobLabel);
  if (job.empty()) return {};
  return {Str(Meta(obj), "namespace") + "/" + job};
}
// "NS/JOB" of a Checkpoint (spec.jobName).
std::vector<std::string> JobOfCheckpoint(const Json& obj) {
  const std::string job = Str(obj.value("spec", Json::object()), "jobName");
  if (job.empty()) return {};
  return {Str(Meta(obj), "namespace") + "/" + job};
}

}  // namespace

class Operator::Impl {
 public:
  Impl(kube::RestClient& client, const Clock& clock, metrics::Registry& registry,
       OperatorOptions options)
      : client_(client),
        clock_(clock),
        opts_(std::move(options)),
        events_(client_, clock_, "tessera.dev/operator", opts_.identity, opts_.log),
        queue_(clock_),
        reconciles_(registry.AddCounter("tessera_operator_reconciles_total",
                                        "Reconciles of a workload object, by kind and result.",
                                        {"kind", "result"})) {}

  absl::Status Start() {
    // The CRDs must be installed: a missing one is one clear error, not a reflector retrying.
    absl::StatusOr<kube::HttpResult> r = client_.Raw("GET", "/apis/tessera.dev/v1");
    if (!r.ok()) return r.status();
    if (r->status != 200 || r->body.find("\"trainingjobs\"") == std::string::npos) {
      return absl::FailedPreconditionError(
          "the tessera.dev/v1 CRDs are not installed (kubectl apply -f "
          "deploy/kubernetes/crds/)");
    }
    has_queues_ = r->body.find("\"queues\"") != std::string::npos;
    absl::StatusOr<kube::HttpResult> pg = client_.Raw("GET", "/apis/scheduling.x-k8s.io/v1alpha1");
    if (!pg.ok() || pg->status != 200 || pg->body.find("\"podgroups\"") == std::string::npos) {
      return absl::FailedPreconditionError(
          "the scheduling.x-k8s.io/v1alpha1 PodGroup CRD is not installed (kubectl apply -f "
          "deploy/kubernetes/crds/scheduling.x-k8s.io_podgroups.yaml)");
    }

    auto make = [&](const kube::ResourceType& t, const std::string& selector,
                    std::function<std::vector<std::string>(const Json&)> job_of) {
      kube::ReflectorOptions ro;
      ro.type = t;
      ro.label_selector = selector;
      ro.log = opts_.log;
      auto inf = std::make_unique<kube::Informer>(client_, ro);
      if (job_of) {
        (void)inf->AddIndexer(kJobIndex, job_of);
        auto note = [this, job_of](const kube::ObjectPtr& o) {
          for (const std::string& k : job_of(*o)) queue_.Add(k);
        };
        inf->AddEventHandlers({[note](const kube::ObjectPtr& o, bool) { note(o); },
                               [note](const kube::ObjectPtr& a, const kube::ObjectPtr& b) {
                                 note(a);
                                 note(b);
                               },
                               [note](const kube::ObjectPtr& o) { note(o); }});
      }
      return inf;
    };
    jobs_ = make(kube::TrainingJobsResource(), "",
                 [](const Json& o) { return std::vector<std::string>{kube::KeyOf(o)}; });
    pods_ = make(kube::PodsResource(), kJobLabel, JobOfChild);
    groups_ = make(kube::CoschedulingPodGroupsResource(), kJobLabel, JobOfChild);
    services_ = make(kube::ServicesResource(), kJobLabel, JobOfChild);
    checkpoints_ = make(kube::CheckpointsResource(), "", JobOfCheckpoint);
    if (has_queues_) {
      queues_ = make(kube::QueuesResource(), "", nullptr);
      // A queue that appears (or goes) changes what waiting jobs may do.
      auto all = [this](const kube::ObjectPtr&) {
        for (const std::string& k : jobs_->store().ListKeys()) queue_.Add(k);
      };
      queues_->AddEventHandlers({[all](const kube::ObjectPtr& o, bool initial) {
                                   if (!initial) all(o);
                                 },
                                 [](const kube::ObjectPtr&, const kube::ObjectPtr&) {}, all});
    }
    std::vector<std::pair<const char*, kube::Informer*>> infs = {
        {"trainingjobs", jobs_.get()},
        {"pods", pods_.get()},
        {"podgroups", groups_.get()},
        {"services", services_.get()},
        {"checkpoints", checkpoints_.get()}};
    if (queues_) infs.emplace_back("queues", queues_.get());
    for (auto& [what, i] : infs) i->Start();
    const absl::Time deadline = absl::Now() + opts_.sync_timeout;
    for (auto& [what, i] : infs) {
      if (!i->WaitForSync(deadline - absl::Now())) {
        return absl::DeadlineExceededError(absl::StrCat("the informer on ", what,
                                                        " did not sync within ",
                                                        absl::FormatDuration(opts_.sync_timeout)));
      }
    }
    for (int i = 0; i < std::max(1, opts_.workers); ++i) {
      workers_.emplace_back([this] { Work(); });
    }
    opts_.log.Info("operator started", {{"workers", opts_.workers}, {"queues", has_queues_}});
    return absl::OkStatus();
  }

  void Stop() {
    queue_.ShutDown();
    for (std::thread& t : workers_) t.join();
    workers_.clear();
    for (auto* i : {&jobs_, &pods_, &groups_, &services_, &checkpoints_, &queues_}) {
      if (*i) (*i)->Stop();
    }
  }

  bool Settle(absl::Duration timeout) {
    // The queue has its own lock, so idleness is polled (a test helper, not a hot path).
    const absl::Time deadline = absl::Now() + timeout;
    while (true) {
      {
        absl::MutexLock l(&mu_);
        if (busy_ == 0 && queue_.Len() == 0) return true;
      }
      if (absl::Now() >= deadline) return false;
      absl::SleepFor(absl::Milliseconds(10));
    }
  }

  OperatorStats stats() const {
    absl::MutexLock l(&mu_);
    return stats_;
  }

 private:
  void Work() {
    while (std::optional<std::string> key = queue_.Get()) {
      {
        absl::MutexLock l(&mu_);
        ++busy_;
      }
      absl::Status s = ReconcileTrainingJob(*key);
      {
        absl::MutexLock l(&mu_);
        ++stats_.reconciles;
        if (!s.ok()) ++stats_.errors;
      }
      reconciles_.With({"TrainingJob", s.ok() ? "ok" : "error"}).Inc();
      if (s.ok()) {
        queue_.Forget(*key);
      } else {
        opts_.log.Debug("reconcile failed; retrying", {{"key", *key}, {"error", s.ToString()}});
        queue_.AddRateLimited(*key);
      }
      queue_.Done(*key);
      absl::MutexLock l(&mu_);
      --busy_;
    }
  }

  std::vector<kube::ObjectPtr> ByJob(const kube::Informer& inf, const std::string& key) {
    std::vector<kube::ObjectPtr> out;
    (void)inf.store().ByIndex(kJobIndex, key, &out);
    return out;
  }

  // The newest Ready Checkpoint among `cps` (by spec.step).
  static std::optional<ResumePoint> Newest(const std::string& job,
                                           const std::vector<kube::ObjectPtr>& cps,
                                           std::string* created) {
    std::optional<ResumePoint> best;
    for (const kube::ObjectPtr& c : cps) {
      const Json& spec = (*c)["spec"];
      if (Str(spec, "jobName") != job) continue;
      if (Str(c->value("status", Json::object()), "phase") != "Ready") continue;
      const int64_t step = spec.value("step", int64_t{0});
      if (!best || step > best->step) {
        best = ResumePoint{Str(Meta(*c), "name"), Str(spec, "path"), step};
        *created = Str(Meta(*c), "creationTimestamp");
      }
    }
    return best;
  }

  absl::Status ReconcileTrainingJob(const std::string& key) {
    kube::ObjectPtr job = jobs_->store().Get(key);
    if (!job || Meta(*job).contains("deletionTimestamp")) return absl::OkStatus();
    const std::string ns = Str(Meta(*job), "namespace");
    const std::string name = Str(Meta(*job), "name");
    const std::vector<kube::ObjectPtr> pods = ByJob(*pods_, key);
    const std::vector<kube::ObjectPtr> groups = ByJob(*groups_, key);
    const std::vector<kube::ObjectPtr> cps = ByJob(*checkpoints_, key);
    RETURN_IF_ERROR(RecordCheckpoints(*job, pods, cps));

    TrainingInputs in;
    in.job = job.get();
    for (const auto& p : pods) in.pods.push_back(p.get());
    for (const auto& g : groups) in.pod_groups.push_back(g.get());
    in.service_exists = services_->store().Get(ns + "/" + ServiceName(name)) != nullptr;
    std::string newest_created;
    in.newest_checkpoint = Newest(name, cps, &newest_created);
    const std::string queue = Str(job->value("spec", Json::object()), "queue", "default");
    in.queue_known = !queues_ || queue == "default" || queues_->store().Get(queue) != nullptr;
    in.now = clock_.Now();
    const TrainingPlan plan = PlanTrainingJob(in, opts_.gang);

    // The status first: the decision (a new generation, say) is recorded before it is acted on,
    // and only if nobody changed the job since it was read.
    if (plan.status) {
      Json body = *job;
      body["status"] = *plan.status;
      absl::StatusOr<Json> w =
          client_.Update(kube::TrainingJobsResource(), ns, name, body, "status");
      if (!w.ok()) return kube::IsApiNotFound(w.status()) ? absl::OkStatus() : w.status();
      absl::MutexLock l(&mu_);
      ++stats_.status_writes;
    }
    const kube::ObjectReference ref = kube::ReferenceTo(*job);
    for (const EventNote& e : plan.events) events_.Post(ref, e.type, e.reason, e.action, e.note);
    for (const ObjectName& p : plan.delete_pods) {
      RETURN_IF_ERROR(Delete(kube::PodsResource(), ns, p));
      absl::MutexLock l(&mu_);
      ++stats_.pods_deleted;
    }
    for (const ObjectName& g : plan.delete_pod_groups) {
      RETURN_IF_ERROR(Delete(kube::CoschedulingPodGroupsResource(), ns, g));
    }
    if (plan.create_service) {
      RETURN_IF_ERROR(CreateIfAbsent(kube::ServicesResource(), ns, *plan.create_service));
    }
    if (plan.create_pod_group) {
      RETURN_IF_ERROR(
          CreateIfAbsent(kube::CoschedulingPodGroupsResource(), ns, *plan.create_pod_group));
    }
    for (const Json& p : plan.create_pods) {
      RETURN_IF_ERROR(CreateIfAbsent(kube::PodsResource(), ns, p));
      absl::MutexLock l(&mu_);
      ++stats_.pods_created;
    }
    // The gang's Pods tell the scheduler's preemption how recent their checkpoint is.
    if (!newest_created.empty()) {
      for (const kube::ObjectPtr& p : pods) {
        const std::string phase = Str(p->value("status", Json::object()), "phase");
        if (phase == "Succeeded" || phase == "Failed" || Meta(*p).contains("deletionTimestamp") ||
            Annotation(*p, kLastCheckpointAnnotation) == newest_created) {
          continue;
        }
        absl::StatusOr<Json> w = client_.MergePatch(
            kube::PodsResource(), ns, Str(Meta(*p), "name"),
            {{"metadata", {{"annotations", {{kLastCheckpointAnnotation, newest_created}}}}}});
        if (!w.ok() && !kube::IsApiNotFound(w.status())) return w.status();
      }
    }
    return absl::OkStatus();
  }

  // Checkpoints that members report on their Pods become Ready Checkpoint objects
  // "{job}-step-{step}", owned by the job (created, then status Ready: the status subresource
  // drops a status sent on create).
  absl::Status RecordCheckpoints(const Json& job, const std::vector<kube::ObjectPtr>& pods,
                                 const std::vector<kube::ObjectPtr>& cps) {
    const std::string ns = Str(Meta(job), "namespace");
    const std::string name = Str(Meta(job), "name");
    for (const kube::ObjectPtr& p : pods) {
      const std::string step_text = Annotation(*p, kCheckpointStepAnnotation);
      int64_t step = 0;
      if (step_text.empty() || !absl::SimpleAtoi(step_text, &step) || step < 0) continue;
      const std::string cp_name = absl::StrCat(name, "-step-", step);
      bool ready = false;
      for (const kube::ObjectPtr& c : cps) {
        if (Str(Meta(*c), "name") == cp_name) {
          ready = Str(c->value("status", Json::object()), "phase") == "Ready";
          if (!ready) break;
        }
      }
      if (ready) continue;
      Json cp = {{"apiVersion", "tessera.dev/v1"},
                 {"kind", "Checkpoint"},
                 {"metadata",
                  {{"name", cp_name},
                   {"namespace", ns},
                   {"labels", {{kJobLabel, name}}},
                   {"ownerReferences", Json::array({ControllerReference(job)})}}},
                 {"spec",
                  {{"jobName", name},
                   {"step", step},
                   {"path", Annotation(*p, kCheckpointPathAnnotation)}}}};
      absl::StatusOr<Json> created = client_.Create(kube::CheckpointsResource(), ns, cp);
      if (!created.ok() && kube::IsApiAlreadyExists(created.status())) {
        created = client_.Get(kube::CheckpointsResource(), ns, cp_name);
      }
      if (!created.ok()) return created.status();
      Json body = *created;
      body["status"] = {{"phase", "Ready"},
                        {"reportedBy", Str(Meta(*p), "name")},
                        {"message", "reported by the member on its Pod"}};
      absl::StatusOr<Json> w =
          client_.Update(kube::CheckpointsResource(), ns, cp_name, body, "status");
      if (!w.ok()) return w.status();
      absl::MutexLock l(&mu_);
      ++stats_.checkpoints_recorded;
    }
    return absl::OkStatus();
  }

  absl::Status Delete(const kube::ResourceType& t, const std::string& ns, const ObjectName& o) {
    kube::DeleteOptions d;
    d.uid_precondition = o.uid;
    d.propagation_policy = "Background";
    absl::Status s = client_.Delete(t, ns, o.name, d);
    // Gone already, or another incarnation by that name (the uid precondition): nothing to do.
    if (s.ok() || kube::IsApiNotFound(s) || kube::IsApiConflict(s)) return absl::OkStatus();
    return s;
  }

  absl::Status CreateIfAbsent(const kube::ResourceType& t, const std::string& ns, const Json& o) {
    absl::StatusOr<Json> r = client_.Create(t, ns, o);
    if (r.ok() || kube::IsApiAlreadyExists(r.status())) return absl::OkStatus();
    return r.status();
  }

  kube::RestClient& client_;
  const Clock& clock_;
  OperatorOptions opts_;
  kube::EventRecorder events_;
  kube::WorkQueue queue_;
  metrics::Family<metrics::Counter>& reconciles_;
  bool has_queues_ = false;
  std::unique_ptr<kube::Informer> jobs_, pods_, groups_, services_, checkpoints_, queues_;
  std::vector<std::thread> workers_;
  mutable absl::Mutex mu_;
  int busy_ ABSL_GUARDED_BY(mu_) = 0;
  OperatorStats stats_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<std::unique_ptr<Operator>> Operator::Create(kube::RestClient& client,
                                                           const Clock& clock,
                                                           metrics::Registry& registry,
                                                           OperatorOptions options) {
  if (options.workers < 1) return absl::InvalidArgumentError("workers: must be at least 1");
  return std::unique_ptr<Operator>(
      new Operator(std::make_unique<Impl>(client, clock, registry, std::move(options))));
}

Operator::Operator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Operator::~Operator() { impl_->Stop(); }
absl::Status Operator::Start() { return impl_->Start(); }
void Operator::Stop() { impl_->Stop(); }
bool Operator::Settle(absl::Duration timeout) { return impl_->Settle(timeout); }
OperatorStats Operator::stats() const { return impl_->stats(); }

}  // namespace tessera::op
