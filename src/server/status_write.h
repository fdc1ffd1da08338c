// StatusWrite: what a PUT of an object's `status` subresource may change, by who writes it and
// the kind, and how the write merges into the stored status. Status is the control plane's, as
// in Kubernetes: creates and updates of an object ignore the status they carry, and the
// controller writes placements, generations, phases and conditions to the store itself. Through
// the API (docs/api.md, "Status"):
//
//   TrainingJob / InferenceService
//     node:NAME  status.members[] entries of members bound to NAME at the job's current
//                generation (api/member_status.h), and an InferenceService replica's
//                status.replicaMetrics entry; `node` is stamped from the placement.
//     admin      the same for any member, and `phase` to Succeeded or Failed (with `message`):
//                an operator ending a job by hand.
//     user       in its namespace, only `phase` to Failed on a job not yet finished: a
//                cancellation (`tessera cancel`, Slurm's scancel); everything else it sends is
//                kept as stored. Users change the spec; the controller derives the status.
//     (admin and user ends: status.reason Cancelled for Failed, message "cancelled by USER")
//   Node         node:NAME (its own) and admin: status.gpus and lastHeartbeatTime; the
//                controller keeps phase and conditions.
//   Checkpoint, ModelVersion
//                user (its namespace) and admin: the whole status (they describe the user's
//                artifacts: a checkpoint becoming Ready).
//   every other kind: admin only, the whole status.
// Everything a writer may not change is kept as stored, so a GET result can be PUT back.
//
// Member entries of an older generation than the job's are dropped silently (the agent's report
// of a binding that was superseded while it was on its way); entries of the current generation
// must name a member of the placement (on the writer's node, for a node); those of a newer
// generation are invalid. Entries of members no longer placed are pruned. A replica's metrics
// go with its member: an entry that is not Running removes them.
//
// Pure; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "api/kinds.h"
#include "api/schema.h"
#include "nlohmann/json.hpp"
#include "server/auth.h"

namespace tessera::server {

// The implicit noexcept moves call nlohmann::json's move, which only asserts; clang-tidy cannot
// see that it never throws.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct StatusWriteResult {
  nlohmann::json status;                   // what to store (valid only when both lists are empty)
  std::vector<api::FieldError> forbidden;  // 403: the writer may not change these
  std::vector<api::FieldError> invalid;    // 422
  bool changed = false;                    // status differs from the stored one
};

// Merges `body_status` (the request's `status`, already schema-validated) into `stored_status`.
// `now` stamps member entries that carry no time.
StatusWriteResult MergeStatusWrite(const api::KindInfo& kind, const Principal& who,
                                   const nlohmann::json& stored_status,
                                   const nlohmann::json& body_status, absl::Time now);

// Whether `who` may PUT the status of `kind` objects at all (the member-level checks come in
// MergeStatusWrite). Empty when allowed, else why not.
std::string AuthorizeStatusWrite(const Principal& who, const api::KindInfo& kind,
                                 const std::string& name_space, const std::string& name);

}  // namespace tessera::server
