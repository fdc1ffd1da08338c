// Fragmentation of GPU nodes measured against a workload's distribution of
// pod shapes, as defined by FGD (Weng et al., USENIX ATC'23, section 4).
//
// For one node and one "typical" pod shape t, the node's idle GPU milli is a
// fragment when t cannot run there: t needs a GPU model the node lacks, not
// enough GPUs have t's share free, or the node lacks t's CPU. When t can run,
// only GPUs whose free share is below t's per-GPU share are fragments. A
// CPU-only shape counts all idle GPU milli (it cannot use GPUs). The node's
// fragmentation is the expectation over the workload:
//   F(n) = sum_t p_t * frag_t(n)        (in milli-GPU)
// and the cluster's is the sum over nodes. FGD places a pod where F grows
// least (the "fragmentation gradient").
//
// Plain computation; no I/O, no allocation after construction.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "model/node.h"
#include "sched/framework/cluster_state.h"

namespace tessera::sched::pack {

// A pod shape: CPU, per-GPU share (0 for CPU-only), GPU count, and the GPU
// models it may use as a bit mask over ModelId (0: any model).
struct PodShape {
  int64_t cpu_milli = 0;
  int32_t gpu_milli = 0;
  int32_t gpus = 0;
  uint64_t model_mask = 0;

  bool AllowsModel(ModelId m) const {
    return model_mask == 0 || (m >= 0 && m < 64 && ((model_mask >> m) & 1u));
  }
  int64_t total_gpu_milli() const { return int64_t{gpus} * gpu_milli; }
};

struct TypicalPod {
  PodShape shape;
  double p = 0;  // probability; the list sums to 1
};

// The state of one node that fragmentation depends on.
struct NodeFree {
  ModelId model = kNoModel;
  int32_t num_gpus = 0;
  int64_t cpu_free = 0;
  std::array<int16_t, model::kMaxGpusPerNode> free{};  // healthy GPUs; 0 for unhealthy

  int64_t total_free() const {
    int64_t t = 0;
    for (int g = 0; g < num_gpus; ++g) t += free[g];
    return t;
  }
};

NodeFree FromState(const NodeState& st);

// Expected fragment (milli-GPU) of `n` against `typical`.
double NodeFragmentation(const NodeFree& n, const std::vector<TypicalPod>& typical);

// The FGD typical-pod list: shapes of `pods` by decreasing count, the most
// popular ones covering `popularity` (0..1] of all pods, renormalised to sum
// to 1. Ties in count are ordered by shape so the result is deterministic.
std::vector<TypicalPod> TypicalPods(const std::vector<PodShape>& pods, double popularity = 0.95);

}  // namespace tessera::sched::pack
