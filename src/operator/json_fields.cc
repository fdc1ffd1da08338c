#include "operator/json_fields.h"

#include "absl/strings/numbers.h"

namespace tessera::op {

const Json& Field(const Json& obj, const char* key) {
  static const Json* const kNull = new Json();
  if (!obj.is_object()) return *kNull;
  auto it = obj.find(key);
  return it == obj.end() ? *kNull : *it;
}

const Json& Sub(const Json& obj, const char* key) {
  static const Json* const kEmpty = new Json(Json::object());
  const Json& v = Field(obj, key);
  return v.is_object() ? v : *kEmpty;
}

int64_t IntOr(const Json& obj, const char* key, int64_t dflt) {
  const Json& v = Field(obj, key);
  return v.is_number_integer() ? v.get<int64_t>() : dflt;
}

std::string StrOr(const Json& obj, const char* key, const std::string& dflt) {
  const Json& v = Field(obj, key);
  return v.is_string() ? v.get<std::string>() : dflt;
}

const Json& Meta(const Json& obj) { return Sub(obj, "metadata"); }

std::string Label(const Json& obj, const char* key) { return StrOr(Sub(Meta(obj), "labels"), key); }

std::string Annotation(const Json& obj, const char* key) {
  return StrOr(Sub(Meta(obj), "annotations"), key);
}

bool Deleting(const Json& obj) { return Meta(obj).contains("deletionTimestamp"); }

int64_t IntLabel(const Json& obj, const char* key, int64_t dflt) {
  int64_t v = 0;
  return absl::SimpleAtoi(Label(obj, key), &v) ? v : dflt;
}

Json ControllerReference(const Json& owner, const std::string& kind) {
  return {{"apiVersion", owner.value("apiVersion", "tessera.dev/v1")},
          {"kind", kind},
          {"name", StrOr(Meta(owner), "name")},
          {"uid", StrOr(Meta(owner), "uid")},
          {"controller", true},
          {"blockOwnerDeletion", true}};
}

Json EnvVar(const std::string& name, const std::string& value) {
  return {{"name", name}, {"value", value}};
}

}  // namespace tessera::op
