// `tessera server`: the control-plane API server on a durable store.
#pragma once

#include "CLI/CLI.hpp"

namespace tessera::server {

// Adds `server` to `app`:
//   tessera server --data-dir DIR [--listen HOST:PORT] [--tokens-file FILE]
// It serves until SIGINT/SIGTERM, then closes the store cleanly. With port 0
// it picks a free port; either way it prints "listening on HOST:PORT" once
// ready.
void RegisterServerCommands(CLI::App& app);

}  // namespace tessera::server
