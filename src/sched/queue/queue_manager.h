// QueueManager: the queueing layer over the scheduling core. Owns the queue
// tree (quotas, fair share), the running set, the pending jobs, and a
// Scheduler whose profile adds three plugins over the default ones: quota
// (PreFilter), reservation (Filter, for backfill) and preemption (PostFilter).
//
// One Cycle(now):
//  1. advance fair share to `now`; kill preemption victims whose grace period
//     has passed (they return to pending, protected from cycles);
//  2. order pending work: jobs whose planned preemption is complete first,
//     then by priority, then jobs their queues' guarantees cover before jobs
//     that would borrow, then gangs restarting after a failure
//     (SubmitOptions::restart), then by the hierarchical fair-share key of
//     their queue (QueueTree::Key), then by creation time;
//  3. for each job: Schedule. Placed: it starts. Not placed but preemption
//     found victims: the plan is verified with a dry run (victims taken out,
//     Evaluate, victims put back); then each victim gets a checkpoint signal
//     with a deadline (now + grace period) and the job is nominated: it runs
//     when its victims are gone (all of a plan's victims are released
//     together, at the deadline or once each has exited, so no other job
//     takes the room first), and with lend_reserved the nodes of its
//     verified placement are held for it from then (Reservation::hold). An
//     elastic victim of a shrink plan gives up only the plan's members
//     instead and runs on (kShrunk;
//     queue_manager_shrink.cc). Otherwise it waits with the scheduler's
//     reason, which names the queue and quota or the topology shortfall;
//  4. backfill (queue_manager_backfill.cc): the first `reservations` jobs
//     that wait for placement (quota allows it) each get a reservation at
//     their earliest start: running jobs are taken out in order of expected
//     end (start + runtime estimate, or the configured default) until a dry
//     run places the job off the nodes earlier reservations hold; the nodes
//     of that placement are reserved from that start. A later job starts now
//     only where its run (now + its runtime estimate) ends before every
//     reservation of the nodes it lands on, so it delays none of them. One
//     reservation is EASY backfill; more is conservative backfill, which
//     also keeps a long job out of the room the second big gang in line
//     drains for (the drain `sim replay` measured in issue 27). With
//     lend_reserved, a job that checkpoints and fails only for that room
//     may borrow it until a grace period before the reservation starts;
//     then the reserved job may preempt it.
//
// Admission is thus placement-aware: quota is charged only when a whole gang
// is placed, and a job its quota allows but no placement can hold is not
// admitted and says why (the Kueue #4329 case). An elastic gang
// (GangPolicy::elastic) is admitted when the quota holds its minMember
// smallest members, keeps as many placed members as the quota admits, and is
// charged what it holds; it may be resized while it runs (Resize, Grow).
//
// No clock: every call takes `now`; no I/O. Outcomes come back as events for
// the caller (server or simulator) to act on. Not thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "model/job.h"
#include "sched/framework/scheduler.h"
#include "sched/queue/admission_env.h"
#include "sched/queue/queue_tree.h"
#include "sched/queue/running_set.h"
#include "sched/queue/runtime_estimator.h"
#include "sched/queue/search_memo.h"
#include "sched/queue/wait_reason.h"

namespace tessera::sched {

class Preemption;

struct QueueManagerConfig {
  QueueTreeSpec tree;
  // Priority class name -> value.
  std::map<std::string, int32_t> priority_classes = {{"system-critical", 1000000},
                                                     {"production", 100000},
                                                     {"research", 1000},
                                                     {"development", 100}};
  std::string default_priority_class;  // "" : a job keeps its own priority
  PreemptionPolicy preemption;
  bool backfill = true;
  absl::Duration default_runtime = absl::Hours(1);
  // Waiting jobs that get a backfill reservation per cycle, in order (1..64).
  int32_t reservations = 1;
  // A job submitted without a runtime estimate gets one learned from the
  // jobs that completed (RuntimeEstimator: its queue, namespace and size)
  // instead of default_runtime, once there are enough of them.
  bool learn_runtimes = false;
  // Backfill lends reserved room to jobs that checkpoint when signalled
  // (SubmitOptions::checkpoints): such a job may start where a reservation
  // holds the nodes (or the quota) even though it would still run at the
  // reservation's start. Its loan ends a grace period before that start:
  // from then the reserved job may preempt it whatever their priorities and
  // queues, and it resumes from its checkpoint when room comes back. Only
  // loans of at least min_loan (and of preemption.min_runtime) are made, so
  // that a run is worth its restart. Needs the preemption plugin in the
  // profile (it does the eviction).
  bool lend_reserved = false;
  absl::Duration min_loan = absl::Minutes(30);
  // Bounds on the reservation search (releases simulated, dry runs).
  int32_t reservation_max_releases = 4096;
  // Per cycle, over all its reservations: a cycle's backfill planning costs
  // at most this many dry runs whatever `reservations` is.
  int32_t reservation_max_dry_runs = 32;
  // The scheduling profile the queue plugins (quota, reservation, preemption)
  // are added to.
  Profile profile = Profile::Default();
  // Registers plugins beyond the built-in ones (the pack policies with their
  // shared context, say) so that `profile` may name them; null: none.
  std::function<absl::Status(PluginRegistry*)> extra_plugins;
};

// Names the field ("priorityClasses.foo: ...").
absl::Status ValidateQueueManagerConfig(const QueueManagerConfig& c);

struct SubmitOptions {
  std::string priority_class;  // "": the default class, or the job's own priority
  // 0: a learned estimate (learn_runtimes), else default_runtime.
  absl::Duration expected_runtime = absl::ZeroDuration();
  // The job was running and a failure stopped it (its node or GPU was lost):
  // among jobs of equal priority and guarantee standing it goes before the
  // fair-share order, so a hardware fault does not send it to the back of
  // its queue (Slurm's requeue keeps a job's place the same way).
  bool restart = false;
  // Restore only: when the job's current run began (its binding, or its last
  // resize) and when it last checkpointed, so a restarted control plane
  // weighs victims (minimum runtime, work lost) and backfill ends as the
  // previous one did. InfinitePast: `now` / never.
  absl::Time started = absl::InfinitePast();
  absl::Time last_checkpoint = absl::InfinitePast();
  // The job writes a checkpoint when signalled and resumes from it
  // (QueueManagerConfig::lend_reserved may lend it reserved room).
  bool checkpoints = false;
};

enum class JobPhase { kUnknown, kPending, kNominated, kRunning, kTerminating };

struct QueueEvent {
  enum class Kind {
    kStarted,           // job: placed and bound
    kCheckpointSignal,  // job (victim): checkpoint now; killed at `deadline`
    kKilled,            // job (victim): resources taken back; it is pending again
    kNominated,         // job: will run once its victims are gone
    // job (elastic victim of a shrink plan): instead of kKilled, its
    // `dropped` members' resources were taken back (Resize); it runs on.
    kShrunk,
  };
  Kind kind;
  std::string job;
  std::string other;  // kCheckpointSignal/kKilled: the preemptor
  absl::Time deadline = absl::InfiniteFuture();
  std::string message;
  // kCheckpointSignal of a shrink plan: the members it will drop (empty: the
  // victim is evicted whole); kShrunk: the members dropped.
  std::vector<MemberPlacement> dropped;
};

struct Reservation {
  std::string job;
  absl::Time start;
  std::vector<NodeId> nodes;
  // What the job will charge its queue (QueueTree leaf `leaf`): a job that
  // runs past `start` is admitted only as if this were already charged, so
  // that backfill takes neither the reserved nodes nor the quota (a full
  // fleet's root capacity, a parent's limit) the job needs then.
  int leaf = -1;
  ResourceList demand;
  // The room a nominated preemptor's verified plan places it in, held from
  // its victims' kill deadline (`start`) while they checkpoint, so that no
  // job taking the free part meanwhile spoils the plan (with lend_reserved
  // only: a lender evicting its borrowers needs it). Not one of the
  // backfill.reservations.
  bool hold = false;
};

struct CycleReport {
  std::vector<QueueEvent> events;
  int32_t started = 0;
  int32_t preemptions = 0;  // plans signalled
  int32_t attempts = 0;     // Schedule calls (jobs skipped by shape not counted)
  int32_t loans = 0;        // of `started`, on reserved room lent (lend_reserved)
  // Jobs started before the reservation was made (all of them when none was).
  int32_t started_before_reservation = 0;
  // In the order they were made: the first is the head-of-line job's.
  std::vector<Reservation> reservations;
};

class QueueManager {
 public:
  // `cluster` is borrowed and must outlive the manager.
  static absl::StatusOr<std::unique_ptr<QueueManager>> Create(QueueManagerConfig config,
                                                              ClusterState* cluster);
  ~QueueManager();

  // Replaces the configuration. On any error nothing changes.
  absl::Status Reconfigure(QueueManagerConfig config);
  const QueueManagerConfig& config() const { return config_; }

  // A new job (validated; its queue must be a leaf queue).
  absl::Status Submit(model::Job job, const SubmitOptions& opts, absl::Time now);
  // A job that already holds `placement` in the cluster (bound by the caller,
  // e.g. rebuilt from a store after a restart): it runs from `now` on and is
  // charged to its queue, which must be a leaf. Nothing is scheduled.
  absl::Status Restore(model::Job job, const Placement& placement, const SubmitOptions& opts,
                       absl::Time now);
  // After a restart, a restored job (Restore) that had been signalled as a
  // preemption victim for `preemptor`, to be stopped at `deadline`, and for
  // an elastic shrink only its `dropping` members (group and member
  // ordinals; empty: the whole job): it is terminating again with that
  // deadline, and `preemptor`, when it is pending, is nominated with it, so
  // the preemption completes as decided instead of being searched again
  // (which could pick other victims and evict twice). FailedPrecondition,
  // changing nothing, when the job is not running or already terminating,
  // or when `preemptor` is not pending (it was deleted or has started): the
  // victim is spared, as Finish spares a cancelled preemptor's victims.
  // InvalidArgument when a dropping member is not one the job holds or would
  // leave fewer than its minMember.
  absl::Status RestoreVictim(absl::string_view victim, absl::string_view preemptor,
                             absl::Time deadline, const std::vector<MemberPlacement>& dropping);
  // Re-reads the fleet capacity (the root's limit) from the cluster, after
  // nodes were added or removed; fair-share state is kept.
  void RefreshCapacity();
  // The job ended (or was cancelled): its resources return.
  absl::Status Finish(absl::string_view key, absl::Time now);
  // Finish for a job that completed its work: with learn_runtimes, its run
  // (since its start, or its restart) teaches the runtime estimates.
  absl::Status Completed(absl::string_view key, absl::Time now);
  // The job wrote a checkpoint at `at`.
  absl::Status ReportCheckpoint(absl::string_view key, absl::Time at);
  // A signalled victim has exited before its deadline. Once every victim of
  // its plan has, the next Cycle releases them together (kKilled events, as
  // at the deadline) and the preemptor can start; until then nothing moves.
  // FailedPrecondition when the job is not being preempted.
  absl::Status VictimExited(absl::string_view key, absl::Time now);

  CycleReport Cycle(absl::Time now);

  // --- Elastic jobs (queue_manager_elastic.cc) ---
  // Replaces the placement of running job `key` by `placement` (a subset of
  // its members after a lost node, or more members after Grow): the cluster
  // binding, the running set and the queue charge follow, which is always
  // what the placed members demand. Members kept unchanged keep their GPUs;
  // members not in the current placement are Assume()d first, so on any
  // error nothing changes. FailedPrecondition for a job that is not elastic
  // (GangPolicy::elastic) or is being preempted; InvalidArgument for a member outside the job's
  // groups, twice in `placement`, or on a missing node or unhealthy GPU.
  absl::Status Resize(absl::string_view key, const Placement& placement, absl::Time now);
  // Tries to place running job `key`'s missing members (up to all of its
  // groups' counts) next to the ones it holds, through the same Scheduler
  // (a dry run of a job made of the missing members, on the job's GPU model,
  // without preemption), then Resize()s to the merged placement. Growing
  // comes after pending work, so it is refused while a preemption is in
  // flight or a pending job that its quota admits waits for room, except jobs
  // holding a backfill reservation, whose nodes it keeps off. Call it after
  // Cycle. It adds as many members as fit and as the
  // queue's quota admits.
  struct GrowResult {
    bool grown = false;
    int32_t added = 0;    // members added
    Placement placement;  // grown: the whole new placement
    std::string reason;   // not grown: why
  };
  // `up_to` > 0 grows to at most that many members in all (an autoscaled
  // service's desired replicas); 0: up to all of the groups' counts.
  GrowResult Grow(absl::string_view key, absl::Time now, int32_t up_to = 0);

  // Called after every Schedule attempt a Cycle makes, placed or not, with
  // the job as scheduled (quota-restricted models applied) and the result;
  // for decision tracing. Runs on the caller's thread inside Cycle and must
  // not call back into the manager. Empty (the default) costs nothing.
  using AttemptObserver = std::function<void(const model::Job&, const ScheduleResult&)>;
  void set_attempt_observer(AttemptObserver f) { attempt_observer_ = std::move(f); }

  // Seeds queue `name`'s fair-share history (decayed dominant share and burst
  // credit in share-seconds), e.g. from its stored status after a restart.
  // Reconfigure keeps the history of queues that survive by name.
  absl::Status SetFairShareHistory(absl::string_view name, double decayed_usage, double credit);

  // Introspection.
  JobPhase Phase(absl::string_view key) const;
  std::string WaitingReason(absl::string_view key) const;
  // The bounded class of WaitingReason (kNotTried for a key not pending).
  WaitReason WaitingReasonClass(absl::string_view key) const;
  absl::StatusOr<QueueStatus> Queue(absl::string_view name) const;
  const RunningSet& running() const { return running_; }
  const QueueTree& tree() const { return *tree_; }
  ClusterState& cluster() { return *cluster_; }
  size_t pending_size() const { return pending_.size(); }
  // The last cycle's reservations, in the order they were made.
  const std::vector<Reservation>& reservations() const { return reservations_; }
  // Job `key`'s reservation of the last cycle, or null.
  const Reservation* ReservationOf(absl::string_view key) const;
  // The earliest end after `now` of a loan of reserved room (lend_reserved);
  // InfiniteFuture when none. The caller cycles then, so that the lender may
  // take its room back on time.
  absl::Time NextLoanEnd(absl::Time now) const;
  // For tracing options (clock, explanations); placements go through Cycle.
  Scheduler& scheduler() { return *scheduler_; }
  // The preemption plan of the last Schedule that reached PostFilter.
  const struct VictimPlan& last_plan() const;
  // Preemption searches answered from the memo / remembered (benchmarks).
  int64_t search_memo_hits() const { return memo_.hits; }
  int64_t search_memo_stores() const { return memo_.stores; }

 private:
  struct Pending {
    std::shared_ptr<const model::Job> job;
    int leaf = -1;
    absl::Duration runtime;
    uint64_t seq = 0;
    std::string reason;
    WaitReason reason_class = WaitReason::kNotTried;
    bool nominated = false;
    absl::flat_hash_set<std::string> victims;  // while nominated
    absl::flat_hash_set<std::string> protected_jobs;
    absl::Time last_checkpoint = absl::InfinitePast();
    int32_t times_preempted = 0;
    bool restart = false;      // SubmitOptions::restart; cleared when it starts
    bool checkpoints = false;  // SubmitOptions::checkpoints
    // While nominated: the nodes its verified plan places it on (held for it
    // from its victims' kill deadline on, `planned_start`).
    std::vector<NodeId> planned_nodes;
    absl::Time planned_start = absl::InfiniteFuture();
    // Its last attempt failed for room, not quota: an elastic job may not
    // grow into room it waits for (Grow).
    bool waits_for_room = false;
    // Derived from the job, its leaf and the fleet's GPU models, which do
    // not change while it waits; valid while cache_epoch == cache_epoch_
    // (EnsureCached). `admission`: AdmissionDemand on its DemandModel;
    // `shape`: id of Shape() (-1: not keyed).
    uint64_t cache_epoch = 0;
    ResourceList admission;
    int32_t shape = -1;
    // Its place in the last cycle's order (OrderPending's starting point).
    uint64_t order_stamp = 0;
    uint32_t order_pos = 0;
  };
  // One pending job in a cycle's order (queue_manager_order.cc).
  struct OrderEntry {
    uint64_t rank;  // ready, priority, guarantee cover, restart, queue key
    absl::Time creation;
    uint64_t seq;
    Pending* p;
    const std::string* key;
    const model::Job* job;  // stable if pending_ moves its entries
  };
  QueueManager() = default;
  absl::Status Build(QueueManagerConfig config);
  void SetCapacities(QueueTree& t) const;
  // Every member's demand; with `counts` (one per group), that many members
  // of each group.
  ResourceList Demand(const model::Job& job, ModelId model, const int32_t* counts = nullptr) const;
  // What `members` of `job` demand (a partial gang is charged what it holds).
  ResourceList PlacedDemand(const model::Job& job, const std::vector<MemberPlacement>& members,
                            ModelId model) const;
  ModelId DemandModel(const model::Job& job) const;
  // GPU models of the fleet the job accepts (empty for a job without GPUs).
  std::vector<ModelId> GpuModelsOf(const model::Job& job) const;
  // What the quota must admit before a job is placed: all its members, or
  // for an elastic gang, its minMember smallest ones.
  ResourceList AdmissionDemand(const model::Job& job, ModelId model) const;
  // An elastic gang placed beyond what its queue's quota admits, or beyond
  // its GangPolicy::start_members, gives back its last members (never below
  // minMember).
  void FitToQuota(const Pending& p, Placement* placement);
  void SetEnv(const Pending& p, bool quota);
  // Recomputes env_.pledged and env_.leaving from the nominated jobs and the
  // signalled victims. O(running slots + pending).
  void RefreshReclaimView();
  // A key equal for jobs that schedule identically (same queue and priority).
  std::string Shape(const Pending& p) const;
  // Fills p's cached fields (admission demand, shape id) when stale.
  void EnsureCached(Pending& p);
  // Every pending job in scheduling order (step 2 of Cycle); sets the
  // queues' pending counts.
  void OrderPending(std::vector<OrderEntry>* out);
  // What the preemption search reads, as generation counters (search_memo.h).
  SearchMemo::Gens Gens() const {
    return {cluster_->generation(), tree_->usage_generation(), manager_gen_};
  }
  // The next time after `now` a running job reaches the minimum runtime
  // (becomes a preemption candidate); InfiniteFuture when none will.
  absl::Time NextCandidateTime(absl::Time now);
  // A loan of reserved room (QueueManagerConfig::lend_reserved): the jobs
  // whose reservations lend it (every one it overlaps), and until when.
  struct Loan {
    std::vector<std::string> lenders;
    absl::Time until;
  };
  void Start(Pending& p, const Placement& placement, absl::Time now, CycleReport* rep,
             const std::string& explanation = "", const Loan* loan = nullptr);
  // The loan a checkpointing job that would still run at the reservations
  // in `mask` could get now: until a grace period before the earliest of
  // them starts; nullopt when that is less than min_loan away.
  std::optional<Loan> LoanFor(uint64_t mask, absl::Time now) const;
  // Tries `job` (p's, or its copy restricted to the GPU models its quota
  // admits) once more on a loan of the reserved room it kept off (`mask`):
  // starts it and returns true when it fits; then p is gone from pending_.
  bool StartOnLoan(Pending& p, const model::Job& job, uint64_t mask, absl::Time now,
                   CycleReport* rep);
  // Whether `p` fits once `victims` are gone (a dry run); `nodes`, when not
  // null, gets the nodes of that placement.
  bool VerifyPlan(const Pending& p, const std::vector<std::string>& victims,
                  std::vector<NodeId>* nodes = nullptr);
  // A nominated job's planned room as a hold reservation (Reservation::hold).
  void HoldPlannedRoom(const Pending& p, const std::string& key);
  void Kill(const std::string& key, absl::Time now, CycleReport* rep);
  // The earliest start of `p` off the nodes the reservations made so far
  // hold; nullopt when none is found within the search bounds.
  std::optional<Reservation> ComputeReservation(const Pending& p, absl::Time now);
  // Adds `r` to reservations_ and env_.reserved_from; false (nothing added)
  // past 64 reservations, the most a mask names.
  bool AddReservation(Reservation r);
  // Bitmask of the reservations starting before `end` (the ones a job
  // running until then keeps off); the key of its backfill rule.
  uint64_t ReservationsBefore(absl::Time end) const;
  // Bitmask of every reservation made so far this cycle.
  uint64_t AllReservations() const {
    return reservations_.empty() ? 0 : ~uint64_t{0} >> (64 - reservations_.size());
  }
  // The nodes of the reservations in `mask`, sorted (the search memo's key).
  const std::vector<NodeId>& ReservedNodes(uint64_t mask);
  // Charges (`sign` +1) or uncharges (-1) the demand of the reservations in
  // `mask` to their queues, around an attempt that must leave them room.
  void ChargeReservations(uint64_t mask, int sign);
  // --- Preemption by shrinking elastic victims (queue_manager_shrink.cc) ---
  // Sets rj's `dropping` (and its charge) when `plan` shrinks it; false when
  // the plan takes it whole.
  bool MarkShrink(const struct VictimPlan& plan, RunningJob* rj) const;
  // TakeOut / PutBack of what a plan takes of `j`: all of it, or its
  // `dropping` members.
  void TakeOutPart(const RunningJob& j);
  void PutBackPart(const RunningJob& j);
  // A shrink victim's deadline (or its plan's victims exited): it gives up its
  // `dropping` members through Resize and reports kShrunk; when that fails
  // (a kept member's GPU turned unhealthy meanwhile) it is killed whole.
  void ShrinkVictim(const std::string& key, absl::Time now, CycleReport* rep);
  // What `members` of running job `j` are charged (its GPU model).
  ResourceList UsageOf(const RunningJob& j, const std::vector<MemberPlacement>& members) const;
  // After Build: the search's charge hook, and shrink victims' charges
  // against the new tree.
  void RefreshShrinkState();
  void TakeOut(const RunningJob& j);
  void PutBack(const RunningJob& j);

  QueueManagerConfig config_;
  ClusterState* cluster_ = nullptr;
  std::unique_ptr<QueueTree> tree_;
  RunningSet running_;
  AdmissionEnv env_;
  std::unique_ptr<Scheduler> scheduler_;
  Preemption* preemption_ = nullptr;
  absl::flat_hash_map<std::string, Pending> pending_;
  // Running jobs' protected sets and runtimes survive a kill.
  absl::flat_hash_map<std::string, Pending> running_meta_;
  std::vector<Reservation> reservations_;
  // Lender's key -> the jobs started on room its reservation lent. Entries
  // of jobs that ended since are harmless (looked up in running_).
  absl::flat_hash_map<std::string, std::vector<std::string>> loans_;
  RuntimeEstimator estimator_;
  // Dry runs left to this cycle's reservation searches.
  int32_t dry_runs_left_ = 0;
  // Backfill reservations made this cycle (holds not counted).
  int32_t backfill_reservations_ = 0;
  // ReservedNodes' answers of this cycle, by mask.
  absl::flat_hash_map<uint64_t, std::vector<NodeId>> reserved_node_sets_;
  uint64_t seq_ = 0;
  AttemptObserver attempt_observer_;
  // Caches of the cycle (queue_manager_order.cc): Pending's derived fields
  // are valid for cache_epoch_, bumped when the tree or the fleet's GPU
  // models change; shape strings interned to ids; failures of this cycle
  // per (shape id, reservations kept off: ReservationsBefore), valid while
  // their gen is failed_gen_; preemption searches that failed, across cycles.
  uint64_t cache_epoch_ = 1;
  int32_t cached_models_ = -1;
  absl::flat_hash_map<std::string, int32_t> shape_ids_;
  struct FailedShape {
    uint64_t gen = 0;
    std::string reason;
    WaitReason reason_class = WaitReason::kNoRoom;
    bool waits_for_room = false;
  };
  absl::flat_hash_map<std::pair<int32_t, uint64_t>, FailedShape> failed_shapes_;
  uint64_t failed_gen_ = 0;
  SearchMemo memo_;
  // Bumped when the running set or the reclaim bookkeeping changes in a way
  // the cluster and the tree do not show (a victim signalled, spared). Any
  // code that changes what the preemption search reads of a RunningJob
  // (terminating, start, priority, leaf, usage, members, a partial eviction
  // in flight) or of the reclaim view must bump it, or a remembered failed
  // search (memo_) may be reused on a changed state.
  uint64_t manager_gen_ = 0;
  std::vector<OrderEntry> order_;  // reused by Cycle
  std::vector<OrderEntry> fresh_entries_;
  uint64_t order_stamp_ = 1;
  size_t last_order_size_ = 0;
  struct {
    absl::Time now = absl::InfinitePast();
    uint64_t gen = ~uint64_t{0};
    absl::Time next;
  } next_candidate_;  // NextCandidateTime's last answer
};

}  // namespace tessera::sched
