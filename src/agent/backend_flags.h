// The GPU backend that a command's --backend, --fake-config and --nvml-lib flags choose, for
// every command that reads GPUs (`tessera agent`, `tessera device-plugin`, `tessera dra-driver`):
// one parse, one set of messages.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "agent/gpu_backend.h"
#include "common/clock.h"

namespace tessera::agent {

// "nvml": NVML loaded from `nvml_lib` ("" = TESSERA_NVML_LIB or libnvidia-ml.so.1); "fake": the
// YAML node description `fake_config` (deploy/fake-gpus/). InvalidArgument naming the flag
// otherwise (--backend, --fake-config). The backend is not initialized (Init is the caller's).
// `clock` must outlive the backend.
absl::StatusOr<std::unique_ptr<GpuBackend>> BackendFromFlags(const std::string& backend,
                                                             const std::string& fake_config,
                                                             const std::string& nvml_lib,
                                                             Clock& clock);

}  // namespace tessera::agent
