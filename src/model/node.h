// A node: its GPUs, their internal topology, CPU/memory, labels, taints, and
// where it sits in the cluster (rack and block). Plain value.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "model/gpu.h"
#include "model/node_topology.h"
#include "model/resources.h"
#include "model/taint.h"

namespace tessera::model {

// The scheduler's per-node limit; larger nodes are rejected by ValidateNode.
inline constexpr int kMaxGpusPerNode = 16;

struct Node {
  std::string name;
  std::vector<Gpu> gpus;  // all of one model (ValidateNode checks)
  NodeTopology topology;  // num_gpus() == gpus.size()
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  // Extended resources it offers (model/resources.h), sorted by name.
  ScalarResources scalars;
  std::map<std::string, std::string> labels;
  std::vector<Taint> taints;
  // Cluster topology above the node: node -> rack (leaf switch) -> block (spine).
  std::string rack;
  std::string block;
  bool unschedulable = false;  // cordoned
  // Most members the node runs at once, whatever they ask (kubelet's max-pods): each is a
  // process tree its agent supervises, so a job of many tiny members cannot crowd one node.
  // 0: no limit.
  int32_t max_members = 0;

  // The node's GPU model ("" for a CPU-only node).
  const std::string& gpu_model() const;
};

// Checks names, sizes, homogeneity of GPU models and topology shape; the
// message names the offending field.
absl::Status ValidateNode(const Node& n);

}  // namespace tessera::model
