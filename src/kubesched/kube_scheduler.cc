#include "kubesched/kube_scheduler.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "controller/queue_codec.h"
#include "kube/codec.h"
#include "kube/resource.h"
#include "kubesched/kube_scheduler_impl.h"

namespace tessera::kubesched {

namespace {

// Is `group_version` ("scheduling.x-k8s.io/v1alpha1") served, with `plural` in it?
bool Served(kube::RestClient& client, const std::string& group_version, const std::string& plural) {
  absl::StatusOr<kube::HttpResult> r = client.Raw("GET", "/apis/" + group_version);
  if (!r.ok() || r->status != 200) return false;
  const kube::Json j = kube::Json::parse(r->body, nullptr, false);
  if (j.is_discarded() || !j.contains("resources")) return false;
  for (const kube::Json& res : j["resources"]) {
    if (res.value("name", "") == plural) return true;
  }
  return false;
}

// Equal for scheduling purposes (everything translate.h reads, cordon aside).
bool SameShape(const model::Node& a, const model::Node& b) {
  if (a.gpus.size() != b.gpus.size() || a.gpu_model() != b.gpu_model()) return false;
  for (size_t i = 0; i < a.gpus.size(); ++i) {
    if (a.gpus[i].memory_mib != b.gpus[i].memory_mib) return false;
  }
  return a.topology == b.topology && a.cpu_milli == b.cpu_milli && a.memory_mib == b.memory_mib &&
         a.labels == b.labels && a.taints == b.taints && a.rack == b.rack && a.block == b.block &&
         a.max_members == b.max_members && a.scalars == b.scalars;
}

}  // namespace

KubeScheduler::Impl::Impl(kube::RestClient& client, const Clock& clock, metrics::Registry& registry,
                          KubeSchedulerOptions options)
    : client_(client),
      clock_(clock),
      opts_(std::move(options)),
      events_(client_, clock_, "tessera.dev/scheduler", opts_.identity, opts_.log),
      attempts_(registry.AddCounter("scheduler_schedule_attempts_total",
                                    "Scheduling attempts of Pods, by result (scheduled, "
                                    "unschedulable, error): one per Pod of a job tried.",
                                    {"result", "profile"})),
      sli_(registry.AddHistogram(
          "scheduler_pod_scheduling_sli_duration_seconds",
          "From a Pod's creation to its binding accepted by the API, for Pods Tessera bound.",
          {"attempts"}, {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300})),
      algorithm_(registry.AddHistogram("scheduler_scheduling_algorithm_duration_seconds",
                                       "One scheduling cycle over every pending job.", {},
                                       {0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5})),
      pending_(registry.AddGauge("scheduler_pending_pods",
                                 "Pods waiting for Tessera, by queue: active (in a queue's "
                                 "pending jobs) or gated (held before a queue: gang incomplete, "
                                 "unknown queue, request that cannot be placed).",
                                 {"queue"})),
      binds_(registry.AddCounter("tessera_kube_bindings_total",
                                 "pods/binding requests, by result (ok, error).", {"result"})) {}

KubeScheduler::Impl::~Impl() { Stop(); }

absl::Status KubeScheduler::Impl::Init() {
  // Victims get the configured grace period through the Eviction API; the queue manager's own
  // deadline is pushed out of reach, so that only the victims' Pods being gone (VictimExited)
  // releases their capacity to the preemptor: an eviction that is refused never lets two jobs
  // hold the same GPUs.
  eviction_grace_ = opts_.queues.preemption.grace_period;
  opts_.queues.preemption.grace_period = absl::Hours(24 * 365);
  const sched::QueueManagerConfig& c = opts_.queues;
  std::vector<std::string> problems;
  absl::StatusOr<std::unique_ptr<sched::QueueManager>> qm = sched::QueueManager::Create(
      controller::BuildQueueConfig(c, {}, {controller::kDefaultQueue}, &problems), &cluster_);
  if (!qm.ok()) return qm.status();
  qm_ = *std::move(qm);
  return absl::OkStatus();
}

void KubeScheduler::Impl::Note(const std::function<void(Inbox&)>& f) {
  absl::MutexLock l(&mu_);
  f(inbox_);
}

std::unique_ptr<kube::Informer> KubeScheduler::Impl::MakeInformer(
    const kube::ResourceType& t, std::function<void(Inbox&, const kube::Json&)> f) {
  kube::ReflectorOptions ro;
  ro.type = t;
  ro.log = opts_.log;
  auto inf = std::make_unique<kube::Informer>(client_, ro);
  auto note = [this, f](const kube::ObjectPtr& o) { Note([&](Inbox& in) { f(in, *o); }); };
  inf->AddEventHandlers({[note](const kube::ObjectPtr& o, bool) { note(o); },
                         [note](const kube::ObjectPtr&, const kube::ObjectPtr& o) { note(o); },
                         [note](const kube::ObjectPtr& o) { note(o); }});
  return inf;
}

void KubeScheduler::Impl::DiscoverApis() {
  const bool started = loop_.joinable();  // later passes start what they add
  std::vector<kube::Informer*> added;
  std::vector<std::string> names;
  if (!has_coscheduling_ && Served(client_, "scheduling.x-k8s.io/v1alpha1", "podgroups")) {
    has_coscheduling_ = true;
    cogroups_inf_ = MakeInformer(
        kube::CoschedulingPodGroupsResource(),
        [](Inbox& in, const kube::Json& o) { in.groups.insert("x:" + kube::KeyOf(o)); });
    added.push_back(cogroups_inf_.get());
    names.push_back("scheduling.x-k8s.io/v1alpha1 podgroups");
  }
  if (!has_kep_groups_) {
    for (const char* v : {"v1beta1", "v1alpha3"}) {
      if (Served(client_, absl::StrCat("scheduling.k8s.io/", v), "podgroups")) {
        has_kep_groups_ = true;
        kep_groups_ = kube::PodGroupsResource();
        kep_groups_.version = v;
        kgroups_inf_ = MakeInformer(kep_groups_, [](Inbox& in, const kube::Json& o) {
          in.groups.insert("k:" + kube::KeyOf(o));
        });
        added.push_back(kgroups_inf_.get());
        names.push_back(absl::StrCat("scheduling.k8s.io/", v, " podgroups"));
        break;
      }
    }
  }
  if (!has_queues_ && Served(client_, "tessera.dev/v1", "queues")) {
    has_queues_ = true;
    queues_inf_ = MakeInformer(kube::QueuesResource(),
                               [](Inbox& in, const kube::Json&) { in.queues = true; });
    added.push_back(queues_inf_.get());
    names.push_back("tessera.dev/v1 queues");
  }
  if (!has_dra_ && Served(client_, "resource.k8s.io/v1", "resourceslices")) {
    has_dra_ = true;
    MakeDraInformers();
    for (auto* p : {&slices_inf_, &claims_inf_, &classes_inf_}) added.push_back(p->get());
    names.push_back("resource.k8s.io/v1");
  }
  if (!started) return;  // Start starts and syncs every informer
  for (kube::Informer* i : added) i->Start();
  if (!names.empty()) {
    opts_.log.Info("API now served; watching it", {{"apis", absl::StrJoin(names, ", ")}});
  }
}

absl::Status KubeScheduler::Impl::Start() {
  kep_groups_ = kube::PodGroupsResource();
  nodes_inf_ = MakeInformer(kube::NodesResource(), [](Inbox& in, const kube::Json& o) {
    in.nodes.insert(kube::KeyOf(o));
  });
  pods_inf_ = MakeInformer(kube::PodsResource(),
                           [](Inbox& in, const kube::Json& o) { in.pods.insert(kube::KeyOf(o)); });
  DiscoverApis();
  opts_.log.Info("scheduler APIs", {{"coschedulingPodGroups", has_coscheduling_ ? "yes" : "no"},
                                    {"kepPodGroups", has_kep_groups_ ? kep_groups_.version : "no"},
                                    {"queues", has_queues_ ? "yes" : "no"},
                                    {"resourceClaims", has_dra_ ? "yes" : "no"}});
  next_discovery_ = absl::Now() + opts_.api_rediscovery;
  std::vector<kube::Informer*> all;
  for (auto* p : {&nodes_inf_, &pods_inf_, &cogroups_inf_, &kgroups_inf_, &queues_inf_,
                  &slices_inf_, &claims_inf_, &classes_inf_}) {
    if (*p) all.push_back(p->get());
  }
  const absl::Time started = clock_.Now();
  for (kube::Informer* i : all) i->Start();
  absl::Time deadline = absl::Now() + opts_.sync_timeout;
  for (kube::Informer* i : all) {
    if (!i->WaitForSync(deadline - absl::Now())) {
      return absl::UnavailableError(
          absl::StrCat("the informers' first lists did not complete within ",
                       absl::FormatDuration(opts_.sync_timeout)));
    }
  }
  writer_ = std::make_unique<ApiWriter>(opts_.api_writers);
  // The first pass: everything the caches hold, in an order that rebuilds (queues, nodes, then
  // Pods); events that arrived meanwhile are in the inbox and are applied again, harmlessly.
  Inbox first;
  {
    absl::MutexLock l(&mu_);
    first = std::move(inbox_);
    inbox_ = Inbox{};
  }
  first.queues = has_queues_;
  for (const std::string& k : nodes_inf_->store().ListKeys()) first.nodes.insert(k);
  for (const std::string& k : pods_inf_->store().ListKeys()) first.pods.insert(k);
  const absl::Time synced = clock_.Now();
  opts_.log.Info("caches filled",
                 {{"nodes", absl::StrCat(first.nodes.size())},
                  {"pods", absl::StrCat(first.pods.size())},
                  {"seconds", absl::StrCat(absl::ToDoubleSeconds(synced - started))}});
  Process(first, /*initial=*/true);
  opts_.log.Info("first pass done",
                 {{"seconds", absl::StrCat(absl::ToDoubleSeconds(clock_.Now() - synced))}});
  loop_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

void KubeScheduler::Impl::Stop() {
  {
    absl::MutexLock l(&mu_);
    if (stop_) return;
    stop_ = true;
  }
  if (loop_.joinable()) loop_.join();
  for (auto* p : {&pods_inf_, &nodes_inf_, &cogroups_inf_, &kgroups_inf_, &queues_inf_,
                  &slices_inf_, &claims_inf_, &classes_inf_}) {
    if (*p) (*p)->Stop();
  }
  if (writer_) writer_->Close();
}

KubeSchedulerStats KubeScheduler::Impl::stats() const {
  absl::MutexLock l(&mu_);
  return stats_;
}

void KubeScheduler::Impl::Loop() {
  for (;;) {
    Inbox in;
    {
      absl::MutexLock l(&mu_);
      // Wake on work, or each second for what time alone changes (fair share, gang timeouts).
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !inbox_.empty(); };
      mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Seconds(1));
      if (stop_) return;
      in = std::move(inbox_);
      inbox_ = Inbox{};
      processing_ = true;
    }
    if (in.empty()) cycle_needed_ = true;  // the tick
    if (absl::Now() >= next_discovery_) {
      next_discovery_ = absl::Now() + opts_.api_rediscovery;
      if (!has_coscheduling_ || !has_kep_groups_ || !has_queues_ || !has_dra_) DiscoverApis();
    }
    Process(in, /*initial=*/false);
    absl::MutexLock l(&mu_);
    processing_ = false;
  }
}

bool KubeScheduler::Impl::Settle(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    if (writer_ && !writer_->WaitIdle(deadline - absl::Now())) return false;
    {
      absl::MutexLock l(&mu_);
      auto quiet = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || (inbox_.empty() && !processing_);
      };
      if (!mu_.AwaitWithTimeout(absl::Condition(&quiet), deadline - absl::Now())) return false;
    }
    // Processing may have posted writes, and their answers come back through the inbox.
    if (!writer_ || writer_->pending() == 0) {
      absl::MutexLock l(&mu_);
      if (inbox_.empty() && !processing_) return true;
    }
    if (absl::Now() >= deadline) return false;
  }
}

void KubeScheduler::Impl::Process(const Inbox& in, bool initial) {
  if (in.queues) RebuildQueues();
  for (const std::string& k : in.nodes) SyncNode(k);
  std::map<std::string, std::vector<std::string>> restore;  // job -> its bound Pods
  for (const std::string& k : in.pods) {
    if (initial) {
      std::optional<kube::Pod> p = GetPod(k);
      if (p && !p->spec.node_name.empty() && !PodTerminal(*p) &&
          p->spec.scheduler_name == opts_.scheduler_name) {
        if (auto it = p->metadata.annotations.find(kJobAnnotation);
            it != p->metadata.annotations.end()) {
          restore[it->second].push_back(k);
          continue;
        }
      }
    }
    SyncPod(k);
  }
  if (!restore.empty()) RestoreJobs(restore);
  for (const Inbox::BindDone& b : in.binds) OnBindDone(b);
  for (const std::string& g : in.regroup) {
    group_status_.erase(g);
    if (auto j = gang_job_.find(g); j != gang_job_.end()) {
      if (auto r = jobs_.find(j->second); r != jobs_.end()) r->second.reason_written.clear();
    }
  }
  for (const std::string& pk : in.retell) {
    held_written_.erase(pk);
    if (auto p = pods_.find(pk); p != pods_.end() && !p->second.job.empty()) {
      if (auto j = jobs_.find(p->second.job); j != jobs_.end()) j->second.reason_written.clear();
    }
  }
  for (const Inbox::EvictDone& e : in.evictions) {
    {
      absl::MutexLock l(&mu_);
      ++(e.status.ok() ? stats_.evictions : stats_.evictions_refused);
    }
    if (!e.status.ok()) EvictionRefused(e.job, e.status);
  }
  // Preemptors held after a refused eviction try again once their backoff has passed.
  for (const auto& [gang, b] : blocked_) {
    if (clock_.Now() >= b.until && held_.contains(gang)) dirty_gangs_.insert(gang);
  }
  for (const std::string& g : in.groups) dirty_gangs_.insert(g);
  if (in.claims) {
    // A claim, a DeviceClass or a node's devices changed: waiting Pods with claims are built
    // again (where their claims could go may have changed).
    std::vector<std::string> rebuild;
    for (const auto& [key, jr] : jobs_) {
      if (jr.running) continue;
      for (const std::string& pk : jr.pods) {
        if (pod_claims_.contains(pk)) {
          rebuild.push_back(key);
          break;
        }
      }
    }
    for (const std::string& key : rebuild) Withdraw(key);
    for (const auto& [key, rec] : pods_) {
      if (rec.role == Role::kPending && rec.job.empty()) dirty_gangs_.insert(rec.gang);
    }
  }
  std::set<std::string> gangs = std::move(dirty_gangs_);
  dirty_gangs_.clear();
  for (const std::string& g : gangs) SyncGang(g);
  if (cycle_needed_) RunCycle();
  if (const absl::Time now = clock_.Now(); in.empty() || now - last_told_ >= kTellEvery) {
    last_told_ = now;
    TellWaiting();
  }
  absl::MutexLock l(&mu_);
  stats_.nodes = cluster_.num_nodes();
  stats_.pending_jobs = static_cast<int64_t>(qm_->pending_size());
}

std::optional<kube::Pod> KubeScheduler::Impl::GetPod(const std::string& key) const {
  kube::ObjectPtr o = pods_inf_->store().Get(key);
  if (!o) return std::nullopt;
  absl::StatusOr<kube::Pod> p = kube::DecodePod(*o);
  if (!p.ok()) {
    opts_.log.Warn("a Pod the API sent does not decode",
                   {{"pod", key}, {"error", p.status().ToString()}});
    return std::nullopt;
  }
  return *std::move(p);
}

// --- Nodes -------------------------------------------------------------------------------------

void KubeScheduler::Impl::SyncNode(const std::string& key) {
  std::optional<sched::NodeId> id = cluster_.FindNode(key);
  kube::ObjectPtr o = nodes_inf_->store().Get(key);
  std::optional<model::Node> want;
  if (o) {
    absl::StatusOr<kube::Node> n = kube::DecodeNode(*o);
    absl::StatusOr<model::Node> m =
        n.ok() ? NodeFromKube(*n, opts_.labels) : absl::StatusOr<model::Node>(n.status());
    if (m.ok()) {
      want = *std::move(m);
      ApplySliceGpus(&*want);
    } else {
      opts_.log.Warn("node left out of scheduling",
                     {{"node", key}, {"error", m.status().ToString()}});
    }
  }
  cycle_needed_ = true;
  if (!want) {
    if (!id) return;
    // Work on a node that is gone ends with it: its Pods are the garbage collector's.
    std::vector<std::string> on_node;
    for (const auto& [job, p] : cluster_.bound()) {
      for (const sched::MemberPlacement& m : p.members) {
        if (m.node == *id) {
          on_node.push_back(job);
          break;
        }
      }
    }
    for (const std::string& job : on_node) {
      if (jobs_.contains(job)) {
        (void)qm_->Finish(job, clock_.Now());
        for (const std::string& pk : jobs_[job].pods) {
          if (auto it = pods_.find(pk); it != pods_.end()) it->second = PodRec{};
        }
        jobs_.erase(job);
      }
    }
    std::vector<std::string> released;
    (void)cluster_.RemoveNode(key, &released);
    for (const std::string& r : released) {
      if (absl::StartsWith(r, "~")) {
        if (auto it = pods_.find(r.substr(1)); it != pods_.end()) it->second = PodRec{};
      }
    }
    qm_->RefreshCapacity();
    return;
  }
  if (!id) {
    absl::StatusOr<sched::NodeId> added = cluster_.AddNode(*std::move(want));
    if (!added.ok()) {
      opts_.log.Warn("node left out of scheduling",
                     {{"node", key}, {"error", added.status().ToString()}});
      return;
    }
    qm_->RefreshCapacity();
    // Pods already bound to it (seen before their node) occupy it now.
    for (auto& [pk, rec] : pods_) {
      if (rec.role == Role::kIgnored && !rec.node.empty() && rec.node == key) {
        if (std::optional<kube::Pod> p = GetPod(pk)) PlaceForeign(pk, rec, *p);
      }
    }
    return;
  }
  const model::Node& have = cluster_.node(*id);
  if (SameShape(have, *want)) {
    // GPU health (allocatable shrank or grew back): the work on it stays, new work avoids it.
    for (size_t g = 0; g < want->gpus.size(); ++g) {
      const bool healthy = want->gpus[g].health == model::GpuHealth::kHealthy;
      if (cluster_.state(*id).healthy(static_cast<int>(g)) != healthy) {
        std::vector<std::string> affected;
        (void)cluster_.SetGpuHealth(*id, static_cast<int>(g), healthy, &affected);
      }
    }
    if (have.unschedulable != want->unschedulable ||
        cluster_.state(*id).schedulable == want->unschedulable) {
      (void)cluster_.SetSchedulable(*id, !want->unschedulable);
    }
    return;
  }
  RebuildNode(*id, *std::move(want));
}

// The node's capacity, labels or taints changed: take its work off, replace the node, put the
// work back on the same GPUs (what no longer fits is logged and left unaccounted).
void KubeScheduler::Impl::RebuildNode(sched::NodeId id, model::Node node) {
  const std::string name = node.name;
  struct Moved {
    std::string key;
    sched::Placement placement;
  };
  std::vector<Moved> moved;
  for (const auto& [job, p] : cluster_.bound()) {
    for (const sched::MemberPlacement& m : p.members) {
      if (m.node == id) {
        moved.push_back({job, p});
        break;
      }
    }
  }
  for (const Moved& m : moved) {
    if (jobs_.contains(m.key)) {
      (void)qm_->Finish(m.key, clock_.Now());
    } else {
      (void)cluster_.Release(m.key);
    }
  }
  std::vector<std::string> released;
  (void)cluster_.RemoveNode(name, &released);
  absl::StatusOr<sched::NodeId> nid = cluster_.AddNode(std::move(node));
  qm_->RefreshCapacity();
  for (Moved& m : moved) {
    bool ok = nid.ok();
    std::vector<sched::MemberPlacement> assumed;
    for (sched::MemberPlacement& mp : m.placement.members) {
      if (!ok) break;
      if (mp.node == id) mp.node = *nid;
      if (cluster_.Assume(mp).ok()) {
        assumed.push_back(mp);
      } else {
        ok = false;
      }
    }
    if (ok) ok = cluster_.Bind(m.placement).ok();
    if (ok && jobs_.contains(m.key)) {
      ok = qm_->Restore(*jobs_[m.key].job, m.placement, {}, clock_.Now()).ok();
      if (!ok) (void)cluster_.Release(m.key);
    } else if (!ok) {
      for (const sched::MemberPlacement& mp : assumed) cluster_.Forget(mp);
    }
    if (!ok) {
      opts_.log.Warn("work no longer fits its changed node; left unaccounted",
                     {{"node", name}, {"job", m.key}});
      absl::MutexLock l(&mu_);
      ++stats_.unaccounted_pods;
    }
  }
}

// --- Queues ------------------------------------------------------------------------------------

void KubeScheduler::Impl::RebuildQueues() {
  std::vector<kube::Json> objs;
  if (queues_inf_) {
    for (const kube::ObjectPtr& o : queues_inf_->store().List()) objs.push_back(*o);
  }
  std::vector<std::string> problems;
  sched::QueueManagerConfig c =
      controller::BuildQueueConfig(opts_.queues, objs, {controller::kDefaultQueue}, &problems);
  for (const std::string& p : problems) opts_.log.Warn("queue left out", {{"problem", p}});
  if (absl::Status s = qm_->Reconfigure(std::move(c)); !s.ok()) {
    opts_.log.Warn("queues not changed", {{"error", s.ToString()}});
    return;
  }
  cycle_needed_ = true;
  // Held gangs may name a queue that now exists.
  for (const auto& [gang, held] : held_) dirty_gangs_.insert(gang);
}

// --- Pods --------------------------------------------------------------------------------------

void KubeScheduler::Impl::SyncPod(const std::string& key) {
  std::optional<kube::Pod> pod = GetPod(key);
  PodRec& rec = pods_[key];
  const bool live = pod && !PodTerminal(*pod);
  if (!live || (pod && pod->metadata.uid != rec.uid && !rec.uid.empty())) {
    // Ended, deleted, or replaced by a new Pod of the same name.
    ReleasePod(key, rec);
    if (!pod) {
      held_written_.erase(key);
      pods_.erase(key);
      return;
    }
    if (!live) {
      rec.uid = pod->metadata.uid;
      return;
    }
  }
  rec.uid = pod->metadata.uid;
  const std::string& node = pod->spec.node_name;
  if (!node.empty()) {
    if (rec.role == Role::kMember && rec.node == node) {  // our binding, seen
      auto a = pod->metadata.annotations.find(kLastCheckpointAnnotation);
      auto j = jobs_.find(rec.job);
      absl::Time t;
      std::string err;
      if (a != pod->metadata.annotations.end() && j != jobs_.end() &&
          absl::ParseTime(absl::RFC3339_full, a->second, &t, &err) &&
          t > j->second.last_checkpoint) {
        j->second.last_checkpoint = t;
        (void)qm_->ReportCheckpoint(rec.job, t);
      }
      return;
    }
    if (rec.role == Role::kForeign && rec.node == node) return;
    if (rec.role == Role::kMember || rec.role == Role::kPending) {
      // Bound by someone else, or bound elsewhere than we asked.
      ReleasePod(key, rec);
    }
    PlaceForeign(key, rec, *pod);
    return;
  }
  if (pod->spec.scheduler_name != opts_.scheduler_name || !pod->spec.scheduling_gates.empty() ||
      pod->metadata.deletion_timestamp) {
    if (rec.role != Role::kIgnored) ReleasePod(key, rec);
    return;
  }
  if (rec.role == Role::kMember) return;  // a binding in flight
  std::optional<GangRef> g = GangOf(*pod);
  const std::string gang = g ? g->Key() : "p:" + key;
  if (rec.role == Role::kPending && rec.gang == gang) {
    dirty_gangs_.insert(gang);  // its spec may have changed (a toleration, say)
    return;
  }
  if (rec.role != Role::kIgnored) ReleasePod(key, rec);
  rec.role = Role::kPending;
  rec.gang = gang;
  if (rec.first_seen == absl::InfinitePast()) rec.first_seen = clock_.Now();
  gang_pods_[gang].insert(key);
  dirty_gangs_.insert(gang);
}

// Whatever the Pod held or waited for, it no longer does.
void KubeScheduler::Impl::ReleasePod(const std::string& key, PodRec& rec) {
  cycle_needed_ = true;
  ReleaseClaims(key);
  switch (rec.role) {
    case Role::kIgnored:
      break;
    case Role::kForeign:
      (void)cluster_.Release("~" + key);
      {
        absl::MutexLock l(&mu_);
        --stats_.foreign_pods;
      }
      break;
    case Role::kPending:
    case Role::kMember:
      if (!rec.job.empty()) MemberEnded(rec.job);
      break;
  }
  if (!rec.gang.empty()) {
    if (auto it = gang_pods_.find(rec.gang); it != gang_pods_.end()) {
      it->second.erase(key);
      if (it->second.empty()) gang_pods_.erase(it);
    }
    dirty_gangs_.insert(rec.gang);
  }
  const std::string uid = rec.uid;
  rec = PodRec{};
  rec.uid = uid;
}

// A Pod bound by another scheduler (or by us before a restart that could not be rebuilt) takes
// its requests on its node: the GPUs of its tessera.dev/gpus annotation, else the lowest free.
bool KubeScheduler::Impl::PlaceForeign(const std::string& key, PodRec& rec, const kube::Pod& pod) {
  rec.role = Role::kIgnored;
  rec.node = pod.spec.node_name;
  std::optional<sched::NodeId> id = cluster_.FindNode(rec.node);
  if (!id) return false;  // its node comes later (SyncNode places it then)
  absl::StatusOr<model::ResourceRequest> req = PodRequest(pod);
  if (!req.ok()) return false;
  sched::MemberPlacement m;
  m.node = *id;
  m.cpu_milli = req->cpu_milli;
  m.memory_mib = req->memory_mib;
  m.scalars = req->scalars;
  const sched::NodeState& st = cluster_.state(*id);
  // GPUs its ResourceClaims hold (kubesched/claims.h) count as its own.
  const std::vector<int> claimed = ClaimedGpus(pod);
  req->gpus += static_cast<int32_t>(claimed.size());
  std::vector<int> gpus = AnnotatedGpus(pod);
  if (static_cast<int>(gpus.size()) != req->gpus && !claimed.empty() &&
      static_cast<int>(claimed.size()) == req->gpus) {
    gpus = claimed;
  }
  if (static_cast<int>(gpus.size()) != req->gpus) {
    gpus.clear();
    for (int g = 0; g < st.num_gpus && static_cast<int>(gpus.size()) < req->gpus; ++g) {
      if (st.healthy(g) && st.free_milli[g] == model::kMilliPerGpu) gpus.push_back(g);
    }
  }
  for (int g : gpus) m.gpus.push_back({static_cast<int8_t>(g), model::kMilliPerGpu});
  bool ok = static_cast<int>(gpus.size()) == req->gpus && cluster_.Assume(m).ok();
  if (ok) {
    sched::Placement p;
    p.job_key = "~" + key;
    p.members.push_back(m);
    ok = cluster_.Bind(std::move(p)).ok();
    if (!ok) cluster_.Forget(m);
  }
  absl::MutexLock l(&mu_);
  if (!ok) {
    ++stats_.unaccounted_pods;
    opts_.log.Warn("a bound Pod does not fit its node as the scheduler sees it; not counted",
                   {{"pod", key}, {"node", rec.node}});
    return false;
  }
  rec.role = Role::kForeign;
  ++stats_.foreign_pods;
  cycle_needed_ = true;
  return true;
}

// --- the facade --------------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<KubeScheduler>> KubeScheduler::Create(kube::RestClient& client,
                                                                     const Clock& clock,
                                                                     metrics::Registry& registry,
                                                                     KubeSchedulerOptions options) {
  auto impl = std::make_unique<Impl>(client, clock, registry, std::move(options));
  if (absl::Status s = impl->Init(); !s.ok()) return s;
  return std::unique_ptr<KubeScheduler>(new KubeScheduler(std::move(impl)));
}

KubeScheduler::KubeScheduler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KubeScheduler::~KubeScheduler() { impl_->Stop(); }
absl::Status KubeScheduler::Start() { return impl_->Start(); }
void KubeScheduler::Stop() { impl_->Stop(); }
KubeSchedulerStats KubeScheduler::stats() const { return impl_->stats(); }
bool KubeScheduler::Settle(absl::Duration timeout) { return impl_->Settle(timeout); }

}  // namespace tessera::kubesched
