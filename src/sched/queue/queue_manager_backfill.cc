// QueueManager's backfill reservations (step 4 of Cycle, queue_manager.h):
// where and when the waiting jobs that hold a reservation will start, and
// which nodes and quota a job started now must leave them so that it delays
// none of them; the holds that keep a nominated preemptor's room; and the
// loans of reserved room to jobs that checkpoint (lend_reserved), which the
// reservation search counts as gone when their loan's grace period ends.

#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/gpu_model_name.h"
#include "sched/queue/queue_manager.h"

namespace tessera::sched {

const Reservation* QueueManager::ReservationOf(absl::string_view key) const {
  for (const Reservation& r : reservations_) {
    if (r.job == key) return &r;
  }
  return nullptr;
}

uint64_t QueueManager::ReservationsBefore(absl::Time end) const {
  uint64_t mask = 0;
  for (size_t i = 0; i < reservations_.size(); ++i) {
    if (reservations_[i].start < end) mask |= uint64_t{1} << i;
  }
  return mask;
}

const std::vector<NodeId>& QueueManager::ReservedNodes(uint64_t mask) {
  auto [it, added] = reserved_node_sets_.try_emplace(mask);
  if (added) {
    for (size_t i = 0; i < reservations_.size(); ++i) {
      if ((mask >> i & 1) == 0) continue;
      it->second.insert(it->second.end(), reservations_[i].nodes.begin(),
                        reservations_[i].nodes.end());
    }
    std::sort(it->second.begin(), it->second.end());
    it->second.erase(std::unique(it->second.begin(), it->second.end()), it->second.end());
  }
  return it->second;
}

void QueueManager::ChargeReservations(uint64_t mask, int sign) {
  for (size_t i = 0; i < reservations_.size(); ++i) {
    const Reservation& r = reservations_[i];
    if ((mask >> i & 1) == 0 || r.leaf < 0) continue;
    if (sign > 0) {
      tree_->Add(r.leaf, r.demand);
    } else {
      tree_->Remove(r.leaf, r.demand);
    }
  }
}

bool QueueManager::AddReservation(Reservation r) {
  if (reservations_.size() >= 64) return false;
  for (NodeId n : r.nodes) env_.reserved_from[n] = std::min(env_.reserved_from[n], r.start);
  if (!r.hold) ++backfill_reservations_;
  reservations_.push_back(std::move(r));
  // Masks name reservations by index: a new one changes no existing set.
  return true;
}

void QueueManager::HoldPlannedRoom(const Pending& p, const std::string& key) {
  // Only with loans, whose evictions rely on it; the default keeps the behaviour measured
  // before (holds alone cost ~1 point of whole-run utilization in `sim replay`, issue 27).
  if (!config_.lend_reserved || p.planned_nodes.empty()) return;
  Reservation r;
  r.job = key;
  r.start = p.planned_start;
  r.nodes = p.planned_nodes;
  // Nodes only: the preemptor's quota is already pledged (RefreshReclaimView), and charging it
  // again would make its own queue look over its guarantee to the next reclaim.
  r.hold = true;
  (void)AddReservation(std::move(r));
}

std::optional<QueueManager::Loan> QueueManager::LoanFor(uint64_t mask, absl::Time now) const {
  Loan loan;
  absl::Time first = absl::InfiniteFuture();
  for (size_t i = 0; i < reservations_.size() && i < 64; ++i) {
    if (((mask >> i) & 1u) == 0) continue;
    loan.lenders.push_back(reservations_[i].job);
    first = std::min(first, reservations_[i].start);
  }
  if (loan.lenders.empty()) return std::nullopt;
  // The eviction's grace period ends as the earliest of them starts.
  loan.until = first - config_.preemption.grace_period;
  if (loan.until - now < std::max(config_.min_loan, config_.preemption.min_runtime)) {
    return std::nullopt;
  }
  return loan;
}

bool QueueManager::StartOnLoan(Pending& p, const model::Job& job, uint64_t mask, absl::Time now,
                               CycleReport* rep) {
  std::optional<Loan> loan = LoanFor(mask, now);
  if (!loan) return false;
  // The attempt keeps off nothing (env_.keep_off_before is past) and charges no reservation.
  SetEnv(p, true);
  env_.allow_preemption = false;
  const SearchMemo::Gens before = Gens();
  ScheduleResult r = scheduler_->Schedule(job);
  ++rep->attempts;
  if (attempt_observer_) attempt_observer_(job, r);
  if (!r.placed()) {
    memo_.Absorb(before, Gens());  // members assumed were forgotten
    return false;
  }
  FitToQuota(p, &r.placement);
  Start(p, r.placement, now, rep,
        absl::StrCat(r.trace.explanation, r.trace.explanation.empty() ? "" : "; ",
                     "on room lent by the reservation of ", absl::StrJoin(loan->lenders, ", "),
                     " until ", absl::FormatTime(loan->until, absl::UTCTimeZone())),
        &*loan);
  ++rep->loans;
  return true;
}

absl::Time QueueManager::NextLoanEnd(absl::Time now) const {
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [lender, borrowers] : loans_) {
    for (const std::string& k : borrowers) {
      const RunningJob* b = running_.Find(k);
      if (b != nullptr && b->LentTo(lender) && b->lease_until > now) {
        next = std::min(next, b->lease_until);
      }
    }
  }
  return next;
}

std::optional<Reservation> QueueManager::ComputeReservation(const Pending& p, absl::Time now) {
  const std::string key = p.job->key();
  std::vector<std::pair<absl::Time, int32_t>> order;
  for (int32_t s = 0; s < running_.num_slots(); ++s) {
    if (!running_.live(s)) continue;
    const RunningJob& rj = running_.at(s);
    // A job past its expected end (its estimate was low) is expected to run
    // as long again: taking it as gone now would promise room it holds.
    absl::Time end = rj.expected_end;
    if (end <= now) end = now + std::max(absl::Minutes(1), rj.expected_end - rj.start);
    // A job on room this one lent leaves when its loan's grace period ends.
    if (rj.LentTo(key)) {
      end = std::min(end, std::max(now, rj.lease_until) + config_.preemption.grace_period);
    }
    // A victim ends at its kill time or expected end; one being shrunk runs on.
    order.push_back({rj.terminating && !rj.shrinking() ? std::min(rj.kill_at, end) : end, s});
  }
  // Released in order of (end, slot), popped from a min-heap: the search
  // usually stops after a few releases, so sorting them all would be wasted.
  const auto later = std::greater<std::pair<absl::Time, int32_t>>();
  std::make_heap(order.begin(), order.end(), later);
  // Whole GPUs the job needs (a fractional share can fit on a partly used GPU).
  int64_t need = 0;
  for (const auto& g : p.job->groups) {
    if (!g.resources.fractional()) need += int64_t{g.count} * g.resources.gpus;
  }
  std::vector<ModelId> models;
  for (ModelId m = 0; m < cluster_->num_models(); ++m) {
    if (model::AnyGpuModelMatches(p.job->gpu_models, cluster_->model_name(m))) models.push_back(m);
  }
  auto accepted = [&](ModelId m) {
    return std::find(models.begin(), models.end(), m) != models.end();
  };
  // Nodes earlier reservations hold are out of this one's reach whenever
  // they free (conservative: a reservation holds its nodes from its start
  // on): their whole free GPUs do not count toward `need`.
  const uint64_t all = AllReservations();
  const std::vector<NodeId>* held = all != 0 ? &ReservedNodes(all) : nullptr;
  // A necessary condition for a dry run to place the job, from the fleet's
  // free histograms without the nodes earlier reservations hold: every
  // whole-GPU group's members fit somewhere, and all of them together fit
  // the free GPUs. A dry run of a 512-member gang costs far more than this,
  // and most release steps of a big gang's search fail it.
  auto may_fit = [&]() {
    FreeHistogram h;
    for (ModelId m : models) {
      const FreeHistogram& f = cluster_->cluster_free(m);
      for (size_t k = 0; k < h.nodes.size(); ++k) h.nodes[k] += f.nodes[k];
      h.free_gpus += f.free_gpus;
    }
    if (h.free_gpus < need) return false;
    if (held != nullptr) {
      for (NodeId n : *held) {
        const NodeState& st = cluster_->state(n);
        if (st.indexed() && accepted(st.model)) h.Remove(st.whole_free);
      }
      if (h.free_gpus < need) return false;
    }
    for (const auto& g : p.job->groups) {
      if (g.resources.gpus > 0 && !g.resources.fractional() &&
          h.MembersThatFit(g.resources.gpus) < g.count) {
        return false;
      }
    }
    return true;
  };
  std::optional<Reservation> res;
  // Slots taken out; the running set itself does not change here.
  std::vector<int32_t> out;
  // With the quota: taking a job out returns its queue's usage too, so the
  // dry run answers "fits and admitted" at that moment. A job the full fleet
  // holds back (the root's capacity, guarantees other queues hold) starts
  // only when both hold; a start that ignored the quota would be a promise
  // the next cycle breaks.
  SetEnv(p, true);
  env_.allow_preemption = false;
  env_.keep_off_before = absl::InfiniteFuture();
  // Earlier reservations hold their quota as they hold their nodes.
  ChargeReservations(all, +1);
  for (size_t i = 0; !order.empty() && i < static_cast<size_t>(config_.reservation_max_releases);
       ++i) {
    std::pop_heap(order.begin(), order.end(), later);
    const std::pair<absl::Time, int32_t> cur = order.back();
    order.pop_back();
    const RunningJob& rj = running_.at(cur.second);
    out.push_back(cur.second);
    TakeOut(rj);
    // Jobs ending at the same moment are released together.
    if (!order.empty() && order.front().first == cur.first) continue;
    if (!may_fit()) continue;
    if (dry_runs_left_ <= 0) break;
    --dry_runs_left_;
    ScheduleResult r = scheduler_->Evaluate(*p.job);
    if (r.placed()) {
      Reservation rv;
      rv.job = p.job->key();
      rv.start = std::max(now, cur.first);
      rv.leaf = p.leaf;
      rv.demand = env_.demand;
      for (const MemberPlacement& m : r.placement.members) rv.nodes.push_back(m.node);
      res = std::move(rv);
      break;
    }
  }
  for (auto it = out.rbegin(); it != out.rend(); ++it) PutBack(running_.at(*it));
  ChargeReservations(all, -1);
  env_.keep_off_before = absl::InfinitePast();
  return res;
}

}  // namespace tessera::sched
