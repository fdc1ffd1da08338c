// KubeScheduler's state and loop (private to kubesched; see kube_scheduler.h for the algorithm).
// kube_scheduler.cc: start, stop, the loop, Nodes and Pods. kube_scheduler_jobs.cc: gangs, jobs,
// the cycle, bindings and what waiting Pods are told.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "kube/event_recorder.h"
#include "kube/informer.h"
#include "kube/objects.h"
#include "kubesched/api_writer.h"
#include "kubesched/claims.h"
#include "kubesched/kube_scheduler.h"
#include "model/job.h"
#include "sched/framework/cluster_state.h"

namespace tessera::kubesched {

class KubeScheduler::Impl {
 public:
  Impl(kube::RestClient& client, const Clock& clock, metrics::Registry& registry,
       KubeSchedulerOptions options);
  ~Impl();
  absl::Status Init();
  absl::Status Start();
  void Stop();
  KubeSchedulerStats stats() const;
  bool Settle(absl::Duration timeout);

 private:
  // --- inbox (informer threads -> loop) ---
  struct Inbox {
    std::set<std::string> pods, nodes, groups;  // groups: GangRef::Key()
    bool queues = false;
    struct BindDone {
      std::string job, pod;
      absl::Status status;
    };
    std::vector<BindDone> binds;
    struct EvictDone {
      std::string job, pod;
      absl::Status status;
    };
    std::vector<EvictDone> evictions;
    // Pods whose PodScheduled write lost a race (the Pod changed since it was read): told again.
    std::vector<std::string> retell;
    std::vector<std::string> regroup;  // gangs whose PodGroup status write lost a race
    bool claims = false;               // a ResourceClaim or DeviceClass changed
    bool empty() const {
      return pods.empty() && nodes.empty() && groups.empty() && !queues && binds.empty() &&
             evictions.empty() && retell.empty() && regroup.empty() && !claims;
    }
  };
  void Note(const std::function<void(Inbox&)>& f);

  // --- per-Pod and per-job state (loop thread only) ---
  enum class Role : uint8_t { kIgnored, kPending, kMember, kForeign };
  struct PodRec {
    Role role = Role::kIgnored;
    std::string uid, gang, job, node;
    absl::Time first_seen = absl::InfinitePast();  // when this scheduler first saw it pending
  };
  struct JobRec {
    std::string gang;               // the gang key ("p:NS/NAME" for a Pod alone)
    std::vector<std::string> pods;  // member group i = pods[i]
    std::shared_ptr<const model::Job> job;
    bool running = false;  // bound (else pending in the queue manager)
    int ended = 0;
    std::string reason_written;
    absl::Time last_checkpoint = absl::InfinitePast();
    absl::Time submitted_at = absl::InfinitePast();
    bool victim = false;    // signalled: its Pods are being evicted
    std::string preemptor;  // while victim
  };
  // A gang or lone Pod that waits before it becomes a job (PodGroup missing, too few Pods,
  // unknown queue, a request that cannot be placed): the Pods are told why, once per reason.
  struct Held {
    std::string reason;
    bool warning = false;  // a Warning Event (the user must act), not only the condition
    absl::Time since = absl::InfinitePast();  // held without a break since (Hold keeps it)
  };
  // How long a job or gang waits before its Pods are told why (PodScheduled=False, an Event,
  // the PodGroup's status): Pods of a gang arrive one by one and a burst of work is placed
  // within moments, and telling each transient state would multiply the API writes.
  static constexpr absl::Duration kTellAfter = absl::Seconds(1);
  // How often at most the loop looks for what to tell (TellWaiting scans every job, running or
  // not; a backlog's bindings echo back as thousands of Pod events, each a pass of the loop, and
  // scanning 12,000 jobs on each took a fifth of the scheduler's CPU). The idle tick tells too.
  static constexpr absl::Duration kTellEvery = absl::Milliseconds(200);

  void Loop();
  void Process(const Inbox& in, bool initial);
  void SyncNode(const std::string& key);
  void SyncPod(const std::string& key);
  void ReleasePod(const std::string& key, PodRec& rec);
  bool PlaceForeign(const std::string& key, PodRec& rec, const kube::Pod& pod);
  void RebuildNode(sched::NodeId id, model::Node node);
  void RebuildQueues();

  // kube_scheduler_jobs.cc
  void SyncGang(const std::string& gang);
  void Withdraw(const std::string& job_key);
  void MemberEnded(const std::string& job_key);
  absl::StatusOr<model::Job> BuildJob(const std::string& name,
                                      const std::vector<const kube::Pod*>& pods,
                                      const GangSpec& spec);
  void Submit(const std::string& gang, model::Job job, std::vector<std::string> pods);
  void RestoreJobs(const std::map<std::string, std::vector<std::string>>& by_job);
  void RunCycle();
  void BindJob(const std::string& job_key, const sched::Placement& p);
  void TellWaiting();
  void Hold(const std::string& gang, Held why);
  // PodScheduled=False (reason Unschedulable) with `message`, and a FailedScheduling Event.
  void WriteUnschedulable(const std::string& pod_key, const std::string& message);
  void OnBindDone(const Inbox::BindDone& b);
  // Preemption (kube_scheduler_jobs.cc): evict a victim's Pods; at its deadline what is left of
  // it is counted as foreign Pods.
  void EvictJob(const std::string& job_key, const std::string& preemptor);
  void VictimKilled(const std::string& job_key);
  void EvictionRefused(const std::string& victim, const absl::Status& why);
  // A job stepped out of the queue (its preemption refused, its gang timed out) waits before it
  // is submitted again.
  struct Blocked {
    absl::Time until;
    absl::Duration backoff;
  };
  // Withdraws pending job `key` and holds its gang for a backoff doubling from 10 s to 5 min with
  // each step-out, saying `why` and when it tries again.
  void BackOff(const std::string& key, const std::string& why);
  absl::flat_hash_map<std::string, Blocked> blocked_;  // gang -> (loop thread only)
  absl::Duration eviction_grace_;
  // A gang's PodGroup status: scheduler-plugins' phase (Pending, Scheduled), KEP-4671's
  // PodGroupScheduled condition with `why`; written when it changes.
  void WriteGroupStatus(const std::string& gang, bool scheduled, const std::string& why);
  void PostEvent(const kube::Pod& pod, const std::string& type, const std::string& reason,
                 const std::string& action, const std::string& note);

  std::optional<kube::Pod> GetPod(const std::string& key) const;

  // Looks for the optional APIs not served yet and watches those that are now (their
  // informers started; their first lists arrive as events). Loop thread (or Start).
  void DiscoverApis();
  // An informer on `t` whose events note `f(inbox, object)`; not started.
  std::unique_ptr<kube::Informer> MakeInformer(const kube::ResourceType& t,
                                               std::function<void(Inbox&, const kube::Json&)> f);
  // kube_scheduler_claims.cc: ResourceClaims for the devices of `tessera dra-driver` (claims.h).
  // The informers on ResourceSlices, ResourceClaims and DeviceClasses, when resource.k8s.io/v1
  // is served.
  void MakeDraInformers();
  // Every device of the node's ResourceSlices.
  std::vector<SliceDevice> NodeDevices(const std::string& node) const;
  // Each of the Pod's spec.resourceClaims: the claim's name (its own, or the one its template
  // made, from status.resourceClaimStatuses; "" while unknown) and the object (null while absent).
  struct PodClaimRef {
    std::string name;
    kube::ObjectPtr obj;
  };
  std::vector<PodClaimRef> PodClaimRefs(const kube::Pod& pod) const;
  // The node's GPUs from its slices when it advertises no nvidia.com/gpu.
  void ApplySliceGpus(model::Node* node) const;
  // The Pod's claims, ready to place (and noted for its binding), with the nodes whose devices
  // could hold them all in `nodes`. An error says why the Pod waits: Unavailable while a claim
  // does not exist yet, InvalidArgument for a claim tessera scheduler cannot place.
  absl::Status PlaceClaims(const kube::Pod& pod, std::set<std::string>* nodes);
  // At binding: each member's claims take their share of the member's GPUs; the claim status
  // writes, by Pod key. Empty and `why` set when the GPUs chosen do not satisfy a claim.
  std::map<std::string, std::vector<std::pair<PlacedClaim, nlohmann::json>>> ClaimAllocations(
      const JobRec& jr, const sched::Placement& p, std::string* why);
  // The devices (SliceDevice::Id) allocated to claims: the informer's allocations and those
  // this scheduler wrote.
  std::set<std::string> AllocatedDevices() const;
  // The GPU indices a bound Pod's own allocated claims hold on its node (sorted).
  std::vector<int> ClaimedGpus(const kube::Pod& pod) const;
  // A Pod's claims are no longer its own once it ends: out of reservedFor, deallocated.
  void ReleaseClaims(const std::string& pod_key);
  bool has_dra_ = false;
  std::unique_ptr<kube::Informer> slices_inf_, claims_inf_, classes_inf_;
  // Pod key -> the claims it was placed with (loop thread only).
  absl::flat_hash_map<std::string, std::vector<PlacedClaim>> pod_claims_;

  kube::RestClient& client_;
  const Clock& clock_;
  KubeSchedulerOptions opts_;
  bool has_coscheduling_ = false, has_kep_groups_ = false, has_queues_ = false;
  absl::Time next_discovery_ = absl::InfiniteFuture();  // loop thread
  // KEP-4671 PodGroups at the newest version served (v1beta1 where the apiserver serves it, as
  // kube-scheduler 1.37 reads them; else v1alpha3).
  kube::ResourceType kep_groups_;

  std::unique_ptr<kube::Informer> pods_inf_, nodes_inf_, cogroups_inf_, kgroups_inf_, queues_inf_;
  std::unique_ptr<ApiWriter> writer_;
  kube::EventRecorder events_;

  mutable absl::Mutex mu_;
  Inbox inbox_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool processing_ ABSL_GUARDED_BY(mu_) = false;  // the loop is applying an inbox
  KubeSchedulerStats stats_ ABSL_GUARDED_BY(mu_);
  std::thread loop_;

  // Loop thread only.
  sched::ClusterState cluster_;
  std::unique_ptr<sched::QueueManager> qm_;
  absl::flat_hash_map<std::string, PodRec> pods_;
  absl::flat_hash_map<std::string, JobRec> jobs_;
  absl::flat_hash_map<std::string, std::set<std::string>> gang_pods_;  // gang -> Pod keys
  absl::flat_hash_map<std::string, std::string> gang_job_;             // gang -> job key
  absl::flat_hash_map<std::string, Held> held_;                        // gang -> why
  absl::flat_hash_map<std::string, std::string> held_written_;         // Pod key -> reason told
  std::set<std::string> dirty_gangs_;
  absl::flat_hash_map<std::string, std::string> group_status_;  // gang -> status last written
  bool cycle_needed_ = true;
  absl::Time last_told_ = absl::InfinitePast();

  // Metrics (declared once).
  metrics::Family<metrics::Counter>& attempts_;
  metrics::Family<metrics::Histogram>& sli_;
  metrics::Family<metrics::Histogram>& algorithm_;
  metrics::Family<metrics::Gauge>& pending_;
  metrics::Family<metrics::Counter>& binds_;
};

}  // namespace tessera::kubesched
