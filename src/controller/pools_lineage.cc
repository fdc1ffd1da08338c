// The GPUPool, Checkpoint-retention and ModelVersion-lineage half of SchedulingController: the
// standalone wiring of the decisions both modes share (api/gpu_pool.h, api/checkpoints.h,
// api/model_lineage.h; docs/api.md, docs/queueing.md "GPU pools").
#include <algorithm>
#include <bit>
#include <limits>
#include <set>

#include "absl/strings/str_join.h"
#include "api/checkpoints.h"
#include "api/gpu_pool.h"
#include "api/model_lineage.h"
#include "controller/controller_internal.h"
#include "controller/scheduling_controller.h"

namespace tessera::controller {

using namespace internal;  // NOLINT: the module's own helpers

namespace {

std::vector<const Json*> Ptrs(const std::vector<Json>& v) {
  std::vector<const Json*> out;
  out.reserve(v.size());
  for (const Json& j : v) out.push_back(&j);
  return out;
}

// The object's namespace (default "default").
std::string NsOf(const Json& obj) {
  return obj.contains("metadata") ? Str(obj["metadata"], "namespace", "default") : "default";
}

// Queue -> the nodes its pools select, for every queue some pool names (api::QueuePoolNodes).
std::map<std::string, std::vector<std::string>> Confinement(
    const std::vector<const Json*>& pools, const std::vector<api::PoolNode>& nodes) {
  std::set<std::string> queues;
  for (const Json* p : pools) {
    if (!p->contains("spec") || !(*p)["spec"].is_object()) continue;
    auto qs = (*p)["spec"].find("queues");
    if (qs == (*p)["spec"].end() || !qs->is_array()) continue;
    for (const Json& q : *qs) {
      if (q.is_string()) queues.insert(q.get<std::string>());
    }
  }
  std::map<std::string, std::vector<std::string>> out;
  for (const std::string& q : queues) {
    if (auto n = api::QueuePoolNodes(q, pools, nodes)) out[q] = *std::move(n);
  }
  return out;
}

}  // namespace

void SchedulingController::InitPoolConfinement() {
  std::vector<const Json*> pools;
  for (const auto& [key, p] : pools_) pools.push_back(&p);
  queue_pool_nodes_ = Confinement(pools, PoolNodes());
}

std::vector<Json> SchedulingController::ListObjects(const std::string& prefix) {
  int64_t rev = std::numeric_limits<int64_t>::max();
  std::vector<store::KeyValue> kvs;
  std::vector<Json> out;
  if (!ListPrefix(prefix.c_str(), &rev, &kvs).ok()) return out;
  out.reserve(kvs.size());
  for (const store::KeyValue& kv : kvs) {
    if (absl::StatusOr<Json> obj = ParseStored(kv.value); obj.ok()) out.push_back(*std::move(obj));
  }
  return out;
}

Json SchedulingController::ResumePoint(const JobRec& rec) {
  const std::vector<Json> cps = ListObjects(absl::StrCat(kCheckpointsPrefix, rec.ns, "/"));
  std::optional<api::CheckpointRef> c = api::NewestReadyCheckpoint(rec.name, Ptrs(cps));
  return c ? api::ResumePointJson(*c) : Json();
}

// --- Checkpoint retention ---------------------------------------------------

void SchedulingController::ApplyRetention(const Json& checkpoint) {
  if (Str(StatusOf(checkpoint), "phase") != "Ready" || !checkpoint.contains("spec")) return;
  const std::string ns = NsOf(checkpoint);
  const std::string job_name = Str(checkpoint["spec"], "jobName");
  const std::string job_key = ObjectKey("trainingjobs", ns, job_name);
  absl::StatusOr<store::KeyValue> kv = store_.Get(job_key);
  if (!kv.ok()) return;  // no such job (yet, or any more): nothing to keep it by
  absl::StatusOr<Json> job = ParseStored(kv->value);
  if (!job.ok() || !job->contains("spec")) return;
  const int keep = api::CheckpointKeep((*job)["spec"]);
  if (keep <= 0) return;
  const std::vector<Json> cps = ListObjects(absl::StrCat(kCheckpointsPrefix, ns, "/"));
  std::vector<std::string> drop = api::CheckpointsBeyondRetention(job_name, Ptrs(cps), keep);
  if (drop.empty()) return;
  // A Checkpoint a ModelVersion was made from is its lineage: kept whatever its age.
  for (const Json& mv : ListObjects(absl::StrCat(kModelVersionsPrefix, ns, "/"))) {
    if (mv.contains("spec") && mv["spec"].is_object())
      std::erase(drop, Str(mv["spec"], "checkpoint"));
  }
  if (drop.empty()) return;
  std::vector<store::Op> ops;
  for (const std::string& name : drop)
    ops.push_back(store::Op::Delete(ObjectKey("checkpoints", ns, name)));
  const Change why{"CheckpointsPruned",
                   absl::StrCat("spec.checkpoint.keep is ", keep, ": deleted checkpoint",
                                drop.size() == 1 ? " " : "s ", absl::StrJoin(drop, ", "))};
  ops.push_back(EventOp(*job, kv->mod_revision, why));
  if (absl::StatusOr<int64_t> r = store_.Txn(ops); !r.ok()) {
    // Another writer deleted one first: the next Ready Checkpoint tries again.
    options_.log.Warn(
        "checkpoints not pruned",
        {{"job", job_name}, {"namespace", ns}, {"error", std::string(r.status().message())}});
    return;
  }
  LogChange(*job, why);
}

// --- GPUPools ---------------------------------------------------------------

void SchedulingController::OnPool(const std::string& key, const Json* obj) {
  if (obj == nullptr) {
    pools_.erase(key);
  } else {
    pools_[key] = *obj;
  }
  pools_dirty_ = true;
}

void SchedulingController::NotePoolFacts(NodeRec& rec, const Json& obj) {
  const bool was_cordoned_by_pool = !rec.pool_cordon.empty();
  std::map<std::string, std::string> labels;
  std::string cordon;
  if (auto meta = obj.find("metadata"); meta != obj.end() && meta->is_object()) {
    if (auto l = meta->find("labels"); l != meta->end() && l->is_object()) {
      for (const auto& [k, v] : l->items()) {
        if (v.is_string()) labels[k] = v.get<std::string>();
      }
    }
    if (auto a = meta->find("annotations"); a != meta->end() && a->is_object()) {
      cordon = Str(*a, kPoolCordonAnnotation);
    }
  }
  bool taint = false;
  if (auto spec = obj.find("spec"); spec != obj.end() && spec->is_object()) {
    if (auto t = spec->find("taints"); t != spec->end() && t->is_array()) {
      for (const Json& x : *t) taint |= x.is_object() && Str(x, "key") == kDrainTaintKey;
    }
  }
  std::string type = rec.id != sched::kNoNode ? cluster_->node(rec.id).gpu_model() : std::string();
  if (labels != rec.labels || type != rec.gpu_type || cordon != rec.pool_cordon ||
      taint != rec.drain_taint || was_cordoned_by_pool != !cordon.empty()) {
    pools_dirty_ = true;
  }
  rec.labels = std::move(labels);
  rec.gpu_type = std::move(type);
  rec.pool_cordon = std::move(cordon);
  rec.drain_taint = taint;
}

std::vector<api::PoolNode> SchedulingController::PoolNodes() const {
  std::vector<api::PoolNode> out;
  out.reserve(nodes_.size());
  for (const auto& [key, rec] : nodes_) {
    api::PoolNode n;
    n.name = rec->name;
    n.gpu_type = rec->gpu_type;
    n.labels = rec->labels;
    n.cordoned = rec->cordoned;
    if (rec->id != sched::kNoNode) {
      const int gpus = static_cast<int>(cluster_->node(rec->id).gpus.size());
      const sched::NodeState& st = cluster_->state(rec->id);
      n.gpus = gpus;
      n.unhealthy = std::popcount(rec->unhealthy & ((gpus >= 32 ? 0u : (1u << gpus)) - 1u));
      for (int g = 0; g < gpus; ++g) {
        if (st.healthy(g) && st.free_milli[g] < 1000) ++n.allocated;
      }
    }
    out.push_back(std::move(n));
  }
  std::sort(out.begin(), out.end(),
            [](const api::PoolNode& a, const api::PoolNode& b) { return a.name < b.name; });
  return out;
}

void SchedulingController::ConfineToPools(model::Job& job) const {
  auto it = queue_pool_nodes_.find(job.queue);
  if (it == queue_pool_nodes_.end()) return;
  model::NodeSelectorRequirement in_pools{"metadata.name", model::NodeSelectorRequirement::Op::kIn,
                                          it->second, /*field=*/true};
  // ANDed with the job's own rule: added to each of its ORed terms.
  if (job.node_affinity.empty()) job.node_affinity.emplace_back();
  for (model::NodeSelectorTerm& t : job.node_affinity) t.requirements.push_back(in_pools);
}

void SchedulingController::SyncPools(absl::Time now) {
  if (!pools_dirty_ && now - pools_synced_ < options_.queue_status_period) return;
  const bool structural = pools_dirty_;
  pools_dirty_ = false;
  pools_synced_ = now;
  const std::vector<api::PoolNode> nodes = PoolNodes();
  std::vector<const Json*> pools;
  for (const auto& [key, p] : pools_) pools.push_back(&p);

  // 1. Each pool's status, written when it differs from the stored one.
  for (const auto& [key, p] : pools_) {
    const Json want = api::PoolStatus(p, nodes);
    const Json& have = StatusOf(p);
    bool same = true;
    for (const auto& [k, v] : want.items()) same &= have.contains(k) && have[k] == v;
    if (same) continue;
    int64_t base = 0;
    absl::StatusOr<int64_t> w = Update(
        key, -1,
        [&want](Json& o) {
          Json& st = StatusOf(o);
          for (const auto& [k, v] : want.items()) st[k] = v;
          return true;
        },
        {"", "", false, false}, &base);
    if (!w.ok() && !absl::IsNotFound(w.status())) {
      options_.log.Warn("gpupool status not written",
                        {{"key", key}, {"error", std::string(w.status().message())}});
    }
  }
  if (!structural) return;  // allocations moved: cordons and confinement depend on nothing else

  // 2. Cordon / drain: each node gets what the pools selecting it ask; ending it undoes only
  // what a pool did.
  const std::set<std::string> cordon = api::NodesCordonedByPools(pools, nodes);
  const std::set<std::string> drain = api::NodesDrainedByPools(pools, nodes);
  for (const auto& [key, rec] : nodes_) {
    const std::string want = drain.count(rec->name)    ? "drain"
                             : cordon.count(rec->name) ? "cordon"
                                                       : "";
    // The annotation is "<mode>" or "<mode>+unschedulable": the node was cordoned by hand
    // before the pool came, and stays cordoned when the pool lets it go.
    const size_t plus = rec->pool_cordon.find('+');
    const std::string have = rec->pool_cordon.substr(0, plus);
    const bool kept = rec->pool_cordon.empty() ? rec->cordoned : plus != std::string::npos;
    if (want == have) continue;
    // A node cordoned by hand (no annotation) that a pool now only cordons is left alone.
    if (want == "cordon" && rec->pool_cordon.empty() && rec->cordoned) continue;
    const Change why =
        want.empty() ? Change{"PoolUncordoned",
                              absl::StrCat("no GPUPool cordons node ", rec->name, " any more")}
        : want == "drain"
            ? Change{"PoolDrained",
                     absl::StrCat("a GPUPool drains node ", rec->name, " (spec.drain)"), true}
            : Change{"PoolCordoned",
                     absl::StrCat("a GPUPool cordons node ", rec->name, " (spec.cordon)")};
    int64_t base = 0;
    absl::StatusOr<int64_t> w = Update(
        key, -1,
        [&want, kept](Json& o) {
          Json& meta = o["metadata"];
          Json& spec = o["spec"];
          if (!spec.is_object()) spec = Json::object();
          Json taints = Json::array();
          if (spec.contains("taints") && spec["taints"].is_array()) {
            for (const Json& t : spec["taints"]) {
              if (!t.is_object() || Str(t, "key") != kDrainTaintKey) taints.push_back(t);
            }
          }
          if (want == "drain") taints.push_back({{"key", kDrainTaintKey}, {"effect", "NoExecute"}});
          if (taints.empty()) {
            spec.erase("taints");
          } else {
            spec["taints"] = std::move(taints);
          }
          spec["unschedulable"] = !want.empty() || kept;
          if (want.empty()) {
            if (meta.contains("annotations") && meta["annotations"].is_object()) {
              meta["annotations"].erase(kPoolCordonAnnotation);
              if (meta["annotations"].empty()) meta.erase("annotations");
            }
          } else {
            meta["annotations"][kPoolCordonAnnotation] = kept ? want + "+unschedulable" : want;
          }
          return true;
        },
        why, &base);
    if (!w.ok()) {
      options_.log.Warn("pool cordon not written",
                        {{"node", rec->name}, {"error", std::string(w.status().message())}});
    }
  }

  // 3. Queue confinement: queued jobs of a queue whose node set changed are admitted again (the
  // new rule in their node affinity). Bound jobs keep running where they are.
  std::map<std::string, std::vector<std::string>> confinement = Confinement(pools, nodes);
  if (confinement == queue_pool_nodes_) return;
  std::set<std::string> changed;
  for (const auto& [q, n] : confinement) {
    auto it = queue_pool_nodes_.find(q);
    if (it == queue_pool_nodes_.end() || it->second != n) changed.insert(q);
  }
  for (const auto& [q, n] : queue_pool_nodes_) {
    if (!confinement.count(q)) changed.insert(q);
  }
  queue_pool_nodes_ = std::move(confinement);
  std::vector<JobRec*> readmit;
  for (const auto& [key, rec] : jobs_) {
    if (rec->job && !rec->bound && !Terminal(rec->phase) && changed.count(rec->job->queue)) {
      readmit.push_back(rec.get());
    }
  }
  std::sort(readmit.begin(), readmit.end(),
            [](const JobRec* a, const JobRec* b) { return a->key < b->key; });
  for (JobRec* rec : readmit) {
    absl::StatusOr<store::KeyValue> kv = store_.Get(rec->key);
    if (!kv.ok()) continue;
    absl::StatusOr<Json> obj = ParseStored(kv->value);
    if (!obj.ok()) continue;
    ReleaseMemory(*rec);
    Admit(*rec, *obj, false);
  }
  if (!readmit.empty()) cycle_needed_ = true;
}

// --- ModelVersion lineage ---------------------------------------------------

void SchedulingController::SyncModelVersions() {
  if (!model_versions_dirty_) return;
  model_versions_dirty_ = false;
  const std::vector<Json> mvs = ListObjects(kModelVersionsPrefix);
  if (mvs.empty()) return;
  std::map<std::string, std::vector<Json>> services, checkpoints;  // by namespace
  for (Json& s : ListObjects(kInferenceServicesPrefix)) services[NsOf(s)].push_back(std::move(s));
  for (Json& c : ListObjects(kCheckpointsPrefix)) checkpoints[NsOf(c)].push_back(std::move(c));
  for (const Json& mv : mvs) {
    const std::string ns = NsOf(mv);
    const std::string name = Str(mv["metadata"], "name");
    const std::vector<std::string> served = api::ServingInferenceServices(name, Ptrs(services[ns]));
    const Json* ckpt = nullptr;
    const std::string want_ckpt = mv.contains("spec") ? Str(mv["spec"], "checkpoint") : "";
    if (!want_ckpt.empty()) {
      for (const Json& c : checkpoints[ns]) {
        if (Str(c["metadata"], "name") == want_ckpt) ckpt = &c;
      }
    }
    const Json want = api::ModelVersionStatus(mv, ckpt, served);
    const Json& have = StatusOf(mv);
    bool same = have.contains("checkpoint") == want.contains("checkpoint");
    for (const auto& [k, v] : want.items()) same &= have.contains(k) && have[k] == v;
    if (same) continue;
    int64_t base = 0;
    absl::StatusOr<int64_t> w = Update(
        ObjectKey("modelversions", ns, name), -1,
        [&want](Json& o) {
          Json& st = StatusOf(o);
          st.erase("checkpoint");
          for (const auto& [k, v] : want.items()) st[k] = v;
          return true;
        },
        {"", "", false, false}, &base);
    if (!w.ok() && !absl::IsNotFound(w.status())) {
      options_.log.Warn("modelversion status not written",
                        {{"modelversion", name}, {"error", std::string(w.status().message())}});
    }
  }
}

}  // namespace tessera::controller
