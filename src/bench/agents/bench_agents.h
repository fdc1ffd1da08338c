// `tessera bench agents`: simulated node agents against a real server (bench_agents.cc).
#pragma once

#include "CLI/CLI.hpp"

namespace tessera::bench {

// Adds `bench agents` under `bench` (created when absent).
// `bench`: the `tessera bench` parent command (src/main).
void RegisterAgentsBenchCommand(CLI::App& bench);

}  // namespace tessera::bench
