// `tessera bench sched`: scheduling-core throughput and gang latency on a
// synthetic cluster; prints one JSON object.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "model/synthetic_cluster.h"
#include "nlohmann/json.hpp"
#include "sched/framework/profile.h"

namespace tessera::bench {

struct SchedBenchOptions {
  model::SyntheticClusterSpec cluster;
  std::string layout = "nvswitch";
  std::vector<int> gang_sizes = {16, 32, 64, 128, 256, 512};
  int gang_samples = 200;
  double background_load = 0.6;  // allocated fraction before measuring gangs
  double fill_target = 0.95;     // single-GPU phase stops here
  uint64_t seed = 42;
  sched::Profile profile = sched::Profile::Default();
  std::string profile_path;  // YAML; empty: the default profile
};

// Runs every phase and returns the report.
nlohmann::json RunSchedBench(const SchedBenchOptions& o);

void RegisterBenchSchedCommands(CLI::App& bench);

}  // namespace tessera::bench
