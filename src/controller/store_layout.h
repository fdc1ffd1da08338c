// The store layout as the controller uses it: the API contract's one statement of it
// (api/store_layout.h), named in this module's namespace.
#pragma once

#include "api/kinds.h"
#include "api/store_layout.h"
#include "nlohmann/json.hpp"

namespace tessera::controller {

using Json = nlohmann::json;

using api::kApiVersion;
using api::kCheckpointsPrefix;
using api::kEventsPrefix;
using api::kInferenceServicesPrefix;
using api::kNodesPrefix;
using api::kPriorityClassesPrefix;
using api::kTrainingJobsPrefix;
using api::ObjectKey;
using api::ParseStored;
using api::ParseTimestamp;
using api::Timestamp;
// The stored bytes of `obj` (resourceVersion dropped).
inline std::string ToStoredValue(const Json& obj) { return api::ToStored(obj); }

}  // namespace tessera::controller
