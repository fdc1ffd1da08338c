#include "controller/controller_metrics.h"

namespace tessera::controller {

ControllerMetrics::ControllerMetrics(metrics::Registry& r)
    : attempts(r.AddCounter("tessera_scheduling_attempts_total",
                            "Scheduling cycles by result (scheduled, unschedulable, error).",
                            {"result"})),
      duration(r.AddHistogram("tessera_scheduling_duration_seconds",
                              "Time of one scheduling cycle (one job, whole gang), by result.",
                              {"result"}, metrics::ExponentialBuckets(1e-5, 2, 18))),
      pending(
          r.AddGauge("tessera_pending_jobs", "Jobs waiting for placement, by queue.", {"queue"})),
      job_pending(r.AddGauge("tessera_job_pending_seconds",
                             "How long each waiting job has waited, with the class of reason it "
                             "waits (NotTried, OverQuota, NoRoom, Reserved, Unschedulable, "
                             "Preempting, Preempted, QueueRejected).",
                             {"namespace", "name", "reason"})),
      gpus_total(
          r.AddGauge("tessera_gpus_capacity", "GPUs on registered nodes, by model.", {"model"})),
      gpus_allocated(r.AddGauge("tessera_gpus_allocated",
                                "GPUs bound to jobs (fractions summed), by model.", {"model"})),
      gpus_healthy(r.AddGauge("tessera_gpus_healthy", "Healthy GPUs, by model.", {"model"})),
      node_ready(r.AddGauge("tessera_node_ready", "1 when the node is Ready, else 0.", {"node"})),
      node_unhealthy(r.AddGauge("tessera_node_gpus_unhealthy",
                                "GPUs of the node reported Unhealthy by its agent.", {"node"})),
      pool_total(r.AddGauge("tessera_pool_gpus_capacity",
                            "GPUs on registered nodes, by model and node pool (spec.pool).",
                            {"model", "pool"})),
      pool_allocated(r.AddGauge("tessera_pool_gpus_allocated",
                                "GPUs bound to jobs (fractions summed), by model and node pool.",
                                {"model", "pool"})),
      preemptions(r.AddCounter("tessera_preemptions_total", "Jobs preempted.", {})),
      preempted_gpus(r.AddCounter("tessera_preempted_gpus_total", "GPUs freed by preemption.", {})),
      requeues(r.AddCounter("tessera_requeues_total",
                            "Bound jobs sent back to the queue, by reason (NodeNotReady, "
                            "GpuUnhealthy, PlacementLost, Preempted, Suspended...).",
                            {"reason"})),
      binding_batch(r.AddHistogram("tessera_binding_batch_size",
                                   "Jobs bound by one store transaction of the controller (a "
                                   "cycle's consecutive bindings share one commit).",
                                   {}, metrics::ExponentialBuckets(1, 2, 14))),
      elastic_resizes(r.AddCounter("tessera_elastic_resizes_total",
                                   "Elastic jobs shrunk (a node or GPU lost, a preemption) or "
                                   "grown back in place, without a requeue, by direction and "
                                   "reason.",
                                   {"direction", "reason"})),
      job_restarts(r.AddCounter("tessera_job_restarts_total",
                                "Gangs restarted in place from their last checkpoint after a "
                                "member exited with an error (spec.maxRestarts), by reason.",
                                {"reason"})),
      inference_desired(r.AddGauge("tessera_inference_desired_replicas",
                                   "Replicas the autoscaler wants for an InferenceService with "
                                   "spec.slo (status.desiredReplicas).",
                                   {"namespace", "name"})),
      inference_current(r.AddGauge("tessera_inference_replicas",
                                   "Replicas bound to an InferenceService with spec.slo.",
                                   {"namespace", "name"})),
      inference_scales(r.AddCounter("tessera_inference_scale_events_total",
                                    "Autoscaled InferenceServices resized (ScaledUp / "
                                    "ScaledDown), by direction (up, down).",
                                    {"direction"})),
      queue_gpus_allocated(r.AddGauge("tessera_queue_gpus_allocated",
                                      "GPUs charged to the queue (its subtree), by model.",
                                      {"queue", "model"})),
      queue_gpu_guaranteed(r.AddGauge("tessera_queue_gpu_quota_guaranteed",
                                      "Nominal (guaranteed) GPU quota of the queue, by model.",
                                      {"queue", "model"})),
      queue_gpu_borrowing_limit(
          r.AddGauge("tessera_queue_gpu_quota_borrowing_limit",
                     "GPUs the queue may use beyond its guarantee, by model (absent: no limit).",
                     {"queue", "model"})),
      queue_fair_share(r.AddGauge("tessera_queue_fair_share",
                                  "Weighted share of the fleet among queues that have work now "
                                  "(0..1).",
                                  {"queue"})),
      queue_entitlement(r.AddGauge("tessera_queue_entitlement",
                                   "Static weighted share of the fleet (0..1).", {"queue"})),
      queue_dominant_share(r.AddGauge("tessera_queue_dominant_share",
                                      "Instantaneous dominant-resource share in use (0..1).",
                                      {"queue"})),
      queue_credit(r.AddGauge("tessera_queue_burst_credit_gpu_seconds",
                              "Burst credit left, in GPU-seconds of the fleet's GPUs.", {"queue"})),
      queue_borrowing(r.AddGauge("tessera_queue_borrowing",
                                 "1 when the queue uses more than its guarantee.", {"queue"})) {}

}  // namespace tessera::controller
