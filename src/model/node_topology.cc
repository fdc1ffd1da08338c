#include "model/node_topology.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tessera::model {

absl::string_view LinkClassName(LinkClass c) {
  switch (c) {
    case LinkClass::kSelf:
      return "X";
    case LinkClass::kNvSwitch:
      return "NVSWITCH";
    case LinkClass::kNvLink:
      return "NVLINK";
    case LinkClass::kPcieSwitch:
      return "PIX";
    case LinkClass::kPcieHostBridge:
      return "PHB";
    case LinkClass::kCrossNuma:
      return "SYS";
  }
  return "?";
}

bool ParseLinkClass(absl::string_view name, LinkClass* out) {
  for (LinkClass c : {LinkClass::kSelf, LinkClass::kNvSwitch, LinkClass::kNvLink,
                      LinkClass::kPcieSwitch, LinkClass::kPcieHostBridge, LinkClass::kCrossNuma}) {
    if (name == LinkClassName(c)) {
      *out = c;
      return true;
    }
  }
  return false;
}

namespace {
// Link outside an NVLink domain: same PCIe pair, same NUMA half, or across.
LinkClass PcieLink(int a, int b, int n) {
  if (a / 2 == b / 2) return LinkClass::kPcieSwitch;
  int half = std::max(1, n / 2);
  if (a / half == b / half) return LinkClass::kPcieHostBridge;
  return LinkClass::kCrossNuma;
}
}  // namespace

NodeTopology NodeTopology::NvSwitch(int n) {
  NodeTopology t;
  t.num_gpus_ = n;
  t.num_domains_ = n > 0 ? 1 : 0;
  t.links_.assign(n * n, LinkClass::kNvSwitch);
  for (int i = 0; i < n; ++i) t.links_[i * n + i] = LinkClass::kSelf;
  t.domains_.assign(n, 0);
  return t;
}

NodeTopology NodeTopology::NvLinkGroups(int n, int group) {
  group = std::max(1, group);
  NodeTopology t;
  t.num_gpus_ = n;
  t.links_.resize(n * n);
  t.domains_.resize(n);
  for (int a = 0; a < n; ++a) {
    t.domains_[a] = a / group;
    for (int b = 0; b < n; ++b) {
      LinkClass c;
      if (a == b) {
        c = LinkClass::kSelf;
      } else if (a / group == b / group) {
        c = LinkClass::kNvLink;
      } else {
        int half = std::max(1, n / 2);
        c = (a / half == b / half) ? LinkClass::kPcieHostBridge : LinkClass::kCrossNuma;
        if (group == 1) c = PcieLink(a, b, n);
      }
      t.links_[a * n + b] = c;
    }
  }
  t.num_domains_ = n > 0 ? (n + group - 1) / group : 0;
  return t;
}

NodeTopology NodeTopology::PcieSwitchPairs(int n) {
  NodeTopology t;
  t.num_gpus_ = n;
  t.links_.resize(n * n);
  t.domains_.resize(n);
  for (int a = 0; a < n; ++a) {
    t.domains_[a] = a;
    for (int b = 0; b < n; ++b) {
      t.links_[a * n + b] = a == b ? LinkClass::kSelf : PcieLink(a, b, n);
    }
  }
  t.num_domains_ = n;
  return t;
}

std::vector<int> NvLinkIslands(int n, const std::vector<LinkClass>& links) {
  std::vector<int> island(n, -1);
  if (static_cast<int>(links.size()) != n * n) return island;
  int next = 0;
  for (int a = 0; a < n; ++a) {
    if (island[a] >= 0) continue;
    island[a] = next;
    std::vector<int> todo = {a};
    while (!todo.empty()) {
      const int x = todo.back();
      todo.pop_back();
      for (int y = 0; y < n; ++y) {
        const LinkClass c = links[x * n + y];
        if (island[y] < 0 && (c == LinkClass::kNvSwitch || c == LinkClass::kNvLink)) {
          island[y] = next;
          todo.push_back(y);
        }
      }
    }
    ++next;
  }
  return island;
}

absl::StatusOr<NodeTopology> NodeTopology::FromMatrix(int n, std::vector<LinkClass> links,
                                                      std::vector<int> domains) {
  if (n < 0) return absl::InvalidArgumentError("topology.numGpus: must be >= 0");
  if (static_cast<int>(links.size()) != n * n) {
    return absl::InvalidArgumentError(
        absl::StrCat("topology.links: need ", n * n, " entries, got ", links.size()));
  }
  if (static_cast<int>(domains.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("topology.domains: need ", n, " entries, got ", domains.size()));
  }
  for (int a = 0; a < n; ++a) {
    if (links[a * n + a] != LinkClass::kSelf) {
      return absl::InvalidArgumentError(
          absl::StrCat("topology.links[", a, "][", a, "]: must be X"));
    }
    for (int b = 0; b < n; ++b) {
      if (links[a * n + b] != links[b * n + a]) {
        return absl::InvalidArgumentError(
            absl::StrCat("topology.links[", a, "][", b, "]: matrix must be symmetric"));
      }
    }
  }
  // Renumber domains densely; GPUs with -1 each get a domain of their own.
  NodeTopology t;
  t.num_gpus_ = n;
  t.links_ = std::move(links);
  t.domains_.resize(n);
  std::vector<std::pair<int, int>> seen;  // original id -> dense id
  int next = 0;
  for (int i = 0; i < n; ++i) {
    int d = domains[i];
    if (d < 0) {
      t.domains_[i] = next++;
      continue;
    }
    auto it = std::find_if(seen.begin(), seen.end(), [&](auto& p) { return p.first == d; });
    if (it == seen.end()) {
      seen.emplace_back(d, next);
      t.domains_[i] = next++;
    } else {
      t.domains_[i] = it->second;
    }
  }
  t.num_domains_ = next;
  return t;
}

}  // namespace tessera::model
