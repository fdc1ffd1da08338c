// Node API object <-> model::Node. Pure functions; thread-safe.
//
// spec either lists gpus[] {index, uuid, model, memoryMiB} or gives
// gpuType + gpuCount (+ gpuMemoryMiB); the intra-node topology is an explicit
// links matrix (+ nvlinkDomains) or a named layout (default nvswitch).
// metadata.labels become node labels; absent rack/block mean "default";
// absent cpuMilli/memoryMiB mean "not limited". status.gpus[].health marks
// GPUs unhealthy. Errors name the field ("spec.gpus[2].model: ...").
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "controller/store_layout.h"
#include "model/node.h"

namespace tessera::controller {

// CPU / memory of a node whose spec does not say (effectively unlimited).
inline constexpr int64_t kUnlimitedCpuMilli = int64_t{1} << 40;
inline constexpr int64_t kUnlimitedMemoryMiB = int64_t{1} << 40;

absl::StatusOr<model::Node> NodeFromObject(const Json& obj);

// Bit i set when status.gpus[] marks GPU i Unhealthy.
uint32_t UnhealthyMask(const Json& obj);

}  // namespace tessera::controller
