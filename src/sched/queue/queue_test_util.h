// Helpers for queueing-layer tests: small clusters, jobs and a driver that
// plays a workload through QueueManager with exact runtimes.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <utility>

#include "absl/time/time.h"
#include "model/job.h"
#include "model/synthetic_cluster.h"
#include "sched/framework/cluster_state.h"
#include "sched/queue/queue_manager.h"

namespace tessera::sched::testing {

// A fixed start time for queue tests (far from the epoch, so durations
// subtracted from it stay valid times).
inline const absl::Time kT0 = absl::UnixEpoch() + absl::Hours(1000);

inline std::unique_ptr<ClusterState> SmallCluster(int nodes, int gpus_per_node = 8,
                                                  int nodes_per_rack = 32) {
  auto cs = std::make_unique<ClusterState>();
  model::SyntheticClusterSpec spec;
  spec.nodes = nodes;
  spec.gpus_per_node = gpus_per_node;
  spec.nodes_per_rack = nodes_per_rack;
  auto ns = model::BuildSyntheticCluster(spec);
  if (!ns.ok()) abort();
  for (auto& n : *ns) {
    if (!cs->AddNode(std::move(n)).ok()) abort();
  }
  return cs;
}

inline model::Job GangJob(std::string name, std::string queue, int members, int gpus,
                          int32_t priority = 0) {
  model::Job j;
  j.name = std::move(name);
  j.queue = std::move(queue);
  j.priority = priority;
  j.groups.push_back({.name = "worker",
                      .count = members,
                      .resources = {.gpus = gpus, .cpu_milli = 1000, .memory_mib = 1024}});
  return j;
}

inline QueueSpec Q(std::string name, std::string parent, int64_t gpus_guaranteed = -1,
                   int64_t borrowing = -1, int64_t lending = -1, double weight = 1) {
  QueueSpec q;
  q.name = std::move(name);
  q.parent = std::move(parent);
  q.weight = weight;
  if (gpus_guaranteed >= 0) {
    q.quotas["gpu/H100"] = {.guaranteed = gpus_guaranteed * 1000,
                            .borrowing_limit = borrowing < 0 ? -1 : borrowing * 1000,
                            .lending_limit = lending < 0 ? -1 : lending * 1000};
  }
  return q;
}

// Every GPU milli held by a bound job; fails the calling test when a GPU is
// held twice or the cluster's indexes disagree.
inline int64_t BoundMilli(const ClusterState& cs) {
  std::set<std::pair<NodeId, int>> seen;
  int64_t milli = 0;
  for (const auto& [key, p] : cs.bound()) {
    for (const MemberPlacement& m : p.members) {
      for (const GpuGrant& g : m.gpus) {
        EXPECT_TRUE(seen.insert({m.node, g.gpu}).second) << "GPU bound twice";
        milli += g.milli;
      }
    }
  }
  EXPECT_TRUE(cs.CheckConsistency().ok());
  EXPECT_EQ(milli, cs.allocated_milli());
  return milli;
}

// Queue `queue`'s H100 usage in milli (-1: the tree tracks no H100 GPUs).
inline int64_t GpuUsage(const QueueTree& t, const std::string& queue) {
  for (size_t r = 0; r < t.resources().size(); ++r) {
    if (t.resources()[r] == "gpu/H100") return t.usage(t.Find(queue), r);
  }
  return -1;
}

}  // namespace tessera::sched::testing
