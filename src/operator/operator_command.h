// `tessera operator`: the tessera.dev workload CRDs' controllers on Kubernetes (operator.h).
#pragma once

#include "CLI/CLI.hpp"

namespace tessera::op {

void RegisterOperatorCommand(CLI::App& app);

}  // namespace tessera::op
