// Lenient reads of JSON objects for the federation: a missing key, a wrong
// type or a non-object reads as empty (members' answers are not trusted to be
// well formed).
#pragma once

#include <string>

#include "nlohmann/json.hpp"

namespace tessera::federation {

// o[key] as a string; "" when absent or not a string.
inline std::string Str(const nlohmann::json& o, const char* key) {
  if (!o.is_object()) return "";
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : "";
}

// o[key]; null when absent.
inline const nlohmann::json& Field(const nlohmann::json& o, const char* key) {
  static const nlohmann::json kNull;
  if (!o.is_object()) return kNull;
  auto it = o.find(key);
  return it == o.end() ? kNull : *it;
}

}  // namespace tessera::federation
