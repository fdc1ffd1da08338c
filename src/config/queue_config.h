// Queueing configuration in YAML: the queue tree, quotas, weights, fair-share
// half-life, priority classes, preemption policy and caps, backfill.
//
//   fairShare: {halfLife: 1h}
//   priorityClasses: {production: 100000, research: 1000}  # added to the built-ins
//   defaultPriorityClass: research
//   preemption: {withinQueue: true, reclaim: true, crossQueueLowerPriority: false,
//                maxEvictedGpus: 64, maxEvictedRatio: 2, gracePeriod: 30s,
//                minRuntime: 5m, order: priorityFirst}  # or gangsFirst
//   backfill: {enabled: true, defaultRuntime: 1h, reservations: 1, learnRuntimes: false}
//   queues:
//     - name: org
//       quotas: {gpu/H100: {guaranteed: 256, borrowingLimit: 0, lendingLimit: 64},
//                cpu: {guaranteed: 2000}, memory: {guaranteed: 16384}}
//     - {name: team-a, parent: org, weight: 2,
//        quotas: {gpu/H100: {guaranteed: 128}}}
//
// Units: GPUs (fractions allowed), CPU cores, memory GiB. Durations as
// "30s", "1h30m". Unknown fields are errors. Every error names its field
// ("queues[1].quotas.gpu/H100.guaranteed: must be a number").
//
// QueueConfigStore keeps the configuration in force: a Load that fails, in
// parsing or validation, leaves the previous one in force.
// Thread safety: none (the owner serialises reloads with scheduling).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sched/queue/queue_manager.h"

namespace tessera::config {

// Parses and validates (sched::ValidateQueueManagerConfig) one document.
absl::StatusOr<sched::QueueManagerConfig> ParseQueueConfig(absl::string_view yaml);
// Reads `path` and parses it; messages start with the path ("q.yaml: cannot
// read", "q.yaml: queues[0].weight: ..."). The server's and the simulator's
// --queue-config.
absl::StatusOr<sched::QueueManagerConfig> LoadQueueConfigFile(const std::string& path);

class QueueConfigStore {
 public:
  // Starts with `initial` (the built-in defaults unless given).
  explicit QueueConfigStore(sched::QueueManagerConfig initial = {})
      : current_(std::move(initial)) {}

  // Parses `yaml`; when it is valid and `manager` (optional) accepts it, it
  // becomes the configuration in force. Otherwise nothing changes.
  absl::Status Load(absl::string_view yaml, sched::QueueManager* manager = nullptr);
  const sched::QueueManagerConfig& current() const { return current_; }
  int64_t generation() const { return generation_; }

 private:
  sched::QueueManagerConfig current_;
  int64_t generation_ = 0;
};

}  // namespace tessera::config
