// `tessera sim pack`: the FGD packing experiment on openb-format traces.
#pragma once

#include "CLI/CLI.hpp"

namespace tessera::sim::pack {

// Adds `pack` under the `sim` parent command.
void RegisterSimPackCommands(CLI::App& sim);

}  // namespace tessera::sim::pack
