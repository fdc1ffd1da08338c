// DRA devices: what `tessera dra-driver` publishes of a node's GPUs in its ResourceSlice
// (resource.k8s.io/v1), and the slice itself.
//
// Algorithm: the devices are the device plugin's inventory (deviceplugin/inventory.h, NVIDIA's
// mixed MIG strategy), so the two never disagree on what a node has: a GPU not in MIG mode is
// device "gpu-<index>"; a GPU in MIG mode is not published itself but as its advertised MIG
// instances "gpu-<index>-mig-<k>" (k: the instance's position among its GPU's advertised ones).
// A GPU and its MIG slices are therefore never both allocatable, with no shared counters needed.
// Attributes (unqualified names, i.e. in the driver's domain): type ("gpu" | "mig"), uuid,
// productName, architecture and computeCapability (a version, from the product name; absent when
// the family is unknown), pciBusID, numaNode, nvlinkDomain (the island of the device's physical
// GPU: the same derivation the device plugin writes as tessera.dev/nvlink-domains), driverVersion
// (a semantic version: NVIDIA's "550.90.07" becomes "550.90.7"), index (the GPU index) and, for
// MIG, profile and parentUUID. Capacity: memory (the GPU's or the MIG instance's framebuffer).
// A device whose physical GPU is unhealthy (the agent's HealthTracker: hardware XIDs, DBE, loss)
// leaves the slice and returns when the GPU recovers.
// Pure functions; no I/O.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "agent/discovery.h"
#include "kube/objects.h"

namespace tessera::dra {

inline constexpr char kDefaultDriverName[] = "gpu.tessera.dev";

struct DraDevice {
  std::string name;      // "gpu-3", "gpu-0-mig-2": unique in the node's pool
  std::string uuid;      // GPU or MIG UUID
  std::string gpu_uuid;  // the physical GPU: the key of its health
  int gpu_index = 0;
  std::optional<int> minor;  // /dev/nvidia<minor> of the physical GPU
  std::string mig_profile;   // empty for a whole GPU
  kube::Json attributes;     // {"uuid": {"string": ...}, ...}, as the API has them
  std::optional<int64_t> memory_bytes;
};

// The devices of a discovered node, by GPU index (a MIG GPU's instances by resource name, then
// instance).
std::vector<DraDevice> BuildDraDevices(const agent::NodeSnapshot& node);

// "NVIDIA H100 80GB HBM3" -> {"Hopper", "9.0.0"}; nullopt for an unknown family.
struct GpuArchitecture {
  std::string name;
  std::string compute_capability;  // semantic version "<major>.<minor>.0"
};
std::optional<GpuArchitecture> ArchitectureOf(absl::string_view product_name);

// "550.90.07" -> "550.90.7", "535.183" -> "535.183.0"; nullopt when not numeric.
std::optional<std::string> SemverOf(absl::string_view driver_version);

// The ResourceSlice of node `node_name` for driver `driver`: pool `node_name`, one slice,
// `generation`; the devices for which `healthy(gpu_uuid)` holds. Its name is SliceName().
kube::Json ResourceSliceJson(const std::string& driver, const std::string& node_name,
                             const std::vector<DraDevice>& devices,
                             const std::function<bool(const std::string&)>& healthy,
                             int64_t generation);

// "<node>-<driver with '.' -> '-'>", e.g. "gpu-1-gpu-tessera-dev".
std::string SliceName(const std::string& driver, const std::string& node_name);

}  // namespace tessera::dra
