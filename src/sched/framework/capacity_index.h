// CapacityIndex: schedulable nodes bucketed by free capacity, per GPU model.
//
// Whole buckets: node ids by their count of whole free healthy GPUs (0..16).
// Partial buckets: nodes that have a partly used healthy GPU, by the largest
// free share on such a GPU, in tenths (0..9).
// Insert/remove are O(1) (swap-remove with stored positions), so the index is
// updated incrementally on every bind and release. Enumeration in "pack"
// order visits the tightest buckets first (best fit); "spread" the emptiest.
// Not thread-safe; owned by ClusterState.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "model/node.h"
#include "sched/framework/types.h"

namespace tessera::sched {

class CapacityIndex {
 public:
  static constexpr int kWholeBuckets = model::kMaxGpusPerNode + 1;
  static constexpr int kPartialBuckets = 10;

  // Grows internal tables for `num_models` models and node ids < `num_nodes`.
  void Resize(int num_models, int num_nodes);

  // Places `node` in the buckets for (model, whole, partial). `partial` is the
  // largest free milli on a partly used GPU (0: none).
  void Insert(NodeId node, ModelId model, int whole, int partial);
  // Removes `node` from wherever it is; no-op if absent.
  void Remove(NodeId node);

  const std::vector<NodeId>& whole_bucket(ModelId m, int k) const { return whole_[m][k]; }
  const std::vector<NodeId>& partial_bucket(ModelId m, int d) const { return partial_[m][d]; }
  int num_models() const { return static_cast<int>(whole_.size()); }

 private:
  struct Pos {
    ModelId model = kNoModel;
    int8_t whole = -1;
    int8_t partial = -1;
    int32_t whole_pos = -1;
    int32_t partial_pos = -1;
  };
  std::vector<std::array<std::vector<NodeId>, kWholeBuckets>> whole_;
  std::vector<std::array<std::vector<NodeId>, kPartialBuckets>> partial_;
  std::vector<Pos> pos_;
};

}  // namespace tessera::sched
