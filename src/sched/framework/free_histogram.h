// FreeHistogram: how many nodes of a domain have exactly k whole free GPUs.
//
// Kept per (domain, GPU model) by ClusterState so that a gang can find a rack
// or block that holds it without scanning the domain's nodes: the number of
// members of g whole GPUs that fit is sum_k nodes[k] * floor(k / g).
#pragma once

#include <array>
#include <cstdint>

#include "model/node.h"

namespace tessera::sched {

struct FreeHistogram {
  std::array<int32_t, model::kMaxGpusPerNode + 1> nodes{};  // nodes[k]: nodes with k free
  int64_t free_gpus = 0;                                    // sum_k k * nodes[k]

  void Add(int k) {
    ++nodes[k];
    free_gpus += k;
  }
  void Remove(int k) {
    --nodes[k];
    free_gpus -= k;
  }
  // Members of `g` whole GPUs each that fit (one member never spans nodes).
  int64_t MembersThatFit(int g) const {
    if (g <= 0) return INT64_MAX;
    int64_t n = 0;
    for (int k = g; k <= model::kMaxGpusPerNode; ++k) n += int64_t{nodes[k]} * (k / g);
    return n;
  }
  int LargestNodeFree() const {
    for (int k = model::kMaxGpusPerNode; k > 0; --k) {
      if (nodes[k] > 0) return k;
    }
    return 0;
  }
};

}  // namespace tessera::sched
