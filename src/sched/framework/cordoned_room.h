// Free GPUs on cordoned nodes, for a waiting job's reason: after a drain, "no schedulable node
// has 4 free GPUs" reads as wrong to whoever sees 6 free on the node just drained, so the
// reason says the room is there but cordoned. O(nodes): only on the failure path, once per job
// shape per cycle (the queue skips equal shapes).
#pragma once

#include <cstdint>
#include <string>

#include "sched/framework/cluster_state.h"
#include "sched/framework/plugin.h"

namespace tessera::sched {

struct CordonedRoom {
  int nodes = 0;          // present, cordoned nodes of an allowed model with >= min_gpus free
  int64_t free_gpus = 0;  // their healthy, entirely free GPUs
  std::string example;    // the one with the most
  int example_free = 0;
};

CordonedRoom FindCordonedRoom(const ClusterState& cs, const JobContext& ctx, int min_gpus);

}  // namespace tessera::sched
