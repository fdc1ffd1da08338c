#include "deviceplugin/preferred_allocation.h"

#include <algorithm>
#include <functional>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace tessera::deviceplugin {
namespace {

int64_t LevelScore(agent::TopologyLevel level) {
  switch (level) {
    case agent::TopologyLevel::kInternal:
      return 60;
    case agent::TopologyLevel::kSingle:
      return 50;
    case agent::TopologyLevel::kMultiple:
      return 40;
    case agent::TopologyLevel::kHostBridge:
      return 30;
    case agent::TopologyLevel::kNode:
      return 20;
    case agent::TopologyLevel::kSystem:
      return 10;
  }
  return 0;
}

int64_t LinkScore(agent::LinkClass c) {
  switch (c) {
    case agent::LinkClass::kPcieSwitch:
      return 50;
    case agent::LinkClass::kHostBridge:
      return 20;
    case agent::LinkClass::kCrossNuma:
      return 10;
    default:
      return 0;
  }
}

// C(n, k), saturating at `cap`.
int64_t Combinations(int64_t n, int64_t k, int64_t cap) {
  if (k < 0 || k > n) return 0;
  k = std::min(k, n - k);
  int64_t c = 1;
  for (int64_t i = 1; i <= k; ++i) {
    c = c * (n - k + i) / i;
    if (c > cap) return cap + 1;
  }
  return c;
}

}  // namespace

int64_t PairScore(const PluginDevice& a, const PluginDevice& b,
                  const agent::TopologyMatrix& topology) {
  if (a.gpu_index == b.gpu_index) return 10000;
  if (a.gpu_index >= topology.size || b.gpu_index >= topology.size) return 0;
  const agent::LinkClass link = topology.Link(a.gpu_index, b.gpu_index);
  const std::optional<agent::TopologyLevel> level = topology.Level(a.gpu_index, b.gpu_index);
  int64_t score = link == agent::LinkClass::kNvLink ? 1000 : 0;
  if (level.has_value()) {
    score += LevelScore(*level);
  } else {
    score += LinkScore(link);
  }
  return score;
}

absl::StatusOr<std::vector<std::string>> PreferredAllocation(
    const std::vector<PluginDevice>& devices, const agent::TopologyMatrix& topology,
    const std::vector<std::string>& available, const std::vector<std::string>& must_include,
    int size) {
  absl::flat_hash_map<std::string, int> position;
  for (int i = 0; i < static_cast<int>(devices.size()); ++i) position[devices[i].id] = i;

  std::vector<int> avail;
  absl::flat_hash_set<std::string> avail_set;
  for (size_t i = 0; i < available.size(); ++i) {
    auto it = position.find(available[i]);
    if (it == position.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("available_deviceIDs[", i, "]: unknown device '", available[i], "'"));
    }
    if (!avail_set.insert(available[i]).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("available_deviceIDs[", i, "]: duplicated device '", available[i], "'"));
    }
    avail.push_back(it->second);
  }
  std::vector<int> chosen;
  absl::flat_hash_set<int> chosen_set;
  for (size_t i = 0; i < must_include.size(); ++i) {
    auto it = position.find(must_include[i]);
    if (it == position.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("must_include_deviceIDs[", i, "]: unknown device '", must_include[i], "'"));
    }
    if (!avail_set.contains(must_include[i])) {
      return absl::InvalidArgumentError(absl::StrCat("must_include_deviceIDs[", i, "]: device '",
                                                     must_include[i],
                                                     "' is not in available_deviceIDs"));
    }
    if (!chosen_set.insert(it->second).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "must_include_deviceIDs[", i, "]: duplicated device '", must_include[i], "'"));
    }
    chosen.push_back(it->second);
  }
  if (size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("allocation_size: must be at least 1, got ", size));
  }
  if (size > static_cast<int>(avail.size())) {
    return absl::InvalidArgumentError(absl::StrCat("allocation_size: ", size, " exceeds the ",
                                                   avail.size(), " available devices"));
  }
  if (size < static_cast<int>(chosen.size())) {
    return absl::InvalidArgumentError(absl::StrCat("allocation_size: ", size, " is less than the ",
                                                   chosen.size(), " must-include devices"));
  }

  auto pair = [&](int a, int b) { return PairScore(devices[a], devices[b], topology); };
  std::vector<int> free;
  for (int d : avail) {
    if (!chosen_set.contains(d)) free.push_back(d);
  }
  std::sort(free.begin(), free.end());
  const int need = size - static_cast<int>(chosen.size());

  // Score of each free device against the must-include set.
  std::vector<int64_t> base(free.size(), 0);
  for (size_t i = 0; i < free.size(); ++i) {
    for (int c : chosen) base[i] += pair(free[i], c);
  }

  std::vector<int> best;
  if (Combinations(static_cast<int64_t>(free.size()), need, kExhaustiveLimit) <= kExhaustiveLimit) {
    // Lexicographic enumeration; a strictly better score replaces, so ties keep the first set.
    int64_t best_score = -1;
    std::vector<int> current;
    std::function<void(size_t, int64_t)> search = [&](size_t from, int64_t score) {
      if (static_cast<int>(current.size()) == need) {
        if (score > best_score) {
          best_score = score;
          best = current;
        }
        return;
      }
      const size_t left = need - current.size();
      for (size_t i = from; i + left <= free.size(); ++i) {
        int64_t add = base[i];
        for (int j : current) add += pair(free[i], free[j]);
        current.push_back(static_cast<int>(i));
        search(i + 1, score + add);
        current.pop_back();
      }
    };
    search(0, 0);
  } else {
    std::vector<bool> taken(free.size(), false);
    std::vector<int64_t> gain = base;
    for (int n = 0; n < need; ++n) {
      int pick = -1;
      for (size_t i = 0; i < free.size(); ++i) {
        if (!taken[i] && (pick < 0 || gain[i] > gain[pick])) pick = static_cast<int>(i);
      }
      taken[pick] = true;
      best.push_back(pick);
      for (size_t i = 0; i < free.size(); ++i) {
        if (!taken[i]) gain[i] += pair(free[i], free[pick]);
      }
    }
  }
  for (int i : best) chosen.push_back(free[i]);
  std::sort(chosen.begin(), chosen.end());
  std::vector<std::string> out;
  for (int d : chosen) out.push_back(devices[d].id);
  return out;
}

}  // namespace tessera::deviceplugin
