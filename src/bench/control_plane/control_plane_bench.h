// `tessera bench control-plane`: the whole path submit -> bound -> running, end to end, through a
// real `tessera server` process (auth on, SQLite durability as shipped, the real controller) and
// simulated node agents speaking the real agent protocol with node tokens (sim_agents.h).
// Prints one JSON object (docs/control-plane.md, "Benchmark: submit to running").
#pragma once

#include "CLI/CLI.hpp"

namespace tessera::bench {

// Adds `bench control-plane` under `bench` (the `tessera bench` parent command, src/main).
void RegisterControlPlaneBenchCommand(CLI::App& bench);

}  // namespace tessera::bench
