// The driver's checkpoint: the claims it has prepared, so that a restarted driver answers a
// repeated NodePrepareResources with the same devices (never preparing twice) and can unprepare
// a claim prepared before the restart (removing its CDI files).
//
// Format: JSON {"version": 1, "checksum": "<FNV-1a 64 of claims.dump(), hex>", "claims": {uid:
// {namespace, name, devices: [{request_names, pool_name, device_name, cdi_device_ids}],
// cdi_files: [...]}}}, written through a temporary file and rename (a crash leaves the old or the
// new file, never half of one). A file that does not parse, has another version, or whose
// checksum does not match is DataLoss: the driver reports it and starts empty, and kubelet's
// next NodePrepareResources calls prepare the claims again (the CDI files are rewritten with the
// same names, so nothing is doubled).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tessera::dra {

struct PreparedDevice {
  std::vector<std::string> request_names;
  std::string pool_name;
  std::string device_name;
  std::vector<std::string> cdi_device_ids;
  bool operator==(const PreparedDevice&) const = default;
};

struct PreparedClaim {
  std::string claim_namespace, claim_name;
  std::vector<PreparedDevice> devices;
  std::vector<std::string> cdi_files;
  bool operator==(const PreparedClaim&) const = default;
};

using PreparedClaims = std::map<std::string, PreparedClaim>;  // by claim UID

// Missing file: empty (OK). Unreadable content: DataLoss naming the file and what is wrong.
absl::StatusOr<PreparedClaims> LoadCheckpoint(const std::string& path);
absl::Status SaveCheckpoint(const std::string& path, const PreparedClaims& claims);

}  // namespace tessera::dra
