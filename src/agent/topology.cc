#include "agent/topology.h"

#include "absl/strings/ascii.h"

namespace tessera::agent {
namespace {

// PCI bus ids compare case-insensitively and NVML may report either the 8- or 4-digit domain
// form; compare on the trailing "bus:device.function" with the domain's value.
std::string NormalizeBusId(std::string_view id) {
  std::string s = absl::AsciiStrToLower(std::string(id));
  size_t colon = s.find(':');
  if (colon == std::string::npos || s.find(':', colon + 1) == std::string::npos) return s;
  std::string domain = s.substr(0, colon);
  size_t nz = domain.find_first_not_of('0');
  domain = nz == std::string::npos ? "0" : domain.substr(nz);
  return domain + s.substr(colon);
}

bool IsNodeGpu(const std::vector<GpuInfo>& gpus, const std::string& bus_id) {
  std::string n = NormalizeBusId(bus_id);
  for (const GpuInfo& g : gpus) {
    if (NormalizeBusId(g.pci_bus_id) == n) return true;
  }
  return false;
}

}  // namespace

bool TopologyLevelFromNvml(int value, TopologyLevel* out) {
  switch (value) {
    case 0:
    case 10:
    case 20:
    case 30:
    case 40:
    case 50:
      *out = static_cast<TopologyLevel>(value);
      return true;
    default:
      return false;
  }
}

std::string_view TopologyLevelName(TopologyLevel level) {
  switch (level) {
    case TopologyLevel::kInternal:
      return "INTERNAL";
    case TopologyLevel::kSingle:
      return "SINGLE";
    case TopologyLevel::kMultiple:
      return "MULTIPLE";
    case TopologyLevel::kHostBridge:
      return "HOSTBRIDGE";
    case TopologyLevel::kNode:
      return "NODE";
    case TopologyLevel::kSystem:
      return "SYSTEM";
  }
  return "UNKNOWN";
}

std::string_view LinkClassName(LinkClass c) {
  switch (c) {
    case LinkClass::kSelf:
      return "self";
    case LinkClass::kNvLink:
      return "nvlink";
    case LinkClass::kPcieSwitch:
      return "pcie-switch";
    case LinkClass::kHostBridge:
      return "host-bridge";
    case LinkClass::kCrossNuma:
      return "cross-numa";
    case LinkClass::kUnknown:
      return "unknown";
  }
  return "unknown";
}

std::string_view LinkClassShortName(LinkClass c) {
  switch (c) {
    case LinkClass::kSelf:
      return "X";
    case LinkClass::kNvLink:
      return "NV";
    case LinkClass::kPcieSwitch:
      return "PXB";
    case LinkClass::kHostBridge:
      return "PHB";
    case LinkClass::kCrossNuma:
      return "SYS";
    case LinkClass::kUnknown:
      return "?";
  }
  return "?";
}

LinkClass LinkClassFromLevel(TopologyLevel level) {
  switch (level) {
    case TopologyLevel::kInternal:
    case TopologyLevel::kSingle:
    case TopologyLevel::kMultiple:
      return LinkClass::kPcieSwitch;
    case TopologyLevel::kHostBridge:
    case TopologyLevel::kNode:
      return LinkClass::kHostBridge;
    case TopologyLevel::kSystem:
      return LinkClass::kCrossNuma;
  }
  return LinkClass::kUnknown;
}

bool SharesNvLink(const std::vector<GpuInfo>& gpus, int a, int b) {
  const GpuInfo& ga = gpus[a];
  const GpuInfo& gb = gpus[b];
  std::string bus_a = NormalizeBusId(ga.pci_bus_id);
  std::string bus_b = NormalizeBusId(gb.pci_bus_id);
  bool a_on_switch = false;
  bool b_on_switch = false;
  for (const NvLinkInfo& l : ga.nvlinks) {
    if (!l.active || l.remote_pci_bus_id.empty()) continue;
    if (NormalizeBusId(l.remote_pci_bus_id) == bus_b) return true;
    if (!IsNodeGpu(gpus, l.remote_pci_bus_id)) a_on_switch = true;
  }
  for (const NvLinkInfo& l : gb.nvlinks) {
    if (!l.active || l.remote_pci_bus_id.empty()) continue;
    if (NormalizeBusId(l.remote_pci_bus_id) == bus_a) return true;
    if (!IsNodeGpu(gpus, l.remote_pci_bus_id)) b_on_switch = true;
  }
  return a_on_switch && b_on_switch;
}

}  // namespace tessera::agent
