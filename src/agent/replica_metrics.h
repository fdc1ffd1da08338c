// ReadReplicaMetrics: the node agent's side of the serving replicas' metrics contract
// (docs/agent.md, "Replica metrics"). A replica of an InferenceService writes, whenever it
// likes, a small JSON object to the file named by TESSERA_METRICS_PATH, e.g.
//   {"p99LatencyMs": 140.5, "rps": 32.0}
// (write a temporary file and rename it over the path, so a reader never sees half of it). Both
// fields are optional non-negative numbers; other fields are ignored. The reading's time is the
// file's modification time, so a replica that stopped writing goes stale by itself.
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "agent/control_plane.h"

namespace tessera::agent {

// nullopt when the file does not exist (the replica has written nothing yet); InvalidArgument
// naming the field (or "file") when it is malformed: not JSON, not an object, a field that is not
// a non-negative number, or larger than 4 KiB. Never throws.
absl::StatusOr<std::optional<ReplicaMetrics>> ReadReplicaMetrics(const std::string& path);

}  // namespace tessera::agent
