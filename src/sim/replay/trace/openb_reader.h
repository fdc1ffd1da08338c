// Reader for the Alibaba "openb" pod lists (cluster-trace-gpu-v2023) in time
// mode: each GPU pod arrives at creation_time and holds its GPUs from when it
// runs until deletion_time - scheduled_time (deletion - creation when
// scheduled_time is empty) has elapsed. The QoS class becomes the queue.
// CPU-only pods are skipped. A GPU-sharing pod (num_gpu 1, gpu_milli < 1000)
// is replayed as one whole GPU: the replay models whole-GPU gangs; the
// static packing protocol for sharing lives in `sim pack`.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sim/replay/workload.h"

namespace tessera::sim::replay {

absl::StatusOr<Workload> ParseOpenbPodCsv(absl::string_view text);
absl::StatusOr<Workload> ReadOpenbPodList(const std::string& path);

}  // namespace tessera::sim::replay
