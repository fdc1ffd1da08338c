#include "operator/operator.h"

#include <atomic>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "api/model_lineage.h"
#include "common/status_macros.h"
#include "kube/api_error.h"
#include "kube/event_recorder.h"
#include "kube/informer.h"
#include "kube/work_queue.h"
#include "operator/inference_plan.h"
#include "operator/operator_internal.h"

namespace tessera::op {

using namespace internal;  // NOLINT: the module's own helpers

namespace internal {

std::vector<kube::ObjectPtr> ByIndex(const kube::Informer& inf, const char* index,
                                     const std::string& value) {
  std::vector<kube::ObjectPtr> out;
  (void)inf.store().ByIndex(index, value, &out);
  return out;
}

absl::Status CreateIfAbsent(Env& env, const kube::ResourceType& t, const std::string& ns,
                            const Json& obj) {
  absl::StatusOr<Json> r = env.client.Create(t, ns, obj);
  if (r.ok() || kube::IsApiAlreadyExists(r.status())) return absl::OkStatus();
  return r.status();
}

absl::Status DeleteObject(Env& env, const kube::ResourceType& t, const std::string& ns,
                          const std::string& name, const std::string& uid) {
  kube::DeleteOptions d;
  d.uid_precondition = uid;
  d.propagation_policy = "Background";
  absl::Status s = env.client.Delete(t, ns, name, d);
  if (s.ok() || kube::IsApiNotFound(s) || kube::IsApiConflict(s)) return absl::OkStatus();
  return s;
}

absl::Status WriteStatus(Env& env, const kube::ResourceType& t, const Json& obj,
                         const Json& status) {
  Json body = obj;
  body["status"] = status;
  absl::StatusOr<Json> w =
      env.client.Update(t, StrOr(Meta(obj), "namespace"), StrOr(Meta(obj), "name"), body, "status");
  if (!w.ok()) return kube::IsApiNotFound(w.status()) ? absl::OkStatus() : w.status();
  ++env.counters.status_writes;
  return absl::OkStatus();
}

}  // namespace internal

namespace {

std::string NsKey(const Json& obj, const std::string& name) {
  return StrOr(Meta(obj), "namespace") + "/" + name;
}
// "NS/JOB" of a child labelled with its TrainingJob.
std::vector<std::string> JobOfChild(const Json& obj) {
  const std::string job = Label(obj, kJobLabel);
  if (job.empty()) return {};
  return {NsKey(obj, job)};
}
std::vector<std::string> ServiceOfChild(const Json& obj) {
  const std::string svc = Label(obj, kServiceLabel);
  if (svc.empty()) return {};
  return {NsKey(obj, svc)};
}
std::vector<std::string> JobOfCheckpoint(const Json& obj) {
  const std::string job = StrOr(Sub(obj, "spec"), "jobName");
  if (job.empty()) return {};
  return {NsKey(obj, job)};
}
std::vector<std::string> ModelOfService(const Json& obj) {
  const std::string mv = StrOr(Sub(obj, "spec"), "modelVersion");
  if (mv.empty()) return {};
  return {NsKey(obj, mv)};
}
std::vector<std::string> CheckpointOfModel(const Json& obj) {
  const std::string cp = StrOr(Sub(obj, "spec"), "checkpoint");
  if (cp.empty()) return {};
  return {NsKey(obj, cp)};
}

}  // namespace

class Operator::Impl {
 public:
  Impl(kube::RestClient& client, const Clock& clock, metrics::Registry& registry,
       OperatorOptions options)
      : opts_(std::move(options)),
        events_(client, clock, "tessera.dev/operator", opts_.identity, opts_.log),
        queue_(clock),
        env_{client,
             clock,
             opts_,
             caches_,
             events_,
             counters_,
             [this](const std::string& key, absl::Duration d) { queue_.AddAfter(key, d); }},
        inference_(env_),
        reconciles_(registry.AddCounter("tessera_operator_reconciles_total",
                                        "Reconciles of a workload object, by kind and result.",
                                        {"kind", "result"})) {}

  absl::Status Start() {
    kube::RestClient& client = env_.client;
    // The CRDs must be installed: a missing one is one clear error, not a reflector retrying.
    absl::StatusOr<kube::HttpResult> r = client.Raw("GET", "/apis/tessera.dev/v1");
    if (!r.ok()) return r.status();
    for (const char* plural :
         {"trainingjobs", "inferenceservices", "checkpoints", "modelversions"}) {
      if (r->status != 200 || r->body.find(absl::StrCat("\"", plural, "\"")) == std::string::npos) {
        return absl::FailedPreconditionError(
            absl::StrCat("the tessera.dev/v1 CRDs are not installed (", plural,
                         " is not served; kubectl apply -f deploy/kubernetes/crds/)"));
      }
    }
    const bool has_queues = r->body.find("\"queues\"") != std::string::npos;
    const bool has_pools = r->body.find("\"gpupools\"") != std::string::npos;
    absl::StatusOr<kube::HttpResult> pg = client.Raw("GET", "/apis/scheduling.x-k8s.io/v1alpha1");
    if (!pg.ok() || pg->status != 200 || pg->body.find("\"podgroups\"") == std::string::npos) {
      return absl::FailedPreconditionError(
          "the scheduling.x-k8s.io/v1alpha1 PodGroup CRD is not installed (kubectl apply -f "
          "deploy/kubernetes/crds/scheduling.x-k8s.io_podgroups.yaml)");
    }

    using KeysOf = std::function<std::vector<std::string>(const Json&)>;
    // An informer whose every event queues the keys `keys_of` gives (already prefixed).
    auto make = [&](const kube::ResourceType& t, const std::string& selector,
                    const std::vector<std::pair<const char*, KeysOf>>& indexes,
                    const KeysOf& keys_of) {
      kube::ReflectorOptions ro;
      ro.type = t;
      ro.label_selector = selector;
      ro.log = opts_.log;
      auto inf = std::make_unique<kube::Informer>(client, ro);
      for (const auto& [name, fn] : indexes) (void)inf->AddIndexer(name, fn);
      if (keys_of) {
        auto note = [this, keys_of](const kube::ObjectPtr& o) {
          for (const std::string& k : keys_of(*o)) queue_.Add(k);
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
    auto prefixed = [](const char* kind, const KeysOf& f) -> KeysOf {
      return [kind, f](const Json& o) {
        std::vector<std::string> keys = f(o);
        for (std::string& k : keys) k = absl::StrCat(kind, "/", k);
        return keys;
      };
    };
    auto self = [](const Json& o) { return std::vector<std::string>{kube::KeyOf(o)}; };
    caches_.jobs = make(kube::TrainingJobsResource(), "", {}, prefixed("TrainingJob", self));
    caches_.pods = make(kube::PodsResource(), kJobLabel, {{kJobIndex, JobOfChild}},
                        prefixed("TrainingJob", JobOfChild));
    caches_.replicas = make(kube::PodsResource(), kServiceLabel, {{kServiceIndex, ServiceOfChild}},
                            prefixed("InferenceService", ServiceOfChild));
    caches_.groups = make(kube::CoschedulingPodGroupsResource(), kJobLabel,
                          {{kJobIndex, JobOfChild}}, prefixed("TrainingJob", JobOfChild));
    KeysOf job_of_child = prefixed("TrainingJob", JobOfChild);
    KeysOf service_of_child = prefixed("InferenceService", ServiceOfChild);
    caches_.services = make(kube::ServicesResource(), "", {{kJobIndex, JobOfChild}},
                            [job_of_child, service_of_child](const Json& o) {
                              std::vector<std::string> k = job_of_child(o);
                              for (std::string& s : service_of_child(o)) k.push_back(s);
                              return k;
                            });
    caches_.models =
        make(kube::ModelVersionsResource(), "", {{kCheckpointIndex, CheckpointOfModel}},
             [this](const Json& o) {
               std::vector<std::string> k = {"ModelVersion/" + kube::KeyOf(o)};
               // Services naming it may now start or roll.
               for (const auto& s : ByIndex(*caches_.inference, kModelIndex, kube::KeyOf(o))) {
                 k.push_back("InferenceService/" + kube::KeyOf(*s));
               }
               return k;
             });
    caches_.inference = make(kube::InferenceServicesResource(), "", {{kModelIndex, ModelOfService}},
                             [](const Json& o) {
                               std::vector<std::string> k = {"InferenceService/" + kube::KeyOf(o)};
                               for (const std::string& m : ModelOfService(o)) {
                                 k.push_back("ModelVersion/" + m);
                               }
                               return k;
                             });
    caches_.checkpoints = make(
        kube::CheckpointsResource(), "", {{kJobIndex, JobOfCheckpoint}}, [this](const Json& o) {
          std::vector<std::string> k;
          for (const std::string& j : JobOfCheckpoint(o)) k.push_back("TrainingJob/" + j);
          for (const auto& m : ByIndex(*caches_.models, kCheckpointIndex, kube::KeyOf(o))) {
            k.push_back("ModelVersion/" + kube::KeyOf(*m));
          }
          return k;
        });
    if (has_queues) {
      // A queue that appears (or goes) changes what waiting workloads may do.
      caches_.queues = make(kube::QueuesResource(), "", {}, [this](const Json&) {
        std::vector<std::string> k;
        for (const std::string& j : caches_.jobs->store().ListKeys())
          k.push_back("TrainingJob/" + j);
        for (const std::string& s : caches_.inference->store().ListKeys()) {
          k.push_back("InferenceService/" + s);
        }
        return k;
      });
    }
    if (has_pools) {
      // Pools are few: every change of a pool, a Node or a bound Pod requeues the one key that
      // reconciles them all, after a second (events of a busy cluster coalesce).
      auto pools_key = [this](const Json&) {
        queue_.AddAfter("GPUPool/-/-", absl::Seconds(1));
        return std::vector<std::string>{};
      };
      caches_.pools = make(kube::GpuPoolsResource(), "", {},
                           [](const Json&) { return std::vector<std::string>{"GPUPool/-/-"}; });
      caches_.nodes = make(kube::NodesResource(), "", {}, pools_key);
      kube::ReflectorOptions ro;
      ro.type = kube::PodsResource();
      ro.field_selector = "spec.nodeName!=";
      ro.log = opts_.log;
      caches_.bound_pods = std::make_unique<kube::Informer>(client, ro);
      caches_.bound_pods->AddEventHandlers(
          {[pools_key](const kube::ObjectPtr& o, bool) { pools_key(*o); },
           [pools_key](const kube::ObjectPtr&, const kube::ObjectPtr& o) { pools_key(*o); },
           [pools_key](const kube::ObjectPtr& o) { pools_key(*o); }});
    }
    std::vector<std::pair<const char*, kube::Informer*>> infs = {
        {"trainingjobs", caches_.jobs.get()},
        {"inferenceservices", caches_.inference.get()},
        {"modelversions", caches_.models.get()},
        {"checkpoints", caches_.checkpoints.get()},
        {"pods of trainingjobs", caches_.pods.get()},
        {"pods of inferenceservices", caches_.replicas.get()},
        {"podgroups", caches_.groups.get()},
        {"services", caches_.services.get()}};
    if (caches_.queues) infs.emplace_back("queues", caches_.queues.get());
    if (caches_.pools) {
      infs.emplace_back("gpupools", caches_.pools.get());
      infs.emplace_back("nodes", caches_.nodes.get());
      infs.emplace_back("bound pods", caches_.bound_pods.get());
    }
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
    if (!opts_.webhook.addr.empty()) {
      absl::StatusOr<std::unique_ptr<AdmissionWebhook>> w =
          AdmissionWebhook::Start(opts_.webhook, [this](const Json& req) { return Judge(req); });
      if (!w.ok()) return w.status();
      webhook_ = *std::move(w);
    }
    opts_.log.Info("operator started", {{"workers", opts_.workers}, {"queues", has_queues}});
    return absl::OkStatus();
  }

  void Stop() {
    if (webhook_) webhook_->Stop();
    queue_.ShutDown();
    for (std::thread& t : workers_) t.join();
    workers_.clear();
    for (auto* i : {&caches_.jobs, &caches_.pods, &caches_.replicas, &caches_.groups,
                    &caches_.services, &caches_.checkpoints, &caches_.queues, &caches_.inference,
                    &caches_.models, &caches_.pools, &caches_.nodes, &caches_.bound_pods}) {
      if (*i) (*i)->Stop();
    }
  }

  bool Settle(absl::Duration timeout) {
    // The queue has its own lock, so idleness is polled (a test helper, not a hot path).
    // Idle twice 20 ms apart: a key handed out by Get is not yet counted busy for an instant.
    const absl::Time deadline = absl::Now() + timeout;
    int idle = 0;
    while (true) {
      idle = busy_.load() == 0 && queue_.Len() == 0 ? idle + 1 : 0;
      if (idle >= 3) return true;
      if (absl::Now() >= deadline) return false;
      absl::SleepFor(absl::Milliseconds(10));
    }
  }

  OperatorStats stats() const {
    OperatorStats s;
    s.reconciles = counters_.reconciles.load();
    s.errors = counters_.errors.load();
    s.pods_created = counters_.pods_created.load();
    s.pods_deleted = counters_.pods_deleted.load();
    s.status_writes = counters_.status_writes.load();
    s.checkpoints_recorded = counters_.checkpoints_recorded.load();
    return s;
  }

  int webhook_port() const { return webhook_ ? webhook_->port() : 0; }

 private:
  // Admission: a ModelVersion that InferenceServices serve may not be deleted.
  std::optional<std::string> Judge(const Json& req) {
    if (StrOr(req, "operation") != "DELETE" ||
        StrOr(Sub(req, "resource"), "resource") != "modelversions") {
      return std::nullopt;
    }
    const std::string ns = StrOr(req, "namespace"), name = StrOr(req, "name");
    const std::vector<std::string> served = ServingServices(env_, ns, name);
    if (served.empty()) return std::nullopt;
    return api::ServedDeletionMessage(name, served);
  }

  // "Kind/NS/NAME" -> the kind's controller.
  absl::Status Dispatch(const std::string& key, std::string* kind) {
    std::vector<std::string> parts = absl::StrSplit(key, absl::MaxSplits('/', 2));
    if (parts.size() != 3) return absl::OkStatus();
    *kind = parts[0];
    if (parts[0] == "TrainingJob") return ReconcileTrainingJob(env_, parts[1], parts[2]);
    if (parts[0] == "InferenceService") return inference_.Reconcile(parts[1], parts[2]);
    if (parts[0] == "ModelVersion") return ReconcileModelVersion(env_, parts[1], parts[2]);
    if (parts[0] == "GPUPool") return ReconcilePools(env_);
    return absl::OkStatus();
  }

  void Work() {
    while (std::optional<std::string> key = queue_.Get()) {
      ++busy_;
      std::string kind;
      absl::Status s = Dispatch(*key, &kind);
      ++counters_.reconciles;
      if (!s.ok()) ++counters_.errors;
      reconciles_.With({kind, s.ok() ? "ok" : "error"}).Inc();
      if (s.ok()) {
        queue_.Forget(*key);
      } else {
        opts_.log.Debug("reconcile failed; retrying", {{"key", *key}, {"error", s.ToString()}});
        queue_.AddRateLimited(*key);
      }
      queue_.Done(*key);
      --busy_;
    }
  }

  OperatorOptions opts_;
  kube::EventRecorder events_;
  kube::WorkQueue queue_;
  Caches caches_;
  Counters counters_;
  Env env_;
  InferenceController inference_;
  metrics::Family<metrics::Counter>& reconciles_;
  std::vector<std::thread> workers_;
  std::atomic<int> busy_{0};
  std::unique_ptr<AdmissionWebhook> webhook_;
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
int Operator::webhook_port() const { return impl_->webhook_port(); }

}  // namespace tessera::op
