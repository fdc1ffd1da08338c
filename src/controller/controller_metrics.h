// The scheduling controller's Prometheus metrics, declared once (Envoy's
// habit): the controller updates them on its own thread; the server's
// /metrics renders the Registry from any thread (the metric types are
// thread-safe).
#pragma once

#include "metrics/registry.h"

namespace tessera::controller {

struct ControllerMetrics {
  explicit ControllerMetrics(metrics::Registry& r);

  metrics::Family<metrics::Counter>& attempts;      // {result}
  metrics::Family<metrics::Histogram>& duration;    // {result}, seconds
  metrics::Family<metrics::Gauge>& pending;         // {queue}
  metrics::Family<metrics::Gauge>& job_pending;     // {namespace, name, reason}, seconds waited
  metrics::Family<metrics::Gauge>& gpus_total;      // {model}
  metrics::Family<metrics::Gauge>& gpus_allocated;  // {model}, whole-GPU equivalents
  metrics::Family<metrics::Gauge>& gpus_healthy;    // {model}
  metrics::Family<metrics::Gauge>& node_ready;      // {node}
  metrics::Family<metrics::Gauge>& node_unhealthy;  // {node}, unhealthy GPUs
  metrics::Family<metrics::Gauge>& pool_total;      // {model, pool}
  metrics::Family<metrics::Gauge>& pool_allocated;  // {model, pool}, whole-GPU equivalents
  metrics::Family<metrics::Counter>& preemptions;   // {}
  metrics::Family<metrics::Counter>& preempted_gpus;
  metrics::Family<metrics::Counter>& requeues;  // {reason}
  // Bindings committed per store transaction (one per run of a cycle's bindings).
  metrics::Family<metrics::Histogram>& binding_batch;  // {}
  // Elastic TrainingJobs resized in place, by direction (shrink, grow) and
  // reason (the shrink's cause: NodeLost, NodeDeleted, GpuUnhealthy,
  // Preempted, NodeDrained, NodeChanged; Capacity for a grow).
  metrics::Family<metrics::Counter>& elastic_resizes;  // {direction, reason}
  // Gangs restarted in place from their checkpoint after a member failed.
  metrics::Family<metrics::Counter>& job_restarts;  // {reason}
  // Autoscaled InferenceServices (spec.slo): the replicas wanted and bound.
  metrics::Family<metrics::Gauge>& inference_desired;   // {namespace, name}
  metrics::Family<metrics::Gauge>& inference_current;   // {namespace, name}
  metrics::Family<metrics::Counter>& inference_scales;  // {direction}
  // Per queue (issue 8 item 1).
  metrics::Family<metrics::Gauge>& queue_gpus_allocated;       // {queue, model}
  metrics::Family<metrics::Gauge>& queue_gpu_guaranteed;       // {queue, model}
  metrics::Family<metrics::Gauge>& queue_gpu_borrowing_limit;  // {queue, model}
  metrics::Family<metrics::Gauge>& queue_fair_share;           // {queue}
  metrics::Family<metrics::Gauge>& queue_entitlement;          // {queue}
  metrics::Family<metrics::Gauge>& queue_dominant_share;       // {queue}
  metrics::Family<metrics::Gauge>& queue_credit;               // {queue}, GPU-seconds
  metrics::Family<metrics::Gauge>& queue_borrowing;            // {queue}
};

}  // namespace tessera::controller
