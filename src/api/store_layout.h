// Where API objects live in the Store and how they are stored: the one statement of that
// contract, shared by the API server (object_codec.h builds on it) and the controller, which
// reads and writes the store directly.
//
// Key "/registry/<plural>/<namespace>/<name>" (cluster-scoped kinds: "/registry/<plural>/<name>");
// value = the object's JSON without metadata.resourceVersion, which is the key's mod_revision.
// Timestamps are RFC 3339 in UTC with seconds precision.
//
// Pure functions; thread-safe.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace tessera::api {

inline constexpr char kNodesPrefix[] = "/registry/nodes/";
inline constexpr char kTrainingJobsPrefix[] = "/registry/trainingjobs/";
inline constexpr char kInferenceServicesPrefix[] = "/registry/inferenceservices/";
inline constexpr char kPriorityClassesPrefix[] = "/registry/priorityclasses/";
inline constexpr char kCheckpointsPrefix[] = "/registry/checkpoints/";
inline constexpr char kEventsPrefix[] = "/registry/events/";

// "/registry/<plural>/<ns>/<name>" or, with an empty ns, "/registry/<plural>/<name>".
std::string ObjectKey(absl::string_view plural, absl::string_view ns, absl::string_view name);

// Parses a stored value; DataLoss when it is not a JSON object with metadata.
absl::StatusOr<nlohmann::json> ParseStored(absl::string_view value);
// The stored bytes of `obj` (metadata.resourceVersion dropped).
std::string ToStored(const nlohmann::json& obj);

// RFC 3339, UTC, seconds: "2026-01-02T03:04:05Z".
std::string Timestamp(absl::Time t);
// Accepts any RFC 3339 time (fractional seconds, offsets).
bool ParseTimestamp(absl::string_view s, absl::Time* out);

}  // namespace tessera::api
