#include "operator/json_fields.h"

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

}  // namespace tessera::op
