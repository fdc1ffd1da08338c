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
                             "How long each waiting job has waited, with the reason it waits.",
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
                            "Bound jobs sent back to the queue, by reason.", {"reason"})) {}

}  // namespace tessera::controller
