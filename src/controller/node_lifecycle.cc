// The node half of SchedulingController: registration, heartbeats, GPU
// health, cordon/drain, NotReady and eviction (see scheduling_controller.h).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "controller/controller_internal.h"
#include "controller/node_codec.h"
#include "controller/node_leases.h"
#include "controller/scheduling_controller.h"

namespace tessera::controller {

using namespace internal;  // NOLINT: the module's own helpers

void SchedulingController::EvictNode(sched::NodeId id, const std::string& phase, const Change& why,
                                     const std::function<bool(const JobRec&)>& pick) {
  std::vector<std::string> keys;
  for (const auto& [key, p] : cluster_->bound()) {
    for (const sched::MemberPlacement& m : p.members) {
      if (m.node == id) {
        keys.push_back(key);
        break;
      }
    }
  }
  std::sort(keys.begin(), keys.end());  // deterministic order
  for (const std::string& k : keys) {
    JobRec* rec = JobBySchedKey(k);
    if (rec == nullptr || (pick && !pick(*rec))) continue;
    // A lost, drained or reconfigured node costs an elastic job only its
    // members there, while it keeps its minReplicas elsewhere.
    if (Shrink(
            *rec, [id](const sched::MemberPlacement& m) { return m.node == id; }, why)) {
      continue;
    }
    if (absl::Status s = Requeue(*rec, phase, why); !s.ok()) {
      options_.log.Error(
          "requeue not written",
          {{"job", rec->name}, {"namespace", rec->ns}, {"error", std::string(s.message())}});
    }
  }
}

// --- Nodes ----------------------------------------------------------------

void SchedulingController::OnNodePut(const std::string& key, const Json& obj, int64_t rev,
                                     bool at_start) {
  const absl::Time now = clock_.Now();
  const Json& st = StatusOf(obj);
  auto it = nodes_.find(key);
  if (it == nodes_.end()) {
    absl::StatusOr<model::Node> node = NodeFromObject(obj);
    auto rec = std::make_unique<NodeRec>();
    rec->name = Str(obj["metadata"], "name");
    rec->revision = rev;
    rec->spec_dump = SpecDumpOfNode(obj);
    rec->heartbeat = Str(st, "lastHeartbeatTime");
    rec->last_seen = now;
    rec->not_ready_since = now;
    rec->unhealthy = UnhealthyMask(obj);
    rec->pool = PoolOf(obj);
    if (!node.ok()) {
      options_.log.Warn("node spec invalid",
                        {{"node", rec->name}, {"error", std::string(node.status().message())}});
      nodes_.emplace(key, std::move(rec));
      return;
    }
    rec->cordoned = node->unschedulable;
    absl::StatusOr<sched::NodeId> id = cluster_->AddNode(*node);
    if (!id.ok()) {
      options_.log.Warn("node not added",
                        {{"node", rec->name}, {"error", std::string(id.status().message())}});
      nodes_.emplace(key, std::move(rec));
      return;
    }
    rec->id = *id;
    NodeRec& r = *rec;
    nodes_.emplace(key, std::move(rec));
    const std::string phase = Str(st, "phase", "Unknown");
    if (at_start) {
      // Heartbeat clocks restart with the controller: no node is declared
      // NotReady (or evicted) early because the server was down.
      r.ready = phase != "NotReady";
    } else {
      r.ready = true;
      if (phase != "Ready") {
        pending_ready_.push_back(
            {key,
             rev,
             obj,
             {"Registered", absl::StrCat("node registered with ", node->gpus.size(), " ",
                                         node->gpu_model(), " GPUs in rack ", node->rack)}});
      }
    }
    if (!r.ready) (void)cluster_->SetSchedulable(r.id, false);
    capacity_dirty_ = true;
    return;
  }
  NodeRec& rec = *it->second;
  if (rev <= rec.revision) return;
  rec.revision = rev;
  if (rec.id == sched::kNoNode) {  // was invalid: try again as a new node
    nodes_.erase(it);
    OnNodePut(key, obj, rev, at_start);
    return;
  }
  const std::string dump = SpecDumpOfNode(obj);
  if (dump != rec.spec_dump) {
    absl::StatusOr<model::Node> node = NodeFromObject(obj);
    if (!node.ok()) {
      options_.log.Warn("node update ignored",
                        {{"node", rec.name}, {"error", std::string(node.status().message())}});
    } else {
      // The scheduler has no in-place node update: the gangs on the node are
      // requeued (a NoExecute taint, i.e. drain, wants exactly that), elastic
      // jobs that keep their minReplicas elsewhere shrink instead, and the
      // node is re-added.
      WritePhases();  // a job that finished is released, not requeued
      // A NoExecute taint the node did not have before is a drain.
      std::string drain;
      for (const model::Taint& t : node->taints) {
        if (t.effect != model::TaintEffect::kNoExecute) continue;
        const auto& old = cluster_->node(rec.id).taints;
        if (std::find(old.begin(), old.end(), t) == old.end()) drain = t.key;
      }
      EvictNode(
          rec.id, "Preempted",
          drain.empty()
              ? Change{"NodeChanged", absl::StrCat("node ", rec.name, " was reconfigured"), true}
              : Change{"NodeDrained",
                       absl::StrCat("node ", rec.name, " drained (NoExecute taint ", drain, ")"),
                       true});
      std::vector<std::string> released;
      (void)cluster_->RemoveNode(rec.name, &released);
      for (const std::string& k : released) {
        if (JobRec* j = JobBySchedKey(k)) {
          ReleaseMemory(*j);
          Enqueue(*j);
        }
      }
      rec.spec_dump = dump;
      rec.pool = PoolOf(obj);
      rec.cordoned = node->unschedulable;
      absl::StatusOr<sched::NodeId> id = cluster_->AddNode(*node);
      rec.id = id.ok() ? *id : sched::kNoNode;
      rec.unhealthy = UnhealthyMask(obj);
      if (id.ok() && !rec.ready) (void)cluster_->SetSchedulable(rec.id, false);
      capacity_dirty_ = true;
      RecordEvent(obj, rev, {"NodeChanged", "node spec changed; gangs on it were requeued"});
    }
  }
  if (rec.id == sched::kNoNode) return;
  auto us = obj["spec"].find("unschedulable");
  const bool cordon = us != obj["spec"].end() && us->is_boolean() && us->get<bool>();
  if (cordon != rec.cordoned) {
    rec.cordoned = cordon;
    (void)cluster_->SetSchedulable(rec.id, !cordon && rec.ready);
    RecordEvent(obj, rev,
                {cordon ? "Cordoned" : "Uncordoned",
                 cordon ? "node marked unschedulable" : "node schedulable again"});
  }
  const std::string hb = Str(st, "lastHeartbeatTime");
  if (!hb.empty() && hb != rec.heartbeat) {
    rec.heartbeat = hb;
    NoteHeartbeat(key, rec, now);
  }
  const uint32_t mask = UnhealthyMask(obj);
  if (mask != rec.unhealthy) {
    if ((mask & ~rec.unhealthy) != 0) WritePhases();  // as above: GPUs turning unhealthy requeue
    std::vector<std::string> affected;
    const uint32_t changed = mask ^ rec.unhealthy;
    const int n = static_cast<int>(cluster_->node(rec.id).gpus.size());
    for (int g = 0; g < n; ++g) {
      if (((changed >> g) & 1u) == 0) continue;
      const bool now_bad = ((mask >> g) & 1u) != 0;
      (void)cluster_->SetGpuHealth(rec.id, g, !now_bad, now_bad ? &affected : nullptr);
      if (now_bad) {
        ++gpu_failures_seen_;
        RecordEvent(obj, rev,
                    {"GpuUnhealthy",
                     absl::StrCat("GPU ", g, " turned unhealthy"),
                     true,
                     true,
                     {{"gpu", g}}});
      } else {
        options_.log.Info("GPU healthy again", {{"node", rec.name}, {"gpu", g}});
      }
    }
    rec.unhealthy = mask;
    std::sort(affected.begin(), affected.end());
    affected.erase(std::unique(affected.begin(), affected.end()), affected.end());
    for (const std::string& k : affected) {
      if (JobRec* j = JobBySchedKey(k); j != nullptr && j->bound) {
        const Change why{"GpuUnhealthy",
                         absl::StrCat("a GPU of node ", rec.name, " turned unhealthy"), true};
        // An elastic job loses only the members on an unhealthy GPU.
        const sched::ClusterState& cs = *cluster_;
        auto on_bad_gpu = [&cs](const sched::MemberPlacement& m) {
          for (const sched::GpuGrant& g : m.gpus) {
            if (!cs.state(m.node).healthy(g.gpu)) return true;
          }
          return false;
        };
        if (!Shrink(*j, on_bad_gpu, why)) (void)Requeue(*j, "NodeLost", why);
      }
    }
  }
}

void SchedulingController::OnNodeDelete(const std::string& key) {
  auto it = nodes_.find(key);
  if (it == nodes_.end()) return;
  NodeRec& rec = *it->second;
  if (rec.id != sched::kNoNode) {
    EvictNode(rec.id, "NodeLost",
              {"NodeDeleted", absl::StrCat("node ", rec.name, " was deleted"), true});
    std::vector<std::string> released;
    (void)cluster_->RemoveNode(rec.name, &released);
    for (const std::string& k : released) {
      if (JobRec* j = JobBySchedKey(k)) {
        ReleaseMemory(*j);
        Enqueue(*j);
      }
    }
  }
  capacity_dirty_ = true;
  nodes_.erase(it);
}

void SchedulingController::NoteHeartbeat(const std::string& key, NodeRec& rec, absl::Time now) {
  rec.last_seen = now;
  if (rec.ready) return;
  rec.ready = true;
  rec.evicted = false;
  (void)cluster_->SetSchedulable(rec.id, !rec.cordoned);
  WriteNodeReadiness(key, rec, true, "HeartbeatResumed", "heartbeats resumed",
                     {"NodeReady", "heartbeats resumed"}, now);
}

void SchedulingController::NodeTimers() {
  if (options_.node_grace <= absl::ZeroDuration()) return;
  const absl::Time now = clock_.Now();
  if (options_.leases != nullptr) {
    // Heartbeats that renewed only the in-memory lease (no store event).
    for (const auto& [name, at] : options_.leases->TakeRenewals()) {
      const std::string key = ObjectKey("nodes", "", name);
      auto it = nodes_.find(key);
      if (it == nodes_.end() || it->second->id == sched::kNoNode) continue;
      NoteHeartbeat(key, *it->second, now);
    }
  }
  std::vector<std::pair<std::string, NodeRec*>> due;
  for (auto& [key, rec] : nodes_) {
    if (rec->id == sched::kNoNode) continue;
    if ((rec->ready && now - rec->last_seen > options_.node_grace) ||
        (!rec->ready && !rec->evicted && now - rec->not_ready_since >= options_.eviction_delay)) {
      due.emplace_back(key, rec.get());
    }
  }
  std::sort(due.begin(), due.end());
  for (auto& [key, rec] : due) {
    if (rec->ready) {
      rec->ready = false;
      rec->evicted = false;
      rec->not_ready_since = now;
      (void)cluster_->SetSchedulable(rec->id, false);
      const std::string msg =
          absl::StrCat("no heartbeat for ", absl::FormatDuration(now - rec->last_seen));
      WriteNodeReadiness(key, *rec, false, "NodeStatusUnknown", msg, {"NodeNotReady", msg, true},
                         now);
      if (options_.eviction_delay > absl::ZeroDuration()) continue;
    }
    EvictNode(rec->id, "NodeLost",
              {"NodeLost",
               absl::StrCat("node ", rec->name, " NotReady for ",
                            absl::FormatDuration(now - rec->not_ready_since)),
               true});
    rec->evicted = true;
  }
}

void SchedulingController::WriteRegistrations() {
  if (pending_ready_.empty()) return;
  std::vector<PendingReady> pending;
  pending.swap(pending_ready_);
  const absl::Time now = clock_.Now();
  auto ready = [&](Json& o) {
    Json& s = StatusOf(o);
    s["phase"] = "Ready";
    SetCondition(s, "Ready", "True", "Registered", "node registered", now);
    return true;
  };
  // One at a time, from what is stored: a node that moved on since it registered.
  auto write_one = [&](const PendingReady& p) {
    auto it = nodes_.find(p.key);
    if (it == nodes_.end()) return;  // deleted since
    WriteNodeReadiness(p.key, *it->second, true, "Registered", "node registered", p.event, now);
  };
  struct Planned {
    const PendingReady* p;
    PreparedWrite prepared;
  };
  std::vector<Planned> planned;
  planned.reserve(pending.size());
  for (const PendingReady& p : pending) {
    if (!nodes_.contains(p.key)) continue;
    absl::StatusOr<PreparedWrite> w = PrepareUpdate(p.key, p.revision, ready, p.event, &p.obj);
    if (w.ok()) {
      planned.push_back({&p, *std::move(w)});
    } else if (!absl::IsCancelled(w.status())) {
      write_one(p);
    }
  }
  std::vector<PreparedWrite*> ops;
  ops.reserve(planned.size());
  for (Planned& p : planned) ops.push_back(&p.prepared);
  CommitInRuns(ops, [&](size_t begin, size_t end, const absl::StatusOr<int64_t>& rev) {
    for (size_t i = begin; i < end; ++i) {
      if (!rev.ok()) {
        write_one(*planned[i].p);
        continue;
      }
      LogChange(planned[i].prepared.obj, planned[i].p->event);
      auto it = nodes_.find(planned[i].p->key);
      if (it != nodes_.end() && planned[i].prepared.base == it->second->revision) {
        it->second->revision = *rev;
      }
    }
  });
}

void SchedulingController::WriteNodeReadiness(const std::string& key, NodeRec& rec, bool ready,
                                              const char* condition_reason,
                                              const std::string& condition_message,
                                              const Change& event, absl::Time now) {
  int64_t base = 0;
  absl::StatusOr<int64_t> w = Update(
      key, -1,
      [&](Json& o) {
        Json& s = StatusOf(o);
        s["phase"] = ready ? "Ready" : "NotReady";
        SetCondition(s, "Ready", ready ? "True" : "False", condition_reason, condition_message,
                     now);
        return true;
      },
      event, &base);
  if (w.ok() && base == rec.revision) rec.revision = *w;
}

}  // namespace tessera::controller
