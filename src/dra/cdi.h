// CDI (Container Device Interface) spec files for prepared claims.
//
// One spec file per prepared device of a claim, <cdi_dir>/<driver>-claim-<claim uid>-<device>.json,
// of kind "<driver>/claim" with one device named "<claim uid>-<device>": so the CDI id that
// NodePrepareResources returns is "<driver>/claim=<claim uid>-<device>", unique per claim and
// device, and unpreparing a claim removes exactly its files. The device's containerEdits: the
// device nodes /dev/nvidia<minor> (of the physical GPU; a MIG instance shares its parent's),
// /dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia-uvm-tools (each under `dev_root` on the host, as
// the device plugin's Allocate) and env NVIDIA_VISIBLE_DEVICES=<uuid> plus
// TESSERA_DRA_CLAIM=<namespace>/<name>, then the claim's configured env (claim_config.h). Written
// with the current CDI spec version (kCdiVersion, SPEC.md of cncf-tags/container-device-interface).
// Files are written to a temporary name and renamed, so a runtime never reads half a spec.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dra/devices.h"
#include "kube/objects.h"

namespace tessera::dra {

inline constexpr char kCdiVersion[] = "1.0.0";

struct CdiClaim {
  std::string driver;  // "gpu.tessera.dev"
  std::string claim_uid;
  std::string claim_namespace, claim_name;
};

// The spec of one device of a claim.
kube::Json CdiSpecJson(const CdiClaim& claim, const DraDevice& device, const std::string& dev_root,
                       const std::map<std::string, std::string>& env = {});

// "<driver>/claim=<uid>-<device>".
std::string CdiDeviceId(const CdiClaim& claim, const DraDevice& device);

// The spec file's path in `cdi_dir`.
std::string CdiSpecPath(const std::string& cdi_dir, const CdiClaim& claim,
                        const std::string& device_name);

// Writes the device's spec file (atomically); returns its path. Idempotent.
absl::StatusOr<std::string> WriteCdiSpec(const std::string& cdi_dir, const CdiClaim& claim,
                                         const DraDevice& device, const std::string& dev_root,
                                         const std::map<std::string, std::string>& env = {});

// Writes `contents` to `path` through a temporary file and rename.
absl::Status WriteFileAtomically(const std::string& path, const std::string& contents);

// Removes a spec file; one already gone is fine (idempotent).
absl::Status RemoveCdiSpec(const std::string& path);

}  // namespace tessera::dra
