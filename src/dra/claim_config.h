// A claim's opaque configuration for `tessera dra-driver`, as the scheduler copies it into
// status.allocation.devices.config (the DeviceClass's entries with source FromClass, then the
// claim's with FromClaim), applied to each prepared device's CDI spec.
//
// The parameters this driver takes (opaque.driver == the driver's name; others' are not ours and
// are skipped):
//   {"env": {"NAME": "value", ...}}
// environment variables for the containers that use the device. Entries apply to a device when
// their `requests` name its request or are empty; later entries override earlier ones (so a
// claim's setting overrides its class's). Refused, all at once, naming each field: parameters
// that are not an object, an unknown key, a value that is not a string, a name that is not an
// environment variable name, and the names the driver sets itself (NVIDIA_VISIBLE_DEVICES,
// TESSERA_DRA_CLAIM: a claim must not widen its own devices).
// Pure; thread-compatible.
#pragma once

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "kube/objects.h"

namespace tessera::dra {

struct DeviceConfig {
  std::map<std::string, std::string> env;
};

// The configuration for a device of request `request` from `config` (status.allocation.devices
// .config, an array; null or absent: none), for driver `driver`.
absl::StatusOr<DeviceConfig> ConfigForDevice(const kube::Json& config, const std::string& driver,
                                             const std::string& request);

}  // namespace tessera::dra
