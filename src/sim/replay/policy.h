// Replay policies: a scheduler profile plus how the simulator drives it.
//
// A policy is the Scheduler the server runs (sched::Profile, plugins from a
// sched::PluginRegistry) with one QueueSort plugin ordering pending work,
// plus two loop options: `backfill` (keep trying jobs behind a blocked one)
// and `preempt_lower_bands` (a blocked job may evict running jobs of a worse
// LAS band). Policies live in a PolicyRegistry by name, so the queue and
// fair-share policies of the queues/quotas work can be added as QueueSort
// plugins plus one Register() call, with no change to the simulator.
//
// Built-in queue sorts (all total orders; ties broken by the job index):
//   sim-fifo  earliest submit first.
//   sim-sjf   shortest known duration first (an oracle), then submit.
//   sim-las   Tiresias-like discretized 2D least-attained-service: attained
//             service is GPUs x seconds held; bands are cut at
//             LasConfig::thresholds_gpu_s; lower band first, FIFO within a
//             band. Running jobs are demoted as they cross a threshold, and a
//             blocked job preempts running jobs of strictly worse bands.
//   default   the server's profile unchanged ("priority" queue sort: higher
//             priority, then earlier creation), greedy backfill without a
//             reservation, as the server's scheduling loop does.
//   queues    no loop of the simulator's own: a sched::QueueManager (the
//             server's queueing layer: queue tree with quotas, borrowing and
//             fair share, priority classes, preemption with a checkpoint
//             signal and grace period, EASY backfill with a reservation)
//             decides, one Cycle per instant; see simulator_queues.cc.
// sjf stops backfilling behind a head blocked for 6 h (starvation guard).
// The sim-* sorts need facts model::Job does not carry (oracle duration,
// attained service); they read them through a JobFactsSource that the
// simulator implements, keyed by the job's name ("j<index>").
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/job.h"
#include "sched/framework/plugin.h"
#include "sched/framework/profile.h"
#include "sched/framework/registry.h"

namespace tessera::sim::replay {

// What the simulator knows about a job beyond model::Job.
struct JobFacts {
  int64_t index = 0;
  double submit_s = 0;
  double duration_s = 0;
  double attained_gpu_s = 0;  // fixed while the job is pending
  int32_t band = 0;           // LAS band from attained_gpu_s
};

class JobFactsSource {
 public:
  virtual ~JobFactsSource() = default;
  // Never null for a job the simulator created.
  virtual const JobFacts& Facts(const model::Job& job) const = 0;
};

// Parses the index of a simulator job name "j<index>"; -1 if not one.
int64_t SimJobIndex(absl::string_view name);
std::string SimJobName(int64_t index);

struct LasConfig {
  std::vector<double> thresholds_gpu_s = {3600, 36000};
  int32_t Band(double attained_gpu_s) const;
  // Attained service at which `band` ends (infinity for the last band).
  double BandEnd(int32_t band) const;
};

// Adds sim-fifo, sim-sjf and sim-las to `registry`. `facts` is borrowed and
// must outlive every plugin created from the registry.
absl::Status RegisterSimQueueSorts(const JobFactsSource* facts, sched::PluginRegistry* registry);

struct PolicySpec {
  std::string name;
  std::string description;
  sched::Profile profile;
  bool backfill = true;
  bool preempt_lower_bands = false;
  bool uses_las_bands = false;  // the simulator tracks demotions
  // Drive a sched::QueueManager (SimOptions::queue_config) built on
  // `profile` instead of the simulator's pending loop; backfill,
  // preempt_lower_bands and reserve_after_s are then the manager's own.
  bool queue_manager = false;
  // With backfill: a blocked head that has waited this long stops the
  // backfill behind it (a starvation guard); infinity: never.
  double reserve_after_s = std::numeric_limits<double>::infinity();
};

class PolicyRegistry {
 public:
  // fifo, sjf, las, default, queues.
  static PolicyRegistry Builtin();
  absl::Status Register(PolicySpec spec);
  absl::StatusOr<PolicySpec> Lookup(absl::string_view name) const;
  std::vector<std::string> Names() const;

 private:
  std::map<std::string, PolicySpec, std::less<>> specs_;
};

}  // namespace tessera::sim::replay
