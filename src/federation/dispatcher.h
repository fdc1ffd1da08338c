// Dispatcher: the hub of a federation of Tessera clusters (`tessera server
// --federation`), in the manner of Kueue's MultiKueue or Armada: users submit
// TrainingJobs and InferenceServices to the hub; the hub schedules no GPU
// itself but hands each job to one member cluster, mirrors its status back,
// and moves it when that member is lost. The hub's store is the source of
// truth: a job accepted there is never lost with a member.
//
// Members are Cluster objects in the hub (spec.server, optional
// spec.tokenFile read on the hub). Each Step():
//   1. Probes every member at once, a thread each (GET /api/v1/fleet): Ready
//      with its capacity (member_capacity.h), or Unreachable. Cluster status:
//      phase, gpus, freeGpus, message. A Ready member's copies of this hub's
//      jobs are listed in the same probe (one list per kind), for 3 and 4.
//   2. Jobs not yet dispatched, by priority then age: to the Ready member
//      where the job fits now with the most free GPUs (spread across the
//      federation); the copy is created there under the same namespace and
//      name, labelled tessera.dev/federation-hub=<hub> and annotated with the
//      hub object's uid. Hub status: phase Dispatched, cluster. A job that
//      fits nowhere waits (phase Pending, message with every member's free
//      GPUs).
//   3. Dispatched jobs: the copy's phase, message, placement, generation,
//      restarts and replicas are mirrored into the hub's status. A copy that
//      disappeared, or a member Unreachable for failover_after (or deleted),
//      sends the job back to step 2 on another member (status.failovers + 1).
//   4. Garbage collection on every Ready member: a copy whose hub job is gone,
//      or was moved to another member, is deleted there. This also fences a
//      member that comes back after a failover: its stale copy is removed
//      before it could run beside the new one for long (the member's own
//      agents stop its members on the deletion).
// A copy is created before the hub records it (create, then CAS on the hub
// object): if the hub write fails the copy is collected and the job is
// dispatched again; a create answered 409 for our own copy counts as done.
//
// Thread safety: Step() runs on one thread (RunInBackground's); Stop() from
// any.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "federation/member_capacity.h"
#include "metrics/registry.h"
#include "obs/log.h"
#include "store/store.h"

namespace tessera::agent {
class ApiClient;
}

namespace tessera::federation {

struct DispatcherOptions {
  absl::Duration period = absl::Seconds(1);
  // A member that has not answered for this long loses its jobs to others.
  absl::Duration failover_after = absl::Seconds(60);
  // Label value on the copies, so that several hubs may share members.
  std::string hub_name = "hub";
  absl::Duration request_timeout = absl::Seconds(5);
  obs::Logger log;
  // Where the hub's series go (borrowed; null: none): per member
  // tessera_federation_cluster_ready, _cluster_gpus, _cluster_free_gpus, and
  // tessera_federation_dispatches_total / _failovers_total.
  metrics::Registry* metrics = nullptr;
};

class Dispatcher {
 public:
  struct Stats {
    int64_t steps = 0;
    int64_t dispatched = 0;
    int64_t failovers = 0;
    int64_t collected = 0;  // stale copies deleted in members
  };

  // `hub` and `clock` must outlive the dispatcher.
  Dispatcher(store::Store& hub, Clock& clock, DispatcherOptions options);
  ~Dispatcher();
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  absl::Status Step();
  void RunInBackground();
  void Stop();
  const Stats& stats() const { return stats_; }

 private:
  struct Member;
  struct HubJob;
  void SyncMembers(absl::Time now);
  // Asks member `m` for its fleet summary (network only; members in parallel).
  void Fetch(Member& m, absl::Time now);
  // Writes what Fetch learnt into the Cluster's status in the hub.
  void RecordProbe(Member& m, absl::Time now);
  void Mirror(HubJob& j, Member& m);
  bool Dispatch(HubJob& j);
  void SendBack(HubJob& j, const std::string& why);
  void Collect(Member& m);
  // CAS-writes `status` fields of hub object `j`; false on a conflict.
  bool WriteStatus(HubJob& j, const Json& fields, const std::vector<std::string>& erase = {});

  store::Store& hub_;
  Clock& clock_;
  const DispatcherOptions options_;
  std::map<std::string, std::unique_ptr<Member>> members_;
  std::map<std::string, std::string> hub_uids_;  // uid -> the cluster its job is on ("": none)
  Stats stats_;
  struct Metrics;
  std::unique_ptr<Metrics> metrics_;  // null without options.metrics
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace tessera::federation
