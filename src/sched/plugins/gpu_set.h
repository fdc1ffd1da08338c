// Choosing GPUs inside one node.
//
// Whole GPUs: among the node's free healthy GPUs pick the set of size g with
// the best key, compared lexicographically (lower is better):
//   1. worst link class between any two chosen GPUs (NVSwitch < NVLink <
//      PCIe switch < host bridge < cross-NUMA): the collective runs at the
//      speed of its slowest link;
//   2. NVLink domains touched;
//   3. domains that were entirely free and would be broken: keeps whole
//      islands for later large requests (pack), the fragmentation argument;
//   4. sum of link classes over all pairs;
//   5. lowest GPU indices (determinism).
// Exhaustive over all subsets while C(free, g) <= 512 (every 8-GPU node);
// beyond that greedy: seed with each domain, grow by the GPU with the best
// worst-link to the set.
//
// Fractional: pack takes the partly used GPU with the least free share that
// still fits (best fit), else a free GPU in the domain with the fewest free
// GPUs; spread takes the GPU with the most free share.
#pragma once

#include <cstdint>

#include "absl/container/inlined_vector.h"
#include "model/node_topology.h"
#include "sched/framework/cluster_state.h"

namespace tessera::sched {

struct GpuSetChoice {
  absl::InlinedVector<int8_t, 8> gpus;
  model::LinkClass worst = model::LinkClass::kSelf;
  int32_t domains = 0;
};

// False when fewer than `g` GPUs are free.
bool ChooseWholeGpus(const model::NodeTopology& topo, const NodeState& st, int g,
                     GpuSetChoice* out);
// Returns the GPU index, or -1 when no healthy GPU has `milli` free.
int ChooseFractionalGpu(const model::NodeTopology& topo, const NodeState& st, int milli, bool pack);

}  // namespace tessera::sched
