// Small helpers for strict YAML decoding: every error names the field path.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "yaml-cpp/yaml.h"

namespace tessera::config {

// Fails if `node` (a map) has a key outside `allowed`.
absl::Status CheckKeys(const YAML::Node& node, const std::vector<std::string>& allowed,
                       absl::string_view path);
absl::Status ReadString(const YAML::Node& node, absl::string_view path, std::string* out);
absl::Status ReadInt(const YAML::Node& node, absl::string_view path, int64_t* out);
absl::Status ReadDouble(const YAML::Node& node, absl::string_view path, double* out);
absl::Status ReadBool(const YAML::Node& node, absl::string_view path, bool* out);

}  // namespace tessera::config
