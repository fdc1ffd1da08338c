// PlanInferenceService: what `tessera operator` does next for one InferenceService, as a pure
// function of the service, its replica Pods and the ModelVersion it names (level-triggered, like
// training_plan.h).
//
// Objects: replica Pods `{service}-{modelVersion}-{i}` (schedulerName tessera, restartPolicy
// Always, the service's image and command, its GPUs as nvidia.com/gpu, env TESSERA_SERVICE,
// TESSERA_MODEL_VERSION, TESSERA_MODEL_PATH = the ModelVersion's spec.artifactPath,
// TESSERA_REPLICA, TESSERA_POD_NAME), labelled with the service, model version and replica index,
// annotated tessera.dev/placement: Spread (the scheduler puts each on the emptiest fitting node,
// so one node's loss takes few replicas), owned by the service; one ClusterIP Service `{service}`
// on port 8000 (named http) selecting every replica.
//
// Algorithm:
//  1. A spec that cannot run on Kubernetes, a queue that does not exist: phase Pending with the
//     field or queue named; nothing created, existing replicas left serving.
//  2. spec.modelVersion names no ModelVersion: condition ModelVersionAvailable=False naming it;
//     replicas of the version already rolled out keep serving; nothing new is created.
//  3. No replica of another version: the replicas are scaled to `desired` (the autoscaler's
//     count; replicas.max without an SLO): missing indices created, the highest ones deleted.
//  4. A rollout (replicas of an older version exist), surge 1 and no unavailability: while fewer
//     than `desired` new replicas exist and fewer than desired + 1 replicas in all, one new
//     replica is created; an old replica is deleted only while more than `desired` replicas are
//     Ready (so Ready replicas never drop below `desired`, hence never below replicas.min); old
//     replicas that are not Ready are deleted at once (they serve nothing). The rollout ends when
//     no old replica is left; status.modelVersion then names the new version.
//  5. Status: replicas, readyReplicas, updatedReplicas, desiredReplicas, modelVersion; phase
//     Pending (no replica), Deploying (fewer Ready than desired, or rolling), Ready; conditions
//     Ready, Progressing, ModelVersionAvailable.
// Pure; thread-compatible.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "operator/training_gang.h"
#include "operator/training_plan.h"

namespace tessera::op {

inline constexpr char kServiceLabel[] = "tessera.dev/inferenceservice";
inline constexpr char kModelVersionLabel[] = "tessera.dev/model-version";
inline constexpr char kReplicaLabel[] = "tessera.dev/replica";
// Set by a replica on its own Pod: its latest latency and throughput, as the standalone agent
// reports them ({"p99LatencyMs": N, "rps": N, "time": RFC 3339}; controller/autoscaler.h).
inline constexpr char kReplicaMetricsAnnotation[] = "tessera.dev/replica-metrics";
inline constexpr int kServingPort = 8000;

struct InferenceInputs {
  const Json* service = nullptr;
  // Pods labelled tessera.dev/inferenceservice=NAME in its namespace.
  std::vector<const Json*> pods;
  bool service_object_exists = false;   // the Kubernetes Service
  const Json* model_version = nullptr;  // the ModelVersion spec.modelVersion names; null: none
  int desired = 1;
  std::string scale_reason;  // why `desired` (the autoscaler's words), for status
  bool queue_known = true;
  absl::Time now;
};

struct InferencePlan {
  std::optional<Json> status;
  std::vector<ObjectName> delete_pods;
  std::optional<Json> create_service;
  std::vector<Json> create_pods;
  std::vector<EventNote> events;
};

InferencePlan PlanInferenceService(const InferenceInputs& in, const GangOptions& opts);

// A replica Pod is Ready: condition Ready=True and not being deleted.
bool PodReady(const Json& pod);

}  // namespace tessera::op
