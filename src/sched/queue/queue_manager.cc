#include "sched/queue/queue_manager.h"

#include <algorithm>
#include <functional>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/suggest.h"
#include "model/gpu_model_name.h"
#include "sched/plugins/default_registry.h"
#include "sched/plugins/preemption.h"
#include "sched/plugins/quota.h"

namespace tessera::sched {

absl::Status ValidateQueueManagerConfig(const QueueManagerConfig& c) {
  absl::Status s = ValidateQueueTree(c.tree);
  if (!s.ok()) return s;
  for (const auto& [name, value] : c.priority_classes) {
    if (name.empty()) return absl::InvalidArgumentError("priorityClasses: a class needs a name");
    if (value < 0 || value > 1000000000) {
      return absl::InvalidArgumentError(
          absl::StrCat("priorityClasses.", name, ": value must be in 0..1000000000, got ", value));
    }
  }
  if (!c.default_priority_class.empty() && !c.priority_classes.contains(c.default_priority_class)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "defaultPriorityClass: unknown priority class \"", c.default_priority_class, "\""));
  }
  const PreemptionPolicy& p = c.preemption;
  if (p.max_evicted_gpus < 0) {
    return absl::InvalidArgumentError("preemption.maxEvictedGpus: must be >= 0 (0: no cap)");
  }
  if (p.max_evicted_ratio < 0) {
    return absl::InvalidArgumentError("preemption.maxEvictedRatio: must be >= 0 (0: no cap)");
  }
  if (p.min_runtime < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("preemption.minRuntime: must be >= 0");
  }
  if (p.grace_period < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("preemption.gracePeriod: must be >= 0");
  }
  if (c.default_runtime <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("backfill.defaultRuntime: must be > 0");
  }
  if (c.reservations < 1 || c.reservations > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("backfill.reservations: must be in 1..64, got ", c.reservations));
  }
  return absl::OkStatus();
}

QueueManager::~QueueManager() = default;

absl::StatusOr<std::unique_ptr<QueueManager>> QueueManager::Create(QueueManagerConfig config,
                                                                   ClusterState* cluster) {
  std::unique_ptr<QueueManager> m(new QueueManager());
  Profile profile = config.profile;
  std::function<absl::Status(PluginRegistry*)> extra_plugins = config.extra_plugins;
  m->cluster_ = cluster;
  m->env_.cluster = cluster;
  m->env_.running = &m->running_;
  absl::Status s = m->Build(std::move(config));
  if (!s.ok()) return s;
  AdmissionEnv* env = &m->env_;
  PluginRegistry reg = DefaultRegistry();
  if (extra_plugins) {
    if (absl::Status es = extra_plugins(&reg); !es.ok()) return es;
  }
  Preemption** pre = &m->preemption_;
  (void)reg.Register(Quota::kName,
                     [env](const PluginArgs&) -> absl::StatusOr<std::unique_ptr<Plugin>> {
                       return std::unique_ptr<Plugin>(new Quota(env));
                     });
  (void)reg.Register(ReservationFilter::kName,
                     [env](const PluginArgs&) -> absl::StatusOr<std::unique_ptr<Plugin>> {
                       return std::unique_ptr<Plugin>(new ReservationFilter(env));
                     });
  (void)reg.Register(Preemption::kName,
                     [env, pre](const PluginArgs&) -> absl::StatusOr<std::unique_ptr<Plugin>> {
                       auto p = std::make_unique<Preemption>(env);
                       *pre = p.get();
                       return std::unique_ptr<Plugin>(std::move(p));
                     });
  profile.plugins.insert(profile.plugins.begin(), PluginConfig{.name = std::string(Quota::kName)});
  profile.plugins.push_back({.name = std::string(ReservationFilter::kName)});
  profile.plugins.push_back({.name = std::string(Preemption::kName)});
  auto sch = Scheduler::Create(profile, reg, cluster);
  if (!sch.ok()) return sch.status();
  m->scheduler_ = std::move(*sch);
  return m;
}

absl::Status QueueManager::Build(QueueManagerConfig config) {
  absl::Status s = ValidateQueueManagerConfig(config);
  if (!s.ok()) return s;
  auto tree = QueueTree::Create(config.tree);
  if (!tree.ok()) return tree.status();
  auto t = std::make_unique<QueueTree>(std::move(*tree));
  // Every queue with work must survive as a leaf.
  auto check_queue = [&](const model::Job& j) -> absl::Status {
    int q = t->Find(j.queue);
    if (q < 0 || !t->IsLeaf(q)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "queues: queue \"", j.queue, "\" has jobs (", j.key(), ") and must stay a leaf queue"));
    }
    return absl::OkStatus();
  };
  for (int32_t sl = 0; sl < running_.num_slots(); ++sl) {
    if (!running_.live(sl)) continue;
    s = check_queue(*running_.at(sl).job);
    if (!s.ok()) return s;
  }
  for (const auto& [k, p] : pending_) {
    s = check_queue(*p.job);
    if (!s.ok()) return s;
  }
  SetCapacities(*t);
  if (tree_ != nullptr) t->CarryHistoryFrom(*tree_);
  // Commit: re-charge running jobs against the new tree.
  tree_ = std::move(t);
  config_ = std::move(config);
  env_.tree = tree_.get();
  env_.policy = config_.preemption;
  for (int32_t sl = 0; sl < running_.num_slots(); ++sl) {
    if (!running_.live(sl)) continue;
    running_.SetLeaf(sl, tree_->Find(running_.at(sl).job->queue));
    RunningJob& rj = running_.at(sl);
    ModelId m = rj.members.empty() || rj.members[0].gpus.empty()
                    ? DemandModel(*rj.job)
                    : cluster_->state(rj.members[0].node).model;
    rj.usage = rj.job->gang.elastic ? PlacedDemand(*rj.job, rj.members, m) : Demand(*rj.job, m);
    tree_->Add(rj.leaf, rj.usage);
  }
  for (auto& [k, p] : pending_) p.leaf = tree_->Find(p.job->queue);
  RefreshShrinkState();
  // Leaves, demands and the search policy may have changed.
  ++cache_epoch_;
  shape_ids_.clear();
  memo_.Clear();
  ++manager_gen_;
  return absl::OkStatus();
}

void QueueManager::SetCapacities(QueueTree& t) const {
  int64_t cpu = 0, mem = 0;
  for (NodeId id = 0; id < cluster_->num_node_slots(); ++id) {
    if (!cluster_->state(id).present) continue;
    cpu += cluster_->node(id).cpu_milli;
    mem += cluster_->node(id).memory_mib;
  }
  t.SetCapacity("cpu", cpu);
  t.SetCapacity("memory", mem);
  for (ModelId m = 0; m < cluster_->num_models(); ++m) {
    if (cluster_->model_name(m).empty()) continue;
    t.SetCapacity(absl::StrCat("gpu/", cluster_->model_name(m)), cluster_->total_gpus(m) * 1000);
  }
}

void QueueManager::RefreshCapacity() { SetCapacities(*tree_); }

absl::Status QueueManager::Reconfigure(QueueManagerConfig config) {
  return Build(std::move(config));
}

absl::Status QueueManager::SetFairShareHistory(absl::string_view name, double decayed_usage,
                                               double credit) {
  const int q = tree_->Find(name);
  if (q < 0) return absl::NotFoundError(absl::StrCat("queue \"", name, "\" not found"));
  tree_->SetHistory(q, decayed_usage, credit);
  return absl::OkStatus();
}

ModelId QueueManager::DemandModel(const model::Job& job) const {
  for (const std::string& name : job.gpu_models) {
    for (ModelId m = 0; m < cluster_->num_models(); ++m) {
      if (model::GpuModelMatches(name, cluster_->model_name(m))) return m;
    }
  }
  for (ModelId m = 0; m < cluster_->num_models(); ++m) {
    if (!cluster_->model_name(m).empty()) return m;
  }
  return kNoModel;
}

std::vector<ModelId> QueueManager::GpuModelsOf(const model::Job& job) const {
  std::vector<ModelId> out;
  bool gpus = false;
  for (const auto& g : job.groups) gpus |= g.resources.gpus > 0;
  if (!gpus) return out;
  for (ModelId m = 0; m < cluster_->num_models(); ++m) {
    const std::string& name = cluster_->model_name(m);
    if (name.empty()) continue;
    if (model::AnyGpuModelMatches(job.gpu_models, name)) out.push_back(m);
  }
  return out;
}

ResourceList QueueManager::PlacedDemand(const model::Job& job,
                                        const std::vector<MemberPlacement>& members,
                                        ModelId model) const {
  absl::InlinedVector<int32_t, 4> held(job.groups.size(), 0);
  for (const MemberPlacement& m : members) {
    if (m.group >= 0 && m.group < static_cast<int32_t>(held.size())) ++held[m.group];
  }
  return Demand(job, model, held.data());
}

ResourceList QueueManager::Demand(const model::Job& job, ModelId model,
                                  const int32_t* counts) const {
  const auto& names = tree_->resources();
  ResourceList d(names.size(), 0);
  std::string gpu = model == kNoModel ? "" : absl::StrCat("gpu/", cluster_->model_name(model));
  for (size_t r = 0; r < names.size(); ++r) {
    for (size_t gi = 0; gi < job.groups.size(); ++gi) {
      const auto& g = job.groups[gi];
      const int64_t n = counts == nullptr ? g.count : counts[gi];
      if (names[r] == "cpu") d[r] += n * g.resources.cpu_milli;
      if (names[r] == "memory") d[r] += n * g.resources.memory_mib;
      if (names[r] == gpu) d[r] += n * g.resources.total_gpu_milli();
    }
  }
  return d;
}

absl::Status QueueManager::Submit(model::Job job, const SubmitOptions& opts, absl::Time now) {
  absl::flat_hash_set<std::string> models;
  for (ModelId m = 0; m < cluster_->num_models(); ++m) models.insert(cluster_->model_name(m));
  absl::Status s = model::ValidateJob(job, &models);
  if (!s.ok()) return s;
  std::string key = job.key();
  if (pending_.contains(key) || running_.Find(key) != nullptr) {
    return absl::AlreadyExistsError(absl::StrCat("job ", key, " already exists"));
  }
  int leaf = tree_->Find(job.queue);
  if (leaf < 0) {
    std::vector<std::string> leaves;
    for (int q = 0; q < tree_->num_queues(); ++q) {
      if (tree_->IsLeaf(q)) leaves.push_back(tree_->name(q));
    }
    return absl::InvalidArgumentError(absl::StrCat("spec.queue: unknown queue \"", job.queue, "\"",
                                                   DidYouMean(job.queue, leaves)));
  }
  if (!tree_->IsLeaf(leaf)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.queue: \"", job.queue, "\" is not a leaf queue; submit to one of its children"));
  }
  std::string cls = opts.priority_class.empty() && job.priority == 0
                        ? config_.default_priority_class
                        : opts.priority_class;
  if (!cls.empty()) {
    auto it = config_.priority_classes.find(cls);
    if (it == config_.priority_classes.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("spec.priorityClassName: unknown priority class \"", cls, "\""));
    }
    job.priority = it->second;
  }
  if (opts.expected_runtime < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("spec.expectedRuntime: must be >= 0");
  }
  if (job.creation_time == absl::UnixEpoch()) job.creation_time = now;
  Pending p;
  p.job = std::make_shared<const model::Job>(std::move(job));
  p.leaf = leaf;
  p.runtime = opts.expected_runtime > absl::ZeroDuration() ? opts.expected_runtime
                                                           : config_.default_runtime;
  if (opts.expected_runtime == absl::ZeroDuration() && config_.learn_runtimes) {
    const model::Job& j = *p.job;
    if (auto e = estimator_.Estimate(j.queue, j.ns, j.total_gpu_milli() / model::kMilliPerGpu)) {
      p.runtime = *e;
    }
  }
  p.seq = ++seq_;
  p.restart = opts.restart;
  p.checkpoints = opts.checkpoints;
  p.reason = "not tried yet";
  pending_.emplace(key, std::move(p));
  return absl::OkStatus();
}

void QueueManager::TakeOut(const RunningJob& j) {
  (void)cluster_->Release(j.key);
  tree_->Remove(j.leaf, j.usage);
}

void QueueManager::PutBack(const RunningJob& j) {
  Placement pl;
  pl.job_key = j.key;
  pl.members = j.members;
  for (const MemberPlacement& m : pl.members) (void)cluster_->Assume(m);
  (void)cluster_->Bind(std::move(pl));
  tree_->Add(j.leaf, j.usage);
}

absl::Status QueueManager::Finish(absl::string_view key, absl::Time now) {
  loans_.erase(key);  // a lender gone: its name in a borrower's lent_for matches no one
  if (auto it = pending_.find(key); it != pending_.end()) {
    // A cancelled preemptor spares the victims that have not exited yet.
    for (const std::string& v : it->second.victims) {
      RunningJob* rj = running_.Find(v);
      if (rj == nullptr || rj->exited) continue;
      rj->terminating = false;
      ++manager_gen_;
      rj->kill_at = absl::InfiniteFuture();
      rj->preempted_by.clear();
      rj->dropping.clear(), rj->dropping_usage.clear();
    }
    pending_.erase(it);
    return absl::OkStatus();
  }
  RunningJob* rj = running_.Find(key);
  if (rj == nullptr) return absl::NotFoundError(absl::StrCat("job ", key, " not found"));
  tree_->Advance(now);
  std::string k(key);
  std::string by = rj->preempted_by;
  TakeOut(*rj);
  running_.Remove(k);
  ++manager_gen_;
  running_meta_.erase(k);
  if (!by.empty()) {
    if (auto it = pending_.find(by); it != pending_.end()) it->second.victims.erase(k);
  }
  return absl::OkStatus();
}

absl::Status QueueManager::Completed(absl::string_view key, absl::Time now) {
  if (const RunningJob* rj = running_.Find(key); rj != nullptr && config_.learn_runtimes) {
    estimator_.Observe(rj->job->queue, rj->job->ns,
                       rj->job->total_gpu_milli() / model::kMilliPerGpu, now - rj->start);
  }
  return Finish(key, now);
}

absl::Status QueueManager::ReportCheckpoint(absl::string_view key, absl::Time at) {
  RunningJob* rj = running_.Find(key);
  if (rj == nullptr) return absl::NotFoundError(absl::StrCat("job ", key, " is not running"));
  // Only a newer checkpoint changes what the preemption search reads.
  if (at > rj->last_checkpoint) {
    rj->last_checkpoint = at;
    ++manager_gen_;
  }
  return absl::OkStatus();
}

void QueueManager::Kill(const std::string& key, absl::Time now, CycleReport* rep) {
  RunningJob* rj = running_.Find(key);
  if (rj == nullptr) return;
  if (rj->shrinking()) return ShrinkVictim(key, now, rep);
  std::string by = rj->preempted_by;
  TakeOut(*rj);
  Pending p;
  if (auto it = running_meta_.find(key); it != running_meta_.end()) {
    p = std::move(it->second);
    running_meta_.erase(it);
  } else {
    p.job = rj->job;
    p.leaf = rj->leaf;
    p.runtime = config_.default_runtime;
    p.seq = ++seq_;
  }
  p.times_preempted = rj->times_preempted + 1;
  running_.Remove(key);
  ++manager_gen_;
  p.nominated = false;
  p.victims.clear();
  if (!by.empty()) p.protected_jobs.insert(by);
  p.reason = absl::StrCat("preempted by ", by, "; waiting to run again");
  p.reason_class = WaitReason::kPreempted;
  pending_[key] = std::move(p);
  if (!by.empty()) {
    if (auto it = pending_.find(by); it != pending_.end()) it->second.victims.erase(key);
  }
  if (rep) {
    rep->events.push_back(
        {QueueEvent::Kind::kKilled, key, by, now, "grace period over or victim exited"});
  }
}

absl::Status QueueManager::VictimExited(absl::string_view key, absl::Time now) {
  RunningJob* rj = running_.Find(key);
  if (rj == nullptr || !rj->terminating) {
    return absl::FailedPreconditionError(absl::StrCat("job ", key, " is not being preempted"));
  }
  rj->exited = true;
  // Release the plan's victims together, once all have exited: released one
  // by one, the room could go to another job before the preemptor's turn.
  // The next Cycle kills them (their deadline moves to now) and reports each
  // as kKilled, so the caller unbinds them exactly as at the deadline.
  std::vector<RunningJob*> plan = {rj};
  auto it = pending_.find(rj->preempted_by);
  if (it != pending_.end()) {
    for (const std::string& v : it->second.victims) {
      if (v == key) continue;
      RunningJob* o = running_.Find(v);
      if (o != nullptr && !o->exited) return absl::OkStatus();
      if (o != nullptr) plan.push_back(o);
    }
  }
  for (RunningJob* v : plan) v->kill_at = std::min(v->kill_at, now);
  return absl::OkStatus();
}

ResourceList QueueManager::AdmissionDemand(const model::Job& job, ModelId model) const {
  const int32_t min = job.effective_min_member();
  if (!job.gang.elastic || min >= job.total_members()) return Demand(job, model);
  // A gang that may start partly placed is admitted for its minMember
  // smallest members (as the gang plugin sizes it); what it then holds is
  // fitted to the quota (FitToQuota) and charged (PlacedDemand).
  std::vector<size_t> order(job.groups.size());
  for (size_t g = 0; g < order.size(); ++g) order[g] = g;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return job.groups[a].resources.total_gpu_milli() < job.groups[b].resources.total_gpu_milli();
  });
  absl::InlinedVector<int32_t, 4> counts(job.groups.size(), 0);
  int32_t left = min;
  for (size_t g : order) {
    counts[g] = std::min(left, job.groups[g].count);
    left -= counts[g];
  }
  return Demand(job, model, counts.data());
}

void QueueManager::FitToQuota(const Pending& p, Placement* placement) {
  const model::Job& job = *p.job;
  const int32_t min = job.effective_min_member();
  if (!job.gang.elastic || min >= job.total_members() || p.leaf < 0) return;
  ModelId model = DemandModel(job);
  for (const MemberPlacement& m : placement->members) {
    if (!m.gpus.empty()) {
      model = cluster_->state(m.node).model;
      break;
    }
  }
  std::vector<MemberPlacement> members = placement->members;
  while (static_cast<int32_t>(members.size()) > min &&
         (job.gang.over_start(static_cast<int32_t>(members.size())) ||
          !tree_->Check(p.leaf, PlacedDemand(job, members, model), {}).empty())) {
    members.pop_back();  // the last placed; the rest keep their ordinals
  }
  if (members.size() == placement->members.size()) return;
  (void)cluster_->Release(placement->job_key);
  for (const MemberPlacement& m : members) (void)cluster_->Assume(m);
  placement->members = std::move(members);
  (void)cluster_->Bind(*placement);
}

void QueueManager::SetEnv(const Pending& p, bool quota) {
  env_.leaf = quota ? p.leaf : -1;
  if (p.cache_epoch == cache_epoch_) {
    env_.demand = p.admission;
  } else {
    env_.demand = AdmissionDemand(*p.job, DemandModel(*p.job));
  }
  env_.protected_jobs = &p.protected_jobs;
  env_.allow_preemption = true;
  env_.own_pledge = p.nominated;
}

void QueueManager::RefreshReclaimView() {
  std::vector<ResourceList> old_pledged = std::move(env_.pledged);
  std::vector<ResourceList> old_leaving = std::move(env_.leaving);
  env_.pledged.clear();
  env_.leaving.clear();
  const size_t nr = tree_->resources().size();
  auto add = [&](std::vector<ResourceList>& to, int leaf, const ResourceList& v) {
    if (leaf < 0) return;
    if (to.empty()) to.assign(tree_->num_queues(), ResourceList(nr, 0));
    for (int q = leaf; q >= 0; q = tree_->parent(q)) {
      for (size_t r = 0; r < nr; ++r) to[q][r] += v[r];
    }
  };
  for (int32_t s = 0; s < running_.num_slots(); ++s) {
    if (running_.live(s) && running_.at(s).terminating) {
      const RunningJob& v = running_.at(s);
      add(env_.leaving, v.leaf, v.shrinking() ? v.dropping_usage : v.usage);
    }
  }
  for (const auto& [k, p] : pending_) {
    if (!p.nominated) continue;
    add(env_.pledged, p.leaf,
        p.cache_epoch == cache_epoch_ ? p.admission : AdmissionDemand(*p.job, DemandModel(*p.job)));
  }
  if (env_.pledged != old_pledged || env_.leaving != old_leaving) ++manager_gen_;
}

void QueueManager::Start(Pending& p, const Placement& placement, absl::Time now, CycleReport* rep,
                         const std::string& explanation, const Loan* loan) {
  // A lender that starts ends its loans: the jobs on them run on.
  if (auto it = loans_.find(placement.job_key); it != loans_.end()) {
    for (const std::string& k : it->second) {
      const int32_t b = running_.SlotOf(k);
      if (b >= 0) running_.EndLoan(b, placement.job_key);
    }
    loans_.erase(it);
  }
  RunningJob rj;
  if (loan != nullptr) {
    rj.lent_for = loan->lenders;
    rj.lease_until = loan->until;
    for (const std::string& l : loan->lenders) loans_[l].push_back(placement.job_key);
  }
  rj.key = placement.job_key;
  rj.job = p.job;
  rj.priority = p.job->priority;
  rj.leaf = p.leaf;
  ModelId m = DemandModel(*p.job);
  for (const MemberPlacement& mp : placement.members) {
    if (!mp.gpus.empty()) {
      m = cluster_->state(mp.node).model;
      break;
    }
  }
  for (const MemberPlacement& mp : placement.members) {
    for (const GpuGrant& g : mp.gpus) rj.gpu_milli += g.milli;
  }
  // An elastic job is charged what it holds; any other gang all its members.
  rj.usage = p.job->gang.elastic ? PlacedDemand(*p.job, placement.members, m) : Demand(*p.job, m);
  rj.start = now;
  rj.last_checkpoint = p.last_checkpoint;
  rj.times_preempted = p.times_preempted;
  rj.expected_end = now + p.runtime;
  rj.members = placement.members;
  tree_->Add(rj.leaf, rj.usage);
  std::string key = rj.key;
  running_.Add(std::move(rj));
  ++manager_gen_;
  Pending meta = std::move(p);
  pending_.erase(key);
  meta.nominated = false;
  meta.restart = false;  // a preemption victim waits its turn again
  meta.victims.clear();
  meta.protected_jobs.clear();  // a new run; old preemptors are no longer special
  meta.reason.clear();
  running_meta_[key] = std::move(meta);
  rep->events.push_back({QueueEvent::Kind::kStarted, key, "", absl::InfiniteFuture(),
                         explanation.empty()
                             ? absl::StrCat("placed ", placement.members.size(), " members")
                             : explanation});
  ++rep->started;
}

bool QueueManager::VerifyPlan(const Pending& p, const std::vector<std::string>& victims,
                              std::vector<NodeId>* nodes) {
  std::vector<RunningJob> out;
  for (const std::string& v : victims) {
    const RunningJob* rj = running_.Find(v);
    if (rj == nullptr) continue;
    out.push_back(*rj);
    MarkShrink(preemption_->last_plan(), &out.back());  // a shrink takes out only its members
    TakeOutPart(out.back());
  }
  SetEnv(p, true);
  env_.allow_preemption = false;
  ScheduleResult r = scheduler_->Evaluate(*p.job);
  for (auto it = out.rbegin(); it != out.rend(); ++it) PutBackPart(*it);
  if (nodes != nullptr && r.placed()) {
    nodes->clear();
    for (const MemberPlacement& m : r.placement.members) nodes->push_back(m.node);
  }
  return r.placed();
}

CycleReport QueueManager::Cycle(absl::Time now) {
  CycleReport rep;
  env_.now = now;
  tree_->Advance(now);
  // 1. Victims whose grace period is over.
  std::vector<std::string> to_kill;
  for (int32_t s = 0; s < running_.num_slots(); ++s) {
    if (running_.live(s) && running_.at(s).terminating && running_.at(s).kill_at <= now) {
      to_kill.push_back(running_.at(s).key);
    }
  }
  for (const std::string& k : to_kill) Kill(k, now, &rep);

  // 2. Order (queue_manager_order.cc). Entries point into pending_, which
  // only the job being scheduled leaves, and which only Kill adds to (below,
  // without a grace period): then the rest of the entries are looked up again.
  std::vector<OrderEntry>& order = order_;
  OrderPending(&order);

  // 3-4. Schedule in order, with backfill behind the first job that waits.
  reservations_.clear();
  backfill_reservations_ = 0;
  reserved_node_sets_.clear();
  dry_runs_left_ = config_.reservation_max_dry_runs;
  env_.keep_off_before = absl::InfinitePast();
  env_.reserved_from.assign(cluster_->num_node_slots(), absl::InfiniteFuture());
  // A job identical in shape (queue, priority, members, constraints) to one
  // that already failed this cycle under the same backfill rule fails the
  // same way: skip it. This keeps a cycle O(distinct shapes) rather than
  // O(pending) for a homogeneous backlog. failed_shapes_[{shape, mask}]
  // holds for this cycle while its gen is failed_gen_.
  ++failed_gen_;
  failed_shapes_.clear();
  // Preemptions in flight, for reclaim decisions; refreshed after each plan.
  RefreshReclaimView();
  for (size_t oi = 0; oi < order.size(); ++oi) {
    if (order[oi].p == nullptr) continue;
    Pending& p = *order[oi].p;
    const std::string& key = *order[oi].key;
    if (p.nominated && !p.victims.empty()) {  // waiting for its victims, its room held
      HoldPlannedRoom(p, key);
      continue;
    }
    // The reservations this job would still be running at: it keeps off their nodes.
    const uint64_t avoid = ReservationsBefore(now + p.runtime);
    const bool keyed = p.protected_jobs.empty() && !p.nominated && p.shape >= 0;
    // The search memo's key: the reserved nodes themselves tell masks apart.
    const int64_t shape = keyed ? int64_t{p.shape} * 2 + (avoid != 0) : -1;
    if (keyed) {
      auto f = failed_shapes_.find({p.shape, avoid});
      if (f != failed_shapes_.end() && f->second.gen == failed_gen_) {
        p.reason = f->second.reason;
        p.reason_class = f->second.reason_class;
        p.waits_for_room = f->second.waits_for_room;
        continue;
      }
    }
    SetEnv(p, true);
    int blocking = -2;  // -1: the fleet is full, not the job's queue
    bool quota_ok = tree_->Check(p.leaf, env_.demand, {}, &blocking).empty();
    // A job that accepts several GPU models may only land on those whose
    // quota admits it: schedule a copy restricted to them.
    const model::Job* job = p.job.get();
    model::Job restricted;
    std::vector<ModelId> models = GpuModelsOf(*p.job);
    // The models the quota refuses, said with the reason when the job waits: the fit check
    // then only saw the others ("the largest node has 4" was an L40S node, not the fleet).
    std::vector<std::string> quota_refused;
    if (models.size() > 1) {
      restricted = *p.job;
      restricted.gpu_models.clear();
      for (ModelId m : models) {
        std::string why = tree_->Check(p.leaf, AdmissionDemand(*p.job, m), {});
        if (why.empty()) {
          restricted.gpu_models.push_back(cluster_->model_name(m));
        } else {
          quota_refused.push_back(absl::StrCat(cluster_->model_name(m), ": ", why));
        }
      }
      if (!restricted.gpu_models.empty()) {
        job = &restricted;
        quota_ok = true;
        env_.quota_checked = true;
      }
    }
    env_.keep_off_before = now + p.runtime;
    preemption_->Reset();
    // A search that failed for this shape on this state fails again
    // (search_memo.h): the plugin takes the remembered plan.
    const std::vector<NodeId>* reserved = avoid != 0 ? &ReservedNodes(avoid) : nullptr;
    const SearchMemo::Gens before = Gens();
    const uint64_t state = memo_.StateId(before);
    env_.known_failure = shape >= 0 ? memo_.Find(shape, state, now, reserved) : nullptr;
    if (env_.known_failure != nullptr) ++memo_.hits;
    // Quota the reservations it overlaps will need is charged while it tries.
    ChargeReservations(avoid, +1);
    ScheduleResult r = scheduler_->Schedule(*job);
    ChargeReservations(avoid, -1);
    if (!r.placed()) memo_.Absorb(before, Gens());  // members assumed were forgotten
    if (shape >= 0 && env_.known_failure == nullptr && preemption_->ran() &&
        env_.allow_preemption && SearchMemo::Cacheable(preemption_->last_plan(), env_.policy)) {
      memo_.Store(shape, state, NextCandidateTime(now), reserved, preemption_->last_plan());
      ++memo_.stores;
    }
    env_.known_failure = nullptr;
    ++rep.attempts;
    if (attempt_observer_) attempt_observer_(*job, r);
    env_.quota_checked = false;
    if (r.placed()) {
      env_.keep_off_before = absl::InfinitePast();
      FitToQuota(p, &r.placement);
      Start(p, r.placement, now, &rep, r.trace.explanation);
      continue;
    }
    // The plan is verified (and, without a grace period, carried out) under
    // the same backfill rule as the attempt.
    // Dry runs (VerifyPlan, ComputeReservation) put back what they take out.
    SearchMemo::Gens dry = Gens();
    std::vector<NodeId> planned;
    const bool verified = !r.victims.empty() && VerifyPlan(p, r.victims, &planned);
    memo_.Absorb(dry, Gens());
    if (verified) {
      const std::string key_copy = key;  // Kill below may move pending_'s entries
      const std::string& key = key_copy;
      const VictimPlan& plan = preemption_->last_plan();
      ++rep.preemptions;
      p.nominated = true;
      p.victims.clear();
      absl::Time deadline = now + config_.preemption.grace_period;
      p.planned_nodes = std::move(planned);
      p.planned_start = deadline;
      for (const std::string& v : r.victims) {
        RunningJob* rj = running_.Find(v);
        rj->terminating = true;
        ++manager_gen_;
        rj->kill_at = deadline;
        rj->preempted_by = key;
        p.victims.insert(v);
        MarkShrink(plan, rj);
        rep.events.push_back({QueueEvent::Kind::kCheckpointSignal, v, key, deadline,
                              absl::StrCat("checkpoint now; preempted for ", key), rj->dropping});
      }
      p.reason = absl::StrFormat(
          "admitted after preemption: waiting for %d gang(s) (%d GPUs for %d needed) to "
          "checkpoint and %s",
          r.victims.size(), plan.evicted_milli / 1000, plan.needed_milli / 1000,
          plan.shrink() ? "shrink" : "exit");
      p.reason_class = WaitReason::kPreempting;
      rep.events.push_back({QueueEvent::Kind::kNominated, key, "", deadline, p.reason});
      if (config_.preemption.grace_period == absl::ZeroDuration()) {
        for (const std::string& v : r.victims) Kill(v, now, &rep);
        ++failed_gen_;  // capacity came back
        // Kill added to pending_, which may have moved its entries.
        for (size_t i = oi + 1; i < order.size(); ++i) {
          auto e = pending_.find(order[i].job->key());
          order[i].p = e == pending_.end() ? nullptr : &e->second;
          order[i].key = e == pending_.end() ? nullptr : &e->first;
        }
        auto again = pending_.find(key);
        if (again != pending_.end()) {
          SetEnv(again->second, true);
          ScheduleResult r2 = scheduler_->Schedule(*again->second.job);
          if (attempt_observer_) attempt_observer_(*again->second.job, r2);
          if (r2.placed()) {
            FitToQuota(again->second, &r2.placement);
            Start(again->second, r2.placement, now, &rep, r2.trace.explanation);
          }
        }
      }
      // Later jobs of this cycle keep off the room it waits for.
      if (auto held = pending_.find(key);
          held != pending_.end() && held->second.nominated && !held->second.victims.empty()) {
        HoldPlannedRoom(held->second, key);
      }
      RefreshReclaimView();
      env_.keep_off_before = absl::InfinitePast();
      continue;
    }
    env_.keep_off_before = absl::InfinitePast();
    // A job that checkpoints may borrow the room it kept off, until shortly
    // before the reservation it overlaps starts (lend_reserved).
    if (avoid != 0 && config_.lend_reserved && p.checkpoints && !r.unresolvable &&
        StartOnLoan(p, *job, avoid, now, &rep)) {
      continue;  // p is gone from pending_
    }
    p.nominated = false;
    p.waits_for_room = (quota_ok || blocking == -1) && !r.unresolvable;
    p.reason = r.reason.empty() ? "does not fit" : r.reason;
    if (preemption_->ran() && !preemption_->last_plan().reason.empty()) {
      p.reason = absl::StrCat(p.reason, "; preemption: ", preemption_->last_plan().reason);
    } else if (!r.victims.empty()) {
      p.reason = absl::StrCat(p.reason, "; preemption: the planned victims would not make room");
    }
    if (r.unresolvable) p.reason = absl::StrCat(p.reason, " (no preemption can help)");
    if (job == &restricted && !quota_refused.empty()) {
      p.reason = absl::StrCat(p.reason, "; the queue's quota rules out ",
                              absl::StrJoin(quota_refused, "; "));
    }
    p.reason_class = r.unresolvable     ? WaitReason::kUnschedulable
                     : p.waits_for_room ? WaitReason::kNoRoom
                                        : WaitReason::kOverQuota;
    bool made_reservation = false;
    // A job that waits for room (its queue admits it, or only the full fleet
    // does not) gets the next reservation.
    if (config_.backfill && backfill_reservations_ < config_.reservations && p.waits_for_room) {
      dry = Gens();
      std::optional<Reservation> res = ComputeReservation(p, now);
      memo_.Absorb(dry, Gens());
      if (backfill_reservations_ == 0) rep.started_before_reservation = rep.started;
      if (res) {
        made_reservation = true;
        p.reason = absl::StrCat(p.reason, "; reserved to start by ",
                                absl::FormatTime(res->start, absl::UTCTimeZone()));
        p.reason_class = WaitReason::kReserved;
        AddReservation(*std::move(res));
      }
    }
    // A reservation changes what later jobs may use, and a job of the same
    // shape may get the next one: cache only failures that made none.
    if (keyed && !made_reservation) {
      FailedShape& f = failed_shapes_[{p.shape, avoid}];
      f.gen = failed_gen_;
      f.reason = p.reason;
      f.reason_class = p.reason_class;
      f.waits_for_room = p.waits_for_room;
    }
  }
  if (backfill_reservations_ == 0) rep.started_before_reservation = rep.started;
  rep.reservations = reservations_;
  return rep;
}

}  // namespace tessera::sched
