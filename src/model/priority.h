// Named priority classes and their default values.
#pragma once

#include <cstdint>
#include <optional>

#include "absl/strings/string_view.h"

namespace tessera::model {

inline constexpr int32_t kPrioritySystemCritical = 1000000;
inline constexpr int32_t kPriorityProduction = 100000;
inline constexpr int32_t kPriorityResearch = 1000;
inline constexpr int32_t kPriorityDevelopment = 100;

// The built-in classes ("system-critical", "production", "research",
// "development"); a deployment may configure others above this module.
std::optional<int32_t> DefaultPriorityClassValue(absl::string_view name);

}  // namespace tessera::model
