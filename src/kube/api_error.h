// Errors of the Kubernetes API as absl::Status.
//
// A failed request becomes a Status whose message names the verb, the object and the API's
// metav1.Status reason and message ("create pods team-a/p0: AlreadyExists: pods \"p0\" already
// exists"), whose code follows the HTTP code (404 NotFound, 409 AlreadyExists or Aborted for a
// Conflict, 410 FailedPrecondition, 422 InvalidArgument, 429 ResourceExhausted, ...), and which
// carries the reason and the HTTP code as payloads so that callers test them exactly
// (IsConflict, IsGone, ...) rather than by message.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace tessera::kube {

// `what`: "create pods team-a/p0"; `body`: the response body (a metav1.Status when the apiserver
// produced the error; anything else is quoted, cut at 200 bytes).
absl::Status ApiError(absl::string_view what, int http_code, const std::string& body);
// The same from a metav1.Status object (a watch stream's ERROR event).
absl::Status ApiErrorFromStatus(absl::string_view what, const nlohmann::json& status);

// The metav1.Status reason of an ApiError ("" for other statuses) and its HTTP code (0).
std::string ApiReason(const absl::Status& s);
int ApiHttpCode(const absl::Status& s);

bool IsApiNotFound(const absl::Status& s);
bool IsApiAlreadyExists(const absl::Status& s);
// 409 reason Conflict: the resourceVersion of an update (or a precondition) was stale.
bool IsApiConflict(const absl::Status& s);
// 410 Gone/Expired: the resourceVersion of a watch or list is too old (compacted): relist.
bool IsApiGone(const absl::Status& s);
// 429: too many requests, or an eviction that a PodDisruptionBudget refuses.
bool IsApiTooManyRequests(const absl::Status& s);

}  // namespace tessera::kube
