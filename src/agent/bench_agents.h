// `tessera bench agents`: simulated node agents against a real server (bench_agents.cc).
#pragma once

#include "CLI/CLI.hpp"

namespace tessera::agent {

// Adds `bench agents` under `bench` (created when absent).
void RegisterAgentsBenchCommand(CLI::App& app);

}  // namespace tessera::agent
