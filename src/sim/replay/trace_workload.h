// Replay workloads from the public traces, on top of the loaders in src/trace
// (the same ones `sim pack` uses).
//
// Philly (philly-pollux/philly.csv): each row is one gang of num_gpus GPUs
// running `duration` seconds; the virtual cluster becomes the queue; submit
// times are seconds after the earliest timestamp (the workload starts at 0).
//
// Alibaba openb pod lists in time mode: each GPU pod arrives at creation_time
// and holds its GPUs for deletion_time - scheduled_time (deletion - creation
// when it was never scheduled). The QoS class becomes the queue. CPU-only
// pods are skipped. A GPU-sharing pod (num_gpu 1, gpu_milli < 1000) keeps its
// share: the scheduler packs shares onto one GPU exactly as in `sim pack`.
// Only the eleven-column lists have times; the multigpu* files do not.
//
// Checkpoint interval and restart overhead are not in the traces: callers
// apply JobDefaults.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sim/replay/workload.h"
#include "trace/openb.h"
#include "trace/philly.h"

namespace tessera::sim::replay {

absl::StatusOr<Workload> WorkloadFromPhilly(const std::vector<trace::PhillyJob>& jobs);
// `file` names the source in error messages.
absl::StatusOr<Workload> WorkloadFromOpenbPods(const std::vector<trace::OpenbPod>& pods,
                                               absl::string_view file);

// Text in the trace's format -> workload (tests; `file` names it in errors).
absl::StatusOr<Workload> ParsePhillyCsv(absl::string_view text,
                                        absl::string_view file = "philly.csv");
absl::StatusOr<Workload> ParseOpenbPodCsv(absl::string_view text,
                                          absl::string_view file = "openb.csv");

absl::StatusOr<Workload> ReadPhillyTrace(const std::string& path);
absl::StatusOr<Workload> ReadOpenbPodList(const std::string& path);

}  // namespace tessera::sim::replay
