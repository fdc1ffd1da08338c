// CheckElastic: a TrainingJob spec's elastic policy checked against its
// groups. The API server's 422 and the controller's decoding share it, so it
// depends on nothing but JSON (the API fuzzer links it alone).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "nlohmann/json.hpp"

namespace tessera::api {

struct SpecError {
  std::string field;  // "spec.elastic.maxReplicas"
  std::string message;
};

// nullopt when `spec` is fine; `*min_replicas` is spec.elastic.minReplicas, or
// 0 when the job is not elastic. Pure; never throws on malformed JSON.
std::optional<SpecError> CheckElastic(const nlohmann::json& spec, int32_t* min_replicas);

}  // namespace tessera::api
