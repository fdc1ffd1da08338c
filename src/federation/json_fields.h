// Lenient reads of JSON objects for the federation: a missing key, a wrong
// type or a non-object reads as empty (members' answers are not trusted to be
// well formed).
#pragma once

#include <string>

#include "api/json_fields.h"
#include "nlohmann/json.hpp"

namespace tessera::federation {

// o[key] as a string; "" when absent or not a string.
inline std::string Str(const nlohmann::json& o, const char* key) { return api::StrOr(o, key); }

// o[key]; null when absent.
using api::Field;

}  // namespace tessera::federation
