// GPU-to-GPU topology: NVML's PCIe common-ancestor levels and the link class derived from them.
//
// Algorithm: for a pair (a, b) the link class is
//   - kNvLink when the GPUs share NVLink: a link of one ends at the other's PCI bus id (a bridge),
//     or both have an active link ending at a device that is not a GPU of this node (an NVSwitch);
//   - otherwise it follows the PCIe common ancestor: INTERNAL/SINGLE/MULTIPLE -> kPcieSwitch,
//     HOSTBRIDGE/NODE -> kHostBridge (same NUMA node), SYSTEM -> kCrossNuma.
// The diagonal is kSelf. Pure functions; no I/O.
#pragma once

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/gpu_info.h"

namespace tessera::agent {

// NVML's nvmlGpuTopologyLevel_t, same numeric values.
enum class TopologyLevel {
  kInternal = 0,     // same board (multi-GPU board)
  kSingle = 10,      // one PCIe switch between them
  kMultiple = 20,    // several PCIe switches, no host bridge
  kHostBridge = 30,  // same host bridge
  kNode = 40,        // same NUMA node, several host bridges
  kSystem = 50,      // across the CPU interconnect (different NUMA nodes)
};

// Maps a raw NVML value; false for a value NVML does not define.
bool TopologyLevelFromNvml(int value, TopologyLevel* out);
std::string_view TopologyLevelName(TopologyLevel level);  // "SINGLE", ...

enum class LinkClass {
  kSelf,
  kNvLink,      // NVLink bridge or NVSwitch fabric
  kPcieSwitch,  // behind a common PCIe switch
  kHostBridge,  // same host bridge / NUMA node
  kCrossNuma,   // across sockets
  kUnknown,     // the driver could not say
};

std::string_view LinkClassName(LinkClass c);  // "nvlink", "pcie-switch", ...
// nvidia-smi topo -m style code: X, NV, PXB, PHB, SYS, ?.
std::string_view LinkClassShortName(LinkClass c);

LinkClass LinkClassFromLevel(TopologyLevel level);

// True when gpus[a] and gpus[b] share NVLink (see the algorithm above).
bool SharesNvLink(const std::vector<GpuInfo>& gpus, int a, int b);

// N x N matrix, row-major. `levels` is empty for a pair on the diagonal or when the driver could
// not report the level (then the link class is kUnknown unless NVLink decides it).
struct TopologyMatrix {
  int size = 0;
  std::vector<LinkClass> links;
  std::vector<std::optional<TopologyLevel>> levels;

  LinkClass Link(int a, int b) const { return links[a * size + b]; }
  std::optional<TopologyLevel> Level(int a, int b) const { return levels[a * size + b]; }
};

// `level_of(a, b)` returns the PCIe level of a pair (a < b) or an error when unavailable.
template <typename LevelFn>
TopologyMatrix BuildTopologyMatrix(const std::vector<GpuInfo>& gpus, LevelFn level_of) {
  TopologyMatrix m;
  m.size = static_cast<int>(gpus.size());
  m.links.assign(gpus.size() * gpus.size(), LinkClass::kUnknown);
  m.levels.assign(gpus.size() * gpus.size(), std::nullopt);
  for (int a = 0; a < m.size; ++a) {
    m.links[a * m.size + a] = LinkClass::kSelf;
    for (int b = a + 1; b < m.size; ++b) {
      absl::StatusOr<TopologyLevel> level = level_of(a, b);
      LinkClass c = LinkClass::kUnknown;
      if (level.ok()) {
        m.levels[a * m.size + b] = m.levels[b * m.size + a] = *level;
        c = LinkClassFromLevel(*level);
      }
      if (SharesNvLink(gpus, a, b)) c = LinkClass::kNvLink;
      m.links[a * m.size + b] = m.links[b * m.size + a] = c;
    }
  }
  return m;
}

}  // namespace tessera::agent
