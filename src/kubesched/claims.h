// ResourceClaims (resource.k8s.io/v1) as `tessera scheduler` places them: the devices of
// `tessera dra-driver` are the node's GPUs, so a claim for whole GPUs is a member's GPU request
// to the scheduling core (its fit, gangs, preemption and the NVLink-aware GPU chooser count
// them), and the GPUs the core chooses become the claim's devices.
//
//   - A node with no `nvidia.com/gpu` capacity takes its GPUs from its ResourceSlices of
//     kDraDriver (SliceGpus): one per whole-GPU device, at its `index`, with memory, product and
//     NVLink island (`nvlinkDomain`); indices missing from the slice (an unhealthy GPU leaves it)
//     are unhealthy GPUs.
//   - A Pod's claims (ClaimOf; `exactly` requests in ExactCount or All mode, firstAvailable
//     subrequests, any selectors, matchAttribute constraints) take one of two things
//     (KindOf, by what their selectors match among the cluster's devices): whole GPUs of
//     kDraDriver, which the core places as the member's GPUs (fit, gangs, preemption, the
//     NVLink-aware chooser), or other devices (MIG instances, other drivers' devices), which the
//     core does not model: those restrict the job to the nodes where they are free, and are
//     allocated from what is free at binding. A claim mixing both waits with a message naming it.
//     With firstAvailable, each node takes the most preferred alternative it can hold, and the job
//     goes where the most preferred one fits.
//   - Where a claim can go: the nodes whose devices hold all the Pod's claims (AllocateClaim on
//     the node's devices: whole GPUs as if free, since the core knows which are in use; other
//     devices less those allocated to claims). An All request over whole GPUs takes the count
//     of the nodes that most often agree.
//   - At binding, each claim takes its share of the GPUs the core chose (ClaimShares), or free
//     devices of the node, checked by AllocateClaim (selectors, constraints); the allocation
//     (AllocationStatus) is written to the claim's status with the Pod in reservedFor before the
//     Pod is bound.
// Pure: no I/O, thread-compatible.
#pragma once

#include <map>
#include <optional>
#include <set>
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

// Whether `d` is a whole GPU of kDraDriver (GpuIndex has a value). A GPU in MIG mode published
// whole (migEnabled, with shared counters) is not: its instances may be allocated by claims the
// core does not see, so it is placed as another device, never as one of the core's GPUs.
bool WholeGpu(const SliceDevice& d);

// What a claim takes (see above).
enum class ClaimKind { kGpus, kDevices };

// One claim of a Pod, ready to place.
struct PlacedClaim {
  std::string name, uid;  // the ResourceClaim object's
  ClaimSpec spec;
  ClaimKind kind = ClaimKind::kGpus;
  int64_t gpus = 0;        // kGpus: whole GPUs it takes, all requests together
  bool allocated = false;  // its allocation was written (KubeScheduler: deallocate at the end)
  std::vector<std::string> held;  // once allocated: its devices (SliceDevice::Id)
  // status.allocation.devices.config: each request's DeviceClass config (source FromClass, the
  // request named), then the claim's own (FromClaim), as kube-scheduler writes it.
  nlohmann::json config = nlohmann::json::array();
  // The claim's alternatives, most preferred first: one without firstAvailable requests; else
  // every combination of the requests' subrequests in order (named "<request>/<subrequest>", as
  // allocation results name them), at most 64. `spec` is the one chosen (the first at ClaimOf).
  std::vector<ClaimSpec> alternatives;
  // Makes alternative `alternative` of kind `k` the claim's spec (and its GPUs).
  void Choose(size_t alternative, ClaimKind k);
};

// `claim` (a ResourceClaim object) with the DeviceClasses by name. InvalidArgument names the
// claim and the field: an unknown class, a selector the CEL subset refuses, a mode or device
// type not supported yet.
absl::StatusOr<PlacedClaim> ClaimOf(const nlohmann::json& claim,
                                    const std::map<std::string, nlohmann::json>& classes);

// What `spec` (one of a claim's alternatives) takes, from `cluster` (every device of the
// cluster's slices): kGpus when each request's selectors match a whole GPU of kDraDriver,
// kDevices when none does. InvalidArgument names the requests when it mixes both; Unavailable
// when a request matches no device at all (it waits for one to be published). `claim_name` is
// for the messages.
absl::StatusOr<ClaimKind> KindOf(const std::vector<SliceDevice>& cluster, const ClaimSpec& spec,
                                 const std::string& claim_name);

// The devices (SliceDevice::Id) a claim object's status.allocation holds.
std::vector<std::string> AllocatedDeviceIds(const nlohmann::json& claim);

// Splits `chosen` (the devices of the GPUs the core chose for a member, in its order) among the
// member's kGpus `claims`, each taking its count through AllocateClaim over what is left; its
// kDevices claims take devices of `node` (the member's node's devices; whole GPUs are left out)
// not in `allocated`, which gains what they take. nullopt, with `why`, when they do not satisfy
// the claims' selectors or constraints, or the devices are no longer free.
std::optional<std::vector<std::vector<DeviceAllocation>>> ClaimShares(
    const std::vector<PlacedClaim>& claims, const std::vector<SliceDevice>& chosen,
    const std::vector<SliceDevice>& node, std::set<std::string>* allocated, std::string* why);

// The GPU indices (GpuIndex) of `node`'s whole GPUs whose ids (SliceDevice::Id) are in `ids`,
// sorted: the GPUs that allocations holding `ids` take on the node.
std::vector<int> GpuIndicesOf(const std::vector<SliceDevice>& node,
                              const std::set<std::string>& ids);

// The id (SliceDevice::Id) of an allocation result.
std::string DeviceId(const DeviceAllocation& a);

// The claim's status once allocated on `node` to Pod `pod_name`/`pod_uid`: allocation.devices
// (with `config`, PlacedClaim::config, when not empty), allocation.nodeSelector (the node by
// name) and reservedFor.
nlohmann::json AllocationStatus(const std::vector<DeviceAllocation>& devices,
                                const std::string& node, const std::string& pod_name,
                                const std::string& pod_uid,
                                const nlohmann::json& config = nlohmann::json::array());

}  // namespace tessera::kubesched
