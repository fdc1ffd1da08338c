#include "api/store_layout.h"

#include "absl/strings/str_cat.h"

namespace tessera::api {

std::string ObjectKey(absl::string_view plural, absl::string_view ns, absl::string_view name) {
  if (ns.empty()) return absl::StrCat("/registry/", plural, "/", name);
  return absl::StrCat("/registry/", plural, "/", ns, "/", name);
}

absl::StatusOr<nlohmann::json> ParseStored(absl::string_view value) {
  nlohmann::json j =
      nlohmann::json::parse(value.begin(), value.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("metadata") || !j["metadata"].is_object()) {
    return absl::DataLossError("stored object is not a JSON object with metadata");
  }
  return j;
}

std::string ToStored(const nlohmann::json& obj) {
  // Copy the object only when there is a resourceVersion to drop.
  auto meta = obj.find("metadata");
  if (meta == obj.end() || !meta->is_object() || !meta->contains("resourceVersion")) {
    return obj.dump();
  }
  nlohmann::json copy = obj;
  copy["metadata"].erase("resourceVersion");
  return copy.dump();
}

std::string Timestamp(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

bool ParseTimestamp(absl::string_view s, absl::Time* out) {
  std::string err;
  return absl::ParseTime(absl::RFC3339_full, std::string(s), out, &err);
}

}  // namespace tessera::api
