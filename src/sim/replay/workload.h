// Workload: the jobs a replay feeds to the scheduler, independent of where
// they came from (a trace reader or the synthetic generator).
//
// Times are seconds from the start of the workload (the first submit is not
// necessarily 0). A job asks for `gpus` whole GPUs as one gang; the simulator
// turns that into members of at most one node each (GangShape). A job with
// gpus == 1 may instead ask for a share of one GPU (gpu_milli < 1000, as the
// openb sharing pods do); it then counts as gpu_milli / 1000 GPU in every
// GPU-time metric.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace tessera::sim::replay {

struct SimJob {
  double submit_s = 0;
  double duration_s = 0;  // run time on its GPUs without failures (the oracle)
  int32_t gpus = 1;
  int32_t gpu_milli = 1000;  // per GPU; < 1000 (a shared GPU) only with gpus == 1
  int32_t priority = 0;
  int32_t queue = 0;        // index into Workload::queues
  double checkpoint_s = 0;  // a checkpoint every this many seconds of progress; 0: never
  // Run time each periodic checkpoint takes to write (no progress meanwhile);
  // 0: free. A job whose cost is known may let Tessera choose checkpoint_s
  // (ApplyYoungDalyCadence).
  double checkpoint_cost_s = 0;
  double restart_s = 0;  // restart overhead after a failure or preemption
  // Index into Workload::priority_classes; -1: none (the job keeps `priority`).
  // Only the `queues` policy reads it (the QueueManager's priority classes).
  int32_t priority_class = -1;

  int64_t milli() const { return int64_t{gpus} * gpu_milli; }
  // GPUs held, in GPU units (a fraction for a shared GPU).
  double gpu_units() const { return static_cast<double>(milli()) / 1000.0; }
};

struct Workload {
  std::string source;               // "philly:<path>", "synthetic", ...
  std::vector<std::string> queues;  // at least one
  // Priority class names jobs refer to (SimJob::priority_class); may be empty.
  std::vector<std::string> priority_classes;
  std::vector<SimJob> jobs;  // sorted by submit_s (stable)

  // Total demand, sum of GPU units * duration.
  double GpuSeconds() const;
  double FirstSubmit() const { return jobs.empty() ? 0 : jobs.front().submit_s; }
};

// Checks every job (field names in messages) and that queues cover them.
absl::Status ValidateWorkload(const Workload& w);
// Sorts jobs by submit time, keeping the input order among equal times.
void SortBySubmit(Workload* w);

// How a gang of `gpus` GPUs is split on nodes of `gpus_per_node`: `members`
// members of `per_member` GPUs each (members * per_member == gpus). A gang
// up to a node is one member; larger gangs take whole nodes when the size
// divides, else the largest divisor that fits on a node.
struct GangShape {
  int32_t members = 1;
  int32_t per_member = 1;
};
GangShape ShapeFor(int32_t gpus, int32_t gpus_per_node);

// Periodic checkpoints (checkpoint_s of progress, then checkpoint_cost_s
// writing it) over `run` seconds of run time from a checkpoint, past the
// restart overhead: the progress made, the progress saved by complete
// checkpoints, and the run time spent writing (an interrupted write included).
// Without checkpoints nothing is saved and all run is progress.
struct RunSplit {
  double done = 0;
  double saved = 0;
  double writing = 0;
};
RunSplit SplitRun(const SimJob& j, double run);
// Run time to make `work` seconds of progress from a checkpoint: the work
// plus a write after every checkpoint_s of it but the last (none at the end).
double RunTimeFor(const SimJob& j, double work);

// Workload-wide overrides applied after reading a trace.
struct JobDefaults {
  double checkpoint_s = 1800;
  double restart_s = 300;
  double checkpoint_cost_s = 0;
};
void ApplyDefaults(const JobDefaults& d, Workload* w);

}  // namespace tessera::sim::replay
