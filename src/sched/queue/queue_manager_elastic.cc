// QueueManager's elastic half: Resize (shrink after a lost node, or the
// second step of Grow) and Grow (place a running job's missing members).
//
// Algorithm (Grow)
//   1. Refuse while pending work has a claim on the room: a preemption in
//      flight (a nominated job or a signalled victim), or a pending job its
//      quota admits that waited for room at the last Cycle, unless it holds
//      a backfill reservation (the grow keeps off every reserved node, as a
//      backfilled job that never ends would).
//   2. Build a job of the missing members only (per group, the ordinals not
//      held, in order; at most up_to members in all when given), on the GPU model the job already
//      runs on, with minMember 1, and ask the Scheduler for a dry run (Evaluate) with the job's own
//      queue charge (quota PreFilter: one more member must fit it) and preemption off. The same
//      plugins decide; there is no second placement code path. Placed members beyond what the quota
//      admits are given back (the last first).
//   3. Map the placed members back to their group and ordinal, merge them
//      with the held ones (sorted by group, then ordinal) and Resize. A job
//      that requires one topology domain grows only inside the one it has.
#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "sched/plugins/preemption.h"
#include "sched/queue/queue_manager.h"

namespace tessera::sched {
namespace {

bool SameMember(const MemberPlacement& a, const MemberPlacement& b) {
  if (a.group != b.group || a.member != b.member || a.node != b.node ||
      a.cpu_milli != b.cpu_milli || a.memory_mib != b.memory_mib ||
      a.gpus.size() != b.gpus.size()) {
    return false;
  }
  for (size_t i = 0; i < a.gpus.size(); ++i) {
    if (a.gpus[i].gpu != b.gpus[i].gpu || a.gpus[i].milli != b.gpus[i].milli) return false;
  }
  return true;
}

}  // namespace

absl::Status QueueManager::Resize(absl::string_view key, const Placement& placement,
                                  absl::Time now) {
  RunningJob* rj = running_.Find(key);
  if (rj == nullptr) return absl::NotFoundError(absl::StrCat("job ", key, " is not running"));
  if (!rj->job->gang.elastic) {
    return absl::FailedPreconditionError(absl::StrCat("job ", key, " is not elastic"));
  }
  if (rj->terminating) {
    return absl::FailedPreconditionError(absl::StrCat("job ", key, " is being preempted"));
  }
  const Placement* cur = cluster_->FindPlacement(key);
  if (cur == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("job ", key, " holds no placement"));
  }
  const model::Job& job = *rj->job;
  if (placement.members.empty()) {
    return absl::InvalidArgumentError("placement: an elastic job keeps at least one member");
  }
  // Validate everything before changing anything.
  std::vector<const MemberPlacement*> kept, added;
  for (size_t i = 0; i < placement.members.size(); ++i) {
    const MemberPlacement& m = placement.members[i];
    if (m.group < 0 || m.group >= static_cast<int32_t>(job.groups.size()) || m.member < 0 ||
        m.member >= job.groups[m.group].count) {
      return absl::InvalidArgumentError(
          absl::StrCat("placement.members[", i, "]: no member ", m.member, " in group ", m.group));
    }
    for (size_t k = 0; k < i; ++k) {
      if (placement.members[k].group == m.group && placement.members[k].member == m.member) {
        return absl::InvalidArgumentError(
            absl::StrCat("placement.members[", i, "]: member placed twice"));
      }
    }
    if (m.node < 0 || m.node >= cluster_->num_node_slots() || !cluster_->state(m.node).present) {
      return absl::InvalidArgumentError(absl::StrCat("placement.members[", i, "]: no such node"));
    }
    for (const GpuGrant& g : m.gpus) {
      if (g.gpu < 0 || g.gpu >= cluster_->state(m.node).num_gpus ||
          !cluster_->state(m.node).healthy(g.gpu)) {
        return absl::InvalidArgumentError(
            absl::StrCat("placement.members[", i, "]: GPU ", int{g.gpu}, " is not healthy"));
      }
    }
    const bool same = std::any_of(cur->members.begin(), cur->members.end(),
                                  [&](const MemberPlacement& o) { return SameMember(o, m); });
    (same ? kept : added).push_back(&m);
  }
  // New members take free room first; on failure nothing has changed.
  for (size_t i = 0; i < added.size(); ++i) {
    absl::Status s = cluster_->Assume(*added[i]);
    if (!s.ok()) {
      for (size_t k = 0; k < i; ++k) cluster_->Forget(*added[k]);
      return s;
    }
  }
  // Release the old binding (the dropped members' GPUs come back) and take
  // the kept members' GPUs again: they were just freed and are healthy, so
  // this cannot fail.
  tree_->Advance(now);
  tree_->Remove(rj->leaf, rj->usage);
  (void)cluster_->Release(key);
  for (const MemberPlacement* m : kept) (void)cluster_->Assume(*m);
  Placement bound;
  bound.job_key = std::string(key);
  bound.members = placement.members;
  (void)cluster_->Bind(bound);
  ModelId model = DemandModel(job);
  for (const MemberPlacement& m : placement.members) {
    if (!m.gpus.empty()) {
      model = cluster_->state(m.node).model;
      break;
    }
  }
  rj->usage = PlacedDemand(job, placement.members, model);
  rj->gpu_milli = 0;
  for (const MemberPlacement& m : placement.members) {
    for (const GpuGrant& g : m.gpus) rj->gpu_milli += g.milli;
  }
  tree_->Add(rj->leaf, rj->usage);
  running_.SetMembers(key, placement.members);
  return absl::OkStatus();
}

QueueManager::GrowResult QueueManager::Grow(absl::string_view key, absl::Time now, int32_t up_to) {
  GrowResult out;
  RunningJob* rj = running_.Find(key);
  if (rj == nullptr || !rj->job->gang.elastic) {
    out.reason = rj == nullptr ? "not running" : "not elastic";
    return out;
  }
  // 1. Pending work first.
  for (int32_t s = 0; s < running_.num_slots(); ++s) {
    if (running_.live(s) && running_.at(s).terminating) {
      out.reason = absl::StrCat("a preemption is in progress (", running_.at(s).key, ")");
      return out;
    }
  }
  for (const auto& [k, p] : pending_) {
    if (p.nominated) {
      out.reason = absl::StrCat("a preemption is in progress (for ", k, ")");
      return out;
    }
    if (p.waits_for_room && ReservationOf(k) == nullptr) {
      out.reason = absl::StrCat("pending job ", k, " waits for room");
      return out;
    }
  }
  // 2. A job of the missing members.
  const model::Job& job = *rj->job;
  const Placement* cur = cluster_->FindPlacement(key);
  if (cur == nullptr) {
    out.reason = "holds no placement";
    return out;
  }
  std::vector<std::vector<bool>> held(job.groups.size());
  for (size_t g = 0; g < job.groups.size(); ++g) held[g].assign(job.groups[g].count, false);
  for (const MemberPlacement& m : cur->members) {
    if (m.group >= 0 && m.group < static_cast<int32_t>(held.size()) && m.member >= 0 &&
        m.member < static_cast<int32_t>(held[m.group].size())) {
      held[m.group][m.member] = true;
    }
  }
  model::Job missing = job;
  missing.groups.clear();
  std::vector<int32_t> origin;                 // missing group -> job group
  std::vector<std::vector<int32_t>> ordinals;  // missing group -> job ordinals
  // Members that may be added: all missing ones, or up to `up_to` in all.
  int64_t room = up_to > 0 ? up_to - static_cast<int64_t>(cur->members.size()) : INT64_MAX;
  for (size_t g = 0; g < job.groups.size(); ++g) {
    std::vector<int32_t> ords;
    for (int32_t m = 0; m < job.groups[g].count && room > 0; ++m) {
      if (!held[g][m]) {
        ords.push_back(m);
        --room;
      }
    }
    if (ords.empty()) continue;
    model::MemberGroup mg = job.groups[g];
    mg.count = static_cast<int32_t>(ords.size());
    missing.groups.push_back(std::move(mg));
    origin.push_back(static_cast<int32_t>(g));
    ordinals.push_back(std::move(ords));
  }
  if (missing.groups.empty()) {
    out.reason = "at its maximum";
    return out;
  }
  missing.gang.min_member = 1;
  missing.gang.timeout = absl::ZeroDuration();
  ModelId model = kNoModel;
  for (const MemberPlacement& m : cur->members) {
    if (!m.gpus.empty()) {
      model = cluster_->state(m.node).model;
      break;
    }
  }
  if (model != kNoModel) missing.gpu_models = {cluster_->model_name(model)};
  env_.now = now;
  env_.leaf = rj->leaf;
  const ModelId demand_model = model == kNoModel ? DemandModel(missing) : model;
  env_.demand = AdmissionDemand(missing, demand_model);  // one member: grow by what fits
  env_.quota_checked = false;
  static const absl::flat_hash_set<std::string> kNone;
  env_.protected_jobs = &kNone;
  env_.allow_preemption = false;
  // Keeps off every reservation, as a backfilled job that never ends would.
  env_.keep_off_before = absl::InfiniteFuture();
  preemption_->Reset();
  ScheduleResult r = scheduler_->Evaluate(missing);
  env_.keep_off_before = absl::InfinitePast();
  env_.allow_preemption = true;
  if (!r.placed()) {
    out.reason = r.reason.empty() ? "the missing members do not fit" : r.reason;
    return out;
  }
  // 3. As many as the queue's quota admits, merged, then resize.
  std::vector<MemberPlacement> extra = r.placement.members;
  while (extra.size() > 1 &&
         !tree_->Check(rj->leaf, PlacedDemand(missing, extra, demand_model), {}).empty()) {
    extra.pop_back();
  }
  std::vector<MemberPlacement> members = cur->members;
  std::vector<size_t> used(ordinals.size(), 0);
  for (MemberPlacement m : extra) {
    const int32_t g = m.group;
    m.group = origin[g];
    m.member = ordinals[g][used[g]++];
    members.push_back(std::move(m));
  }
  std::sort(members.begin(), members.end(), [](const MemberPlacement& a, const MemberPlacement& b) {
    return std::tie(a.group, a.member) < std::tie(b.group, b.member);
  });
  if (job.topology.required && job.topology.level != model::TopologyLevel::kNone) {
    auto domain = [&](NodeId n) -> int64_t {
      switch (job.topology.level) {
        case model::TopologyLevel::kRack:
          return cluster_->state(n).rack;
        case model::TopologyLevel::kBlock:
          return cluster_->state(n).block;
        default:
          return n;
      }
    };
    for (const MemberPlacement& m : members) {
      if (domain(m.node) != domain(members.front().node)) {
        out.reason = absl::StrCat("no room for more members in the job's ",
                                  model::TopologyLevelName(job.topology.level));
        return out;
      }
    }
  }
  Placement grown;
  grown.job_key = std::string(key);
  grown.members = std::move(members);
  if (absl::Status s = Resize(key, grown, now); !s.ok()) {
    out.reason = std::string(s.message());
    return out;
  }
  out.grown = true;
  out.added = static_cast<int32_t>(extra.size());
  out.placement = std::move(grown);
  return out;
}

}  // namespace tessera::sched
