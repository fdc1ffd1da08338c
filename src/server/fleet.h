// The fleet summary behind the web dashboard: GET /api/v1/fleet.
//
// One compact document with every node (its GPUs' NVLink domains and health),
// every job (state, queue, size and placement) and every Queue object, built
// so that a browser can draw 100,000 GPUs without fetching 12,500 full Node
// objects: a node is one short array, its GPUs a string of health letters.
//
//   GET /api/v1/fleet                      full snapshot ("full": true)
//   GET /api/v1/fleet?resourceVersion=N    only what changed after N (upserts
//                                          and deletions); a full snapshot
//                                          instead when N is compacted away
//       [&waitSeconds=S]                   long poll: wait up to S (<= 5) s for
//                                          a change when nothing changed yet
//
//       [&samplesVersion=V]                live utilization (gpu_samples.h):
//                                          "samples" rows for the nodes whose
//                                          heartbeat samples changed after V,
//                                          and the wait also ends on one
//
// The answer's resourceVersion is the revision it is complete up to: pass it
// back to get the next change set; likewise samplesVersion. Node rows carry
// the newest heartbeat samples (from memory, fresher than the stored Node). A change may be
// delivered twice (rows are upserts), never lost. Rows (docs/dashboard.md):
//   nodes: [name, rack, block, phase, gpuModel, unschedulable 0|1,
//           [NVLink domain per GPU], health letters ("H" healthy, "U" unhealthy)
//           per GPU, agent endpoint, [measured utilization % per GPU, -1 where
//           the agent reported none]]
//   jobs:  [kind "T"|"I", namespace, name, phase, queue, GPUs requested,
//           priority, [[node, [GPU indices], gpuMilli], ...], message]
//           [, {"created": creationTimestamp, "reason": status.reason (the
//           bounded word, when not the phase), "exitCode": a failed job's first
//           failed member's, "scale": [bound, desired, min, max, slo p99 ms,
//           mean p99 ms of the fresh readings, fresh readings] (spec.slo only),
//           "cluster", "requeues", "failovers" (federation hub, when set)}]
//           (keys only when they apply)
//   queues: the Queue objects as the API returns them.
//   clusters: [name, phase, GPUs, free GPUs, message] (a federation hub's
//            member clusters; deletions in deletedClusters)
//   samples: [name, [measured utilization % per GPU, -1 where none]] (only
//            with samplesVersion; a full snapshot has them in its node rows)
//
// Authorization follows the API: listing nodes is required (a node token gets
// 403); jobs are those the caller may list (a user sees its namespace only).
// Thread-safe; holds no state but the store and samples references.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/auth.h"
#include "server/gpu_samples.h"
#include "store/store.h"

namespace tessera::server {

struct FleetRequest {
  int64_t since = 0;  // 0: full snapshot
  double wait_seconds = 0;
  int64_t samples_since = -1;  // -1: the caller does not follow samples
  // An autoscaled service's replica metrics count when at most this old at
  // `now` (the autoscaler's --autoscale-freshness-seconds). The row is built
  // when the service is written, so a mean shown can outlive its readings
  // until the next write (agents rewrite the readings as they come).
  absl::Time now = absl::UnixEpoch();
  absl::Duration metrics_freshness = absl::Seconds(30);
};

// The response body (JSON text), or a store error. `samples` may be null (no
// live samples: node rows carry the stored ones).
absl::StatusOr<std::string> FleetSummary(store::Store& store, const GpuSamples* samples,
                                         const Principal& who, const FleetRequest& req);

}  // namespace tessera::server
