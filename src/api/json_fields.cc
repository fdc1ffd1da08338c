#include "api/json_fields.h"

namespace tessera::api {

using Json = nlohmann::json;

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

const Json& Items(const Json& obj, const char* key) {
  static const Json* const kEmpty = new Json(Json::array());
  const Json& v = Field(obj, key);
  return v.is_array() ? v : *kEmpty;
}

int64_t IntOr(const Json& obj, const char* key, int64_t dflt) {
  const Json& v = Field(obj, key);
  return v.is_number_integer() ? v.get<int64_t>() : dflt;
}

std::string StrOr(const Json& obj, const char* key, const std::string& dflt) {
  const Json& v = Field(obj, key);
  return v.is_string() ? v.get<std::string>() : dflt;
}

bool BoolOr(const Json& obj, const char* key, bool dflt) {
  const Json& v = Field(obj, key);
  return v.is_boolean() ? v.get<bool>() : dflt;
}

}  // namespace tessera::api
