// Job accounting: the GPU time a TrainingJob or InferenceService has held, and when it started
// and ended, kept in its status by the controller and read by `tessera history` (Slurm's sacct)
// and `get jobs -o wide` (docs/api.md, "Accounting").
//
//   status.startTime       the first binding (kept over requeues and restarts)
//   status.completionTime  when the job became Succeeded or Failed
//   status.gpuSeconds      GPU-seconds of the bindings that have ended: each binding adds its
//                          GPUs (a shared GPU counts gpuMilli/1000) times the time from its
//                          scheduledTime to its release
//   status.accountedTime   how far the open binding is already in gpuSeconds (set when the
//                          placement is replaced in place: a resize, a restart)
//   the open binding       status.placement since accountedTime (else scheduledTime), counted by
//                          readers up to completionTime (a finished job whose placement was
//                          kept) or now
//
// Contract: ReleasePlacement is the one way the controller ends a binding, so every binding is
// counted exactly once (a placement removed without it would be lost to accounting).
// Pure functions; thread-compatible.
#pragma once

#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace tessera::api {

// The GPUs a status.placement holds: whole GPUs, a shared GPU as gpuMilli/1000.
double PlacementGpus(const nlohmann::json& placement);

// GPU-seconds a job's status accounts for up to `now`: status.gpuSeconds plus the open binding.
double GpuSecondsUsed(const nlohmann::json& status, absl::Time now);

// Counts the open binding of `status` up to `now` into status.gpuSeconds (accountedTime = now):
// call before replacing status.placement in place. No-op without a placement.
void AccrueOpenBinding(nlohmann::json& status, absl::Time now);
// Ends the open binding of `status` at `now`: AccrueOpenBinding, then removes status.placement,
// status.replicas and status.accountedTime. A status without a placement is left as is.
void ReleasePlacement(nlohmann::json& status, absl::Time now);

// Stamps status.startTime (at a first binding) and status.completionTime (when terminal), each
// once; `now` is the time of the change being written.
void StampStart(nlohmann::json& status, absl::Time now);
void StampCompletion(nlohmann::json& status, absl::Time now);

}  // namespace tessera::api
