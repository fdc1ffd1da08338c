// ResourceClaims (resource.k8s.io/v1) as `tessera scheduler` places them: the devices of
// `tessera dra-driver` are the node's GPUs, so a claim for whole GPUs is a member's GPU request
// to the scheduling core (its fit, gangs, preemption and the NVLink-aware GPU chooser count
// them), and the GPUs the core chooses become the claim's devices.
//
//   - A node with no `nvidia.com/gpu` capacity takes its GPUs from its ResourceSlices of
//     kDraDriver (SliceGpus): one per whole-GPU device, at its `index`, with memory, product and
//     NVLink island (`nvlinkDomain`); indices missing from the slice (an unhealthy GPU leaves it)
//     are unhealthy GPUs.
//   - A Pod's claims (ClaimOf) must ask for whole GPUs of kDraDriver in ExactCount mode (any
//     selectors, matchAttribute constraints); anything else waits with a message naming the
//     claim and what is not supported yet (MIG devices, All, other drivers, firstAvailable).
//     Their counts add to the member's GPUs; the nodes whose devices could hold the claims at all
//     (AllocateClaim on the node's devices, nothing allocated) restrict where the job may go.
//   - At binding, each claim takes its share of the GPUs the core chose, checked by AllocateClaim
//     over exactly those devices (selectors, constraints); the allocation (AllocationStatus) is
//     written to the claim's status with the Pod in reservedFor before the Pod is bound.
// Pure: no I/O, thread-compatible.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kubesched/device_allocator.h"
#include "model/node.h"
#include "nlohmann/json.hpp"

namespace tessera::kubesched {

inline constexpr char kDraDriver[] = "gpu.tessera.dev";

// The node's GPUs from its slices' whole-GPU devices of kDraDriver (see above); empty when it has
// none. `node_name` names the node in the GPUs' uuids.
std::vector<model::Gpu> SliceGpus(const std::vector<SliceDevice>& devices,
                                  const std::string& node_name, std::vector<int>* nvlink_domains);

// The GPU index of a whole-GPU device of kDraDriver (its `index` attribute); nullopt for any
// other device (a MIG instance, another driver's).
std::optional<int> GpuIndex(const SliceDevice& d);

// One claim of a Pod, ready to place.
struct PlacedClaim {
  std::string name, uid;  // the ResourceClaim object's
  ClaimSpec spec;
  int64_t gpus = 0;        // whole GPUs it asks, all requests together
  bool allocated = false;  // its allocation was written (KubeScheduler: deallocate at the end)
};

// `claim` (a ResourceClaim object) with the DeviceClasses by name. InvalidArgument names the
// claim and the field: an unknown class, a selector the CEL subset refuses, a mode or device
// type not supported yet.
absl::StatusOr<PlacedClaim> ClaimOf(const nlohmann::json& claim,
                                    const std::map<std::string, nlohmann::json>& classes);

// Splits `chosen` (the devices of the GPUs the core chose for a member, in its order) among the
// member's `claims`, each taking its count through AllocateClaim over what is left. nullopt, with
// `why`, when they do not satisfy the claims' selectors or constraints.
std::optional<std::vector<std::vector<DeviceAllocation>>> ClaimShares(
    const std::vector<PlacedClaim>& claims, const std::vector<SliceDevice>& chosen,
    std::string* why);

// The devices of kDraDriver a claim object's status.allocation holds (their names).
std::vector<std::string> ClaimedGpuNames(const nlohmann::json& claim);

// The claim's status once allocated on `node` to Pod `pod_name`/`pod_uid`: allocation.devices,
// allocation.nodeSelector (the node by name) and reservedFor.
nlohmann::json AllocationStatus(const std::vector<DeviceAllocation>& devices,
                                const std::string& node, const std::string& pod_name,
                                const std::string& pod_uid);

}  // namespace tessera::kubesched
