// Checkpoints of a TrainingJob: which one it resumes from, and which ones retention deletes.
// Shared by the standalone controller (src/controller) and the Kubernetes operator
// (src/operator), which pass Checkpoint objects of the shape
// {"metadata": {...}, "spec": {"jobName", "step", "path"}, "status": {"phase"}}.
//
// Order: a Checkpoint is newer than another when its spec.step is higher; at equal steps, when
// its metadata.creationTimestamp is later (RFC 3339; a missing or unparsable one is the oldest);
// then when its metadata.name is greater. The order is total, so every function here gives one
// answer whatever the order of its input.
//
// The caller passes the Checkpoints of the job's namespace (a job's checkpoints live beside it);
// objects of other jobs, malformed ones and ones being deleted (metadata.deletionTimestamp) are
// ignored. Pure functions, no I/O; thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nlohmann/json.hpp"

namespace tessera::api {

struct CheckpointRef {
  std::string name;
  int64_t step = 0;
  std::string path;
};

// The job's resume point: among `checkpoints` (Checkpoint objects) with spec.jobName == job_name
// and status.phase == "Ready", the newest (the order above); nullopt when there is none.
std::optional<CheckpointRef> NewestReadyCheckpoint(
    std::string_view job_name, const std::vector<const nlohmann::json*>& checkpoints);

// {"checkpoint": name, "step": S, "path": P}: the status.resumeFrom form of a TrainingJob.
nlohmann::json ResumePointJson(const CheckpointRef& c);

// Retention (a TrainingJob's spec.checkpoint.keep): the names, sorted, of the job's Checkpoints to
// delete so that only the newest `keep` Ready ones remain. Not Ready ones (Pending, Writing,
// Failed) older than the newest Ready one are deleted too; those newer are kept (still being
// written). Never names the newest Ready one. `keep <= 0` keeps all (returns empty), as does a job
// with no Ready Checkpoint.
std::vector<std::string> CheckpointsBeyondRetention(
    std::string_view job_name, const std::vector<const nlohmann::json*>& checkpoints, int keep);

// spec.checkpoint.keep of a TrainingJob's spec (0, keep all, when absent or malformed).
int CheckpointKeep(const nlohmann::json& job_spec);

}  // namespace tessera::api
