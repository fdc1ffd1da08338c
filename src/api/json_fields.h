// Lenient readers of JSON objects as the API carries them: a field may be absent or of another
// type (a client's body before validation, a member cluster's answer, a status another writer
// made), and reads as the caller's default instead of throwing, as nlohmann's value() and at()
// would. The one implementation the controller, the operator, the federation and the tables use.
// Pure; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "nlohmann/json.hpp"

namespace tessera::api {

// obj[key], or null when obj is not an object or has no such key.
const nlohmann::json& Field(const nlohmann::json& obj, const char* key);
// obj[key] when it is an object, else an empty object.
const nlohmann::json& Sub(const nlohmann::json& obj, const char* key);
// obj[key] when it is an array, else an empty array.
const nlohmann::json& Items(const nlohmann::json& obj, const char* key);
// obj[key] as an integer, a string, a bool; `dflt` when absent or of another type.
int64_t IntOr(const nlohmann::json& obj, const char* key, int64_t dflt);
std::string StrOr(const nlohmann::json& obj, const char* key, const std::string& dflt = "");
bool BoolOr(const nlohmann::json& obj, const char* key, bool dflt);

}  // namespace tessera::api
