// GPUPool: a named group of nodes, chosen by GPU type and node labels, with a status that counts
// them, a switch to cordon or drain them all, and the queues whose jobs may run only there.
// Shared by the standalone controller (src/controller) and the Kubernetes operator
// (src/operator): each turns its own node objects into PoolNode and passes GPUPool objects of the
// shape {"metadata": {...}, "spec": {...}, "status": {...}}.
//
//   selection   spec.gpuType equals the node's GPU type ("" or "*": any type), and every
//               spec.nodeSelector label has the node's value.
//   status      counts over the selected nodes (PoolStatus); phase Draining while spec.cordon or
//               spec.drain, else Pending with no node, else Ready.
//   cordon      spec.cordon: true cordons every selected node (no new members land there);
//               spec.drain: true cordons them and evicts what runs there (requeued from the
//               newest Ready Checkpoint). Setting either back to false uncordons what the pool
//               cordoned.
//   queues      a queue named in the spec.queues of one or more pools is confined to them: its jobs
//               are placed only on nodes one of those pools selects (QueuePoolNodes). A queue no
//               pool names is not confined.
//
// GPUPools being deleted (metadata.deletionTimestamp) select nothing. Pure functions, no I/O;
// thread-compatible.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "nlohmann/json.hpp"

namespace tessera::api {

// A node as a pool sees it.
struct PoolNode {
  std::string name;
  std::string gpu_type;
  std::map<std::string, std::string> labels;
  int gpus = 0;       // GPUs it has
  int unhealthy = 0;  // of those, reported unhealthy
  int allocated = 0;  // of those, held by bound members
  bool cordoned = false;
};

// status.nodeNames lists at most this many names (the first, sorted); status.nodes counts all.
inline constexpr int kPoolStatusMaxNodeNames = 256;

// Whether a GPUPool's spec selects the node: spec.gpuType equals the node's GPU type (or is "" /
// "*"), and every spec.nodeSelector label matches.
bool PoolSelects(const nlohmann::json& pool_spec, const PoolNode& n);

// The status a GPUPool should have over `nodes` (all nodes; it selects its own):
// {"phase": Ready|Draining|Pending, "nodes": N, "gpus": G, "allocatable": healthy GPUs on
// uncordoned nodes, "allocated": A, "unhealthy": U, "nodeNames": [...sorted, capped at
// kPoolStatusMaxNodeNames], "cordoned": cordoned nodes}. Only these keys: the caller merges them
// into the stored status and writes it when they differ.
nlohmann::json PoolStatus(const nlohmann::json& pool, const std::vector<PoolNode>& nodes);

// spec.cordon or spec.drain (a drain cordons too); spec.drain.
bool PoolCordons(const nlohmann::json& pool_spec);
bool PoolDrains(const nlohmann::json& pool_spec);

// The names of the nodes that some pool of `pools` cordons (PoolCordons) / drains (PoolDrains).
std::set<std::string> NodesCordonedByPools(const std::vector<const nlohmann::json*>& pools,
                                           const std::vector<PoolNode>& nodes);
std::set<std::string> NodesDrainedByPools(const std::vector<const nlohmann::json*>& pools,
                                          const std::vector<PoolNode>& nodes);

// The nodes a job of `queue` may be placed on: nullopt when no pool names the queue in
// spec.queues (not confined); else the names of the nodes those pools select, sorted (empty when
// they select none: the queue's jobs wait).
std::optional<std::vector<std::string>> QueuePoolNodes(
    std::string_view queue, const std::vector<const nlohmann::json*>& pools,
    const std::vector<PoolNode>& nodes);

}  // namespace tessera::api
