// Inventory: which Kubernetes extended resources a node's GPUs become, and the devices of each.
//
// Algorithm (NVIDIA's "mixed" MIG strategy): a GPU without MIG enabled is one device of
// `nvidia.com/gpu` whose id is the GPU UUID; a GPU with MIG enabled is not advertised itself and
// contributes each MIG instance as a device of `nvidia.com/mig-<profile>` whose id is the MIG
// UUID. With MigStrategy::kNone every GPU is an `nvidia.com/gpu` device and MIG is ignored.
// Resource names follow NVIDIA's k8s-device-plugin, so that pod specs written for it schedule:
// "mig-" + the profile with '+' replaced by '.' ("1g.10gb+me" -> nvidia.com/mig-1g.10gb.me,
// "1g.24gb+me.all" -> mig-1g.24gb.me.all, "1g.24gb-me" -> mig-1g.24gb-me); any other character a
// Kubernetes resource name does not allow becomes '-'. As in NVIDIA's mixed strategy, a MIG
// device whose compute instance is a part of its GPU instance ("1c.3g.40gb") is not advertised.
// A MIG device's health is its parent GPU's: XIDs and ECC errors are reported per physical GPU.
// Resources are sorted by name, devices by (GPU index, id). Pure functions; no I/O.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "agent/discovery.h"

namespace tessera::deviceplugin {

enum class MigStrategy { kNone, kMixed };

// "none" or "mixed"; InvalidArgument otherwise.
absl::StatusOr<MigStrategy> ParseMigStrategy(absl::string_view name);

inline constexpr char kGpuResource[] = "nvidia.com/gpu";

struct PluginDevice {
  std::string id;                // GPU UUID, or MIG UUID for a MIG device
  std::string gpu_uuid;          // the physical GPU: the key of its health
  int gpu_index = 0;             // index into the node's GPUs and topology matrix
  std::optional<int> minor;      // /dev/nvidia<minor> of the physical GPU
  std::optional<int> numa_node;  // of the physical GPU
  std::string mig_profile;       // empty for a whole GPU
};

struct Resource {
  std::string name;         // "nvidia.com/gpu", "nvidia.com/mig-1g.10gb"
  std::string socket_name;  // file name in the device-plugin directory, "tessera-gpu.sock"
  std::vector<PluginDevice> devices;
};

// "nvidia.com/mig-<profile, '+' -> '.'>".
std::string MigResourceName(absl::string_view profile);

// False for a compute-instance profile "<c>c.<g>g.<mem>" with c != g, which NVIDIA's mixed
// strategy does not advertise.
bool MigProfileIsAdvertised(absl::string_view profile);

// Resources of a discovered node. A GPU that could not be queried at all still appears (under
// nvidia.com/gpu) when its UUID is known; one without a UUID cannot be addressed and is skipped.
std::vector<Resource> BuildInventory(const agent::NodeSnapshot& node, MigStrategy strategy);

}  // namespace tessera::deviceplugin
