// What kubelet's Allocate and GetPreferredAllocation calls answer for one resource, as pure
// functions over the protobuf messages (the gRPC server only translates statuses).
//
// Allocate contract: the whole request fails, and nothing is returned, when any id of any
// container is unknown to the resource (InvalidArgument), appears twice in the request
// (InvalidArgument) or belongs to an unhealthy GPU (FailedPrecondition); every message names
// the field, e.g. "container_requests[0].devices_ids[2]: unknown device 'GPU-x' for resource
// nvidia.com/gpu". The plugin keeps no allocation state, so a failed call changes nothing.
// For the devices of one container the response carries
//   - env NVIDIA_VISIBLE_DEVICES: the ids (GPU or MIG UUIDs) joined by commas, in request order;
//   - device specs (rw): /dev/nvidia<minor> of every distinct physical GPU, then the control
//     devices (/dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia-uvm-tools, /dev/nvidia-modeset);
//   - CDI devices "nvidia.com/gpu=<id>" (as `nvidia-ctk cdi generate` names them by UUID),
//     unless disabled.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/topology.h"
#include "deviceplugin/inventory.h"
#include "deviceplugin/v1beta1/api.pb.h"

namespace tessera::deviceplugin {

struct AllocateOptions {
  bool cdi = true;
  std::string cdi_kind = "nvidia.com/gpu";
  std::string dev_dir = "/dev";  // host and container path prefix of device nodes
  std::vector<std::string> control_devices = {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools",
                                              "nvidia-modeset"};
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
