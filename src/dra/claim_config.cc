#include "dra/claim_config.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tessera::dra {
namespace {

bool EnvName(const std::string& n) {
  if (n.empty() || std::isdigit(static_cast<unsigned char>(n[0]))) return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

}  // namespace

absl::StatusOr<DeviceConfig> ConfigForDevice(const kube::Json& config, const std::string& driver,
                                             const std::string& request) {
  DeviceConfig out;
  if (!config.is_array()) return out;
  std::vector<std::string> errors;
  for (size_t i = 0; i < config.size(); ++i) {
    const kube::Json& c = config[i];
    if (!c.is_object()) continue;
    const kube::Json opaque = c.value("opaque", kube::Json::object());
    if (!opaque.is_object() || opaque.value("driver", "") != driver) continue;
    const kube::Json requests = c.value("requests", kube::Json::array());
    if (requests.is_array() && !requests.empty() &&
        std::find(requests.begin(), requests.end(), request) == requests.end()) {
      continue;
    }
    const std::string field =
        absl::StrCat("status.allocation.devices.config[", i, "].opaque.parameters");
    const kube::Json params = opaque.value("parameters", kube::Json::object());
    if (!params.is_object()) {
      errors.push_back(field + ": not an object");
      continue;
    }
    for (const auto& [key, value] : params.items()) {
      if (key != "env") {
        errors.push_back(absl::StrCat(field, ".", key, ": unknown (this driver takes env)"));
        continue;
      }
      if (!value.is_object()) {
        errors.push_back(field + ".env: not an object of names to values");
        continue;
      }
      for (const auto& [name, v] : value.items()) {
        const std::string where = absl::StrCat(field, ".env.", name);
        if (!EnvName(name)) {
          errors.push_back(where + ": not an environment variable name");
        } else if (name == "NVIDIA_VISIBLE_DEVICES" || name == "TESSERA_DRA_CLAIM") {
          errors.push_back(where + ": set by the driver from the allocation, not by a claim");
        } else if (!v.is_string()) {
          errors.push_back(where + ": not a string");
        } else {
          out.env[name] = v.get<std::string>();
        }
      }
    }
  }
  if (!errors.empty()) return absl::InvalidArgumentError(absl::StrJoin(errors, "; "));
  return out;
}

}  // namespace tessera::dra
