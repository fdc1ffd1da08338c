// `tessera sim replay`: trace replay with failures, several policies side by
// side. Registered under the `sim` parent command by src/main/main.cc.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"

namespace tessera::sim::replay {

void RegisterSimReplayCommands(CLI::App& sim);

// "90" (seconds), "30m", "2.5h", "1d" -> seconds. Error names `flag`.
absl::StatusOr<double> ParseSeconds(const std::string& flag, const std::string& value);

// "15m:1,30m:2,0:1" -> (seconds, weight) pairs; durations as ParseSeconds.
absl::StatusOr<std::vector<std::pair<double, double>>> ParseDurationMix(const std::string& flag,
                                                                        const std::string& value);

}  // namespace tessera::sim::replay
