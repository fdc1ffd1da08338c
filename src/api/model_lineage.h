// ModelVersion lineage: the Checkpoint (and through it the TrainingJob and step) a model version
// came from, and the InferenceServices serving it; a served ModelVersion cannot be deleted.
// Shared by the standalone server and controller and the Kubernetes operator, which pass objects
// of the shape {"metadata": {...}, "spec": {...}, "status": {...}}.
//
//   ModelVersion.spec.checkpoint   names a Checkpoint of its namespace (optional)
//   ModelVersion.status            servedBy, checkpoint {name, jobName, step, path}, phase and the
//                                  condition CheckpointResolved (ModelVersionStatus)
//   deletion                       refused while ServingInferenceServices is not empty, with
//                                  ServedDeletionMessage (409 Conflict standalone; the operator's
//                                  admission answer on Kubernetes)
//
// Pure functions, no I/O; thread-compatible.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "nlohmann/json.hpp"

namespace tessera::api {

// Names (sorted, unique) of the InferenceServices whose spec.modelVersion == mv_name, that are
// not being deleted (no metadata.deletionTimestamp) and not in a terminal phase (Succeeded,
// Failed). The caller passes the InferenceServices of the ModelVersion's namespace.
std::vector<std::string> ServingInferenceServices(
    std::string_view mv_name, const std::vector<const nlohmann::json*>& services);

// The one message both modes give when refusing to delete a served ModelVersion:
// `modelversion "llama-v3" is served by inferenceservices chat, search: delete or repoint them
// first` (`inferenceservice chat: delete or repoint it first` for one).
std::string ServedDeletionMessage(std::string_view mv_name,
                                  const std::vector<std::string>& services);

// The lineage status of ModelVersion `mv`, given the Checkpoint its spec.checkpoint names (null
// when it names none, or one that does not exist) and the services serving it:
//   servedBy    `served_by`, sorted
//   checkpoint  {"name", "jobName", "step", "path"} of `checkpoint` when spec.checkpoint names it
//   phase       Retired when the stored status says so (set by its owner, kept); else Pending while
//               spec.checkpoint names a Checkpoint that is missing or not Ready; else Ready
//   reason, message, conditions[CheckpointResolved]
//               which Checkpoint is missing or not Ready (reason CheckpointMissing,
//               CheckpointNotReady), or that it resolved (CheckpointReady); no checkpoint named:
//               reason "" and the condition True with reason NoCheckpoint
// Only these keys (no times, so an unchanged lineage gives an equal object): the caller merges
// them into the stored status and writes it when they differ.
nlohmann::json ModelVersionStatus(const nlohmann::json& mv, const nlohmann::json* checkpoint,
                                  const std::vector<std::string>& served_by);

}  // namespace tessera::api
