// SchedulingController: runs inside `tessera server` and makes the stored
// objects come true: it schedules TrainingJobs and InferenceServices onto
// Nodes through the queueing layer (sched::QueueManager: queue tree, quotas
// with borrowing, fair share, burst credit, backfill, preemption) over the
// real sched::Scheduler, and drives the job and node lifecycles.
//
// Algorithm
//   Start(): list Nodes, PriorityClasses, TrainingJobs, InferenceServices;
//     rebuild the ClusterState from the nodes and from every stored
//     status.placement (Assume + Bind, no scheduling), queue the rest.
//     O(objects); nothing is written unless a stored placement no longer
//     fits (its node is gone), which requeues that job.
//   Step(): (1) apply the Store events since the last revision (own writes
//     are recognised by revision and skipped); (2) node timers: no
//     heartbeat for node_grace -> NotReady (cordoned in the ClusterState);
//     NotReady for eviction_delay -> every gang with a member there is
//     requeued (NodeLost); (3) one QueueManager cycle (every pending job
//     tried in priority / fair-share order), then its events are written:
//     Started -> the binding; CheckpointSignal -> the victim's
//     PreemptionPending condition; Killed -> the victim is unbound (phase
//     Preempted, resumeFrom the last Ready Checkpoint) and waits again;
//     jobs that still wait get the queue layer's reason in status.message.
//     Member reports (status.members[], written by node agents) move bound
//     jobs to Running / Succeeded / Failed and services through Deploying /
//     Ready / Degraded (member_phase.h).
//
// Queues: the tree is the queue YAML (options.queues) plus every Queue
// object plus an implicit quota-less top-level queue per job queue name that
// neither defines (controller/queue_codec.h). A Queue change rebuilds the
// tree at the next step (fair-share history restarts); a tree that does not
// build leaves the previous one in force and says why in the Queue's
// status.message. Each Queue's status carries its usage, fair share and
// credit (written at most every queue_status_period).
//
// Lifecycle: Pending -> Admitted (decoded, priority resolved, queued) ->
// Scheduled (bound) -> Running -> Succeeded | Failed (from the members'
// reports; an admin may also end a job through the status subresource); Preempted / NodeLost
// (node lost, GPU unhealthy, NoExecute taint / drain) -> requeued, resuming
// from the newest Ready Checkpoint. Each transition is written in ONE store
// transaction together with an Event object (kind Event) naming the reason.
//
// Safety (see docs/control-plane.md):
//   * A binding is written with compare-and-swap on the job's revision the
//     scheduler decided on; if the job changed, the binding is undone.
//   * The in-memory ClusterState always holds at least what the store says
//     is bound: bind in memory, then write (undo on failure); unbind in the
//     store first, then release in memory. So no GPU is ever bound twice in
//     the store, whenever the process dies. The one exception is a
//     preemption victim, which the QueueManager releases in memory inside
//     its cycle: its unbinding is written before any binding of that cycle,
//     and if it cannot be written no binding is and the controller re-lists.
//   * Fencing: status.generation is bumped on every placement and stamped
//     on every member; an agent runs a member only while the job's current
//     generation and placement name it.
//
// Thread safety: Start/Step/introspection from one thread, or
// RunInBackground() which owns that thread until Stop().
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "api/gpu_pool.h"
#include "common/clock.h"
#include "controller/autoscaler.h"
#include "controller/controller_metrics.h"
#include "controller/events.h"
#include "controller/store_layout.h"
#include "model/job.h"
#include "obs/log.h"
#include "obs/otlp_exporter.h"
#include "sched/framework/cluster_state.h"
#include "sched/framework/profile.h"
#include "sched/framework/scheduler.h"
#include "sched/pack/plugin_set.h"
#include "sched/queue/queue_manager.h"
#include "store/store.h"

namespace tessera::controller {

class NodeLeases;

struct ControllerOptions {
  sched::Profile profile = sched::Profile::Default();
  // A node without a heartbeat for this long turns NotReady (0: never).
  absl::Duration node_grace = absl::Seconds(40);
  // Event objects older than this are deleted (0: kept forever), a page of
  // 1,000 per step, in passes every event_ttl / 10 (10 s to 10 min).
  absl::Duration event_ttl = absl::Hours(1);
  // Heartbeats kept in memory by the API server (borrowed; null: only the
  // Node's stored status.lastHeartbeatTime counts). See node_leases.h. The
  // controller is its one TakeRenewals() reader.
  NodeLeases* leases = nullptr;
  // A node NotReady for this long loses its gangs (requeued, NodeLost).
  absl::Duration eviction_delay = absl::Minutes(5);
  // Background loop: longest sleep between steps when nothing is written.
  absl::Duration tick = absl::Milliseconds(200);
  int max_cycles_per_step = 10000;
  int64_t page = 5000;  // list / events page size
  // The queueing configuration in force before any Queue object: fair-share
  // half-life, priority classes, preemption policy, backfill, YAML queues.
  // Its `profile` is replaced by `profile` above.
  sched::QueueManagerConfig queues;
  // Queue objects' status (usage, fair share, credit) is rewritten at most
  // this often per queue.
  absl::Duration queue_status_period = absl::Seconds(5);
  // Longest time between queue cycles when nothing changes (fair-share
  // order and backfill reservations move with time).
  absl::Duration idle_cycle = absl::Seconds(5);
  // An elastic TrainingJob below its maxReplicas is grown back at most this
  // often (counted from its binding or last resize): each resize restarts
  // its members from the last checkpoint, so it should not follow every GPU
  // that frees up.
  absl::Duration elastic_grow_interval = absl::Seconds(60);
  // The autoscaling policy of InferenceServices with spec.slo (freshness of
  // readings, tolerance, scale-down stabilization window; autoscaler.h).
  AutoscalerOptions autoscaler;
  // Per-GPU mean time between failures for the checkpoint interval Tessera
  // chooses (status.checkpointIntervalSeconds, Young/Daly) for TrainingJobs
  // that declare spec.checkpoint.costSeconds without intervalSeconds. Zero:
  // the rate observed since Start() (GPUs turning unhealthy over GPU-time)
  // once it has seen sched::kMinObservedGpuFailures failures, else
  // sched::kDefaultGpuMtbfSeconds (50,000 GPU-hours).
  absl::Duration checkpoint_gpu_mtbf = absl::ZeroDuration();
  // Where to export scheduling and fleet metrics (borrowed; null: none).
  metrics::Registry* metrics = nullptr;
  // One structured line per transition (binding, preemption, requeue, node
  // NotReady, GPU health), with job / namespace / node fields.
  obs::Logger log;
  // Each scheduling decision's spans (see decision_spans.h), called on the
  // controller thread; must not block (OtlpExporter::Export queues). Empty: none.
  std::function<void(obs::TraceRecord)> on_decision;
};

class SchedulingController {
 public:
  // Neither `store` nor `clock` is owned; both must outlive the controller.
  static absl::StatusOr<std::unique_ptr<SchedulingController>> Create(store::Store& store,
                                                                      Clock& clock,
                                                                      ControllerOptions options);
  ~SchedulingController();

  // Lists the store and rebuilds state. Call once before Step().
  absl::Status Start();
  // One pass: events, node timers, scheduling cycles. Deterministic given the
  // store contents and the clock.
  absl::Status Step();

  // Runs Start() then Step() in a loop on a thread of its own.
  void RunInBackground();
  // Ends the background loop. Idempotent.
  void Stop();

  // --- Introspection (controller thread, or after Stop) ---
  const sched::ClusterState& cluster() const { return *cluster_; }
  size_t queued() const { return qm_->pending_size(); }
  const sched::QueueManager& queues() const { return *qm_; }
  int64_t revision() const { return revision_; }
  struct Stats {
    int64_t steps = 0;
    int64_t cycles = 0;
    int64_t bound = 0;
    int64_t bind_conflicts = 0;
    int64_t bind_batch_fallbacks = 0;       // batched binding Txns that failed (written one by one)
    int64_t admission_batch_fallbacks = 0;  // batched admission Txns that failed (likewise)
    int64_t phase_batches = 0;          // member-reported phases written several jobs to one Txn
    int64_t phase_batch_fallbacks = 0;  // phase Txns that failed (then written one by one)
    int64_t requeued = 0;
    int64_t restored = 0;  // placements rebuilt by Start()
    int64_t preemptions_resumed =
        0;                          // victims of a preemption in flight carried on (RestoreVictim)
    int64_t preempted = 0;          // victims unbound
    int64_t deadline_exceeded = 0;  // stopped by spec.maxRuntimeSeconds
    int64_t events_collected = 0;   // Event objects deleted past event_ttl
    int64_t queue_rebuilds = 0;
    int64_t elastic_shrinks = 0;  // elastic jobs that lost members and kept running
    int64_t elastic_grows = 0;    // elastic jobs that got members back
    int64_t restarts = 0;         // gangs restarted in place after a member failed
    int64_t preempt_shrinks = 0;  // elastic victims shrunk by a preemption (in elastic_shrinks)
    int64_t scale_ups = 0;        // autoscaled services grown toward desiredReplicas
    int64_t scale_downs = 0;      // autoscaled services shrunk to desiredReplicas
    absl::Duration start_time;
    absl::Duration start_read_time;  // of start_time, reading the store (the rest: decoding)
  };
  const Stats& stats() const { return stats_; }

 private:
  struct JobRec;
  struct NodeRec;
  SchedulingController(store::Store& store, Clock& clock, ControllerOptions options);

  void Reset();
  absl::Status ListPrefix(const char* prefix, int64_t* revision, std::vector<store::KeyValue>* out);
  absl::Status ApplyEvent(const store::Event& e);
  void OnNodePut(const std::string& key, const Json& obj, int64_t rev, bool at_start);
  void OnNodeDelete(const std::string& key);
  void OnJobPut(const std::string& key, const Json& obj, int64_t rev, bool at_start);
  void OnJobDelete(const std::string& key);
  void OnPriorityClass(const Json& obj, bool deleted);
  void OnQueue(const Json& obj, bool deleted);
  void OnCheckpoint(const Json& obj);
  // Queue layer membership: Enqueue defers the submission to the next cycle;
  // ReleaseMemory takes the job out of the QueueManager (its GPUs return in
  // memory) or, if it is bound outside it, out of the ClusterState.
  void Enqueue(JobRec& rec);
  // `completed`: the job succeeded, and its run teaches the runtime estimates.
  void ReleaseMemory(JobRec& rec, bool completed = false);
  void RebuildQueues();
  void FlushSubmissions(absl::Time now);
  // Hands rec's stored preemption in flight to the QueueManager.
  void RestoreInflightPreemption(JobRec& rec, absl::Time now);
  void WaitingReasons(absl::Time now);
  void WriteQueueStatus(absl::Time now);
  void Admit(JobRec& rec, const Json& obj, bool at_start);
  // A heartbeat of `rec` was seen now (a new stored lastHeartbeatTime or a
  // renewed lease): it counts from now, and a NotReady node is Ready again.
  void NoteHeartbeat(const std::string& key, NodeRec& rec, absl::Time now);
  void NodeTimers();
  // Stops bound jobs that have run past spec.maxRuntimeSeconds since their
  // binding: phase Failed, reason DeadlineExceeded, placement cleared (the
  // agents stop the members), GPUs back to the pool.
  void RuntimeLimits();
  // Arms rec's runtime limit for a binding made at `since`.
  void ArmRuntimeLimit(JobRec& rec, absl::Time since);
  void RunCycles();
  // One Schedule attempt of the queue cycle as a decision trace for
  // options.on_decision (set as the QueueManager's attempt observer).
  void RecordDecision(const model::Job& job, const sched::ScheduleResult& r);
  absl::Time decision_mark_;  // end of the previous decision in this cycle
  // Refreshes the fleet, queue and pending-job gauges (GPUs by model, node readiness, pending
  // jobs), at most every kGaugeEvery (the first step always):
  // they walk every node and job, which at 12,500 nodes was a sixth of the server's CPU when
  // done on every step. A Prometheus scrape (15 s and up) sees them at most ~1.2 s old (a step
  // comes at least every tick).
  static constexpr absl::Duration kGaugeEvery = absl::Seconds(1);
  void UpdateGauges();

  // Read-modify-write of an object with CAS; `mutate` edits the latest
  // object (return false to abandon). With expected > 0 the object must still
  // be at that revision. Appends an Event for `reason` in the same Txn.
  struct Change {
    std::string reason;
    std::string message;
    bool warning = false;
    bool record = true;                 // also write an Event object
    std::vector<obs::LogField> fields;  // extra fields of the log line
  };
  // On success `*base` is the revision the object had before the write.
  absl::StatusOr<int64_t> Update(const std::string& key, int64_t expected,
                                 const std::function<bool(Json&)>& mutate, const Change& event,
                                 int64_t* base);
  // The read-modify half of Update: the object as `mutate` leaves it and the ops that write it
  // (CAS on the revision read) and its Event. Cancelled if `mutate` abandons it,
  // FailedPrecondition if expected > 0 and the object moved on.
  struct PreparedWrite {
    Json obj;
    int64_t base = 0;
    std::vector<store::Op> ops;
  };
  // `current`: the object as stored at `expected` (> 0), when the caller has it (from the event
  // it just applied): no read then.
  absl::StatusOr<PreparedWrite> PrepareUpdate(const std::string& key, int64_t expected,
                                              const std::function<bool(Json&)>& mutate,
                                              const Change& event, const Json* current = nullptr);
  // A binding decided by the QueueManager (a kStarted event) and the explanation it came with.
  struct PendingBinding {
    JobRec* rec;
    std::string explanation;
  };
  // Writes the bindings of one run of kStarted events together: every job's status and its
  // Event in one store transaction (one commit, one fsync, however many jobs), each job CAS'd
  // on the revision this controller decided on. If the transaction fails (a job changed under
  // it), each binding is written on its own instead. A binding not written is undone in memory
  // and its job queued again. Clears `batch`.
  void WriteBindings(std::vector<PendingBinding>* batch, absl::Time now);
  // The status change that binds `rec` at its next generation; nullopt if `rec` holds no
  // placement. `mutate` applies it to a stored job (false: the job ended meanwhile).
  struct BindingChange {
    int64_t generation;
    std::string message;
    size_t members;
    Change change;
    std::function<bool(Json&)> mutate;
  };
  std::optional<BindingChange> PlanBinding(const JobRec& rec, const std::string& explanation,
                                           absl::Time now) const;
  // rec's memory once its binding `b` is stored at `revision`.
  void NoteBound(JobRec& rec, const BindingChange& b, int64_t revision, absl::Time now);
  // Update of bound job `rec`'s status, fenced on the binding this controller
  // knows (a bound phase at rec.generation; otherwise abandoned, Cancelled).
  // `mutate` edits the status; false abandons. rec.revision follows the write
  // when nobody else wrote the job in between.
  absl::StatusOr<int64_t> UpdateBinding(JobRec& rec,
                                        const std::function<bool(Json& status)>& mutate,
                                        const Change& event);
  // The object-level mutation UpdateBinding applies: abandons (false) unless the stored job is
  // still bound at `generation`, then `mutate` edits its status.
  static std::function<bool(Json& obj)> OnBinding(int64_t generation,
                                                  std::function<bool(Json& status)> mutate);
  // An Event object about `obj` (a standalone write, for changes made by others).
  void RecordEvent(const Json& obj, int64_t rev, const Change& why);
  // Writes a Node's phase (Ready / NotReady) and its Ready condition; `rec.revision` follows
  // the write when nobody else wrote the Node in between.
  void WriteNodeReadiness(const std::string& key, NodeRec& rec, bool ready,
                          const char* condition_reason, const std::string& condition_message,
                          const Change& event, absl::Time now);
  // The store write of that Event (a new name each call).
  store::Op EventOp(const Json& obj, int64_t base, const Change& why);
  // The log line of a transition written for `obj`.
  void LogChange(const Json& obj, const Change& why) const;
  // Writes status (phase, reason, condition, message) of a job; keeps its revision.
  // status.reason is `status_reason` when given (a waiting job's WaitReason class, while its
  // condition keeps the Kubernetes reason Unschedulable), else why.reason. `extra_status`'s
  // keys are set in the status too (a null value removes the key). Releasing the placement
  // accounts for its GPU time; a terminal phase stamps completionTime (api/job_accounting.h).
  // SetJobPhase's change of a stored job `obj`; false (abandon the write) when obj is terminal in
  // another phase.
  static bool ApplyPhase(Json& obj, const std::string& phase, const Change& why,
                         bool clear_placement, const std::string& status_reason,
                         const Json* extra_status, absl::Time now);
  // The job's admission, when one is still pending, is written first: nothing else is written
  // about a job before it (a caller passing rec.phase then keeps the phase that write left).
  absl::Status SetJobPhase(JobRec& rec, const std::string& phase, const Change& why,
                           bool clear_placement, const std::string& status_reason = "",
                           const Json* extra_status = nullptr);
  // Unbinds a job in the store, then releases it and queues it again.
  absl::Status Requeue(JobRec& rec, const std::string& phase, const Change& why);
  void EvictNode(sched::NodeId id, const std::string& phase, const Change& why,
                 const std::function<bool(const JobRec&)>& pick = nullptr);
  // status.resumeFrom of `rec`: api::NewestReadyCheckpoint over its namespace's Checkpoints
  // (null when there is none).
  Json ResumePoint(const JobRec& rec);
  // --- GPUPools, Checkpoint retention, ModelVersion lineage (pools_lineage.cc; api/gpu_pool.h,
  // api/checkpoints.h, api/model_lineage.h) ---
  // Every stored object under `prefix` (`ns`/ when ns is non-empty) that parses.
  std::vector<Json> ListObjects(const std::string& prefix);
  // A Checkpoint turned Ready: when its TrainingJob has spec.checkpoint.keep > 0, the Checkpoints
  // api::CheckpointsBeyondRetention names (less any a ModelVersion of the namespace names in
  // spec.checkpoint: its lineage) are deleted in one Txn with an Event CheckpointsPruned on the
  // job naming them.
  void ApplyRetention(const Json& checkpoint);
  void OnPool(const std::string& key, const Json* obj);
  // Notes the stored facts pools_lineage.cc reads from a Node (labels, GPU type, the pool
  // cordon annotation, the drain taint) in rec.
  void NotePoolFacts(NodeRec& rec, const Json& obj);
  // Recomputes, when pools or nodes changed (or every queue_status_period, as allocations
  // move): each GPUPool's status (written when it differs), the cordon / drain the pools ask
  // of their nodes (written to the Node as `tessera cordon` / `tessera drain` do, marked with
  // kPoolCordonAnnotation so that ending it undoes only what a pool did), and the queues'
  // confinement (queued jobs of a queue whose node set changed are admitted again).
  void SyncPools(absl::Time now);
  // queue_pool_nodes_ from the pools and nodes known (Start, before the jobs are admitted).
  void InitPoolConfinement();
  // The pools' nodes as api::PoolNode.
  std::vector<api::PoolNode> PoolNodes() const;
  // Adds the required node affinity that confines `job` to the nodes of the pools naming its
  // queue (api::QueuePoolNodes; memoized in queue_pool_nodes_). No-op for unconfined queues.
  void ConfineToPools(model::Job& job) const;
  // Recomputes, when ModelVersions, InferenceServices or Checkpoints changed: each
  // ModelVersion's lineage status (api::ModelVersionStatus), written when it differs.
  void SyncModelVersions();
  // --- Elastic TrainingJobs (elastic.cc) ---
  // Drops the members of bound elastic job `rec` for which `lost` is true,
  // when at least spec.elastic.minReplicas remain: the store first (new
  // placement and generation, resumeFrom, Event ElasticShrink), then memory
  // (QueueManager::Resize). False when the job is not elastic, would fall
  // below its minimum or the write failed: the caller requeues it.
  bool Shrink(JobRec& rec, const std::function<bool(const sched::MemberPlacement&)>& lost,
              const Change& why);
  // After the queue cycle: running elastic jobs below their maximum get
  // their missing members if they fit (QueueManager::Grow), at most every
  // options.elastic_grow_interval; memory first, then the store (undone on
  // failure). Event ElasticGrow.
  void GrowElastic(absl::Time now);
  // --- Autoscaled InferenceServices (inference_autoscale.cc) ---
  // Reads an InferenceService's spec.slo, replicas bounds, status.replicaMetrics and
  // status.desiredReplicas into rec (every stored version the controller sees).
  void ObserveService(JobRec& rec, const Json& obj);
  // After the queue cycle: each bound service with an SLO gets its autoscaler's
  // recommendation; status.desiredReplicas follows it, and so do its replicas:
  // grown toward it (QueueManager::Grow capped at desired; memory first, then
  // the store) or shrunk to it (the store first, then QueueManager::Resize),
  // Event ScaledUp / ScaledDown with the reason.
  void AutoscaleServices(absl::Time now);
  // Writes status.desiredReplicas (and an Event when `why.record`).
  void WriteDesired(JobRec& rec, int32_t desired, const Change& why, absl::Time now);
  // job_restart.cc: a bound job whose member exited non-zero at the current
  // generation, with restarts left (spec.maxRestarts), is restarted in place:
  // the same placement at generation + 1 (every member stopped and started
  // again from status.resumeFrom), status.restarts + 1, Event Restarting.
  // The GPUs stay bound (memory unchanged). Idempotent: a failure of an older
  // generation, or a job without restarts left, changes nothing (the agent
  // then reports Failed).
  void MaybeRestart(JobRec& rec, const Json& obj);
  // member_reports.cc: the phase bound rec's members' reports call for (member_phase.h), noted
  // for WritePhases (a later report of the same job replaces it); a finished job is unbound in
  // the same write, then released.
  void ApplyMemberReports(JobRec& rec, const Json& obj);
  // Writes the phases ApplyMemberReports noted since the last call: every job's status and its
  // Event in one store transaction, each CAS'd on the revision its reports were read at (one
  // commit, one fsync, for a page of agents' reports). If the transaction fails (a job changed
  // under it), each is written on its own as before: read, check the binding, CAS. Step calls it
  // after each page of events and before any event that could requeue a job (a deletion, a Node
  // whose spec changed or whose GPU turned unhealthy, a queue or priority class; not a
  // heartbeat), so a finished job is released before a node's loss or a cycle can see it.
  void WritePhases();
  // The implicit noexcept moves call nlohmann::json's move, which only asserts; clang-tidy cannot
  // see that it never throws.
  // NOLINTNEXTLINE(bugprone-exception-escape)
  struct PendingPhase {
    std::string phase;
    std::string status_reason;
    Change why;
    int64_t generation = 0;  // the binding the reports were of
    int64_t revision = 0;    // the job's, at the last report
    Json obj;                // as stored at `revision`: written from, with no read
  };
  std::map<std::string, PendingPhase> pending_phases_;  // by store key, in key order
  // Commits `writes` (their ops moved out) in runs of consecutive writes that fit one store Txn
  // (Store::MaxTxnOps, store/txn_runs.h); `written(begin, end, rev)` after each run with the
  // Txn's result. Bindings, admissions and member-reported phases share commits this way.
  void CommitInRuns(
      const std::vector<PreparedWrite*>& writes,
      absl::FunctionRef<void(size_t begin, size_t end, const absl::StatusOr<int64_t>& rev)>
          written);
  // admission_writes.cc: SetJobPhase for many jobs at once. Each write is prepared (CAS on
  // `expected`, or on the revision read when -1; `current`, when not null, is the object as
  // stored at `expected`: no read), then committed in runs the store takes (CommitInRuns: one
  // commit for a page of jobs, not one each); the writes of a run that fails are each done on
  // their own by SetJobPhase, whose failures are logged. Returns the number of runs that failed.
  // NOLINTNEXTLINE(bugprone-exception-escape): as PendingPhase
  struct PhaseWrite {
    JobRec* rec = nullptr;
    std::string phase;
    Change why;
    bool clear_placement = false;
    std::string status_reason;
    Json extra_status;  // null: none
    int64_t expected = -1;
    const Json* current = nullptr;
  };
  int SetJobPhases(std::vector<PhaseWrite>& writes);
  // Nodes that registered since the last step, to be marked Ready (node_lifecycle.cc): written
  // together by WriteRegistrations (CommitInRuns), not one durable write each on this thread
  // (12,500 agents starting at once held the controller, and every binding, for a minute).
  struct PendingReady {
    std::string key;
    int64_t revision = 0;  // the registration's
    Json obj;              // the Node as registered
    Change event;
  };
  std::vector<PendingReady> pending_ready_;
  void WriteRegistrations();
  // Admissions (Pending -> Queued, the Admitted condition and Event) that Admit decided, written
  // together (SetJobPhases) by WriteAdmissions: after the cycle, which writes those it binds
  // together with their bindings (WriteBindings), and before anything else is written about
  // them. `only`: just that job's admission, if one is pending (before another write about it).
  void WriteAdmissions(const std::string* only = nullptr);
  // Whether Admit moved the job (Suspended, say) into its queue and that is not written yet:
  // its stored phase, and so rec.phase, still says otherwise.
  bool QueuedButNotWritten(const std::string& key) const;
  struct PendingAdmission {
    std::string phase;     // the job's, when admitted (Pending or Suspended)
    std::string to;        // Queued, or Suspended (spec.suspend)
    int64_t revision = 0;  // the job's, when admitted
    Json obj;              // as stored at `revision`
    Change why;
  };
  // By store key: a later decision about a job (suspended, then resumed in the same page)
  // replaces the earlier one.
  std::map<std::string, PendingAdmission> pending_admissions_;
  // Admissions held for the cycle at most (each holds its object); more are written per page.
  static constexpr size_t kMaxPendingAdmissions = 5000;
  // Re-places bound rec at generation + 1 with placement `p` (every member
  // restamped; agents restart them from status.resumeFrom, the newest Ready
  // Checkpoint, which the message names) if the stored binding is still the
  // one at rec.generation: one store transaction with why's Event. `also`
  // checks and sets the caller's own status fields; false abandons the write.
  // False when nothing was written.
  bool WriteGeneration(JobRec& rec, const sched::Placement& p, Change why, absl::Time now,
                       const std::function<bool(Json& status)>& also);
  // WriteGeneration of an elastic resize (replicas, lastResizeTime; then
  // rec.last_resize). `preempted`: the resize ends a preemption
  // (PreemptionPending goes False). `also`, when set, sets the caller's own
  // status fields too (an autoscaled service's desiredReplicas).
  bool WriteResize(JobRec& rec, const sched::Placement& p, const Change& why, absl::Time now,
                   bool preempted = false, const std::function<void(Json& status)>& also = nullptr);
  // The ElasticShrink change for `dropped` members of rec (`keep` left), with
  // the cause `why`.
  Change ShrinkChange(const JobRec& rec, const std::vector<sched::MemberPlacement>& dropped,
                      int32_t keep, const Change& why) const;
  // A QueueEvent kShrunk: the QueueManager shrank preemption victim `rec` in
  // memory; writes the smaller placement (ElasticShrink naming the
  // preemptor). False when it could not be written: memory then holds less
  // than the store, so the caller writes no binding of this cycle and
  // re-lists.
  bool WritePreemptionShrink(JobRec& rec, const sched::QueueEvent& ev, absl::Time now);
  JobRec* JobBySchedKey(const std::string& sched_key);

  store::Store& store_;
  Clock& clock_;
  const ControllerOptions options_;
  std::unique_ptr<sched::ClusterState> cluster_;
  // Every plugin a profile may name, with the pack plugins' shared context
  // (sched/pack/plugin_set.h). Declared before qm_, whose plugins point into it.
  std::unique_ptr<sched::pack::PluginSet> plugins_;
  std::unique_ptr<sched::QueueManager> qm_;
  std::vector<std::string> to_restore_;                        // store keys of bound jobs to charge
  std::vector<std::string> to_submit_;                         // store keys, deduplicated at flush
  absl::flat_hash_map<std::string, Json> queue_objects_;       // by name
  absl::flat_hash_map<std::string, std::string> queue_specs_;  // name -> spec dump
  absl::flat_hash_map<std::string, std::string> queue_status_written_;
  absl::flat_hash_map<std::string, absl::Time> queue_status_time_;
  std::string queue_problem_;  // why the last tree did not build
  bool queues_dirty_ = true;
  // Set by Start: the first tree built afterwards takes each queue's
  // fair-share history from its stored status (decayedUsage, burstCredit).
  bool seed_fair_share_ = true;
  bool capacity_dirty_ = true;
  bool resync_ = false;  // memory may differ from the store: re-list
  // A queue cycle runs when the store changed (every change of memory is
  // also a store write whose event comes back), at a preemption deadline, or
  // at least every options.idle_cycle; otherwise an idle server does not
  // re-try every pending job every tick.
  bool cycle_needed_ = true;
  absl::Time next_deadline_ = absl::InfiniteFuture();
  // (deadline, job key) of bound jobs with spec.maxRuntimeSeconds; an entry
  // whose job was unbound or rebound since is skipped when it comes due.
  std::set<std::pair<absl::Time, std::string>> runtime_deadlines_;
  EventCollector events_gc_;  // Event objects older than options_.event_ttl
  absl::Time last_cycle_ = absl::InfinitePast();
  // The fleet's observed GPU failure rate (ControllerOptions::checkpoint_gpu_mtbf):
  // GPUs that turned unhealthy, and GPU-seconds of fleet seen, since the first Start().
  int64_t gpu_failures_seen_ = 0;
  double gpu_seconds_seen_ = 0;
  absl::Time gpu_time_mark_ = absl::InfinitePast();
  // Per-GPU MTBF in seconds for Young/Daly intervals (see the option).
  double CheckpointGpuMtbfSeconds() const;
  std::unique_ptr<ControllerMetrics> metrics_;
  uint64_t gauges_generation_ = ~uint64_t{0};
  absl::Time gauges_at_ = absl::InfinitePast();                     // when UpdateGauges last ran
  absl::flat_hash_map<std::string, bool> exported_ready_;           // node -> value last exported
  absl::flat_hash_map<std::string, uint32_t> exported_unhealthy_;   // node -> mask last exported
  absl::flat_hash_map<std::string, std::unique_ptr<JobRec>> jobs_;  // by store key
  absl::flat_hash_map<std::string, JobRec*> by_sched_key_;
  absl::flat_hash_map<std::string, std::unique_ptr<NodeRec>> nodes_;  // by store key
  absl::flat_hash_map<std::string, int32_t> priority_classes_;
  std::map<std::string, Json> pools_;  // GPUPool objects by store key
  bool pools_dirty_ = true;
  absl::Time pools_synced_ = absl::InfinitePast();
  // Queue name -> the nodes its pools select (absent: not confined), as of the last SyncPools.
  std::map<std::string, std::vector<std::string>> queue_pool_nodes_;
  // Per InferenceService store key, what its lineage depends on (spec.modelVersion, phase,
  // deletion); a change marks the ModelVersions dirty.
  absl::flat_hash_map<std::string, std::string> service_lineage_;
  bool model_versions_dirty_ = true;
  int64_t revision_ = 0;
  bool started_ = false;
  uint64_t event_seq_ = 0;
  Stats stats_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace tessera::controller
