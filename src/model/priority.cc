#include "model/priority.h"

namespace tessera::model {

std::optional<int32_t> DefaultPriorityClassValue(absl::string_view name) {
  if (name == "system-critical") return kPrioritySystemCritical;
  if (name == "production") return kPriorityProduction;
  if (name == "research") return kPriorityResearch;
  if (name == "development") return kPriorityDevelopment;
  return std::nullopt;
}

}  // namespace tessera::model
