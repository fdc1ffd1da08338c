// Helpers for scheduler tests: small clusters and jobs.
#pragma once

#include <memory>
#include <string>

#include "model/job.h"
#include "model/synthetic_cluster.h"
#include "sched/framework/cluster_state.h"
#include "sched/framework/scheduler.h"
#include "sched/plugins/default_registry.h"

namespace tessera::sched::testing {

inline void AddNodes(ClusterState* cs, const model::SyntheticClusterSpec& spec) {
  auto nodes = model::BuildSyntheticCluster(spec);
  if (!nodes.ok()) abort();
  for (auto& n : *nodes) {
    if (!cs->AddNode(std::move(n)).ok()) abort();
  }
}

inline std::unique_ptr<Scheduler> MakeScheduler(
    ClusterState* cs, sched::Profile profile = sched::Profile::Default()) {
  auto s = Scheduler::Create(profile, DefaultRegistry(), cs);
  if (!s.ok()) abort();
  return std::move(*s);
}

inline model::Job MakeJob(std::string name, int members, int gpus_per_member,
                          int gpu_milli = model::kMilliPerGpu) {
  model::Job j;
  j.name = std::move(name);
  j.groups.push_back({.name = "worker",
                      .count = members,
                      .resources = {.gpus = gpus_per_member,
                                    .gpu_milli = gpu_milli,
                                    .cpu_milli = 1000,
                                    .memory_mib = 1024}});
  return j;
}

}  // namespace tessera::sched::testing
