// What the operator's per-kind controllers share (operator.cc owns it): the informer caches, the
// API client, the Event recorder, counters, and small helpers over JSON objects. Internal to the
// operator module.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "api/gpu_pool.h"
#include "common/clock.h"
#include "controller/autoscaler.h"
#include "kube/event_recorder.h"
#include "kube/informer.h"
#include "kube/rest_client.h"
#include "operator/json_fields.h"
#include "operator/operator.h"

namespace tessera::op::internal {

// Index "job" on Pods, PodGroups, Services and Checkpoints: "NS/NAME" of the TrainingJob.
inline constexpr char kJobIndex[] = "job";
// Index "service" on Pods: "NS/NAME" of the InferenceService.
inline constexpr char kServiceIndex[] = "service";
// Index "model" on InferenceServices: "NS/NAME" of the ModelVersion they serve.
inline constexpr char kModelIndex[] = "model";
// Index "checkpoint" on ModelVersions: "NS/NAME" of the Checkpoint they come from.
inline constexpr char kCheckpointIndex[] = "checkpoint";
// On a ModelVersion while InferenceServices serve it.
inline constexpr char kServedFinalizer[] = "tessera.dev/served";

// The informers, started and synced before any worker runs. `queues` is null when the Queue CRD
// is not served (queue names are then not checked).
struct Caches {
  std::unique_ptr<kube::Informer> jobs, pods, groups, services, checkpoints, queues, inference,
      models;
  // Pods of InferenceServices (labelled tessera.dev/inferenceservice), apart from the
  // TrainingJobs' (`pods`): a label selector cannot ask for either label.
  std::unique_ptr<kube::Informer> replicas;
  // GPUPools (null when the CRD is not served), every Node, and every Pod bound to a node (what
  // holds GPUs there).
  std::unique_ptr<kube::Informer> pools, nodes, bound_pods;
};

struct Counters {
  std::atomic<int64_t> reconciles{0}, errors{0}, pods_created{0}, pods_deleted{0}, status_writes{0},
      checkpoints_recorded{0};
};

// Borrowed by the controllers for the operator's life; every member is safe to use from any
// worker thread.
struct Env {
  kube::RestClient& client;
  const Clock& clock;
  const OperatorOptions& opts;
  Caches& caches;
  kube::EventRecorder& events;
  Counters& counters;
  // Reconcile `key` ("Kind/NS/NAME") again after `delay` (periodic work such as autoscaling).
  std::function<void(const std::string& key, absl::Duration delay)> requeue_after;
};

std::vector<kube::ObjectPtr> ByIndex(const kube::Informer& inf, const char* index,
                                     const std::string& value);

// Create, treating AlreadyExists as done (names are deterministic).
absl::Status CreateIfAbsent(Env& env, const kube::ResourceType& t, const std::string& ns,
                            const Json& obj);
// Delete with a uid precondition, background propagation; NotFound or another incarnation by that
// name (409) is done.
absl::Status DeleteObject(Env& env, const kube::ResourceType& t, const std::string& ns,
                          const std::string& name, const std::string& uid);
// PUT .../status with `status` over `obj` (conditioned on its resourceVersion). NotFound is done.
absl::Status WriteStatus(Env& env, const kube::ResourceType& t, const Json& obj,
                         const Json& status);

absl::Status ReconcileTrainingJob(Env& env, const std::string& ns, const std::string& name);
absl::Status ReconcileModelVersion(Env& env, const std::string& ns, const std::string& name);
// The InferenceServices serving ModelVersion NS/NAME (api::ServingInferenceServices).
std::vector<std::string> ServingServices(Env& env, const std::string& ns, const std::string& name);

// GPUPools: every pool's status, cordons and drains, in one pass (pools are few; Node and Pod
// events requeue the one key "GPUPool/").
absl::Status ReconcilePools(Env& env);
// The Nodes a workload of `queue` may use: nullopt when no GPUPool names the queue.
std::optional<std::vector<std::string>> QueueNodes(Env& env, const std::string& queue);
// Adds a required node affinity (matchFields metadata.name In `nodes`, ANDed into every term).
void ConfineToNodes(Json& pod, const std::vector<std::string>& nodes);

// InferenceServices: replicas, rollouts and autoscaling (inference_plan.h). Holds each service's
// autoscaler (its recommendation history); Reconcile may run on several workers at once.
class InferenceController {
 public:
  explicit InferenceController(Env& env) : env_(env) {}
  absl::Status Reconcile(const std::string& ns, const std::string& name);

 private:
  Env& env_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<controller::Autoscaler>> scalers_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::op::internal
