// NodeTopology: how the GPUs inside one node are connected.
//
// Holds the link class between every pair of GPUs (a dense n x n matrix)
// and the NVLink domain ("island") of each GPU: GPUs of one domain talk over
// NVLink/NVSwitch; GPUs of different domains go through PCIe or across NUMA.
// Factories build the common layouts (DGX/HGX NVSwitch all-to-all, NVLink
// pairs or quads, PCIe switch pairs). Plain value; copy freely.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tessera::model {

// Link class between two GPUs, fastest first; the numeric order is used as a
// cost (lower is better). Names follow `nvidia-smi topo -m`.
enum class LinkClass : uint8_t {
  kSelf = 0,
  kNvSwitch = 1,        // NVSwitch all-to-all (NV18 on HGX H100)
  kNvLink = 2,          // direct NVLink bridge (NV#)
  kPcieSwitch = 3,      // PIX/PXB: through PCIe switches only
  kPcieHostBridge = 4,  // PHB/NODE: through a host bridge on one NUMA node
  kCrossNuma = 5,       // SYS: across the CPU interconnect
};
absl::string_view LinkClassName(LinkClass c);
// The inverse of LinkClassName; false for anything else.
bool ParseLinkClass(absl::string_view name, LinkClass* out);

class NodeTopology {
 public:
  NodeTopology() = default;

  // All GPUs in one NVSwitch domain (DGX/HGX H100, A100 HGX).
  static NodeTopology NvSwitch(int num_gpus);
  // NVLink inside groups of `group` GPUs (2: bridged pairs, 4: quads);
  // PCIe switch between neighbouring groups on one NUMA node, cross-NUMA
  // between the two halves of the node.
  static NodeTopology NvLinkGroups(int num_gpus, int group);
  // No NVLink: pairs of GPUs under one PCIe switch, host bridge between pairs
  // on one NUMA node, cross-NUMA between halves. Each GPU is its own domain.
  static NodeTopology PcieSwitchPairs(int num_gpus);
  // From an explicit matrix (row-major, n*n) and per-GPU domain ids
  // (-1: no NVLink). Validates symmetry and the diagonal. A node that names
  // no domains gets the islands its links make (NvLinkIslands).
  static absl::StatusOr<NodeTopology> FromMatrix(int num_gpus, std::vector<LinkClass> links,
                                                 std::vector<int> domains);

  int num_gpus() const { return num_gpus_; }
  LinkClass link(int a, int b) const { return links_[a * num_gpus_ + b]; }
  // NVLink domain of GPU `i` (dense ids 0..num_domains()-1).
  int domain(int i) const { return domains_[i]; }
  int num_domains() const { return num_domains_; }
  friend bool operator==(const NodeTopology&, const NodeTopology&) = default;

 private:
  int num_gpus_ = 0;
  int num_domains_ = 0;
  std::vector<LinkClass> links_;
  std::vector<int> domains_;
};

// The NVLink islands of a link matrix (row-major, n*n): GPUs joined by NVLink
// or NVSwitch links, transitively, share an island; ids are dense, in GPU
// order (GPU 0's island is 0). The one derivation of islands from links: the
// scheduler's node decoding and the dashboard both use it.
std::vector<int> NvLinkIslands(int num_gpus, const std::vector<LinkClass>& links);

}  // namespace tessera::model
