// JSON (de)serialization of API objects: request-body checks, the stored
// form, and the Kubernetes-style Status error body. Pure functions, no I/O;
// thread-safe.
//
// Stored form: the object's JSON with metadata.resourceVersion removed (it is
// the store's mod_revision and is filled in on every read).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "api/kinds.h"
#include "api/schema.h"
#include "api/store_layout.h"
#include "nlohmann/json.hpp"

namespace tessera::api {

using Json = nlohmann::json;

inline constexpr int kMaxJsonDepth = 32;

// Parses a request body that must be one JSON object: rejects invalid UTF-8,
// nesting deeper than `max_depth` (checked before parsing, so a hostile body
// cannot make the parser recurse), malformed JSON and an object that repeats
// a key, with InvalidArgument.
absl::StatusOr<Json> ParseBody(std::string_view body, int max_depth = kMaxJsonDepth);

// True when `s` is well-formed UTF-8 (no overlongs, surrogates or > U+10FFFF).
bool IsValidUtf8(std::string_view s);

// Label keys: 1-253 of [A-Za-z0-9._/-]; values: 0-63 of [A-Za-z0-9._-]
// (what selectors can address).
bool IsLabelKey(const std::string& s);
bool IsLabelValue(const std::string& s);

// Validates `obj` as an object of `kind` addressed by the URL's namespace
// (empty for cluster-scoped kinds) and, for an update, the URL's name.
std::vector<FieldError> ValidateObject(const KindInfo& kind, const Json& obj,
                                       std::string_view url_namespace, std::string_view url_name);

// Store keys: "/registry/<plural>/<namespace>/<name>" or
// "/registry/<plural>/<name>" for cluster-scoped kinds. StorePrefix with an
// empty namespace covers every namespace.
std::string StoreKey(const KindInfo& kind, std::string_view ns, std::string_view name);
std::string StorePrefix(const KindInfo& kind, std::string_view ns);

// The kind a ResourceQuota's spec.hard key counts ("count/trainingjobs" -> TrainingJob), or null
// when the key names none that a quota may count (events and quotas themselves are not).
const KindInfo* QuotaCountedKind(std::string_view key);

// The API object for stored bytes at `mod_revision`.
absl::StatusOr<Json> FromStored(std::string_view value, int64_t mod_revision);

// The same object as FromStored, as JSON text, without parsing: splices
// "resourceVersion" into the stored text (fast path for large lists). The
// stored text must come from ToStored (DataLoss otherwise).
absl::StatusOr<std::string> StoredToApiText(std::string_view value, int64_t mod_revision);

// RFC 3339 in UTC, seconds precision: "2026-01-02T03:04:05Z" (store_layout.h).
inline std::string FormatTimestamp(absl::Time t) { return Timestamp(t); }

// A Kubernetes-style Status failure body.
Json StatusBody(int code, absl::string_view reason, absl::string_view message,
                const std::vector<FieldError>& causes = {});

}  // namespace tessera::api
