// The autoscaling half of SchedulingController: an InferenceService with
// spec.slo runs as many replicas as its autoscaler recommends
// (controller/autoscaler.h; docs/control-plane.md, "Autoscaling").
//
// Such a service decodes to an elastic gang of replicas.max members that
// starts with max(1, replicas.min) (job_codec.cc). After each queue cycle
// (pending work had its turn first), for each bound one:
//   1. its replicas' fresh readings (status.replicaMetrics, written by their
//      node agents; only members placed now, on the node that reported,
//      written after the last resize) give the autoscaler's recommendation
//      `desired`;
//   2. desired < bound: the highest ordinals are dropped. The store first: the
//      smaller placement at a new generation (agents keep the surviving
//      replicas running, docs/agent.md), replicas, desiredReplicas,
//      lastScaleTime and an Event ScaledDown with the reason; then memory
//      (QueueManager::Resize returns the GPUs and the quota charge);
//   3. desired > bound: QueueManager::Grow places missing replicas, at most
//      up to desired (memory first, then the store; undone if the write
//      fails), Event ScaledUp. No room: desiredReplicas is written with the
//      reason it waits, and the grow is tried again after the next cycle;
//   4. otherwise a changed desiredReplicas alone is written.
// Services without spec.slo never get here: they are placed as before.
#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "controller/controller_internal.h"
#include "controller/scheduling_controller.h"

namespace tessera::controller {

using namespace internal;  // NOLINT: the module's own helpers

namespace {

std::string MemberName(const model::Job& job, const sched::MemberPlacement& m) {
  return model::MemberKey(job.groups[m.group].name, m.member);
}

}  // namespace

void SchedulingController::ObserveService(JobRec& rec, const Json& obj) {
  if (Str(obj, "kind") != "InferenceService") return;
  auto spec_it = obj.find("spec");
  const std::optional<ServiceSlo> slo =
      spec_it != obj.end() ? ServiceSloOf(*spec_it) : std::nullopt;
  rec.slo = slo;
  if (!rec.slo) {
    rec.autoscaler.reset();
    rec.readings.clear();
    return;
  }
  const Json& st = StatusOf(obj);
  rec.desired_written = IntOr(st, "desiredReplicas", -1);
  rec.readings.clear();
  auto metrics = st.find("replicaMetrics");
  if (metrics == st.end() || !metrics->is_object()) return;
  for (auto it = metrics->begin(); it != metrics->end(); ++it) {
    std::optional<ReplicaReading> r = ReplicaReadingOf(it.value());
    if (!r) continue;
    rec.readings[it.key()] = {Str(it.value(), "node"), *r};
  }
}

void SchedulingController::WriteDesired(JobRec& rec, int32_t desired, const Change& why,
                                        absl::Time now) {
  absl::StatusOr<int64_t> w = UpdateBinding(
      rec,
      [&](Json& st) {
        st["desiredReplicas"] = desired;
        st["lastScaleTime"] = Timestamp(now);
        return true;
      },
      why);
  if (w.ok()) rec.desired_written = desired;
}

void SchedulingController::AutoscaleServices(absl::Time now) {
  if (metrics_) {
    metrics_->inference_desired.Clear();
    metrics_->inference_current.Clear();
  }
  std::vector<JobRec*> services;
  for (const auto& [key, rec] : jobs_) {
    if (!rec->slo || !rec->job || !rec->job->gang.elastic || !rec->bound || !rec->in_qm ||
        !BoundPhase(rec->phase) || qm_->Phase(rec->job->key()) != sched::JobPhase::kRunning ||
        cluster_->FindPlacement(rec->job->key()) == nullptr) {
      continue;
    }
    services.push_back(rec.get());
  }
  std::sort(services.begin(), services.end(), GrowsFirst<JobRec>);
  for (JobRec* rec : services) {
    const std::string key = rec->job->key();
    const sched::Placement before = *cluster_->FindPlacement(key);
    const int32_t held = static_cast<int32_t>(before.members.size());
    std::vector<ReplicaReading> readings;
    for (const sched::MemberPlacement& m : before.members) {
      auto it = rec->readings.find(MemberName(*rec->job, m));
      if (it != rec->readings.end() && it->second.first == cluster_->node(m.node).name) {
        readings.push_back(it->second.second);
      }
    }
    if (!rec->autoscaler) rec->autoscaler = std::make_unique<Autoscaler>(options_.autoscaler);
    const ScaleDecision d =
        rec->autoscaler->Recommend(*rec->slo, held, readings, now, rec->last_resize);
    if (metrics_) {
      metrics_->inference_desired.With({rec->ns, rec->name}).Set(d.desired);
      metrics_->inference_current.With({rec->ns, rec->name}).Set(held);
    }
    // The Event of a scale step: reason, counts, the autoscaler's why, `what`.
    auto scaled = [&](const char* reason, const std::string& what) {
      return Change{reason,
                    absl::StrCat("autoscaler: ", held, " -> ", d.desired, " replicas: ", d.reason,
                                 "; ", what),
                    false,
                    true,
                    {{"desired", static_cast<int64_t>(d.desired)}}};
    };
    // What a resize writes besides WriteResize's own fields.
    auto also = [&](const std::vector<std::string>& dropped) {
      return [&, dropped](Json& st) {
        st["desiredReplicas"] = d.desired;
        st["lastScaleTime"] = Timestamp(now);
        auto metrics = st.find("replicaMetrics");
        if (metrics != st.end() && metrics->is_object()) {
          for (const std::string& n : dropped) metrics->erase(n);
        }
      };
    };
    if (d.desired < held) {
      // 2. Drop the highest ordinals: the store first, then memory.
      sched::Placement kept = before;
      std::sort(kept.members.begin(), kept.members.end(),
                [](const sched::MemberPlacement& a, const sched::MemberPlacement& b) {
                  return std::tie(a.group, a.member) < std::tie(b.group, b.member);
                });
      std::vector<std::string> dropped, dropped_names;
      for (size_t i = d.desired; i < kept.members.size(); ++i) {
        dropped_names.push_back(MemberName(*rec->job, kept.members[i]));
        dropped.push_back(
            absl::StrCat(dropped_names.back(), " on ", cluster_->node(kept.members[i].node).name));
      }
      kept.members.resize(d.desired);
      const Change why = scaled("ScaledDown", "dropped " + absl::StrJoin(dropped, ", "));
      if (!WriteResize(*rec, kept, why, now, false, also(dropped_names))) continue;
      rec->desired_written = d.desired;
      if (absl::Status s = qm_->Resize(key, kept, now); !s.ok()) {
        // Memory keeps the larger binding: never less than the store.
        options_.log.Error("scale down not applied in memory",
                           {{"job", rec->name}, {"error", std::string(s.message())}});
      }
      ++stats_.scale_downs;
      if (metrics_) metrics_->inference_scales.With({"down"}).Inc();
      cycle_needed_ = true;  // the freed room may start a pending job
    } else if (d.desired > held) {
      // 3. Grow toward desired: memory first, then the store.
      sched::QueueManager::GrowResult g = qm_->Grow(key, now, d.desired);
      if (!g.grown) {
        if (d.desired != rec->desired_written) {
          WriteDesired(*rec, d.desired, scaled("ScaledUp", "waiting for room: " + g.reason), now);
        }
        continue;
      }
      std::vector<std::string> added;
      for (const sched::MemberPlacement& m : AddedMembers(before, g.placement)) {
        added.push_back(
            absl::StrCat(MemberName(*rec->job, m), " on ", cluster_->node(m.node).name));
      }
      const Change why = scaled("ScaledUp", "added " + absl::StrJoin(added, ", "));
      if (!WriteResize(*rec, g.placement, why, now, false, also({}))) {
        // Memory must never hold less than the store: back to what it holds.
        if (absl::Status s = qm_->Resize(key, before, now); !s.ok()) {
          options_.log.Error("scale up not undone; re-listing",
                             {{"job", rec->name}, {"error", std::string(s.message())}});
          resync_ = true;
          return;
        }
        continue;
      }
      rec->desired_written = d.desired;
      ++stats_.scale_ups;
      if (metrics_) metrics_->inference_scales.With({"up"}).Inc();
    } else if (d.desired != rec->desired_written) {
      // 4. The count is right; say so (no Event: nothing moved).
      WriteDesired(*rec, d.desired, {"Autoscaled", d.reason, false, false}, now);
    }
  }
}

}  // namespace tessera::controller
