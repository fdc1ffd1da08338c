// NodeAgent: the node's side of the control plane. It registers the node (GPUs, topology, rack
// and block), heartbeats the GPU health the shared HealthTracker decides, and makes the members
// the server binds to this node run here (and nothing else).
//
// Algorithm (Step(), called in a loop by Run()):
//  1. Not registered: RegisterNode. On failure wait with exponential backoff (initial_backoff
//     doubling to max_backoff, with +-20% jitter from the injected seed) and retry. On success
//     the next binding sync is a *fencing* sync.
//  2. Heartbeat when heartbeat_interval has passed or a health transition arrived (Wake() from
//     a tracker listener, so a health change reaches the server within one heartbeat, usually
//     at once). A failed heartbeat, or none for partition_after (the agent was cut off or
//     paused), drops to step 1 (re-register, then fence).
//  3. Sync bindings when a BindingWatcher offers a newer set (OfferBindings: the server's
//     per-node long-poll, so a bind reaches the agent at once at O(own bindings) cost), and as a
//     safety net every sync_interval (ListBindings); a fencing sync always lists afresh. A
//     tracked member that is not bound any more, or bound
//     with another fencing generation, is stopped: killed at once on a fencing sync (Slurm's
//     rule: after a restart or a partition the server may have rebound its GPUs), else sent its
//     checkpoint signal with its grace period (preemption, a gang moved off an unhealthy GPU). A
//     bound member that is not tracked is started, only if all its GPUs are healthy here. An
//     exited member of the current binding is not restarted (its exit code is reported).
//     A member is never started without a binding listed by the server in this pass.
//     A running serving replica (InferenceService) whose binding moved to a newer generation with
//     the replica itself unchanged (same GPUs, command and env but for the gang's world size and
//     rank: a scale event of its service) keeps its process and adopts the generation.
//  4. Poll the launcher; report members whose state changed since the last report, and serving
//     replicas' new metrics readings (replica_metrics.h) at most every metrics_interval.
// Thread safety: Step/Run on one thread; Wake, Stop and Workloads from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/control_plane.h"
#include "agent/dcgm_metrics.h"
#include "agent/gpu_backend.h"
#include "agent/health.h"
#include "agent/launcher/launcher.h"
#include "common/clock.h"
#include "obs/log.h"

namespace tessera::agent {

struct NodeAgentOptions {
  std::string node_name;
  std::string rack;
  std::string block;
  std::map<std::string, std::string> labels;
  std::string agent_endpoint;
  // What the node offers its members (registered as the Node's cpuMilli / memoryMiB, which the
  // scheduler's fit checks); 0: not reported.
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  absl::Duration heartbeat_interval = absl::Seconds(10);
  absl::Duration sync_interval = absl::Seconds(2);
  // No successful heartbeat for this long (a partition, or the agent was paused): the server has
  // probably declared the node NotReady and rebound its members, so the agent re-registers and
  // fences. 0: 3 x heartbeat_interval.
  absl::Duration partition_after = absl::ZeroDuration();
  absl::Duration initial_backoff = absl::Milliseconds(500);
  absl::Duration max_backoff = absl::Seconds(30);
  uint64_t seed = 1;
  // A serving replica (InferenceService member) that exits is started again at the same
  // generation after this backoff, doubled per restart up to the maximum (Kubernetes'
  // CrashLoopBackOff: 10 s to 5 min); the count resets after 10 minutes of running.
  // Training members are never restarted here (the controller restarts gangs, spec.maxRestarts).
  absl::Duration replica_restart_backoff = absl::Seconds(10);
  absl::Duration max_replica_restart_backoff = absl::Minutes(5);
  // A serving replica's metrics file (TESSERA_METRICS_PATH) is read, and a new reading reported,
  // at most this often per replica (HPA's metrics resolution is 15 s; the controller's
  // autoscaler counts readings up to 30 s old).
  absl::Duration metrics_interval = absl::Seconds(5);
  // Launches, exits, fencing and control-plane failures, one structured line
  // each with job / namespace / node fields.
  obs::Logger log;
};

struct NodeAgentStats {
  int64_t registrations = 0;
  int64_t heartbeats = 0;
  int64_t failures = 0;
  int64_t started = 0;
  int64_t fenced = 0;               // killed at once: unbound at (re-)registration
  int64_t stopped = 0;              // checkpoint signal: unbound while connected
  int64_t checkpoint_requests = 0;  // checkpoint signal: preemption pending while bound
  int64_t lists = 0;                // ListBindings calls (fencing and safety-net syncs)
  int64_t offers = 0;               // binding sets applied from OfferBindings
  int64_t replica_restarts = 0;     // serving replicas started again after they exited
  int64_t generations_adopted = 0;  // serving replicas kept running into a new generation
  int64_t metrics_reports = 0;      // replica metrics readings sent
};

class NodeAgent {
 public:
  // All references must outlive the agent. The backend must be initialized and the launcher's
  // Init() done.
  NodeAgent(GpuBackend& backend, HealthTracker& tracker, Launcher& launcher,
            ControlPlaneClient& client, Clock& clock, NodeAgentOptions options);

  // Reads the GPUs (identity, topology) and adopts the members in the launcher's state dir.
  absl::Status Init();
  // One pass of the algorithm; returns how long to wait before the next one.
  absl::Duration Step();
  // Step() until Stop(); waits between steps on the real time of the wait (Wake() cuts it short).
  void Run();
  void Stop();
  // A health change (or anything else) wants a heartbeat now.
  void Wake();
  // A newer binding set from a watcher: synced on the next Step (at once: it wakes Run), unless
  // older than the set last applied, or the next sync is a fencing one (that lists afresh).
  void OfferBindings(BindingSet set);

  bool registered() const { return registered_; }
  const NodeAgentStats& stats() const { return stats_; }
  const NodeRegistration& registration() const { return registration_; }
  // GPU UUID -> the workload running on it, for /metrics labels.
  absl::flat_hash_map<std::string, WorkloadLabels> Workloads() const;

 private:
  static bool WakeOrStop(NodeAgent* a) ABSL_NO_THREAD_SAFETY_ANALYSIS;
  std::vector<GpuHealthReport> HealthReports() const;
  void Fail(const absl::Status& s, const char* what);
  void SyncBindings(const std::vector<Binding>& bindings, bool fence);
  // Starts the member of `b` if its GPUs are healthy; false otherwise.
  bool StartMember(const Binding& b, const char* why);
  // A current serving replica `m` has exited: wait out its backoff (after its exit was
  // reported), then start it again.
  void RestartReplica(const MemberStatus& m, const Binding& b);
  void Report();
  // A running serving replica's new metrics reading, if it is time to read one and the file has
  // one newer than the last sent; a malformed file is logged (once per distinct error).
  std::optional<ReplicaMetrics> NewMetrics(const MemberStatus& m, absl::Time now);
  // A running serving replica whose binding `b` is of a newer generation but leaves the
  // replica itself unchanged keeps running under it; false when it must be restarted instead.
  bool AdoptGeneration(const MemberStatus& m, const Binding& b);

  GpuBackend& backend_;
  HealthTracker& tracker_;
  Launcher& launcher_;
  ControlPlaneClient& client_;
  Clock& clock_;
  const NodeAgentOptions options_;
  std::mt19937_64 rng_;
  NodeRegistration registration_;

  bool registered_ = false;
  bool fence_next_sync_ = true;
  absl::Duration backoff_;
  absl::Time next_attempt_ = absl::InfinitePast();
  absl::Time next_heartbeat_ = absl::InfinitePast();
  absl::Time last_heartbeat_ok_ = absl::InfinitePast();
  absl::Time next_sync_ = absl::InfinitePast();
  std::map<std::string, std::string> reported_;  // member id -> last reported state
  struct ReplicaRestart {
    int restarts = 0;
    bool waiting = false;  // exited, start again at not_before
    absl::Time not_before = absl::InfiniteFuture();
    absl::Time started = absl::InfinitePast();  // last restart
  };
  std::map<std::string, ReplicaRestart> replica_restarts_;  // member id ->
  struct MetricsSent {
    absl::Time read_at = absl::InfinitePast();  // last read of the file
    absl::Time time = absl::InfinitePast();     // the reading last sent (its file time)
    std::string error;                          // the last malformed-file error logged
  };
  std::map<std::string, MetricsSent> metrics_sent_;  // member id ->
  // Members of a binding that cannot start (an empty command, a spec the launcher refuses): not
  // tried again for that binding, reported Failed "could not start" until the binding goes.
  struct StartFailure {
    MemberSpec spec;
    std::string error;
    bool reported = false;
  };
  std::map<std::string, StartFailure> start_failures_;  // member id ->
  NodeAgentStats stats_;

  mutable absl::Mutex mu_;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<BindingSet> offered_ ABSL_GUARDED_BY(mu_);
  int64_t applied_revision_ = 0;        // of the binding set last synced
  std::vector<Binding> last_bindings_;  // that set
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<std::string, WorkloadLabels> workloads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::agent
