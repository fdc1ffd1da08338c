// What kubelet's Allocate and GetPreferredAllocation calls answer for one resource, as pure
// functions over the protobuf messages (the gRPC server only translates statuses).
//
// Allocate contract: the whole request fails, and nothing is returned, when any id of any
// container is unknown to the resource (InvalidArgument), appears twice in the request
// (InvalidArgument) or belongs to an unhealthy GPU (FailedPrecondition); every message names
// the field, e.g. "container_requests[0].devices_ids[2]: unknown device 'GPU-x' for resource
// nvidia.com/gpu". The plugin keeps no allocation state, so a failed call changes nothing.
// For the devices of one container the response carries what the device-list strategies ask
// for (NVIDIA's k8s-device-plugin `--device-list-strategy`, default envvar alone):
//   - envvar: env NVIDIA_VISIBLE_DEVICES, the ids (GPU or MIG UUIDs) joined by commas in request
//     order, and device specs (rw) for /dev/nvidia<minor> of every distinct physical GPU, then
//     the control devices (nvidiactl, nvidia-uvm, nvidia-uvm-tools, nvidia-modeset): only the
//     nodes that exist on the host (a node the host lacks would fail the container's creation);
//     host path under `dev_root`, container path under /dev;
//   - cdi-annotations: one annotation "cdi.k8s.io/tessera-device-plugin_<first id>" whose value
//     is the CDI device names joined by commas (the container-device-interface annotation form);
//   - cdi-cri: the CDI device names in the CRI field (Kubernetes 1.28+).
// CDI device names are "<cdi_kind>=<id>", "nvidia.com/gpu=<UUID>" as `nvidia-ctk cdi generate`
// names them. With CDI strategies alone, as NVIDIA's plugin, neither env nor device specs are
// returned: the CDI spec carries them.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/topology.h"
#include "deviceplugin/inventory.h"
#include "deviceplugin/v1beta1/api.pb.h"

namespace tessera::deviceplugin {

// NVIDIA's --device-list-strategy values this plugin implements (volume-mounts is not).
struct DeviceListStrategies {
  bool envvar = true;
  bool cdi_annotations = false;
  bool cdi_cri = false;

  bool operator==(const DeviceListStrategies&) const = default;
};

// "envvar", "cdi-annotations", "cdi-cri", each at most once and at least one;
// InvalidArgument naming the bad value otherwise.
absl::StatusOr<DeviceListStrategies> ParseDeviceListStrategies(
    const std::vector<std::string>& names);
// "envvar,cdi-cri".
std::string DeviceListStrategiesName(const DeviceListStrategies& s);

// Whether a device node exists on the host: the filesystem view of Allocate, injected so that
// tests decide. Called from gRPC threads; must be thread-safe.
using DeviceNodeExistsFn = std::function<bool(const std::string& host_path)>;
// The real view: stat(2) succeeds.
bool DeviceNodeExistsOnHost(const std::string& host_path);

struct AllocateOptions {
  DeviceListStrategies strategies;
  std::string cdi_kind = "nvidia.com/gpu";
  // Where the host's device nodes are (NVIDIA's --dev-root, "/" by default; a containerized
  // driver has them under e.g. /run/nvidia/driver): host paths are <dev_root>/dev/<node>.
  std::string dev_root = "/";
  std::vector<std::string> control_devices = {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools",
                                              "nvidia-modeset"};
  DeviceNodeExistsFn node_exists = DeviceNodeExistsOnHost;
};

// Healthy(gpu_uuid): the current verdict for a physical GPU.
using HealthFn = std::function<bool(const std::string& gpu_uuid)>;

absl::StatusOr<v1beta1::AllocateResponse> BuildAllocateResponse(
    const v1beta1::AllocateRequest& request, const Resource& resource, const HealthFn& healthy,
    const AllocateOptions& options);

// Applies PreferredAllocation to each container request; errors are prefixed with
// "container_requests[i].".
absl::StatusOr<v1beta1::PreferredAllocationResponse> BuildPreferredAllocationResponse(
    const v1beta1::PreferredAllocationRequest& request, const Resource& resource,
    const agent::TopologyMatrix& topology);

}  // namespace tessera::deviceplugin
