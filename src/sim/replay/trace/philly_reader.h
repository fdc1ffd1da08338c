// Reader for the Philly-derived job trace of the Pollux artifact
// (philly-pollux/philly.csv: timestamp,duration,num_gpus,gpu_time,cluster).
//
// Each row is one gang of num_gpus GPUs running `duration` seconds; the
// virtual cluster hash becomes the queue. Submit times are seconds after the
// earliest timestamp (so the workload starts at 0). Checkpoint interval and
// restart overhead are not in the trace: callers apply JobDefaults.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sim/replay/workload.h"

namespace tessera::sim::replay {

// Parses the CSV text. Errors name the line and the column.
absl::StatusOr<Workload> ParsePhillyCsv(absl::string_view text);
absl::StatusOr<Workload> ReadPhillyTrace(const std::string& path);

// Parses "YYYY-MM-DD HH:MM:SS" (UTC) into seconds since the Unix epoch.
bool ParseDateTime(absl::string_view s, int64_t* out);

// Reads a whole file; NotFound with the path when it cannot be opened.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

}  // namespace tessera::sim::replay
