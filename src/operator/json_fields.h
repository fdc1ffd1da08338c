// Small readers over JSON objects as the API sends them (fields may be absent or of another
// type), shared by the operator's plans and controllers. Pure; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "api/json_fields.h"
#include "api/store_layout.h"
#include "nlohmann/json.hpp"

namespace tessera::op {

using Json = nlohmann::json;

// The API module's lenient readers (api/json_fields.h).
using api::Field;
using api::IntOr;
using api::StrOr;
using api::Sub;
const Json& Meta(const Json& obj);  // Sub(obj, "metadata")
std::string Label(const Json& obj, const char* key);
std::string Annotation(const Json& obj, const char* key);
bool Deleting(const Json& obj);  // metadata.deletionTimestamp is set
// A label holding a number (a generation, a replica index), or `dflt`.
int64_t IntLabel(const Json& obj, const char* key, int64_t dflt);
// The controller owner reference to `owner`, an object of `kind` (a list's items may lack their
// kind), so that the garbage collector deletes what it owns with it.
Json ControllerReference(const Json& owner, const std::string& kind);
// A container's {"name", "value"} environment entry.
Json EnvVar(const std::string& name, const std::string& value);

// RFC 3339 in UTC, whole seconds (metav1.Time): the API module's.
using api::Timestamp;

}  // namespace tessera::op
