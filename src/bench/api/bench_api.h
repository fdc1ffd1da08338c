// `tessera bench api`: benchmark of the API server on its durable store.
#pragma once

#include "CLI/CLI.hpp"

namespace tessera::bench {

// Adds `api` under `bench` (the `tessera bench` parent command, src/main).
void RegisterApiBenchCommand(CLI::App& bench);

}  // namespace tessera::bench
