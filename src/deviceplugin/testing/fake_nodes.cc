#include "deviceplugin/testing/fake_nodes.h"

#include "agent/fake/fake_backend.h"
#include "agent/fake/fake_config.h"
#include "common/clock.h"
#include "common/status_macros.h"

namespace tessera::deviceplugin::testing {

const char kNvSwitch8[] = R"(
driver_version: "550.90.07"
nvswitch: true
defaults: {model: NVIDIA H100 80GB HBM3, memory_mib: 81559, nvlinks: 18}
gpus:
  - {uuid: GPU-nvsw-0, pci_bus_id: "00000000:18:00.0", numa_node: 0}
  - {uuid: GPU-nvsw-1, pci_bus_id: "00000000:2A:00.0", numa_node: 0}
  - {uuid: GPU-nvsw-2, pci_bus_id: "00000000:3A:00.0", numa_node: 0}
  - {uuid: GPU-nvsw-3, pci_bus_id: "00000000:5D:00.0", numa_node: 0}
  - {uuid: GPU-nvsw-4, pci_bus_id: "00000000:9A:00.0", numa_node: 1}
  - {uuid: GPU-nvsw-5, pci_bus_id: "00000000:AB:00.0", numa_node: 1}
  - {uuid: GPU-nvsw-6, pci_bus_id: "00000000:BA:00.0", numa_node: 1}
  - {uuid: GPU-nvsw-7, pci_bus_id: "00000000:DB:00.0", numa_node: 1}
topology:
  - {gpus: [0, 1], level: SINGLE}
  - {gpus: [2, 3], level: SINGLE}
  - {gpus: [4, 5], level: SINGLE}
  - {gpus: [6, 7], level: SINGLE}
)";

const char kPciePairs4[] = R"(
driver_version: "550.90.07"
defaults: {model: NVIDIA A100 80GB PCIe, memory_mib: 81920}
gpus:
  - {uuid: GPU-pcie-0, pci_bus_id: "00000000:17:00.0", numa_node: 0}
  - {uuid: GPU-pcie-1, pci_bus_id: "00000000:31:00.0", numa_node: 0}
  - {uuid: GPU-pcie-2, pci_bus_id: "00000000:B1:00.0", numa_node: 1}
  - {uuid: GPU-pcie-3, pci_bus_id: "00000000:CA:00.0", numa_node: 1}
nvlink_pairs:
  - {gpus: [0, 1], links: 12}
  - {gpus: [2, 3], links: 12}
topology:
  - {gpus: [0, 1], level: SINGLE}
  - {gpus: [2, 3], level: SINGLE}
)";

const char kMigMixed2[] = R"(
driver_version: "535.183.01"
defaults: {model: NVIDIA A100-SXM4-80GB, memory_mib: 81920}
gpus:
  - uuid: GPU-mig-0
    pci_bus_id: "00000000:07:00.0"
    numa_node: 0
    mig:
      instances:
        - {profile: 1g.10gb, uuid: MIG-a-0, memory_mib: 9856}
        - {profile: 1g.10gb, uuid: MIG-a-1, memory_mib: 9856}
        - {profile: 3g.40gb, uuid: MIG-a-2, memory_mib: 40192}
  - {uuid: GPU-mig-1, pci_bus_id: "00000000:0F:00.0", numa_node: 0}
)";

absl::StatusOr<agent::NodeSnapshot> DiscoverYaml(const std::string& yaml) {
  ASSIGN_OR_RETURN(agent::FakeConfig config, agent::ParseFakeConfig(yaml));
  ManualClock clock;
  agent::FakeBackend backend(std::move(config), clock);
  RETURN_IF_ERROR(backend.Init());
  absl::StatusOr<agent::NodeSnapshot> node = agent::Discover(backend);
  backend.Shutdown().IgnoreError();
  return node;
}

}  // namespace tessera::deviceplugin::testing
