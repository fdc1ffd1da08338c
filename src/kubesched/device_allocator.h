// AllocateClaim: choosing the devices of one node for a ResourceClaim (resource.k8s.io/v1), as
// the scheduler writes them into the claim's status.allocation.
//
// Algorithm, for one claim on one node's ResourceSlice devices:
//  1. Candidates per request: the devices not allocated to another claim, not conflicting with
//     one (a whole GPU and its MIG instances exclude each other: same `uuid` / `parentUUID`;
//     partitionable devices: what they consume of their pool's shared counters must still be
//     left after what the allocated devices consume), and
//     selected by every selector of the request's DeviceClass and of the request (CEL,
//     kube/device_cel.h). A selector that fails to evaluate on a device leaves the device out;
//     the first such error is reported if the claim cannot be allocated.
//  2. matchAttribute constraints: every device of the named requests (all requests when none is
//     named) must carry the attribute with one value. The candidates are grouped by that value
//     and the groups tried best fit first (fewest candidates that still hold what the requests
//     ask, so a 4-GPU claim takes a 4-GPU NVLink island and leaves the 8-GPU one whole).
//  3. Within the group, requests are filled in order. ExactCount takes `count` devices,
//     preferring one NVLink domain (the smallest domain that holds them all, else the largest
//     domains first), then the lowest names; All takes every device the selectors match, and
//     fails if any of them is unavailable. Devices a request took are not offered to the next,
//     nor are devices conflicting with them.
// Greedy per request: with overlapping requests it can miss an allocation that exists (as the
// reference allocator's backtracking would find); the result is always a valid allocation.
//
// Pure: no I/O, thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kube/device_cel.h"

namespace tessera::kubesched {

// One device of a node's ResourceSlices.
struct SliceDevice {
  std::string driver, pool, name;
  kube::CelValue cel;  // kube::DeviceValue(driver, the slice's device)
  // Exclusion: a whole GPU holds "uuid"; a MIG instance holds "parentUUID" (both from the
  // driver's attributes, empty when absent).
  std::string uuid, parent_uuid;
  std::optional<int64_t> nvlink_domain;  // the driver's nvlinkDomain attribute
  // Partitionable devices: what it takes of its pool's counter sets (consumesCounters), each
  // counter keyed "<driver>/<pool>/<set>/<counter>" with the amount in milli-units, and what
  // those counters hold (the pool's sharedCounters; a counter no slice declares holds 0).
  std::vector<std::pair<std::string, int64_t>> consumes;
  std::shared_ptr<const std::map<std::string, int64_t>> counters;
  std::string Id() const { return driver + "/" + pool + "/" + name; }
};

// The attribute `qualified` ("DOMAIN/NAME") of a device's CEL value (kube::DeviceValue); null when
// absent.
const kube::CelValue* DeviceAttribute(const kube::CelValue& device, const std::string& qualified);

// The devices of the node's slices, from resource.k8s.io/v1 ResourceSlice objects (those whose
// spec.nodeName is the node). Devices of other drivers are included (their attributes by their
// own domain); uuid/parentUUID/nvlinkDomain are read from the device's own driver's domain.
std::vector<SliceDevice> DevicesOfSlices(const std::vector<nlohmann::json>& slices);

struct DeviceRequestSpec {
  std::string name;
  // The DeviceClass's selectors, then the request's own.
  std::vector<kube::DeviceSelector> selectors;
  bool all = false;   // allocationMode All
  int64_t count = 1;  // ExactCount
};

struct ClaimSpec {
  std::vector<DeviceRequestSpec> requests;
  struct MatchAttribute {
    std::string attribute;              // fully qualified, e.g. "gpu.tessera.dev/nvlinkDomain"
    std::vector<std::string> requests;  // empty: every request
  };
  std::vector<MatchAttribute> constraints;
};

struct DeviceAllocation {
  std::string request, driver, pool, device;
};

struct AllocationOutcome {
  std::vector<DeviceAllocation> devices;  // empty when it does not fit
  bool fits = false;
  std::string why;  // when it does not fit: what is missing, or the first selector error
};

// Allocates `claim` from `devices` (one node's), leaving out the ids (SliceDevice::Id) in
// `allocated` and what conflicts with them.
AllocationOutcome AllocateClaim(const ClaimSpec& claim, const std::vector<SliceDevice>& devices,
                                const std::set<std::string>& allocated);

}  // namespace tessera::kubesched
