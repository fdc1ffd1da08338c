// `tessera bench api`: benchmark of the API server on its durable store.
#pragma once

#include "CLI/CLI.hpp"

namespace tessera::server {

// Adds `bench api` to `app` (creating `bench` if no other module has).
// Called by RegisterServerCommands.
// `bench`: the `tessera bench` parent command (src/main).
void RegisterApiBenchCommand(CLI::App& bench);

}  // namespace tessera::server
