// DRA devices: what `tessera dra-driver` publishes of a node's GPUs in its ResourceSlice
// (resource.k8s.io/v1), and the slice itself.
//
// Algorithm: the devices are the device plugin's inventory (deviceplugin/inventory.h, NVIDIA's
// mixed MIG strategy), so the two never disagree on what a node has: a GPU not in MIG mode is
// device "gpu-<index>"; a GPU in MIG mode is not published itself but as its advertised MIG
// instances "gpu-<index>-mig-<k>" (k: the instance's position among its GPU's advertised ones).
// Partitionable devices (resource.k8s.io/v1 sharedCounters, served when DRAPartitionableDevices is
// on: beta and on by default since 1.35): a GPU in MIG mode whose memory and every instance's
// memory are known is published as well, whole ("gpu-<index>", attribute migEnabled: true: all
// its instances, as NVIDIA_VISIBLE_DEVICES=<its UUID> gives them), with a counter set
// "gpu-<index>" of its memory; the whole GPU consumes all of it and each instance its own
// memory, so a scheduler never allocates the GPU and one of its instances both. The counter sets
// go in a second slice of the pool (the API allows devices or sharedCounters in one slice, not
// both). Where the API server does not keep sharedCounters, the whole MIG GPUs are left out and
// the slice is as before: a GPU in MIG mode published only as its instances.
// Attributes (unqualified names, i.e. in the driver's domain): type ("gpu" | "mig"), uuid,
// productName, architecture and computeCapability (a version, from the product name; absent when
// the family is unknown), pciBusID, numaNode, nvlinkDomain (the island of the device's physical
// GPU: the same derivation the device plugin writes as tessera.dev/nvlink-domains), driverVersion
// (a semantic version: NVIDIA's "550.90.07" becomes "550.90.7"), index (the GPU index) and, for
// MIG, profile and parentUUID; migEnabled (bool) on every whole GPU. Capacity: memory (the GPU's or
// the MIG instance's framebuffer). A device whose physical GPU is unhealthy (the agent's
// HealthTracker: hardware XIDs, DBE, loss) leaves the slice and returns when the GPU recovers.
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

// The implicit noexcept move of its nlohmann::json runs assert_invariant, which clang-tidy cannot
// see does not throw.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct DraDevice {
  std::string name;      // "gpu-3", "gpu-0-mig-2": unique in the node's pool
  std::string uuid;      // GPU or MIG UUID
  std::string gpu_uuid;  // the physical GPU: the key of its health
  int gpu_index = 0;
  std::optional<int> minor;  // /dev/nvidia<minor> of the physical GPU
  std::string mig_profile;   // empty for a whole GPU
  kube::Json attributes;     // {"uuid": {"string": ...}, ...}, as the API has them
  std::optional<int64_t> memory_bytes;
  // Partitionable: the counter set ("gpu-<index>") whose memory it consumes (`consumes` bytes),
  // "" for none. `mig_parent`: a whole GPU in MIG mode (published only with its counters).
  std::string counter_set;
  int64_t consumes = 0;
  bool mig_parent = false;
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

// The ResourceSlices of node `node_name` for driver `driver`: pool `node_name` at `generation`,
// the devices for which `healthy(gpu_uuid)` holds, in slice SliceName(); with `partitionable`
// and a device that consumes counters, also whole MIG GPUs and their counter sets, in a second
// slice CounterSliceName() (the pool then has two slices).
std::vector<kube::Json> ResourceSlicesJson(const std::string& driver, const std::string& node_name,
                                           const std::vector<DraDevice>& devices,
                                           const std::function<bool(const std::string&)>& healthy,
                                           int64_t generation, bool partitionable);

// "<node>-<driver with '.' -> '-'>", e.g. "gpu-1-gpu-tessera-dev".
std::string SliceName(const std::string& driver, const std::string& node_name);
// SliceName() + "-counters".
std::string CounterSliceName(const std::string& driver, const std::string& node_name);

}  // namespace tessera::dra
