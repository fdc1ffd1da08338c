// QueueManager's pending order (step 2 of Cycle) and the per-job caches that
// keep a cycle's cost per pending job small.
//
// Order, lexicographic: ready (nominated, its victims gone) first, priority
// (higher first), covered by its queues' guarantees first, restarting after
// a failure first, its leaf's fair-share key (QueueTree::Key, lower first),
// creation time, submission sequence. The first four and the leaf's rank
// among the leaves' keys are packed into one integer, so the sort compares
// integers; ranks give equal keys equal ranks, so jobs of two leaves with
// equal keys fall through to creation time, as the keys themselves did.
//
// What changes between cycles: the leaves' keys (decayed usage moves with
// time: recomputed per leaf, not per job), guarantee cover (queue usage:
// computed once per shape, a job's queue and demand), ready (a flag). What
// does not while a job waits: its admission demand and its shape string,
// computed once per job (EnsureCached) and kept until the tree is rebuilt or
// the fleet gains a GPU model.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sched/queue/queue_manager.h"

namespace tessera::sched {

std::string QueueManager::Shape(const Pending& p) const {
  const model::Job& j = *p.job;
  // Not worth keying; always tried.
  if (!j.tolerations.empty() || !j.node_affinity.empty()) return "";
  std::string s =
      absl::StrCat(p.leaf, "|", j.priority, "|", static_cast<int>(j.placement), "|",
                   static_cast<int>(j.topology.level), j.topology.required, "|", j.gang.min_member,
                   j.gang.elastic ? "e" : "", "|", absl::StrJoin(j.gpu_models, ","), "|");
  for (const auto& g : j.groups) {
    absl::StrAppend(&s, g.count, "x", g.resources.gpus, ":", g.resources.gpu_milli, ":",
                    g.resources.gpu_memory_mib, ":", g.resources.cpu_milli, ":",
                    g.resources.memory_mib, ";");
    for (const auto& [name, amount] : g.resources.scalars)
      absl::StrAppend(&s, name, "=", amount, ";");
  }
  for (const auto& [k, v] : j.node_selector) absl::StrAppend(&s, k, "=", v, ",");
  return s;
}

void QueueManager::EnsureCached(Pending& p) {
  if (p.cache_epoch == cache_epoch_) return;
  p.admission = AdmissionDemand(*p.job, DemandModel(*p.job));
  std::string s = Shape(p);
  if (s.empty()) {
    p.shape = -1;
  } else {
    auto [it, added] =
        shape_ids_.try_emplace(std::move(s), static_cast<int32_t>(shape_ids_.size()));
    p.shape = it->second;
  }
  p.cache_epoch = cache_epoch_;
}

absl::Time QueueManager::NextCandidateTime(absl::Time now) {
  // Starts, kills and signals bump manager_gen_: reuse within one state.
  if (now == next_candidate_.now && manager_gen_ == next_candidate_.gen) {
    return next_candidate_.next;
  }
  absl::Time next = absl::InfiniteFuture();
  const absl::Duration min_runtime = config_.preemption.min_runtime;
  for (int32_t s = 0; s < running_.num_slots(); ++s) {
    if (!running_.live(s)) continue;
    const RunningJob& rj = running_.at(s);
    if (rj.terminating) continue;
    // Eligible from start + minRuntime on (preemption.cc: now - start < min).
    const absl::Time t = rj.start + min_runtime;
    if (t > now) next = std::min(next, t);
    // A lent job becomes its lender's candidate when its loan ends.
    if (!rj.lent_for.empty() && rj.lease_until > now) next = std::min(next, rj.lease_until);
  }
  next_candidate_ = {now, manager_gen_, next};
  return next;
}

void QueueManager::OrderPending(std::vector<OrderEntry>* out) {
  if (cached_models_ != cluster_->num_models()) {
    cached_models_ = cluster_->num_models();
    ++cache_epoch_;  // DemandModel may pick another model
  }
  if (shape_ids_.size() > 4 * pending_.size() + 4096) {
    // Shapes of jobs long gone: start the table again (ids are reused, so
    // the searches remembered by id go too).
    shape_ids_.clear();
    memo_.Clear();
    ++cache_epoch_;
  }
  const int nq = tree_->num_queues();
  std::vector<int> pending_count(nq, 0);
  for (const auto& [k, p] : pending_) ++pending_count[p.leaf];
  std::vector<QueueTree::OrderKey> keys(nq);
  std::vector<int> leaves;
  for (int q = 0; q < nq; ++q) {
    tree_->SetPending(q, pending_count[q]);
    if (tree_->IsLeaf(q)) {
      keys[q] = tree_->Key(q);
      leaves.push_back(q);
    }
  }
  std::sort(leaves.begin(), leaves.end(), [&](int a, int b) { return keys[a] < keys[b]; });
  std::vector<uint32_t> rank(nq, 0);
  for (size_t i = 1; i < leaves.size(); ++i) {
    const bool tie = !(keys[leaves[i - 1]] < keys[leaves[i]]);
    rank[leaves[i]] = rank[leaves[i - 1]] + (tie ? 0 : 1);
  }
  // Guarantee cover per shape (same queue, same demand) this cycle:
  // -1 unknown, else 0/1.
  std::vector<int8_t> covered_by_shape(shape_ids_.size(), -1);
  const bool any_guarantee = tree_->any_guarantee();
  auto covered_of = [&](const Pending& p) {
    // A job its queues' guarantees cover goes before one that would borrow,
    // as in Kueue and YuniKorn: otherwise fair share hands freed GPUs to a
    // queue already at its guarantee, the queue below its guarantee
    // reclaims them once min_runtime has passed, and so on (a ping-pong
    // `sim replay` found).
    if (!any_guarantee) return false;  // no job is covered
    const ResourceList& d = p.admission;
    bool covered = std::any_of(d.begin(), d.end(), [](int64_t v) { return v > 0; });
    for (int q = p.leaf; covered && q >= 0; q = tree_->parent(q)) {
      covered = tree_->WithinGuarantee(q, d);
    }
    return covered;
  };
  // Entries go where they were in the last cycle's order (Pending's
  // order_stamp/order_pos; a slot taken twice or out of range goes with the
  // new jobs), new jobs after them. The order is total, so whatever the
  // input the result is the same; in the last order the entries mostly are
  // sorted already, and then sorting the new ones and merging is O(n).
  out->assign(last_order_size_, OrderEntry{});
  std::vector<OrderEntry>& fresh = fresh_entries_;
  fresh.clear();
  for (auto& [k, p] : pending_) {
    EnsureCached(p);
    bool covered;
    if (p.shape >= 0 && static_cast<size_t>(p.shape) < covered_by_shape.size()) {
      int8_t& c = covered_by_shape[p.shape];
      if (c < 0) c = covered_of(p) ? 1 : 0;
      covered = c == 1;
    } else {
      covered = covered_of(p);
    }
    const bool ready = p.nominated && p.victims.empty();
    // Priority descending: flip the order-preserving unsigned image.
    const uint64_t prio = ~(static_cast<uint32_t>(p.job->priority) ^ 0x80000000u) & 0xffffffffu;
    const uint64_t r = (uint64_t{!ready} << 63) | (prio << 31) | (uint64_t{!covered} << 30) |
                       (uint64_t{!p.restart} << 29) | (rank[p.leaf] & ((1u << 29) - 1));
    const OrderEntry e{r, p.job->creation_time, p.seq, &p, &k, p.job.get()};
    if (p.order_stamp == order_stamp_ && p.order_pos < out->size() &&
        (*out)[p.order_pos].p == nullptr) {
      (*out)[p.order_pos] = e;
    } else {
      fresh.push_back(e);
    }
  }
  out->erase(
      std::remove_if(out->begin(), out->end(), [](const OrderEntry& e) { return e.p == nullptr; }),
      out->end());
  auto less = [](const OrderEntry& a, const OrderEntry& b) {
    if (a.rank != b.rank) return a.rank < b.rank;
    if (a.creation != b.creation) return a.creation < b.creation;
    return a.seq < b.seq;
  };
  if (!std::is_sorted(out->begin(), out->end(), less)) std::sort(out->begin(), out->end(), less);
  std::sort(fresh.begin(), fresh.end(), less);
  const size_t mid = out->size();
  out->insert(out->end(), fresh.begin(), fresh.end());
  std::inplace_merge(out->begin(), out->begin() + mid, out->end(), less);
  ++order_stamp_;
  for (size_t i = 0; i < out->size(); ++i) {
    (*out)[i].p->order_stamp = order_stamp_;
    (*out)[i].p->order_pos = static_cast<uint32_t>(i);
  }
  last_order_size_ = out->size();
}

}  // namespace tessera::sched
