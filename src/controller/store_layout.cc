#include "controller/store_layout.h"

#include "absl/strings/str_cat.h"

namespace tessera::controller {

std::string ObjectKey(absl::string_view plural, absl::string_view ns, absl::string_view name) {
  if (ns.empty()) return absl::StrCat("/registry/", plural, "/", name);
  return absl::StrCat("/registry/", plural, "/", ns, "/", name);
}

absl::StatusOr<Json> ParseStored(absl::string_view value) {
  Json j = Json::parse(value.begin(), value.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("metadata") || !j["metadata"].is_object()) {
    return absl::DataLossError("stored object is not a JSON object with metadata");
  }
  return j;
}

std::string ToStoredValue(const Json& obj) {
  Json copy = obj;
  if (copy.contains("metadata")) copy["metadata"].erase("resourceVersion");
  return copy.dump();
}

std::string Timestamp(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

bool ParseTimestamp(absl::string_view s, absl::Time* out) {
  std::string err;
  return absl::ParseTime(absl::RFC3339_full, std::string(s), out, &err);
}

}  // namespace tessera::controller
