// YAML <-> JSON for manifests and `-o yaml`. Plain scalars are typed the way
// YAML 1.2's core schema reads them (null, true/false, integers, floats);
// quoted scalars stay strings. Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace tessera::cli {

using Json = nlohmann::json;

// Every document of `text` (YAML or JSON), as JSON values. A document that is
// a List (`items`) is returned as its items.
absl::StatusOr<std::vector<Json>> ParseManifests(const std::string& text);

// `value` as block-style YAML.
std::string ToYaml(const Json& value);

}  // namespace tessera::cli
