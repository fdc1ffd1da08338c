// API objects (TrainingJob, InferenceService) <-> model::Job, and a job's
// status.placement <-> sched::Placement. Pure functions; thread-safe.
//
// Mapping (docs/api.md, "Scheduling"):
//   TrainingJob: one model group per spec.groups[] (count, gpusPerReplica,
//     gpuMilli, gpuMemoryMiB, resources.cpu cores -> milli, resources.memoryGiB
//     -> MiB); groups' gpuType joins spec.gpuModels (every group must agree).
//     placement defaults to Pack.
//   TrainingJob spec.elastic {minReplicas, maxReplicas}: a replica is one
//     member; the groups' counts are the job's maximum, so maxReplicas must
//     equal their sum (a different value is refused, not rescaled), and
//     minReplicas becomes gang.min_member (spec.gang.minMember may be given
//     too only with the same value). The controller then shrinks and grows
//     the bound gang between the two (controller/elastic.cc).
//   InferenceService: one group "replica" of replicas.max members; the gang
//     needs max(1, replicas.min) of them unless spec.gang says otherwise;
//     placement defaults to Spread.
//   priority: spec.priority, else spec.priorityClassName resolved through the
//     resolver (PriorityClass objects, then model/priority.h defaults), else 0.
// Every error names the field ("spec.groups[1].gpuType: ...").
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "api/elastic_spec.h"
#include "controller/store_layout.h"
#include "model/job.h"
#include "sched/framework/cluster_state.h"
#include "sched/framework/types.h"

namespace tessera::controller {

// Looks a priority class name up; nullopt when unknown.
using PriorityResolver = std::function<std::optional<int32_t>(absl::string_view)>;

// The scheduler key of a job object: TrainingJob "ns/name",
// InferenceService "ns/isvc.name" (so the two kinds never collide).
std::string SchedulerName(absl::string_view kind, absl::string_view name);

absl::StatusOr<model::Job> JobFromObject(const Json& obj, const PriorityResolver& priority);

// status.placement of `p` for `job`, each member stamped with `generation`.
Json PlacementToJson(const sched::Placement& p, const model::Job& job,
                     const sched::ClusterState& cluster, int64_t generation);
// The placement recorded in `placement` (status.placement), resolved against
// `cluster`. NotFound when a node is gone; InvalidArgument when a group or
// GPU does not exist.
absl::StatusOr<sched::Placement> PlacementFromJson(const Json& placement, const model::Job& job,
                                                   const sched::ClusterState& cluster);

}  // namespace tessera::controller
