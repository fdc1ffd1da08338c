// Queue objects (kind Queue, cluster-scoped) <-> the queue tree of
// sched::QueueManager, and the semantic checks the API server runs before it
// writes a Queue (a tree that would not build is rejected, naming the field).
//
// Queue spec, in user units (GPUs, CPU cores, memory GiB):
//   parent: org              # "" or absent: a top-level queue
//   weight: 2                # fair-share weight among siblings (default 1)
//   gpuQuota: {H100: 64}     # guaranteed GPUs per model (short form)
//   borrowing: false         # short form: may the gpuQuota queue exceed it?
//                            # false (default): borrowingLimit 0; true: no limit
//   quotas:                  # full form (wins over gpuQuota for a resource)
//     gpu/H100: {guaranteed: 64, borrowingLimit: 16, lendingLimit: 8}
//     cpu: {guaranteed: 512}
//     memory: {guaranteed: 4096}
//
// The live tree = the queues of the server's queue YAML (--queue-config),
// then every Queue object (replacing a YAML queue of the same name), then an
// implicit top-level queue without quota for every queue name a job uses
// that neither defines (so `default` always works).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "controller/store_layout.h"
#include "sched/queue/queue_manager.h"

namespace tessera::controller {

inline constexpr char kQueuesPrefix[] = "/registry/queues/";

// One Queue object as a QueueSpec; errors name the field ("spec.quotas.cpu.guaranteed: ...").
absl::StatusOr<sched::QueueSpec> QueueSpecFromObject(const Json& obj);

inline constexpr char kDefaultQueue[] = "default";  // a job's queue when spec.queue is absent

// `base` with the Queue objects and implicit queues folded into its tree.
// Implicit (top-level, no quota): every name in `job_queues` when neither `base` nor the objects
// define any queue; otherwise only kDefaultQueue, when used and not defined.
// Objects that do not decode are skipped and reported in `problems`
// ("queue NAME: message").
sched::QueueManagerConfig BuildQueueConfig(const sched::QueueManagerConfig& base,
                                           const std::vector<Json>& queue_objects,
                                           const std::set<std::string>& job_queues,
                                           std::vector<std::string>* problems);

// Would the tree still be valid after `name` becomes `obj` (null: deleted)?
// `stored` holds the other Queue objects. InvalidArgument names the field of
// `obj` ("spec.parent: unknown queue \"org\"") or the queue that breaks.
absl::Status ValidateQueueChange(const sched::QueueManagerConfig& base,
                                 const std::vector<Json>& stored, const std::string& name,
                                 const Json* obj);

}  // namespace tessera::controller
