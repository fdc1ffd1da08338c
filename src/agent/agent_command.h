// `tessera gpus`: what the node agent's GPU backend discovers, for a person checking a machine.
//
//   tessera gpus [--backend nvml|fake] [--fake-config FILE] [--nvml-lib PATH]
//                [-o table|json|prometheus] [--watch DURATION] [--ignore-xid N ...]
//
// table: identity, memory, MIG, metrics and the topology matrix; json: the same for programs;
// prometheus: DCGM-exporter-compatible metrics. --watch then waits for GPU events for DURATION
// and prints each event and every health transition (the HealthTracker's verdicts).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace CLI {
class App;
}  // namespace CLI

namespace tessera {
class Clock;
}  // namespace tessera

namespace tessera::agent {

struct GpusOptions {
  std::string backend = "nvml";  // "nvml" or "fake"
  std::string fake_config;       // required for the fake backend
  std::string nvml_lib;          // empty: TESSERA_NVML_LIB or libnvidia-ml.so.1
  std::string output = "table";  // "table", "json" or "prometheus"
  absl::Duration watch = absl::ZeroDuration();
  std::vector<uint64_t> ignore_xids;
  std::string hostname;  // for prometheus labels; empty: gethostname()
};

// Runs the command against `clock`; returns the process exit code (0 ok, 1 backend failure,
// 2 bad usage). Writes results to `out` and diagnostics to `err`.
int RunGpusCommand(const GpusOptions& options, Clock& clock, std::ostream& out, std::ostream& err);

// Adds `gpus` to the tessera binary.
void RegisterAgentCommands(CLI::App& app);

}  // namespace tessera::agent
