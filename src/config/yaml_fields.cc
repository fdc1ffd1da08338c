#include "config/yaml_fields.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"

namespace tessera::config {

absl::Status CheckKeys(const YAML::Node& node, const std::vector<std::string>& allowed,
                       absl::string_view path) {
  if (!node.IsMap()) return absl::InvalidArgumentError(absl::StrCat(path, ": expected a mapping"));
  for (const auto& kv : node) {
    std::string key = kv.first.as<std::string>();
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ".", key, ": unknown field; expected one of: ", absl::StrJoin(allowed, ", ")));
    }
  }
  return absl::OkStatus();
}

absl::Status ReadString(const YAML::Node& node, absl::string_view path, std::string* out) {
  if (!node.IsScalar())
    return absl::InvalidArgumentError(absl::StrCat(path, ": expected a string"));
  *out = node.Scalar();
  return absl::OkStatus();
}

absl::Status ReadInt(const YAML::Node& node, absl::string_view path, int64_t* out) {
  if (!node.IsScalar() || !absl::SimpleAtoi(node.Scalar(), out)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": expected an integer"));
  }
  return absl::OkStatus();
}

absl::Status ReadDouble(const YAML::Node& node, absl::string_view path, double* out) {
  if (!node.IsScalar() || !absl::SimpleAtod(node.Scalar(), out)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": expected a number"));
  }
  return absl::OkStatus();
}

absl::Status ReadBool(const YAML::Node& node, absl::string_view path, bool* out) {
  if (!node.IsScalar() || !absl::SimpleAtob(node.Scalar(), out)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": expected true or false"));
  }
  return absl::OkStatus();
}

}  // namespace tessera::config
