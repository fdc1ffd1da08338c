#include "kube/field_reader.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tessera::kube::internal {

void FieldReader::Error(const std::string& path, const std::string& msg) {
  errors_.push_back(absl::StrCat(path, ": ", msg));
}

absl::Status FieldReader::Finish() const {
  if (errors_.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what_, ": ", absl::StrJoin(errors_, "; ")));
}

const Json* FieldReader::Get(const Json& obj, const char* key) const {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string FieldReader::Str(const Json& obj, const char* key, const std::string& path) {
  return OptStr(obj, key, path).value_or("");
}

std::optional<std::string> FieldReader::OptStr(const Json& obj, const char* key,
                                               const std::string& path) {
  const Json* v = Get(obj, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) {
    Error(Join(path, key), "must be a string");
    return std::nullopt;
  }
  return v->get<std::string>();
}

bool FieldReader::Bool(const Json& obj, const char* key, const std::string& path) {
  const Json* v = Get(obj, key);
  if (v == nullptr) return false;
  if (!v->is_boolean()) {
    Error(Join(path, key), "must be true or false");
    return false;
  }
  return v->get<bool>();
}

int64_t FieldReader::Int(const Json& obj, const char* key, const std::string& path) {
  return OptInt(obj, key, path).value_or(0);
}

std::optional<int64_t> FieldReader::OptInt(const Json& obj, const char* key,
                                           const std::string& path) {
  const Json* v = Get(obj, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number_integer()) {
    Error(Join(path, key), "must be an integer");
    return std::nullopt;
  }
  return v->get<int64_t>();
}

std::map<std::string, std::string> FieldReader::StrMap(const Json& obj, const char* key,
                                                       const std::string& path) {
  std::map<std::string, std::string> out;
  const Json* v = Object(obj, key, path);
  if (v == nullptr) return out;
  for (auto it = v->begin(); it != v->end(); ++it) {
    if (!it->is_string()) {
      Error(Join(Join(path, key), it.key().c_str()), "must be a string");
      continue;
    }
    out.emplace(it.key(), it->get<std::string>());
  }
  return out;
}

std::vector<std::string> FieldReader::StrList(const Json& obj, const char* key,
                                              const std::string& path) {
  std::vector<std::string> out;
  const Json* v = Array(obj, key, path);
  if (v == nullptr) return out;
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string()) {
      Error(Index(Join(path, key), i), "must be a string");
      continue;
    }
    out.push_back((*v)[i].get<std::string>());
  }
  return out;
}

ResourceList FieldReader::Resources(const Json& obj, const char* key, const std::string& path) {
  ResourceList out;
  const Json* v = Object(obj, key, path);
  if (v == nullptr) return out;
  for (auto it = v->begin(); it != v->end(); ++it) {
    const std::string field = Join(Join(path, key), it.key().c_str());
    std::string text;
    if (it->is_string()) {
      text = it->get<std::string>();
    } else if (it->is_number()) {  // Quantity's JSON form also accepts a bare number
      text = it->dump();
    } else {
      Error(field, "must be a quantity string");
      continue;
    }
    absl::StatusOr<Quantity> q = ParseQuantity(text);
    if (!q.ok()) {
      Error(field, std::string(q.status().message()));
      continue;
    }
    out.emplace(it.key(), *std::move(q));
  }
  return out;
}

const Json* FieldReader::Object(const Json& obj, const char* key, const std::string& path) {
  const Json* v = Get(obj, key);
  if (v == nullptr) return nullptr;
  if (!v->is_object()) {
    Error(Join(path, key), "must be an object");
    return nullptr;
  }
  return v;
}

const Json* FieldReader::Array(const Json& obj, const char* key, const std::string& path) {
  const Json* v = Get(obj, key);
  if (v == nullptr) return nullptr;
  if (!v->is_array()) {
    Error(Join(path, key), "must be a list");
    return nullptr;
  }
  return v;
}

void SetOrErase(Json& obj, const char* key, Json value, bool empty) {
  if (empty) {
    if (obj.is_object()) obj.erase(key);
    return;
  }
  obj[key] = std::move(value);
}

Json EncodeResources(const ResourceList& r) {
  Json out = Json::object();
  for (const auto& [name, q] : r) out[name] = q.text;
  return out;
}

Json EncodeStrMap(const std::map<std::string, std::string>& m) {
  Json out = Json::object();
  for (const auto& [k, v] : m) out[k] = v;
  return out;
}

std::string Describe(const char* kind, const Json& j) {
  std::string name = "(unnamed)", ns;
  if (j.is_object() && j.contains("metadata") && j["metadata"].is_object()) {
    const Json& m = j["metadata"];
    if (m.contains("name") && m["name"].is_string()) name = m["name"].get<std::string>();
    if (m.contains("namespace") && m["namespace"].is_string())
      ns = m["namespace"].get<std::string>();
  }
  return ns.empty() ? absl::StrCat(kind, " ", name) : absl::StrCat(kind, " ", ns, "/", name);
}

}  // namespace tessera::kube::internal
