// `tessera` client commands in kubectl's habits: apply, get, describe,
// delete, cordon, uncordon, drain, top. Each talks to the API server over
// HTTP (see api_client.h for --server/--token/--namespace and the config
// file) and exits non-zero with the server's message on failure.
#pragma once

#include "CLI/CLI.hpp"

namespace tessera::cli {

void RegisterCliCommands(CLI::App& app);

}  // namespace tessera::cli
