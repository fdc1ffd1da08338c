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
//      A change of the hub object's spec, labels or annotations is pushed to
//      the copy once (copy_sync.h); a refusal is recorded in status.specSync
//      and an Event, and not retried until the next change.
//   3b. A copy its member has not placed for requeue_after while another
//      Ready member fits the job now (requeue.h) is moved, in the hub's queue
//      order with the jobs of step 2: the copy is created on the new member,
//      the old one deleted at the resourceVersion it was seen unplaced at (a
//      copy placed meanwhile is not deleted, and the move is abandoned), then
//      the hub records it (status.requeues + 1, Event Requeued).
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
#include "controller/events.h"
#include "federation/member_capacity.h"
#include "federation/requeue.h"
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
  // A copy its member has not placed for this long moves to another member
  // that fits it now (zero: never).
  absl::Duration requeue_after = absl::Seconds(300);
  // Label value on the copies, so that several hubs may share members.
  std::string hub_name = "hub";
  absl::Duration request_timeout = absl::Seconds(5);
  // The hub's Events (Requeued, SpecUpdated, ...) are deleted this long after
  // they were written (zero: never); the hub runs no scheduling controller
  // to collect them.
  absl::Duration event_ttl = absl::Hours(1);
  obs::Logger log;
  // Where the hub's series go (borrowed; null: none): per member
  // tessera_federation_cluster_ready, _cluster_gpus, _cluster_free_gpus, and
  // tessera_federation_dispatches_total / _failovers_total / _requeues_total.
  metrics::Registry* metrics = nullptr;
};

class Dispatcher {
 public:
  struct Stats {
    int64_t steps = 0;
    int64_t dispatched = 0;
    int64_t failovers = 0;
    int64_t collected = 0;  // stale copies deleted in members
    int64_t requeued = 0;   // unplaced copies moved to another member
    int64_t spec_pushed = 0;
    int64_t spec_refused = 0;
    int64_t events_collected = 0;  // the hub's Events deleted past event_ttl
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
  // Mirrors the copy's status into `j`; the copy as listed, or null when it
  // is gone (then the job is sent back).
  const Json* Mirror(HubJob& j, Member& m);
  // Pushes a change of `j`'s spec or metadata to its copy (copy_sync.h).
  void SyncSpec(HubJob& j, Member& m, const Json& copy);
  bool Dispatch(HubJob& j);
  // Creates `j`'s copy on `m` (a 409 for our own copy counts as created);
  // false otherwise, with the reason in `j`'s status if `say_why`.
  bool CreateCopy(HubJob& j, Member& m, bool say_why);
  // Moves `j`, unplaced on `from` (copy as listed), per requeue.h.
  void Requeue(HubJob& j, Member& from, const Json& copy);
  void SendBack(HubJob& j, const std::string& why);
  void Collect(Member& m);
  std::vector<Candidate> Candidates() const;
  using Note = controller::EventNote;  // an Event about the hub object, written with the status
  // CAS-writes `status` fields of hub object `j` (and `note`'s Event in the
  // same transaction); false on a conflict.
  bool WriteStatus(HubJob& j, const Json& fields, const std::vector<std::string>& erase = {},
                   const Note* note = nullptr);

  store::Store& hub_;
  Clock& clock_;
  const DispatcherOptions options_;
  std::map<std::string, std::unique_ptr<Member>> members_;
  std::map<std::string, std::string> hub_uids_;  // uid -> the cluster its job is on ("": none)
  // "uid/cluster" -> since when that copy waits unplaced there (requeue.h).
  std::map<std::string, absl::Time> unplaced_since_;
  int64_t event_seq_ = 0;
  controller::EventCollector events_gc_;  // the hub's Events older than options.event_ttl
  Stats stats_;
  struct Metrics;
  std::unique_ptr<Metrics> metrics_;  // null without options.metrics
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace tessera::federation
