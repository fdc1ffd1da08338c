// Status conditions (metav1.Condition's shape: type, status, reason, message,
// lastTransitionTime), as the standalone controller and the Kubernetes operator both write them.
// Pure; thread-compatible.
#pragma once

#include <string>

#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace tessera::api {

// Sets condition `type` in status.conditions to `value` ("True", "False", "Unknown") with its
// reason and message (cut to 4 KiB), adding it when absent. lastTransitionTime changes only when
// the value does, so writing the same condition again leaves the status equal.
void SetCondition(nlohmann::json& status, const std::string& type, const std::string& value,
                  const std::string& reason, const std::string& message, absl::Time now);

}  // namespace tessera::api
