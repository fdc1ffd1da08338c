// Fake node descriptions (FakeBackend YAML) the device plugin tests share, with hand-drawn
// topologies, and a helper that discovers one without any threads.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "agent/discovery.h"

namespace tessera::deviceplugin::testing {

// 8 x H100 SXM on NVSwitches; PCIe switch pairs (0,1) (2,3) (4,5) (6,7) at SINGLE; GPUs 0-3 on
// NUMA node 0 and 4-7 on node 1 (other pairs: NODE within a NUMA node, SYSTEM across).
// UUIDs GPU-nvsw-0 ... GPU-nvsw-7.
extern const char kNvSwitch8[];

// 4 x A100 PCIe: NVLink bridges join (0,1) and (2,3), each pair behind one PCIe switch (SINGLE);
// GPUs 0,1 on NUMA node 0, 2,3 on node 1 (cross pairs SYSTEM). UUIDs GPU-pcie-0 ... GPU-pcie-3.
extern const char kPciePairs4[];

// 2 x A100: GPU 0 in MIG mode with two 1g.10gb instances (MIG-a-0, MIG-a-1) and one 3g.40gb
// (MIG-a-2); GPU 1 (GPU-mig-1) without MIG. GPU 0 is GPU-mig-0.
extern const char kMigMixed2[];

// Parses `yaml`, initializes a FakeBackend on a manual clock and discovers it.
absl::StatusOr<agent::NodeSnapshot> DiscoverYaml(const std::string& yaml);

}  // namespace tessera::deviceplugin::testing
