// KubeScheduler: gangs and jobs, the cycle, bindings, and what waiting Pods are told.
#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "controller/queue_codec.h"
#include "kube/api_error.h"
#include "kube/codec.h"
#include "kube/resource.h"
#include "kubesched/kube_scheduler_impl.h"

namespace tessera::kubesched {
namespace {

// metav1.Time (seconds), as conditions carry it; Events' MicroTime is kube::FormatMicroTime.
std::string Rfc3339(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

absl::Time CreationTime(const kube::Pod& p) {
  absl::Time t;
  std::string err;
  if (absl::ParseTime(absl::RFC3339_full, p.metadata.creation_timestamp, &t, &err)) return t;
  return absl::InfinitePast();
}

// A transient failure worth another try: the connection, the API's throttling, a 5xx.
bool Retryable(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s) || kube::IsApiTooManyRequests(s) ||
         absl::IsInternal(s);
}

}  // namespace

void KubeScheduler::Impl::SyncGang(const std::string& gang) {
  if (auto b = blocked_.find(gang); b != blocked_.end() && clock_.Now() < b->second.until) {
    return;  // held until its preemption may be tried again (EvictionRefused)
  }
  std::vector<std::string> pending;
  if (auto it = gang_pods_.find(gang); it != gang_pods_.end()) {
    for (const std::string& pk : it->second) {
      auto pr = pods_.find(pk);
      if (pr != pods_.end() && pr->second.role == Role::kPending) pending.push_back(pk);
    }
  }
  if (auto j = gang_job_.find(gang); j != gang_job_.end()) {
    JobRec& jr = jobs_[j->second];
    if (jr.running) {
      // The gang runs: Pods that join it later are scheduled one by one.
      for (const std::string& pk : pending) {
        if (!pods_[pk].job.empty()) continue;
        std::optional<kube::Pod> p = GetPod(pk);
        if (!p) continue;
        absl::StatusOr<model::Job> job = BuildJob(p->metadata.name, {&*p}, GangSpec{});
        if (!job.ok()) {
          Hold("p:" + pk,
               {std::string(job.status().message()), !absl::IsUnavailable(job.status())});
          continue;
        }
        Submit("p:" + pk, *std::move(job), {pk});
      }
      return;
    }
    if (jr.pods == pending) return;
    Withdraw(j->second);
  }
  if (pending.empty()) {
    held_.erase(gang);
    blocked_.erase(gang);
    return;
  }
  std::vector<std::optional<kube::Pod>> owned;
  owned.reserve(pending.size());  // `pods` points into it
  std::vector<const kube::Pod*> pods;
  for (const std::string& pk : pending) {
    owned.push_back(GetPod(pk));
    if (!owned.back()) return;  // deleted meanwhile: its own event follows
    pods.push_back(&*owned.back());
  }
  GangSpec spec;
  std::string name = pods[0]->metadata.name;
  if (!absl::StartsWith(gang, "p:")) {
    const bool x = absl::StartsWith(gang, "x:");
    const std::string key = gang.substr(2);
    const std::string api = x ? "scheduling.x-k8s.io/v1alpha1" : "scheduling.k8s.io/v1alpha3";
    kube::Informer* inf = x ? cogroups_inf_.get() : kgroups_inf_.get();
    kube::ObjectPtr o = inf ? inf->store().Get(key) : nullptr;
    if (!o) {
      Hold(gang, {absl::StrCat("waiting for PodGroup ", key, " (", api, ")",
                               inf ? "" : ": that API is not served by this cluster"),
                  inf == nullptr});
      return;
    }
    absl::StatusOr<GangSpec> s;
    if (x) {
      absl::StatusOr<kube::CoschedulingPodGroup> g = kube::DecodeCoschedulingPodGroup(*o);
      s = g.ok() ? GangSpecOf(*g, opts_.labels) : absl::StatusOr<GangSpec>(g.status());
    } else {
      absl::StatusOr<kube::PodGroup> g = kube::DecodePodGroup(*o);
      s = g.ok() ? GangSpecOf(*g, opts_.labels) : absl::StatusOr<GangSpec>(g.status());
    }
    if (!s.ok()) {
      Hold(gang, {absl::StrCat("PodGroup ", key, ": ", s.status().message()), true});
      return;
    }
    spec = *s;
    name = absl::StrCat(x ? "podgroup:" : "kep-podgroup:", key.substr(key.find('/') + 1));
    if (static_cast<int32_t>(pending.size()) < spec.min_member) {
      Hold(gang, {absl::StrCat("pod group ", key, ": ", pending.size(), " of its minMember ",
                               spec.min_member, " Pods exist"),
                  false});
      return;
    }
  }
  absl::StatusOr<model::Job> job = BuildJob(name, pods, spec);
  if (!job.ok()) {
    // Unavailable: waiting for something to appear (a ResourceClaim), not the user's mistake.
    Hold(gang, {std::string(job.status().message()), !absl::IsUnavailable(job.status())});
    return;
  }
  Submit(gang, *std::move(job), std::move(pending));
}

absl::StatusOr<model::Job> KubeScheduler::Impl::BuildJob(const std::string& name,
                                                         const std::vector<const kube::Pod*>& pods,
                                                         const GangSpec& spec) {
  model::Job j;
  j.name = name;
  j.ns = pods[0]->metadata.ns;
  std::vector<std::string> errs;
  std::set<std::string> queues;
  j.creation_time = absl::InfiniteFuture();
  j.priority = spec.priority.value_or(0);
  std::optional<std::set<std::string>> claim_nodes;  // where every member's claims could go
  for (const kube::Pod* p : pods) {
    auto q = p->metadata.labels.find(kQueueLabel);
    queues.insert(q == p->metadata.labels.end() ? controller::kDefaultQueue : q->second);
    j.priority = std::max(j.priority, p->spec.priority.value_or(0));
    j.creation_time = std::min(j.creation_time, CreationTime(*p));
    absl::StatusOr<model::ResourceRequest> r = PodRequest(*p);
    if (!r.ok()) {
      errs.push_back(absl::StrCat("pod ", p->metadata.name, ": ", r.status().message()));
      continue;
    }
    // A Pod that asks nothing (BestEffort) fits anywhere, as in kube-scheduler; the core's
    // members always ask something, so it asks one milli-CPU.
    // Its ResourceClaims: GPUs of its member, on the nodes that could hold them (claims.h).
    std::set<std::string> nodes;
    if (absl::Status s = PlaceClaims(*p, &nodes); !s.ok()) {
      if (absl::IsUnavailable(s)) return s;
      errs.push_back(absl::StrCat("pod ", p->metadata.name, ": ", s.message()));
      continue;
    }
    if (auto c = pod_claims_.find(absl::StrCat(p->metadata.ns, "/", p->metadata.name));
        c != pod_claims_.end()) {
      for (const PlacedClaim& pc : c->second) r->gpus += static_cast<int32_t>(pc.gpus);
      if (!claim_nodes) {
        claim_nodes = std::move(nodes);
      } else {
        std::erase_if(*claim_nodes, [&](const std::string& n) { return !nodes.contains(n); });
      }
    }
    if (r->gpus == 0 && r->cpu_milli == 0 && r->memory_mib == 0 && r->scalars.empty()) {
      r->cpu_milli = 1;
    }
    j.groups.push_back({p->metadata.name, 1, *r});
  }
  if (queues.size() > 1) {
    errs.push_back(absl::StrCat("metadata.labels[", kQueueLabel, "]: the gang's Pods name ",
                                queues.size(), " queues (", absl::StrJoin(queues, ", "),
                                "); a gang runs in one"));
  }
  j.queue = *queues.begin();
  if (auto pl = pods[0]->metadata.annotations.find(kPlacementAnnotation);
      pl != pods[0]->metadata.annotations.end()) {
    if (pl->second == "Spread") {
      j.placement = model::PlacementPreference::kSpread;
    } else if (pl->second != "Pack") {
      errs.push_back(absl::StrCat("pod ", pods[0]->metadata.name, ": metadata.annotations[",
                                  kPlacementAnnotation, "]: \"", pl->second,
                                  "\" is neither Pack nor Spread"));
    }
  }
  if (absl::Status s = ApplyPodConstraints(*pods[0], &j); !s.ok()) {
    errs.push_back(absl::StrCat("pod ", pods[0]->metadata.name, ": ", s.message()));
  }
  // The core places a gang under one set of constraints: its Pods must agree on them rather than
  // have the first Pod's apply to all silently.
  for (size_t i = 1; i < pods.size(); ++i) {
    model::Job other;
    if (!ApplyPodConstraints(*pods[i], &other).ok()) continue;  // named above when it is the first
    if (other.node_selector != j.node_selector || other.node_affinity != j.node_affinity ||
        other.tolerations != j.tolerations) {
      errs.push_back(absl::StrCat("pod ", pods[i]->metadata.name,
                                  ": spec.nodeSelector, spec.affinity.nodeAffinity and "
                                  "spec.tolerations must be the same on every Pod of a gang (they "
                                  "differ from pod ",
                                  pods[0]->metadata.name, "'s)"));
      break;
    }
  }
  if (claim_nodes) {
    if (claim_nodes->empty()) {
      errs.push_back("no node's GPUs can hold the ResourceClaims of every Pod of the gang");
    }
    // ANDed with each term of the Pods' own required node affinity.
    model::NodeSelectorRequirement on;
    on.key = "metadata.name";
    on.op = model::NodeSelectorRequirement::Op::kIn;
    on.values.assign(claim_nodes->begin(), claim_nodes->end());
    on.field = true;
    if (j.node_affinity.empty()) j.node_affinity.emplace_back();
    for (model::NodeSelectorTerm& t : j.node_affinity) t.requirements.push_back(on);
  }
  if (!errs.empty()) return absl::InvalidArgumentError(absl::StrJoin(errs, "; "));
  const int32_t n = static_cast<int32_t>(pods.size());
  j.gang.min_member = n == 1 ? 0 : std::min(spec.min_member, n);
  j.gang.timeout = spec.timeout;
  j.topology = spec.topology;
  if (absl::Status s = model::ValidateJob(j, nullptr); !s.ok()) return s;
  return j;
}

void KubeScheduler::Impl::Submit(const std::string& gang, model::Job job,
                                 std::vector<std::string> pods) {
  const std::string key = job.key();
  auto shared = std::make_shared<const model::Job>(job);
  if (absl::Status s = qm_->Submit(std::move(job), {}, clock_.Now()); !s.ok()) {
    Hold(gang, {absl::StrCat("queue \"", shared->queue, "\": ", s.message()), true});
    return;
  }
  JobRec& jr = jobs_[key];
  jr.gang = gang;
  jr.pods = std::move(pods);
  jr.job = std::move(shared);
  jr.submitted_at = clock_.Now();
  gang_job_[gang] = key;
  for (const std::string& pk : jr.pods) pods_[pk].job = key;
  held_.erase(gang);
  cycle_needed_ = true;
}

void KubeScheduler::Impl::Withdraw(const std::string& job_key) {
  auto it = jobs_.find(job_key);
  if (it == jobs_.end()) return;
  (void)qm_->Finish(job_key, clock_.Now());
  for (const std::string& pk : it->second.pods) {
    if (auto p = pods_.find(pk); p != pods_.end() && p->second.job == job_key)
      p->second.job.clear();
  }
  if (auto g = gang_job_.find(it->second.gang); g != gang_job_.end() && g->second == job_key) {
    gang_job_.erase(g);
  }
  dirty_gangs_.insert(it->second.gang);
  jobs_.erase(it);
  cycle_needed_ = true;
}

void KubeScheduler::Impl::MemberEnded(const std::string& job_key) {
  auto it = jobs_.find(job_key);
  if (it == jobs_.end()) return;
  JobRec& jr = it->second;
  if (!jr.running) {
    Withdraw(job_key);  // the gang is formed again without it
    return;
  }
  if (++jr.ended < static_cast<int>(jr.pods.size())) return;
  if (jr.victim) {
    // Evicted whole: the preemptor may start now (the next cycle releases the victim: kKilled).
    (void)qm_->VictimExited(job_key, clock_.Now());
    cycle_needed_ = true;
    return;
  }
  Withdraw(job_key);  // the last member: the gang's resources return
}

void KubeScheduler::Impl::RestoreJobs(
    const std::map<std::string, std::vector<std::string>>& by_job) {
  for (const auto& [key, unsorted] : by_job) {
    std::vector<std::string> pks = unsorted;
    std::sort(pks.begin(), pks.end());
    std::vector<std::optional<kube::Pod>> owned;
    owned.reserve(pks.size());  // `pods` points into it
    std::vector<const kube::Pod*> pods;
    for (const std::string& pk : pks) {
      owned.push_back(GetPod(pk));
      if (owned.back()) pods.push_back(&*owned.back());
    }
    if (pods.size() != pks.size()) continue;
    std::optional<GangRef> g = GangOf(*pods[0]);
    const std::string gang = g ? g->Key() : "p:" + pks[0];
    absl::StatusOr<model::Job> job = BuildJob(key.substr(key.find('/') + 1), pods, {});
    sched::Placement placement;
    placement.job_key = key;
    bool ok = job.ok() && job->key() == key;
    std::vector<sched::MemberPlacement> assumed;
    for (size_t i = 0; ok && i < pods.size(); ++i) {
      std::optional<sched::NodeId> id = cluster_.FindNode(pods[i]->spec.node_name);
      if (!id) {
        ok = false;
        break;
      }
      sched::MemberPlacement m;
      m.group = static_cast<int32_t>(i);
      m.node = *id;
      m.cpu_milli = job->groups[i].resources.cpu_milli;
      m.memory_mib = job->groups[i].resources.memory_mib;
      m.scalars = job->groups[i].resources.scalars;
      for (int g : AnnotatedGpus(*pods[i])) {
        m.gpus.push_back({static_cast<int8_t>(g), model::kMilliPerGpu});
      }
      ok = static_cast<int>(m.gpus.size()) == job->groups[i].resources.gpus &&
           cluster_.Assume(m).ok();
      if (ok) {
        assumed.push_back(m);
        placement.members.push_back(m);
      }
    }
    if (ok) {
      job->gang.min_member = 0;
      ok = cluster_.Bind(placement).ok();
      if (ok && !qm_->Restore(*job, placement, {}, clock_.Now()).ok()) {
        (void)cluster_.Release(key);
        ok = false;
        assumed.clear();  // Release forgot them
      }
    }
    if (!ok) {
      for (const sched::MemberPlacement& m : assumed) cluster_.Forget(m);
      opts_.log.Warn(
          "a job bound before this scheduler started could not be rebuilt; its Pods "
          "are counted one by one",
          {{"job", key}});
      for (size_t i = 0; i < pods.size(); ++i) PlaceForeign(pks[i], pods_[pks[i]], *pods[i]);
      continue;
    }
    JobRec& jr = jobs_[key];
    jr.gang = gang;
    jr.pods = pks;
    jr.job = std::make_shared<const model::Job>(*std::move(job));
    jr.running = true;
    gang_job_[gang] = key;
    for (size_t i = 0; i < pks.size(); ++i) {
      PodRec& rec = pods_[pks[i]];
      rec.role = Role::kMember;
      rec.uid = pods[i]->metadata.uid;
      rec.gang = gang;
      rec.job = key;
      rec.node = pods[i]->spec.node_name;
      gang_pods_[gang].insert(pks[i]);
    }
  }
}

void KubeScheduler::Impl::RunCycle() {
  cycle_needed_ = false;
  const absl::Time t0 = clock_.Now();
  sched::CycleReport rep = qm_->Cycle(t0);
  algorithm_.With({}).Observe(absl::ToDoubleSeconds(clock_.Now() - t0));
  int64_t placed_pods = 0;
  for (const sched::QueueEvent& e : rep.events) {
    if (!jobs_.contains(e.job)) continue;
    switch (e.kind) {
      case sched::QueueEvent::Kind::kStarted: {
        const sched::Placement* p = cluster_.FindPlacement(e.job);
        if (p == nullptr) break;
        placed_pods += static_cast<int64_t>(p->members.size());
        BindJob(e.job, *p);
        break;
      }
      case sched::QueueEvent::Kind::kCheckpointSignal:
        EvictJob(e.job, e.other);
        break;
      case sched::QueueEvent::Kind::kKilled:
        VictimKilled(e.job);
        break;
      case sched::QueueEvent::Kind::kNominated:
      case sched::QueueEvent::Kind::kShrunk:  // no elastic jobs in Kubernetes mode
        break;
    }
  }
  const std::string profile = opts_.queues.profile.name;
  if (placed_pods > 0) attempts_.With({"scheduled", profile}).Inc(static_cast<double>(placed_pods));
  if (rep.attempts > rep.started) {
    attempts_.With({"unschedulable", profile}).Inc(rep.attempts - rep.started);
  }
  absl::MutexLock l(&mu_);
  ++stats_.cycles;
}

void KubeScheduler::Impl::BindJob(const std::string& job_key, const sched::Placement& p) {
  JobRec& jr = jobs_[job_key];
  // The members' ResourceClaims take the GPUs chosen, or the job steps back (claims.h).
  std::string claims_why;
  std::map<std::string, std::vector<std::pair<PlacedClaim, kube::Json>>> claims =
      ClaimAllocations(jr, p, &claims_why);
  if (!claims_why.empty()) {
    BackOff(job_key, claims_why);
    return;
  }
  jr.running = true;
  blocked_.erase(jr.gang);
  std::vector<bool> placed(jr.pods.size(), false);
  for (const sched::MemberPlacement& m : p.members) {
    const std::string& pk = jr.pods[m.group];
    placed[m.group] = true;
    PodRec& rec = pods_[pk];
    rec.role = Role::kMember;
    rec.node = cluster_.node(m.node).name;
    held_written_.erase(pk);
    std::optional<kube::Pod> pod = GetPod(pk);
    if (!pod) continue;  // deleted: its event ends the member
    kube::Binding b;
    b.ns = pod->metadata.ns;
    b.pod_name = pod->metadata.name;
    b.pod_uid = pod->metadata.uid;
    b.node = rec.node;
    b.annotations[kJobAnnotation] = job_key;
    std::vector<int> gpus;
    for (const sched::GpuGrant& g : m.gpus) gpus.push_back(g.gpu);
    if (!gpus.empty()) b.annotations[kGpusAnnotation] = absl::StrJoin(gpus, ",");
    // From when this scheduler first saw it pending (creationTimestamp has 1 s resolution).
    const absl::Time created =
        rec.first_seen != absl::InfinitePast() ? rec.first_seen : CreationTime(*pod);
    std::vector<std::pair<PlacedClaim, kube::Json>> allocations;
    if (auto c = claims.find(pk); c != claims.end()) {
      allocations = std::move(c->second);
      std::vector<PlacedClaim>& placed_claims = pod_claims_[pk];
      for (size_t k = 0; k < placed_claims.size() && k < allocations.size(); ++k) {
        placed_claims[k].allocated = true;
        placed_claims[k].held = allocations[k].first.held;
      }
    }
    writer_->Post([this, b = std::move(b), job_key, pk, created, pod = *std::move(pod),
                   allocations = std::move(allocations)] {
      absl::Status s;
      // The claims first: kubelet prepares what status.allocation says once the Pod is bound.
      for (const auto& [claim, status] : allocations) {
        for (int attempt = 0; attempt < 4; ++attempt) {
          if (attempt > 0) absl::SleepFor(absl::Milliseconds(100 << attempt));
          s = client_
                  .MergePatch(kube::ResourceClaimsResource(), b.ns, claim.name,
                              kube::Json{{"status", status}}, "status")
                  .status();
          if (!Retryable(s)) break;
        }
        if (!s.ok()) break;
      }
      for (int attempt = 0; s.ok() && attempt < 4; ++attempt) {
        if (attempt > 0) absl::SleepFor(absl::Milliseconds(100 << attempt));
        s = client_.Bind(b);
        if (!Retryable(s)) break;
      }
      binds_.With({s.ok() ? "ok" : "error"}).Inc();
      if (s.ok()) {
        if (created != absl::InfinitePast()) {
          sli_.With({"1"}).Observe(absl::ToDoubleSeconds(clock_.Now() - created));
        }
        // Its own task, in the later lane: a writer binds again instead of waiting on the
        // Event's round trip, and a backlog's bindings go before their Events.
        writer_->Post(
            [this, pod, b] {
              PostEvent(pod, "Normal", "Scheduled", "Binding",
                        absl::StrCat("Successfully assigned ", b.ns, "/", b.pod_name, " to ",
                                     b.node));
            },
            ApiWriter::Lane::kLater);
      }
      Note([&](Inbox& in) { in.binds.push_back({job_key, pk, s}); });
    });
  }
  WriteGroupStatus(jr.gang, true,
                   absl::StrCat(p.members.size(), " Pods placed on ",
                                p.members.empty() ? "" : cluster_.node(p.members[0].node).name,
                                p.members.size() > 1 ? " and others" : ""));
  // Members beyond what a gang needed that found no room wait on as Pods of their own.
  for (size_t i = 0; i < placed.size(); ++i) {
    if (placed[i]) continue;
    ++jr.ended;
    pods_[jr.pods[i]].job.clear();
    dirty_gangs_.insert(jr.gang);
  }
}

void KubeScheduler::Impl::OnBindDone(const Inbox::BindDone& b) {
  {
    absl::MutexLock l(&mu_);
    ++(b.status.ok() ? stats_.bound : stats_.bind_errors);
  }
  if (b.status.ok() || kube::IsApiNotFound(b.status)) return;  // a deleted Pod ends by its event
  opts_.log.Warn("binding refused", {{"pod", b.pod}, {"error", b.status.ToString()}});
  auto it = pods_.find(b.pod);
  if (it == pods_.end() || it->second.job != b.job) return;
  if (std::optional<kube::Pod> pod = GetPod(b.pod)) {
    writer_->Post([this, pod = *std::move(pod), msg = std::string(b.status.message())] {
      PostEvent(pod, "Warning", "FailedScheduling", "Binding",
                absl::StrCat("Binding rejected: ", msg));
    });
  }
  ReleasePod(b.pod, it->second);
  SyncPod(b.pod);  // pending again (or bound by another, as the API said)
}

// The queue manager's own deadline is far off on purpose (Init): the victims' Pods going is what
// releases their capacity.
void KubeScheduler::Impl::EvictJob(const std::string& job_key, const std::string& preemptor) {
  JobRec& jr = jobs_[job_key];
  jr.victim = true;
  jr.preemptor = preemptor;
  const int64_t grace = absl::ToInt64Seconds(eviction_grace_);
  for (const std::string& pk : jr.pods) {
    auto it = pods_.find(pk);
    if (it == pods_.end() || it->second.role != Role::kMember) continue;
    std::optional<kube::Pod> pod = GetPod(pk);
    if (!pod) continue;
    kube::Eviction ev;
    ev.ns = pod->metadata.ns;
    ev.pod_name = pod->metadata.name;
    ev.pod_uid = pod->metadata.uid;
    ev.grace_period_seconds = grace;
    writer_->Post([this, ev, job_key, pk, preemptor, pod = *std::move(pod)] {
      absl::Status s = client_.Evict(ev);
      if (s.ok()) {
        PostEvent(pod, "Normal", "Preempted", "Preempting",
                  absl::StrCat("Preempted by ", preemptor, "; checkpoint now"));
      }
      if (kube::IsApiNotFound(s)) s = absl::OkStatus();  // already gone
      Note([&](Inbox& in) { in.evictions.push_back({job_key, pk, s}); });
    });
  }
}

void KubeScheduler::Impl::EvictionRefused(const std::string& victim, const absl::Status& why) {
  auto v = jobs_.find(victim);
  if (v == jobs_.end() || !v->second.victim) return;
  const std::string preemptor = v->second.preemptor;
  opts_.log.Warn("eviction refused; the preemption is called off",
                 {{"victim", victim}, {"preemptor", preemptor}, {"error", why.ToString()}});
  for (auto& [key, jr] : jobs_) {
    if (jr.victim && jr.preemptor == preemptor) {
      jr.victim = false;
      jr.preemptor.clear();
    }
  }
  auto p = jobs_.find(preemptor);
  if (p == jobs_.end() || p->second.running) return;
  // Withdrawing the preemptor spares its other victims (QueueManager::Finish).
  BackOff(preemptor, absl::StrCat("preemption blocked: the eviction of a Pod of ", victim,
                                  " was refused (", why.message(), ")"));
}

void KubeScheduler::Impl::BackOff(const std::string& key, const std::string& why) {
  const std::string gang = jobs_[key].gang;
  Blocked& b = blocked_[gang];
  b.backoff = b.backoff == absl::ZeroDuration() ? absl::Seconds(10)
                                                : std::min(b.backoff * 2, absl::Minutes(5));
  b.until = clock_.Now() + b.backoff;
  Withdraw(key);
  Hold(gang, {absl::StrCat(why, "; tries again at ",
                           absl::FormatTime("%H:%M:%SZ", b.until, absl::UTCTimeZone())),
              true});
}

void KubeScheduler::Impl::VictimKilled(const std::string& job_key) {
  // The queue manager took the victim's resources back and holds it as pending: it is no longer
  // a job of ours (its Pods are gone, or their eviction was refused). Pods still bound keep
  // their nodes' capacity as anyone's bound Pods do.
  auto it = jobs_.find(job_key);
  if (it == jobs_.end()) return;
  std::vector<std::string> pods = it->second.pods;
  it->second.running = false;
  Withdraw(job_key);
  for (const std::string& pk : pods) {
    auto pr = pods_.find(pk);
    if (pr == pods_.end() || pr->second.role != Role::kMember) continue;
    pr->second.job.clear();
    if (std::optional<kube::Pod> pod = GetPod(pk);
        pod && !pod->spec.node_name.empty() && !PodTerminal(*pod)) {
      PlaceForeign(pk, pr->second, *pod);
    } else {
      pr->second.role = Role::kIgnored;
    }
  }
}

void KubeScheduler::Impl::WriteGroupStatus(const std::string& gang, bool scheduled,
                                           const std::string& why) {
  const bool x = absl::StartsWith(gang, "x:");
  if (!x && !absl::StartsWith(gang, "k:")) return;  // a Pod of its own
  std::string& last = group_status_[gang];
  const std::string now_written = absl::StrCat(scheduled ? "1" : "0", why);
  if (last == now_written) return;
  last = now_written;
  const std::string key = gang.substr(2);
  const std::string ns = key.substr(0, key.find('/')), name = key.substr(key.find('/') + 1);
  const absl::Time now = clock_.Now();
  kube::Json patch;
  if (x) {
    patch = {{"status", {{"phase", scheduled ? "Scheduled" : "Pending"}}}};
    if (scheduled) patch["status"]["scheduleStartTime"] = kube::FormatMicroTime(now);
  } else {
    patch = {
        {"status",
         {{"conditions", kube::Json::array({{{"type", "PodGroupScheduled"},
                                             {"status", scheduled ? "True" : "False"},
                                             {"reason", scheduled ? "Scheduled" : "Unschedulable"},
                                             {"message", why},
                                             {"lastTransitionTime", Rfc3339(now)}}})}}}};
  }
  // "Waiting" holds only on the resourceVersion read, so that it never lands after the
  // "Scheduled" a later binding wrote; a lost race is told again.
  kube::Informer* inf = x ? cogroups_inf_.get() : kgroups_inf_.get();
  if (!scheduled && inf != nullptr) {
    if (kube::ObjectPtr o = inf->store().Get(key)) {
      patch["metadata"]["resourceVersion"] = (*o)["metadata"].value("resourceVersion", "");
    }
  }
  writer_->Post([this, x, ns, name, patch, gang] {
    absl::StatusOr<kube::Json> r = client_.MergePatch(
        x ? kube::CoschedulingPodGroupsResource() : kep_groups_, ns, name, patch, "status");
    if (kube::IsApiConflict(r.status())) {
      Note([&](Inbox& in) { in.regroup.push_back(gang); });
    } else if (!r.ok()) {
      opts_.log.Debug("PodGroup status not written", {{"error", r.status().ToString()}});
    }
  });
}

void KubeScheduler::Impl::Hold(const std::string& gang, Held why) {
  auto [it, added] = held_.try_emplace(gang);
  const absl::Time since = added ? clock_.Now() : it->second.since;
  it->second = std::move(why);
  it->second.since = since;
}

void KubeScheduler::Impl::TellWaiting() {
  int64_t active = 0, gated = 0;
  const std::string nodes = absl::StrCat(cluster_.num_nodes());
  // A gang not placed within its PodGroup's scheduleTimeoutSeconds steps out of the queue for a
  // backoff (as coscheduling backs a timed-out group off), saying so; then it queues again.
  std::vector<std::string> timed_out;
  const absl::Time now = clock_.Now();
  for (const auto& [key, jr] : jobs_) {
    if (!jr.running && jr.job && jr.job->gang.timeout > absl::ZeroDuration() &&
        now - jr.submitted_at > jr.job->gang.timeout &&
        qm_->Phase(key) == sched::JobPhase::kPending) {
      timed_out.push_back(key);
    }
  }
  for (const std::string& key : timed_out) {
    BackOff(key, absl::StrCat("gang not placed within its scheduleTimeoutSeconds (",
                              absl::FormatDuration(jobs_[key].job->gang.timeout),
                              "): ", qm_->WaitingReason(key)));
  }
  for (auto& [key, jr] : jobs_) {
    if (jr.running) continue;
    active += static_cast<int64_t>(jr.pods.size());
    if (now - jr.submitted_at < kTellAfter) continue;
    std::string why = qm_->WaitingReason(key);
    if (why.empty() || why == jr.reason_written) continue;
    jr.reason_written = why;
    const std::string msg = absl::StrCat("0/", nodes, " nodes are available: ", why);
    WriteGroupStatus(jr.gang, false, msg);
    for (const std::string& pk : jr.pods) WriteUnschedulable(pk, msg);
  }
  for (const auto& [gang, h] : held_) {
    auto it = gang_pods_.find(gang);
    if (it == gang_pods_.end()) continue;
    if (!h.warning && now - h.since < kTellAfter) {
      gated += static_cast<int64_t>(it->second.size());
      continue;
    }
    WriteGroupStatus(gang, false, h.reason);
    for (const std::string& pk : it->second) {
      auto pr = pods_.find(pk);
      if (pr == pods_.end() || pr->second.role != Role::kPending || !pr->second.job.empty()) {
        continue;
      }
      ++gated;
      std::string& told = held_written_[pk];
      if (told == h.reason) continue;
      told = h.reason;
      WriteUnschedulable(pk, h.reason);
    }
  }
  pending_.With({"active"}).Set(static_cast<double>(active));
  pending_.With({"gated"}).Set(static_cast<double>(gated));
}

void KubeScheduler::Impl::WriteUnschedulable(const std::string& pod_key,
                                             const std::string& message) {
  std::optional<kube::Pod> pod = GetPod(pod_key);
  if (!pod) return;
  const absl::Time now = clock_.Now();
  writer_->Post([this, pod = *std::move(pod), message, now] {
    // A strategic merge patch: the PodScheduled condition replaced by type, the others kept. It
    // holds only if the Pod is as it was read (its resourceVersion): a Pod bound meanwhile keeps
    // the PodScheduled=True its binding wrote.
    kube::Json patch = {
        {"metadata", {{"resourceVersion", pod.metadata.resource_version}}},
        {"status",
         {{"conditions", kube::Json::array({{{"type", "PodScheduled"},
                                             {"status", "False"},
                                             {"reason", "Unschedulable"},
                                             {"message", message},
                                             {"lastTransitionTime", Rfc3339(now)}}})}}}};
    absl::StatusOr<kube::HttpResult> r = client_.Raw(
        "PATCH",
        kube::ResourcePath(kube::PodsResource(), pod.metadata.ns, pod.metadata.name, "status"),
        patch.dump(), "application/strategic-merge-patch+json");
    if (r.ok() && r->status == 409) {
      // Changed since read: if it still waits, the loop tells it again from its newer state.
      Note([&](Inbox& in) { in.retell.push_back(kube::ObjectKey(pod.metadata)); });
      return;
    }
    if (!r.ok() || r->status >= 300) {
      opts_.log.Debug("PodScheduled condition not written",
                      {{"pod", pod.metadata.name},
                       {"error", r.ok() ? absl::StrCat(r->status) : r.status().ToString()}});
    }
    PostEvent(pod, "Warning", "FailedScheduling", "Scheduling", message);
  });
}

void KubeScheduler::Impl::PostEvent(const kube::Pod& pod, const std::string& type,
                                    const std::string& reason, const std::string& action,
                                    const std::string& note) {
  kube::ObjectReference r;
  r.api_version = "v1";
  r.kind = "Pod";
  r.ns = pod.metadata.ns;
  r.name = pod.metadata.name;
  r.uid = pod.metadata.uid;
  events_.Post(r, type, reason, action, note);
}

}  // namespace tessera::kubesched
