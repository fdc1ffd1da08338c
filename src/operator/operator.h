// Operator: `tessera operator`'s controllers for the tessera.dev workload CRDs on Kubernetes, in
// client-go's pattern: informers feed a rate-limited work queue of keys, workers reconcile one
// key at a time from the informer caches (level-triggered), and write through the API.
//
// TrainingJob (training_plan.h has the algorithm): a gang of Pods (schedulerName tessera), its
// scheduler-plugins PodGroup and a headless Service, all owned by the job; restarts from the
// newest Ready Checkpoint; status. Checkpoints a member reports on its Pod (annotations
// tessera.dev/checkpoint-step and -path) become Ready Checkpoint objects owned by the job, and the
// newest Ready one's time goes on the gang's Pods as tessera.dev/last-checkpoint, which the
// scheduler's preemption reads.
// InferenceService (inference_plan.h): replica Pods and a Service, the replica count from the
// standalone controller's autoscaler fed by the replicas' reports on their Pods, rollouts to a
// new ModelVersion with surge 1 and no drop in Ready replicas.
// ModelVersion: lineage status (Checkpoint, job, step; the services serving it) and, while it is
// served, a finalizer that keeps it until no service uses it.
// Keys: "Kind/NS/NAME". Events of children map to their owner's key (by label), Checkpoints to
// their job and the ModelVersions made from them, InferenceServices to their ModelVersion; a
// Queue change requeues every workload (one may wait for it).
// Thread safety: Start and Stop from one thread; Settle and stats from any.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "kube/rest_client.h"
#include "metrics/registry.h"
#include "obs/log.h"
#include "operator/admission_webhook.h"
#include "operator/training_gang.h"

namespace tessera::op {

struct OperatorOptions {
  GangOptions gang;
  // Serve the validating admission webhook (admission_webhook.h) once the caches are synced;
  // empty addr: none.
  WebhookOptions webhook;
  int workers = 4;
  std::string identity = "tessera-operator";  // Events' reportingInstance
  absl::Duration sync_timeout = absl::Seconds(60);
  obs::Logger log;
};

struct OperatorStats {
  int64_t reconciles = 0;
  int64_t errors = 0;  // reconciles that failed and were requeued
  int64_t pods_created = 0, pods_deleted = 0;
  int64_t status_writes = 0;
  int64_t checkpoints_recorded = 0;
};

class Operator {
 public:
  // `client`, `clock` and `registry` are borrowed and must outlive the operator.
  static absl::StatusOr<std::unique_ptr<Operator>> Create(kube::RestClient& client,
                                                          const Clock& clock,
                                                          metrics::Registry& registry,
                                                          OperatorOptions options);
  ~Operator();
  Operator(const Operator&) = delete;
  Operator& operator=(const Operator&) = delete;

  // Starts the informers, waits for their first lists (sync_timeout), then the workers.
  // FailedPrecondition when the tessera.dev CRDs are not installed.
  absl::Status Start();
  // Stops the workers (each finishes its key) and the informers; idempotent.
  void Stop();
  // True once the queue is empty and no worker is busy, within `timeout` (tests).
  bool Settle(absl::Duration timeout);
  // The webhook's port (0 when it is not served).
  int webhook_port() const;
  OperatorStats stats() const;

  class Impl;

 private:
  explicit Operator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::op
