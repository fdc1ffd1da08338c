// Preferred allocation: the best-connected set of `size` devices out of the available ones.
//
// Algorithm: every pair of devices gets a connectivity score, and a set's score is the sum over
// its pairs. A pair's score is dominated by the link class, NVLink (a bridge or an NVSwitch
// fabric) first, and refined by the PCIe common ancestor, so that on an all-NVSwitch node the
// pairs behind one PCIe switch and on one NUMA node still win:
//   same physical GPU (two MIG devices)  10000
//   NVLink                               1000
//   plus PCIe level: INTERNAL 60, SINGLE 50, MULTIPLE 40, HOSTBRIDGE 30, NODE 20, SYSTEM 10,
//   unknown 0 (without a level, a PCIe link class still counts: PCIe switch 50, host bridge 20,
//   cross-NUMA 10).
// The must-include devices are always in the set. The rest are chosen by exhaustive search over
// all combinations when there are at most kExhaustiveLimit of them, else greedily (repeatedly
// add the device that raises the score most). Ties go to the set that comes first in inventory
// order, so the answer is deterministic. The result lists devices in inventory order.
// Health is not considered: kubelet offers only healthy devices.
// Pure functions; no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/topology.h"
#include "deviceplugin/inventory.h"

namespace tessera::deviceplugin {

inline constexpr int64_t kExhaustiveLimit = 200000;

// Connectivity score of two distinct devices of one resource.
int64_t PairScore(const PluginDevice& a, const PluginDevice& b,
                  const agent::TopologyMatrix& topology);

// Chooses `size` ids from `available` including every id of `must_include`.
// InvalidArgument, naming the field (available_deviceIDs, must_include_deviceIDs,
// allocation_size), for: an id not in `devices`, a duplicated id, a must-include id that is not
// available, a size below 1, above the available count or below the must-include count.
absl::StatusOr<std::vector<std::string>> PreferredAllocation(
    const std::vector<PluginDevice>& devices, const agent::TopologyMatrix& topology,
    const std::vector<std::string>& available, const std::vector<std::string>& must_include,
    int size);

}  // namespace tessera::deviceplugin
