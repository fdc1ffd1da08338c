// ClusterState: the scheduler's consistent, incrementally updated view of the
// fleet: nodes, free capacity per GPU, bound jobs, and the indexes that make
// placement sub-linear (CapacityIndex, FreeHistogram per rack/block/cluster).
//
// Every mutation (AddNode, RemoveNode, SetGpuHealth, SetSchedulable, Assume,
// Forget, Bind, Release) updates node state and all indexes in O(GPUs per
// node); nothing is rebuilt. Assume is all-or-nothing: if any part of a member
// placement does not fit, the state is unchanged and an error is returned, so
// no GPU or GPU fraction is ever over-allocated.
//
// Thread safety: none; one owner (the scheduler loop) mutates it. Readers on
// other threads need their own copy or external locking.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "model/node.h"
#include "model/resources.h"
#include "sched/framework/capacity_index.h"
#include "sched/framework/free_histogram.h"
#include "sched/framework/types.h"

namespace tessera::sched {

// Per-node mutable capacity. Read-only to plugins.
struct NodeState {
  bool present = false;      // false once removed (the id is not reused)
  bool schedulable = false;  // not cordoned
  ModelId model = kNoModel;  // kNoModel for CPU-only nodes
  int32_t rack = -1;
  int32_t block = -1;
  int8_t num_gpus = 0;
  int8_t whole_free = 0;    // healthy GPUs entirely free
  int16_t max_partial = 0;  // largest free milli on a healthy, partly used GPU
  uint32_t healthy_mask = 0;
  int32_t members = 0;  // members placed here
  int64_t gpu_memory_mib = 0;
  int64_t cpu_free = 0;
  int64_t memory_free = 0;
  // Free amount of each of the node's extended resources, in the order of Node::scalars.
  std::vector<int64_t> scalar_free;
  std::array<int16_t, model::kMaxGpusPerNode> free_milli{};
  // Members placed here by GPU shape (see GpuShapeOf): shared GPU, 1, 2, 4,
  // 8 whole GPUs, any other count. CPU-only members are not counted.
  std::array<int16_t, 6> shape_members{};

  bool healthy(int gpu) const { return (healthy_mask >> gpu) & 1u; }
  // Bit s set when shape_members[s] > 0.
  uint8_t shape_mask() const;
  // Indexed nodes are the ones new work may land on.
  bool indexed() const { return present && schedulable; }
  int64_t free_gpu_milli() const;
};

// The index of extended resource `name` in n.scalars (and NodeState::scalar_free), -1 if the
// node has none.
int ScalarIndex(const model::Node& n, const std::string& name);

// GPU shape class of a member from its grants: 0 shared GPU, 1..4 for 1, 2,
// 4, 8 whole GPUs, 5 any other count; -1 for a member without GPUs.
int GpuShapeOf(absl::Span<const GpuGrant> grants);

// Everything Filter and Score may read about an indexed node, less its
// identity: nodes with equal keys are interchangeable for a scheduling
// decision. GPU free shares are sorted when the node's GPUs are symmetric
// (every pair joined by the same link class), since then no plugin can tell
// the GPUs apart.
struct NodeEquivalenceKey {
  int32_t static_class = -1;  // identical spec: model, GPUs, topology, CPU, labels, taints, rack
  int64_t cpu_free = 0;
  int64_t memory_free = 0;
  uint32_t healthy_mask = 0;
  uint8_t shape_mask = 0;
  bool full = false;  // at the node's max_members: no member more fits, whatever it asks
  std::array<int16_t, model::kMaxGpusPerNode> free_milli{};
  std::vector<int64_t> scalar_free;  // extended resources free (names: the static class's)

  friend bool operator==(const NodeEquivalenceKey&, const NodeEquivalenceKey&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const NodeEquivalenceKey& k) {
    return H::combine(std::move(h), k.static_class, k.cpu_free, k.memory_free, k.healthy_mask,
                      k.shape_mask, k.full, k.free_milli, k.scalar_free);
  }
};

// A live equivalence class at a glance (kept contiguous for fast scans).
struct ClassInfo {
  int32_t id = -1;          // class id
  NodeId rep = kNoNode;     // a member node
  NodeId min_id = kNoNode;  // the member with the lowest id
  int32_t size = 0;         // member nodes
  ModelId model = kNoModel;
  int8_t num_gpus = 0;
  int8_t whole_free = 0;
  int16_t max_partial = 0;
  int64_t cpu_free = 0;
};

class ClusterState {
 public:
  ClusterState() = default;
  ClusterState(const ClusterState&) = delete;
  ClusterState& operator=(const ClusterState&) = delete;

  // --- Nodes -------------------------------------------------------------
  // Adds a node (validated with model::ValidateNode). Unhealthy GPUs in the
  // spec start unhealthy. Fails on a duplicate name.
  absl::StatusOr<NodeId> AddNode(model::Node node);
  // Removes a node; every job with a member on it is released and its key
  // appended to `released` (a gang that loses a member is restarted whole).
  absl::Status RemoveNode(absl::string_view name, std::vector<std::string>* released);
  // Marks one GPU (un)healthy. An unhealthy GPU leaves the free pool at once;
  // jobs using it are reported in `affected` (not released: the caller decides).
  absl::Status SetGpuHealth(NodeId node, int gpu, bool healthy, std::vector<std::string>* affected);
  // Cordon (false) or uncordon (true). Running work stays.
  absl::Status SetSchedulable(NodeId node, bool schedulable);

  std::optional<NodeId> FindNode(absl::string_view name) const;
  int num_node_slots() const { return static_cast<int>(nodes_.size()); }
  int num_nodes() const { return live_nodes_; }
  const model::Node& node(NodeId id) const { return nodes_[id]; }
  const NodeState& state(NodeId id) const { return states_[id]; }

  // --- GPU models and domains --------------------------------------------
  ModelId FindModel(absl::string_view name) const;  // kNoModel if unknown
  const std::string& model_name(ModelId m) const { return model_names_[m]; }
  ModelId num_models() const { return static_cast<ModelId>(model_names_.size()); }
  int num_racks() const { return static_cast<int>(rack_names_.size()); }
  int num_blocks() const { return static_cast<int>(block_names_.size()); }
  const std::string& rack_name(int r) const { return rack_names_[r]; }
  const std::string& block_name(int b) const { return block_names_[b]; }
  const std::vector<NodeId>& rack_nodes(int r) const { return rack_nodes_[r]; }
  const std::vector<NodeId>& block_nodes(int b) const { return block_nodes_[b]; }
  int rack_block(int r) const { return rack_block_[r]; }
  // Whole-free histograms of indexed nodes, per model.
  const FreeHistogram& rack_free(int rack, ModelId m) const { return rack_hist_[rack][m]; }
  const FreeHistogram& block_free(int block, ModelId m) const { return block_hist_[block][m]; }
  const FreeHistogram& cluster_free(ModelId m) const { return cluster_hist_[m]; }
  const CapacityIndex& index() const { return index_; }
  // GPUs of model `m` on present nodes (healthy or not), and of them allocated milli.
  int64_t total_gpus(ModelId m) const { return total_gpus_[m]; }
  int64_t allocated_milli(ModelId m) const { return allocated_milli_[m]; }
  int64_t total_gpus() const;
  int64_t allocated_milli() const;
  // Free milli-CPU summed over present nodes (schedulable or not). O(1).
  int64_t free_cpu_milli() const { return free_cpu_milli_; }
  // Most GPUs on any node of model `m` ever added (an upper bound after removals).
  int max_node_gpus(ModelId m) const { return max_node_gpus_[m]; }

  // --- Allocation --------------------------------------------------------
  // Takes the member's resources on its node. All-or-nothing; an error means
  // the placement does not fit (a bug in the caller) and nothing changed.
  absl::Status Assume(const MemberPlacement& m);
  // Exact inverse of a successful Assume.
  void Forget(const MemberPlacement& m);
  // Records a job whose members were all Assume()d. Fails if the key is bound.
  absl::Status Bind(Placement p);
  // Forgets every member of a bound job. NotFound if it is not bound.
  absl::Status Release(absl::string_view job_key);
  const Placement* FindPlacement(absl::string_view job_key) const;
  const absl::flat_hash_map<std::string, Placement>& bound() const { return bound_; }

  // --- Equivalence classes ------------------------------------------------
  // Indexed nodes grouped by NodeEquivalenceKey, maintained incrementally
  // (O(1) per mutation). The runner may evaluate one node per class when a
  // profile asks for it (Profile::dedupe_equivalent_nodes). Live classes are
  // kept in two contiguous lists: those whose nodes have some free healthy
  // GPU share, and the rest (only CPU-only members can use them).
  absl::Span<const ClassInfo> class_infos(bool with_free_gpu) const {
    return class_lists_[with_free_gpu ? 0 : 1].info;
  }
  int num_live_classes() const {
    return static_cast<int>(class_lists_[0].ids.size() + class_lists_[1].ids.size());
  }
  const ClassInfo& class_info(int32_t c) const {
    return class_lists_[class_list_[c]].info[class_pos_[c]];
  }
  const std::vector<NodeId>& class_nodes(int32_t c) const { return class_nodes_[c]; }
  int32_t node_class(NodeId id) const { return node_class_[id]; }

  // Bumped on every mutation; lets callers cache derived views.
  uint64_t generation() const { return generation_; }

  // Recomputes everything from scratch and compares with the incremental
  // indexes. For tests and debugging; O(cluster).
  absl::Status CheckConsistency() const;

 private:
  ModelId InternModel(const std::string& name);
  int InternRack(const std::string& rack, const std::string& block);
  // Recomputes whole_free/max_partial of `id` and moves it in every index.
  void Reindex(NodeId id);
  void Unindex(NodeId id);
  void JobsOnNode(NodeId id, int gpu, std::vector<std::string>* out) const;
  NodeEquivalenceKey KeyOf(NodeId id) const;
  void AddToClass(NodeId id);
  void RemoveFromClass(NodeId id);

  std::vector<model::Node> nodes_;
  std::vector<NodeState> states_;
  absl::flat_hash_map<std::string, NodeId> by_name_;
  int live_nodes_ = 0;

  std::vector<std::string> model_names_;
  std::vector<std::string> rack_names_;
  std::vector<std::string> block_names_;
  absl::flat_hash_map<std::string, int> rack_ids_;
  absl::flat_hash_map<std::string, int> block_ids_;
  std::vector<int> rack_block_;
  std::vector<std::vector<NodeId>> rack_nodes_;
  std::vector<std::vector<NodeId>> block_nodes_;

  // Per node: what it contributes to the histograms right now (-1: nothing).
  std::vector<int8_t> hist_contrib_;
  std::vector<std::vector<FreeHistogram>> rack_hist_;   // [rack][model]
  std::vector<std::vector<FreeHistogram>> block_hist_;  // [block][model]
  std::vector<FreeHistogram> cluster_hist_;             // [model]
  std::vector<int64_t> total_gpus_;
  std::vector<int64_t> allocated_milli_;
  int64_t free_cpu_milli_ = 0;
  std::vector<int> max_node_gpus_;
  CapacityIndex index_;

  // Static classes: nodes with identical specs.
  absl::flat_hash_map<std::string, int32_t> static_class_ids_;
  std::vector<int32_t> static_class_;   // per node
  std::vector<bool> static_symmetric_;  // per static class
  // Equivalence classes (see class_infos()).
  absl::flat_hash_map<NodeEquivalenceKey, int32_t> class_by_key_;
  std::vector<NodeEquivalenceKey> class_key_;
  std::vector<std::vector<NodeId>> class_nodes_;
  struct ClassList {
    std::vector<int32_t> ids;
    std::vector<ClassInfo> info;  // parallel to ids
  };
  ClassList class_lists_[2];        // [0]: some free GPU share; [1]: none
  std::vector<int8_t> class_list_;  // per class id: which list
  std::vector<int32_t> class_pos_;  // per class id: position in its list (-1: free id)
  std::vector<int32_t> free_class_ids_;
  std::vector<int32_t> node_class_;  // -1: in no class
  std::vector<int32_t> node_class_pos_;

  absl::flat_hash_map<std::string, Placement> bound_;
  uint64_t generation_ = 0;
};

}  // namespace tessera::sched
