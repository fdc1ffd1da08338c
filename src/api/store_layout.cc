#include "api/store_layout.h"

#include "absl/strings/str_cat.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"

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

namespace {

// The digits s[at, at + n) as a number; false if any is not a digit.
bool Digits(absl::string_view s, size_t at, size_t n, int* out) {
  *out = 0;
  for (size_t i = at; i < at + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    *out = *out * 10 + (s[i] - '0');
  }
  return true;
}

}  // namespace

bool ParseTimestamp(absl::string_view s, absl::Time* out) {
  // The form Timestamp() writes, "2026-01-02T03:04:05Z", is read directly: a restart reads one
  // or two per stored job, and absl::ParseTime's general parser cost ~5% of it. A date that is
  // not a real one (02-30) or any other form takes the general path, which decides.
  int y, mo, d, h, mi, sec;
  if (s.size() == 20 && s[4] == '-' && s[7] == '-' && s[10] == 'T' && s[13] == ':' &&
      s[16] == ':' && s[19] == 'Z' && Digits(s, 0, 4, &y) && Digits(s, 5, 2, &mo) &&
      Digits(s, 8, 2, &d) && Digits(s, 11, 2, &h) && Digits(s, 14, 2, &mi) &&
      Digits(s, 17, 2, &sec)) {
    const absl::CivilSecond cs(y, mo, d, h, mi, sec);
    if (cs.year() == y && cs.month() == mo && cs.day() == d && cs.hour() == h &&
        cs.minute() == mi && cs.second() == sec) {
      *out = absl::FromCivil(cs, absl::UTCTimeZone());
      return true;
    }
  }
  std::string err;
  return absl::ParseTime(absl::RFC3339_full, std::string(s), out, &err);
}

}  // namespace tessera::api
