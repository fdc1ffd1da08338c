// Loader for the Philly-derived job trace of the Pollux artifact
// (philly-pollux/philly.csv: timestamp,duration,num_gpus,gpu_time,cluster).
//
// One row is one gang of num_gpus GPUs that ran `duration` seconds, submitted
// at `timestamp` ("YYYY-MM-DD HH:MM:SS", UTC) in virtual cluster `cluster`.
// Parsing is strict, like the openb loader: a malformed row fails the whole
// file with "file:line: column N (name): what is wrong". Plain functions;
// thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tessera::trace {

struct PhillyJob {
  int64_t timestamp = 0;  // seconds since the Unix epoch
  double duration_s = 0;
  int32_t num_gpus = 1;
  double gpu_time = 0;  // GPU-seconds as given (num_gpus * duration in the artifact)
  std::string cluster;  // virtual cluster hash
  friend bool operator==(const PhillyJob&, const PhillyJob&) = default;
};

// `file` names the source in error messages.
absl::StatusOr<std::vector<PhillyJob>> ParsePhillyJobs(absl::string_view text,
                                                       absl::string_view file);
absl::StatusOr<std::vector<PhillyJob>> LoadPhillyJobs(const std::string& path);

// Parses "YYYY-MM-DD HH:MM:SS" (UTC) into seconds since the Unix epoch.
bool ParseDateTime(absl::string_view s, int64_t* out);

}  // namespace tessera::trace
