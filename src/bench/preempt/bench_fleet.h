// What the queue-layer benchmarks (`bench preempt`, `bench queue-cycle`)
// share: the fleet (8-GPU NVSwitch nodes, 32 per rack), their jobs, and the
// thread's CPU time (on a shared machine wall time also counts waiting).
#pragma once

#include <ctime>
#include <string>

#include "absl/status/status.h"
#include "model/job.h"
#include "model/synthetic_cluster.h"
#include "sched/framework/cluster_state.h"

namespace tessera::bench {

inline absl::Status BuildBenchFleet(int nodes, sched::ClusterState* cs) {
  model::SyntheticClusterSpec spec;
  spec.nodes = nodes;
  spec.gpus_per_node = 8;
  spec.nodes_per_rack = 32;
  spec.layout = model::GpuLayout::kNvSwitch;
  auto built = model::BuildSyntheticCluster(spec);
  if (!built.ok()) return built.status();
  for (auto& n : *built) {
    if (auto s = cs->AddNode(std::move(n)); !s.ok()) return s.status();
  }
  return absl::OkStatus();
}

// One member of `gpus` GPUs, or gpus / 8 members of 8 (in one rack when
// `rack`); 4 CPUs and 64 GiB per GPU.
inline model::Job MakeBenchJob(const std::string& name, const std::string& queue, int gpus,
                               int32_t prio, bool rack) {
  model::Job j;
  j.name = name;
  j.queue = queue;
  j.priority = prio;
  model::MemberGroup g;
  g.name = "worker";
  if (gpus <= 8) {
    g.count = 1;
    g.resources.gpus = gpus;
  } else {
    g.count = gpus / 8;
    g.resources.gpus = 8;
    if (rack) j.topology = {model::TopologyLevel::kRack, true};
  }
  g.resources.cpu_milli = 4000LL * g.resources.gpus;
  g.resources.memory_mib = 65536LL * g.resources.gpus;
  j.groups.push_back(g);
  return j;
}

inline double ThreadCpuUs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

}  // namespace tessera::bench
