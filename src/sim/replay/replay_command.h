// `tessera sim replay`: trace replay with failures, several policies side by
// side. Registered under the `sim` parent command by src/main/main.cc.
#pragma once

#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"

namespace tessera::sim::replay {

void RegisterSimReplayCommands(CLI::App& sim);

// "90" (seconds), "30m", "2.5h", "1d" -> seconds. Error names `flag`.
absl::StatusOr<double> ParseSeconds(const std::string& flag, const std::string& value);

}  // namespace tessera::sim::replay
