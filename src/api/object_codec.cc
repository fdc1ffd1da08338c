#include "api/object_codec.h"

#include <algorithm>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/elastic_spec.h"
#include "api/limits.h"

namespace tessera::api {

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len;
    uint32_t cp;
    if ((c & 0xe0) == 0xc0) {
      len = 2, cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3, cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (int k = 1; k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
      return false;
    }
    i += len;
  }
  return true;
}

absl::StatusOr<Json> ParseBody(std::string_view body, int max_depth) {
  if (!IsValidUtf8(body)) return absl::InvalidArgumentError("request body is not valid UTF-8");
  if (body.substr(0, 3) == "\xEF\xBB\xBF") {
    return absl::InvalidArgumentError(
        "request body starts with a UTF-8 byte order mark; send plain JSON (RFC 8259 section 8.1)");
  }
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : body) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > max_depth) {
        return absl::InvalidArgumentError(
            absl::StrCat("request body nests deeper than ", max_depth, " levels"));
      }
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  // Duplicate keys would otherwise be resolved silently (last one wins), so
  // two readers of the same body could disagree on what it says.
  std::vector<std::set<std::string>> keys;
  std::string duplicate;
  auto check = [&](int, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
        keys.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        if (!keys.empty()) keys.pop_back();
        break;
      case Json::parse_event_t::key:
        if (!keys.empty() && !keys.back().insert(parsed.get<std::string>()).second &&
            duplicate.empty()) {
          duplicate = parsed.get<std::string>();
        }
        break;
      default:
        break;
    }
    return true;
  };
  Json j = Json::parse(body, check, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("request body is not valid JSON");
  if (!duplicate.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("request body repeats the field \"", duplicate, "\""));
  }
  if (!j.is_object()) return absl::InvalidArgumentError("request body must be a JSON object");
  return j;
}

namespace {

bool LabelChars(const std::string& s, bool allow_slash) {
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
          c == '_' || c == '-' || (allow_slash && c == '/'))) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool IsLabelKey(const std::string& s) {
  return !s.empty() && s.size() <= 253 && LabelChars(s, true);
}
bool IsLabelValue(const std::string& s) { return s.size() <= 63 && LabelChars(s, false); }

std::vector<FieldError> ValidateObject(const KindInfo& kind, const Json& obj,
                                       std::string_view url_namespace, std::string_view url_name) {
  std::vector<FieldError> errors;
  kind.object_schema.Validate(obj, "", errors);
  if (!errors.empty()) return errors;
  const Json& meta = obj["metadata"];
  if (kind.namespaced) {
    if (meta.contains("namespace") && !meta["namespace"].is_null() &&
        meta["namespace"].get<std::string>() != url_namespace) {
      errors.push_back(
          {"metadata.namespace", absl::StrCat("does not match the namespace \"",
                                              std::string(url_namespace), "\" in the URL")});
    }
  } else if (meta.contains("namespace") && !meta["namespace"].is_null()) {
    errors.push_back({"metadata.namespace", absl::StrCat(kind.kind, " is cluster-scoped")});
  }
  if (!url_name.empty() && meta["name"].get<std::string>() != url_name) {
    errors.push_back({"metadata.name", absl::StrCat("does not match the name \"",
                                                    std::string(url_name), "\" in the URL")});
  }
  if (meta.contains("labels") && meta["labels"].is_object()) {
    for (auto it = meta["labels"].begin(); it != meta["labels"].end(); ++it) {
      const std::string path = absl::StrCat("metadata.labels[", Json(it.key()).dump(), "]");
      if (!IsLabelKey(it.key())) {
        errors.push_back(
            {path, "key must be 1-253 characters of a-z, A-Z, 0-9, '.', '_', '-', '/'"});
      }
      if (!IsLabelValue(it.value().get<std::string>())) {
        errors.push_back({path, "value must be 0-63 characters of a-z, A-Z, 0-9, '.', '_', '-'"});
      }
    }
  }
  if (kind.kind == "InferenceService") {
    const Json& r = obj["spec"]["replicas"];
    if (r["min"].get<int64_t>() > r["max"].get<int64_t>()) {
      errors.push_back({"spec.replicas.min", "must be <= spec.replicas.max"});
    }
  }
  if (kind.kind == "TrainingJob" && obj["spec"].contains("groups") &&
      obj["spec"]["groups"].is_array()) {
    int64_t members = 0;
    for (const Json& g : obj["spec"]["groups"]) {
      if (g.is_object() && g.contains("count") && g["count"].is_number_integer()) {
        members += std::clamp<int64_t>(g["count"].get<int64_t>(), 0, kMaxMembersPerJob);
      }
    }
    if (members > kMaxMembersPerJob) {
      errors.push_back(
          {"spec.groups", absl::StrCat("the groups' counts add up to ", members,
                                       " members; a job has at most ", kMaxMembersPerJob)});
    }
  }
  if (obj["metadata"].contains("annotations") && obj["metadata"]["annotations"].is_object()) {
    const Json& ann = obj["metadata"]["annotations"];
    if (auto g = ann.find(kGraceAnnotation); g != ann.end() && g->is_string()) {
      double secs = -1;
      if (!absl::SimpleAtod(g->get<std::string>(), &secs) || !(secs >= 0) ||
          secs > static_cast<double>(kMaxGraceSeconds)) {
        errors.push_back(
            {absl::StrCat("metadata.annotations[\"", kGraceAnnotation, "\"]"),
             absl::StrCat("must be a number of seconds from 0 to ", kMaxGraceSeconds)});
      }
    }
  }
  if (kind.kind == "ResourceQuota" && obj["spec"].contains("hard") &&
      obj["spec"]["hard"].is_object()) {
    for (auto it = obj["spec"]["hard"].begin(); it != obj["spec"]["hard"].end(); ++it) {
      if (QuotaCountedKind(it.key()) == nullptr) {
        std::vector<std::string> counted;
        for (const KindInfo& k : AllKinds()) {
          if (QuotaCountedKind(absl::StrCat("count/", k.plural)) != nullptr) {
            counted.push_back(absl::StrCat("count/", k.plural));
          }
        }
        errors.push_back({absl::StrCat("spec.hard[", Json(it.key()).dump(), "]"),
                          absl::StrCat("must be one of ", absl::StrJoin(counted, ", "))});
      }
    }
  }
  if (kind.kind == "TrainingJob") {
    // The same check the controller decodes with (controller/job_codec.h).
    int32_t min_replicas = 0;
    if (std::optional<SpecError> e = CheckElastic(obj["spec"], &min_replicas)) {
      errors.push_back({e->field, e->message});
    }
  }
  return errors;
}

const KindInfo* QuotaCountedKind(std::string_view key) {
  constexpr std::string_view kPrefix = "count/";
  if (key.substr(0, kPrefix.size()) != kPrefix) return nullptr;
  key.remove_prefix(kPrefix.size());
  const KindInfo* kind = KindByPlural(key);
  if (kind == nullptr || !kind->namespaced || kind->kind == "Event" ||
      kind->kind == "ResourceQuota") {
    return nullptr;
  }
  return kind;
}

std::string StoreKey(const KindInfo& kind, std::string_view ns, std::string_view name) {
  return ObjectKey(kind.plural,
                   kind.namespaced ? absl::string_view(ns.data(), ns.size()) : absl::string_view(),
                   absl::string_view(name.data(), name.size()));
}

std::string StorePrefix(const KindInfo& kind, std::string_view ns) {
  if (!kind.namespaced || ns.empty()) return absl::StrCat("/registry/", kind.plural, "/");
  return absl::StrCat("/registry/", kind.plural, "/", std::string(ns), "/");
}

absl::StatusOr<Json> FromStored(std::string_view value, int64_t mod_revision) {
  Json j = Json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("metadata")) {
    return absl::DataLossError("stored object is not valid JSON");
  }
  j["metadata"]["resourceVersion"] = std::to_string(mod_revision);
  return j;
}

absl::StatusOr<std::string> StoredToApiText(std::string_view value, int64_t mod_revision) {
  // ToStored dumps keys in sorted order, so the top-level "metadata" key comes
  // after "apiVersion" and "kind" (fixed, validated strings) and is the first
  // place this unescaped text occurs; inside string values quotes are escaped.
  static constexpr std::string_view kMeta = "\"metadata\":{";
  size_t at = value.find(kMeta);
  if (at == std::string_view::npos || value.size() < at + kMeta.size() + 1) {
    return absl::DataLossError("stored object has no metadata");
  }
  at += kMeta.size();
  std::string out;
  out.reserve(value.size() + 40);
  out.append(value.substr(0, at));
  out.append("\"resourceVersion\":\"").append(std::to_string(mod_revision)).append("\"");
  if (value[at] != '}') out.push_back(',');
  out.append(value.substr(at));
  return out;
}

Json StatusBody(int code, absl::string_view reason, absl::string_view message,
                const std::vector<FieldError>& causes) {
  Json body = {{"apiVersion", "v1"},
               {"kind", "Status"},
               {"status", "Failure"},
               {"code", code},
               {"reason", std::string(reason)},
               {"message", std::string(message)}};
  if (!causes.empty()) {
    Json list = Json::array();
    for (const FieldError& e : causes) list.push_back({{"field", e.field}, {"message", e.message}});
    body["details"] = {{"causes", list}};
  }
  return body;
}

}  // namespace tessera::api
