// Where API objects live in the Store and how they are stored; the contract
// shared with src/server/api/object_codec.h (which the server owns): key
// "/registry/<plural>/<namespace>/<name>" (cluster-scoped kinds:
// "/registry/<plural>/<name>"), value = the object's JSON without
// metadata.resourceVersion, which is the key's mod_revision.
//
// The controller sits below the server in the module graph, so it restates
// the layout here rather than include the server's codec.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace tessera::controller {

using Json = nlohmann::json;

inline constexpr char kApiVersion[] = "tessera.dev/v1";
inline constexpr char kNodesPrefix[] = "/registry/nodes/";
inline constexpr char kTrainingJobsPrefix[] = "/registry/trainingjobs/";
inline constexpr char kInferenceServicesPrefix[] = "/registry/inferenceservices/";
inline constexpr char kPriorityClassesPrefix[] = "/registry/priorityclasses/";
inline constexpr char kCheckpointsPrefix[] = "/registry/checkpoints/";
inline constexpr char kEventsPrefix[] = "/registry/events/";

// "/registry/<plural>/<ns>/<name>" or, with an empty ns, "/registry/<plural>/<name>".
std::string ObjectKey(absl::string_view plural, absl::string_view ns, absl::string_view name);

// Parses a stored value; DataLoss when it is not a JSON object with metadata.
absl::StatusOr<Json> ParseStored(absl::string_view value);
// The stored bytes of `obj` (resourceVersion dropped).
std::string ToStoredValue(const Json& obj);

// RFC 3339, UTC, seconds: "2026-01-02T03:04:05Z".
std::string Timestamp(absl::Time t);
bool ParseTimestamp(absl::string_view s, absl::Time* out);

}  // namespace tessera::controller
