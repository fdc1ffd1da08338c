// `tessera bench restart`: how long the scheduling controller takes to resume
// from a durable store holding a large fleet with every GPU bound (the issue's
// "restart-to-scheduling time with 50,000 jobs stored"). Prints one JSON
// object.
#pragma once

#include "CLI/CLI.hpp"

namespace tessera::bench {

// Adds `restart` under `bench`.
void RegisterRestartBenchCommands(CLI::App& bench);

}  // namespace tessera::bench
