#include "sched/plugins/preemption.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "sched/plugins/freed_gpus.h"

namespace tessera::sched {
namespace {

struct Group {
  int32_t gpus;  // whole GPUs per member (a fractional member counts as 1)
  int32_t count;
};

struct Cost {
  int32_t k = 0;
  int32_t max_priority = 0;
  int64_t sum_priority = 0;
  int64_t disruptions = 0;  // earlier preemptions of the victims
  double work = 0;
  int64_t milli = 0;
  bool operator<(const Cost& o) const {
    if (k != o.k) return k < o.k;
    if (max_priority != o.max_priority) return max_priority < o.max_priority;
    if (sum_priority != o.sum_priority) return sum_priority < o.sum_priority;
    if (disruptions != o.disruptions) return disruptions < o.disruptions;
    if (std::abs(work - o.work) > 1e-6) return work < o.work;
    return milli < o.milli;
  }
};

class Search {
 public:
  Search(AdmissionEnv& env, const model::Job& job, const JobContext& ctx)
      : env_(env), cs_(*env.cluster), rs_(*env.running), job_(job), ctx_(ctx), freed_(cs_) {
    // The min_member smallest members must fit.
    std::vector<Group> all;
    for (const auto& g : job.groups) {
      if (g.resources.gpus <= 0) continue;
      all.push_back({g.resources.fractional() ? 1 : g.resources.gpus, g.count});
    }
    std::sort(all.begin(), all.end(),
              [](const Group& a, const Group& b) { return a.gpus < b.gpus; });
    int left = job.effective_min_member();
    for (Group g : all) {
      int take = std::min(left, g.count);
      if (take <= 0) break;
      groups_.push_back({g.gpus, take});
      need_gpus_ += int64_t{take} * g.gpus;
      left -= take;
    }
    std::vector<int32_t> group_gpus;
    for (const Group& g : groups_) group_gpus.push_back(g.gpus);
    freed_.set_group_gpus(std::move(group_gpus));
    level_ = job.topology.required ? job.topology.level : model::TopologyLevel::kNone;
    if (env_.tree != nullptr && env_.leaf >= 0) {
      quota_why_ = env_.tree->Check(env_.leaf, env_.demand, {}, &blocking_);
    }
    cap_milli_ = INT64_MAX;
    if (env_.policy.max_evicted_gpus > 0) cap_milli_ = env_.policy.max_evicted_gpus * 1000;
    if (env_.policy.max_evicted_ratio > 0) {
      cap_milli_ = std::min<int64_t>(
          cap_milli_, static_cast<int64_t>(env_.policy.max_evicted_ratio * need_gpus_ * 1000));
    }
  }

  VictimPlan Run() {
    VictimPlan plan;
    plan.needed_milli = need_gpus_ * 1000;
    std::vector<std::pair<int32_t, int32_t>> by_prio;  // (priority, slot)
    const bool may = MayHaveCandidates();
    for (int32_t s = 0; may && s < rs_.num_slots(); ++s) {
      if (!rs_.live(s) || !Eligible(rs_.at(s))) continue;
      by_prio.push_back({rs_.at(s).priority, s});
      if (rs_.at(s).job->gang.elastic && Surplus(rs_.at(s)) > 0) shrinkable_.push_back(s);
    }
    // Group by priority (few distinct values: a counting sort, not a sort).
    std::vector<int32_t> levels;
    for (auto [p, s] : by_prio) {
      if (std::find(levels.begin(), levels.end(), p) == levels.end()) levels.push_back(p);
      if (levels.size() > 64) break;
    }
    std::vector<int32_t> eligible;
    eligible.reserve(by_prio.size());
    if (levels.size() > 64) {
      std::sort(by_prio.begin(), by_prio.end());
      for (auto [p, s] : by_prio) eligible.push_back(s);
    } else {
      std::sort(levels.begin(), levels.end());
      std::vector<std::vector<int32_t>> buckets(levels.size());
      for (auto [p, s] : by_prio) {
        buckets[std::lower_bound(levels.begin(), levels.end(), p) - levels.begin()].push_back(s);
      }
      for (const auto& b : buckets) eligible.insert(eligible.end(), b.begin(), b.end());
    }
#ifndef NDEBUG
    if (!may) {  // the summary's promise, checked against the scan it saved
      for (int32_t s = 0; s < rs_.num_slots(); ++s) {
        assert(!rs_.live(s) || !Eligible(rs_.at(s)));
      }
    }
#endif
    if (eligible.empty()) {
      plan.reason =
          "no running job may be preempted for it (lower priority in its queue, "
          "borrowed capacity, and running at least the minimum runtime)";
      return plan;
    }
    bool capped = false;
    size_t end = 0;
    while (end < eligible.size()) {
      int32_t tier = rs_.at(eligible[end]).priority;
      while (end < eligible.size() && rs_.at(eligible[end]).priority == tier) ++end;
      if (env_.policy.gangs_first) end = eligible.size();  // one pass: fewest gangs first
      std::vector<int32_t> best;
      Cost best_cost;
      SearchTier(eligible, end, &best, &best_cost, &capped);
      if (!best.empty()) {
        plan.slots = best;
        plan.max_priority = best_cost.max_priority;
        plan.sum_priority = best_cost.sum_priority;
        plan.work_lost = best_cost.work;
        plan.evicted_milli = best_cost.milli;
        plan.evaluations = evals_;
        return plan;
      }
    }
    plan.evaluations = evals_;
    plan.reason = capped ? absl::StrCat("preemption would evict more than the cap of ",
                                        cap_milli_ / 1000, " GPUs")
                         : "no set of preemptible jobs makes room";
    return plan;
  }

 private:
  // False when no running job can be Eligible, from the running set's summary of priorities by
  // queue (a few entries) instead of a pass over every running job: the pass is most of a
  // failed search's cost with a backlog of jobs that cannot preempt (tens of thousands of
  // running jobs, hundreds of failed searches a cycle). The conditions are Eligible's, less
  // those that only narrow it (time run, terminating, protected), so true may still find none.
  bool MayHaveCandidates() {
    if (rs_.lent() > 0) return true;
    bool may = false;
    rs_.ForEachLeafMinPriority([&](int leaf, int32_t min_priority) {
      if (may) return;
      if (leaf == env_.leaf || env_.leaf < 0 || leaf < 0) {
        may = env_.policy.within_queue && min_priority < job_.priority;
        return;
      }
      const QueueInfo& qi = QueueFacts(leaf);
      if (!qi.borrowing) return;
      may = (env_.policy.cross_queue_lower_priority && min_priority < job_.priority) ||
            (env_.policy.reclaim && qi.mine_within_guarantee);
    });
    return may;
  }

  bool Eligible(const RunningJob& v) {
    if (v.terminating || v.job.get() == &job_) return false;
    // Its loan of this job's reserved room is over (QueueManagerConfig::lend_reserved).
    if (!v.lent_for.empty() && env_.now >= v.lease_until && v.LentTo(job_.key())) return true;
    if (env_.now - v.start < env_.policy.min_runtime) return false;
    if (env_.protected_jobs != nullptr && !env_.protected_jobs->empty() &&
        env_.protected_jobs->contains(v.key)) {
      return false;
    }
    if (v.leaf == env_.leaf || env_.leaf < 0 || v.leaf < 0) {
      return env_.policy.within_queue && v.priority < job_.priority;
    }
    // Another queue's job: only from a queue that borrows (guarantees hold).
    // Reclaim: any priority, when the preemptor's queue stays within its own
    // guarantee. Cross-queue priority preemption (optional): lower priority.
    QueueInfo& qi = QueueFacts(v.leaf);
    if (!qi.borrowing) return false;
    if (env_.policy.cross_queue_lower_priority && v.priority < job_.priority) return true;
    return env_.policy.reclaim && qi.mine_within_guarantee;
  }

  struct QueueInfo {
    bool borrowing = false;              // the victim's side borrows below the LCA
    bool mine_within_guarantee = false;  // the preemptor's side stays within guarantee
  };
  QueueInfo& QueueFacts(int victim_leaf) {
    auto it = queue_cache_.find(victim_leaf);
    if (it != queue_cache_.end()) return it->second;
    QueueInfo qi;
    bool tracked = false;
    for (int64_t d : env_.demand) tracked |= d > 0;
    if (env_.tree == nullptr || !tracked) {
      // No guarantee covers what the job asks for: nothing to protect.
      qi.borrowing = true;
      qi.mine_within_guarantee = false;
    } else {
      const QueueTree& t = *env_.tree;
      int lca = t.Lca(env_.leaf, victim_leaf);
      qi.mine_within_guarantee = true;
      ResourceList extra;
      for (int q = env_.leaf; q != lca && q >= 0; q = t.parent(q)) {
        // Demand of this queue's preemptors already admitted counts as used.
        extra = env_.demand;
        if (static_cast<size_t>(q) < env_.pledged.size()) {
          for (size_t r = 0; r < extra.size(); ++r) {
            extra[r] += env_.pledged[q][r] - (env_.own_pledge ? env_.demand[r] : 0);
          }
        }
        if (!t.WithinGuarantee(q, extra)) qi.mine_within_guarantee = false;
      }
      for (int q = victim_leaf; q != lca && q >= 0; q = t.parent(q)) {
        const ResourceList* leaving =
            static_cast<size_t>(q) < env_.leaving.size() ? &env_.leaving[q] : nullptr;
        if (t.Borrowing(q, env_.demand, leaving)) qi.borrowing = true;
      }
    }
    return queue_cache_.emplace(victim_leaf, qi).first->second;
  }

  int DomainOf(NodeId n) const {
    const NodeState& st = cs_.state(n);
    switch (level_) {
      case model::TopologyLevel::kRack:
        return st.rack;
      case model::TopologyLevel::kBlock:
        return st.block;
      case model::TopologyLevel::kNode:
        return n;
      case model::TopologyLevel::kNone:
        break;
    }
    return 0;
  }
  bool Usable(NodeId n) const {
    const NodeState& st = cs_.state(n);
    if (env_.KeepsOff(n)) return false;  // backfilling: room there belongs to a reservation
    return st.indexed() && ctx_.AllowsModel(st.model);
  }

  // Base whole-GPU fit of the domain: per group members, and free GPUs.
  void Base(int dom, std::vector<int64_t>* fit, int64_t* free) const {
    fit->assign(groups_.size(), 0);
    *free = 0;
    if (level_ == model::TopologyLevel::kNode) {
      if (!Usable(dom)) return;
      int w = cs_.state(dom).whole_free;
      for (size_t i = 0; i < groups_.size(); ++i) (*fit)[i] = w / groups_[i].gpus;
      *free = w;
      return;
    }
    for (ModelId m = 0; m < cs_.num_models(); ++m) {
      if (!ctx_.AllowsModel(m)) continue;
      const FreeHistogram& h = level_ == model::TopologyLevel::kRack    ? cs_.rack_free(dom, m)
                               : level_ == model::TopologyLevel::kBlock ? cs_.block_free(dom, m)
                                                                        : cs_.cluster_free(m);
      for (size_t i = 0; i < groups_.size(); ++i) (*fit)[i] += h.MembersThatFit(groups_[i].gpus);
      *free += h.free_gpus;
    }
  }

  // Whole GPUs freed in `dom` by evicting `set`; true when the job then fits
  // (placement quick check and quota).
  bool Feasible(int dom, const std::vector<int64_t>& base_fit, int64_t base_free,
                const int32_t* set, size_t n, int64_t* freed_out = nullptr) {
    ++evals_;
    int64_t milli = 0;
    for (size_t i = 0; i < n; ++i) {
      const RunningJob& v = rs_.at(set[i]);
      milli += v.gpu_milli;
      for (const MemberPlacement& m : v.members) Touch(dom, m, +1);
    }
    if (freed_out) *freed_out = freed_.whole();
    const bool fits = Fits(base_fit, base_free, freed_.whole(), freed_.members());
    freed_.Clear();
    if (milli > cap_milli_) {
      over_cap_ = true;
      return false;
    }
    if (!fits) return false;
    if (!quota_why_.empty()) {
      removed_.clear();
      for (size_t i = 0; i < n; ++i) {
        const RunningJob& v = rs_.at(set[i]);
        if (v.leaf >= 0) removed_.push_back({v.leaf, &v.usage});
      }
      if (!env_.tree->Admits(env_.leaf, env_.demand, removed_)) return false;
    }
    return true;
  }

  // With a quota check to make, the victim at `slot` taken out of (sign +1) or put back in (-1)
  // its queue's usage, so that each check is one Admits, not one per victim in the set.
  void Charge(int32_t slot, int sign) {
    const RunningJob& v = rs_.at(slot);
    if (quota_why_.empty() || v.leaf < 0) return;
    if (sign > 0) {
      env_.tree->TakeOutForSearch(v.leaf, v.usage);
    } else {
      env_.tree->PutBackAfterSearch(v.leaf, v.usage);
    }
  }
  // Feasible() for the set that freed_ and the queue tree hold (Greedy), of `milli` GPUs.
  bool FeasibleSoFar(const std::vector<int64_t>& base_fit, int64_t base_free, int64_t milli) {
    ++evals_;
    if (milli > cap_milli_) {
      over_cap_ = true;
      return false;
    }
    if (!Fits(base_fit, base_free, freed_.whole(), freed_.members())) return false;
    return quota_why_.empty() || env_.tree->Admits(env_.leaf, env_.demand, {});
  }

  // Adds (sign +1) or takes back (-1) member `m` in freed_ when its node is usable in `dom`.
  void Touch(int dom, const MemberPlacement& m, int sign) {
    if (DomainOf(m.node) == dom && Usable(m.node)) freed_.Change(m, sign);
  }
  // The victim at `slot`, all its members, in freed_ and (Charge) the queue tree.
  void Apply(int dom, int32_t slot, int sign) {
    Charge(slot, sign);
    for (const MemberPlacement& m : rs_.at(slot).members) Touch(dom, m, sign);
  }

  // The placement quick check: `dfree` whole GPUs and `dfit` members per group freed.
  bool Fits(const std::vector<int64_t>& base_fit, int64_t base_free, int64_t dfree,
            const std::vector<int64_t>& dfit) const {
    if (base_free + dfree < need_gpus_) return false;
    for (size_t i = 0; i < groups_.size(); ++i) {
      if (base_fit[i] + dfit[i] < groups_[i].count) return false;
    }
    return true;
  }

  // Feasible() for one victim whose members are on distinct nodes, without
  // the scratch bookkeeping (the common case; about half the cost).
  bool Single(int dom, const std::vector<int64_t>& base_fit, int64_t base_free, int32_t slot,
              int64_t* freed_out) {
    const RunningJob& v = rs_.at(slot);
    const size_t n = v.members.size();
    bool distinct = n <= 16;
    for (size_t i = 0; distinct && i < n; ++i) {
      for (size_t j = i + 1; j < n; ++j) {
        if (v.members[i].node == v.members[j].node) {
          distinct = false;
          break;
        }
      }
    }
    if (!distinct) return Feasible(dom, base_fit, base_free, &slot, 1, freed_out);
    ++evals_;
    std::vector<int64_t> dfit(groups_.size(), 0);
    int64_t dfree = 0;
    for (const MemberPlacement& m : v.members) {
      if (DomainOf(m.node) != dom || !Usable(m.node)) continue;
      const NodeState& st = cs_.state(m.node);
      int w = st.whole_free;
      for (const GpuGrant& g : m.gpus) {
        if (st.healthy(g.gpu) && st.free_milli[g.gpu] + g.milli == model::kMilliPerGpu) ++w;
      }
      for (size_t i = 0; i < groups_.size(); ++i) {
        dfit[i] += w / groups_[i].gpus - st.whole_free / groups_[i].gpus;
      }
      dfree += w - st.whole_free;
    }
    *freed_out = dfree;
    if (v.gpu_milli > cap_milli_) {
      over_cap_ = true;
      return false;
    }
    if (!Fits(base_fit, base_free, dfree, dfit)) return false;
    if (!quota_why_.empty()) {
      removed_.clear();
      if (v.leaf >= 0) removed_.push_back({v.leaf, &v.usage});
      if (!env_.tree->Admits(env_.leaf, env_.demand, removed_)) return false;
    }
    return true;
  }

  Cost CostOf(const int32_t* set, size_t n) const {
    Cost c;
    c.k = static_cast<int32_t>(n);
    for (size_t i = 0; i < n; ++i) {
      const RunningJob& v = rs_.at(set[i]);
      c.sum_priority += v.priority;
      c.disruptions += v.times_preempted;
      c.max_priority = i == 0 ? v.priority : std::max(c.max_priority, v.priority);
      c.work += v.WorkLost(env_.now);
      c.milli += v.gpu_milli;
    }
    return c;
  }

  bool HelpsQuota(const RunningJob& v) const {
    if (quota_why_.empty()) return true;
    if (blocking_ < 0) return true;
    return v.leaf >= 0 && env_.tree->IsAncestor(blocking_, v.leaf);
  }

  void SearchTier(const std::vector<int32_t>& eligible, size_t end, std::vector<int32_t>* best,
                  Cost* best_cost, bool* capped) {
    // Candidates per domain.
    absl::flat_hash_map<int, std::vector<int32_t>> by_dom;
    for (size_t i = 0; i < end; ++i) {
      int32_t s = eligible[i];
      if (level_ == model::TopologyLevel::kNone) {
        by_dom[0].push_back(s);
        continue;
      }
      int last = -1;
      for (const MemberPlacement& m : rs_.at(s).members) {
        int d = DomainOf(m.node);
        if (d == last) continue;
        auto& v = by_dom[d];
        if (v.empty() || v.back() != s) v.push_back(s);
        last = d;
      }
    }
    // With a quota refusal and no topology, victims anywhere may help.
    std::vector<int64_t> base_fit;
    int64_t base_free;
    std::vector<std::pair<int64_t, int32_t>> useful;  // (freed GPUs, slot)
    // Domains in id order, not the map's: the first of equally cheap plans wins
    // and the evaluation budget is spent in this order, so a hash order (seeded
    // per process) would make victims differ between runs of the same input.
    std::vector<int> doms;
    doms.reserve(by_dom.size());
    for (const auto& entry : by_dom) doms.push_back(entry.first);
    std::sort(doms.begin(), doms.end());
    for (int dom : doms) {
      const std::vector<int32_t>& cands = by_dom[dom];
      Base(dom, &base_fit, &base_free);
      int64_t deficit = std::max<int64_t>(need_gpus_ - base_free, 0);
      // Singles, and each candidate's usefulness.
      useful.clear();
      std::vector<int32_t> chosen;
      Cost chosen_cost;
      for (int32_t s : cands) {
        int64_t freed = 0;
        bool ok = Single(dom, base_fit, base_free, s, &freed);
        useful.push_back({freed, s});
        if (ok) {
          Cost c = CostOf(&s, 1);
          if (chosen.empty() || c < chosen_cost) chosen = {s}, chosen_cost = c;
        }
      }
      if (chosen.empty()) {
        // Lower bound on gangs needed.
        std::sort(useful.begin(), useful.end(), [](auto& a, auto& b) { return a.first > b.first; });
        int64_t acc = 0;
        int32_t lb = 0;
        for (auto& [f, s] : useful) {
          if (acc >= deficit && lb >= 1) break;
          acc += f;
          ++lb;
        }
        lb = std::max(lb, 2);
        if (acc < deficit) continue;  // even all of them do not make room
        if (!best->empty() && lb > best_cost->k) continue;
        if (cands.size() <= static_cast<size_t>(env_.policy.exhaustive_pair_limit) &&
            evals_ < env_.policy.eval_budget) {
          for (size_t i = 0; i < useful.size(); ++i) {
            for (size_t j = i + 1; j < useful.size(); ++j) {
              if (useful[i].first + useful[j].first < deficit) break;
              int32_t pair[2] = {useful[i].second, useful[j].second};
              if (Feasible(dom, base_fit, base_free, pair, 2)) {
                Cost c = CostOf(pair, 2);
                if (chosen.empty() || c < chosen_cost) chosen = {pair[0], pair[1]}, chosen_cost = c;
              }
            }
          }
        }
        if (chosen.empty()) Greedy(dom, useful, base_fit, base_free, &chosen, &chosen_cost);
      }
      if (!chosen.empty() && (best->empty() || chosen_cost < *best_cost)) {
        *best = chosen;
        *best_cost = chosen_cost;
      }
    }
    if (over_cap_) *capped = true;
  }

  void Greedy(int dom, const std::vector<std::pair<int64_t, int32_t>>& useful,
              const std::vector<int64_t>& base_fit, int64_t base_free, std::vector<int32_t>* chosen,
              Cost* cost) {
    std::vector<int32_t> set;
    std::vector<std::tuple<int, int64_t, int32_t, double, int32_t>> keyed;
    for (auto& [freed, s] : useful) {
      const RunningJob& v = rs_.at(s);
      keyed.emplace_back(HelpsQuota(v) ? 0 : 1, -freed, v.priority, v.WorkLost(env_.now), s);
    }
    std::sort(keyed.begin(), keyed.end());
    // Each prefix is evaluated as Feasible would, but incrementally: the scratch keeps the set
    // so far and each step adds one victim (a full Feasible per prefix is quadratic in the set,
    // and sets of thousands of small jobs are what a big preemptor needs).
    int64_t milli = 0;
    // freed_ and the queue tree hold `set` while this runs; both are restored on return.
    struct Restore {
      Search* s;
      const std::vector<int32_t>* set;
      ~Restore() {
        for (int32_t slot : *set) s->Charge(slot, -1);
        s->freed_.Clear();
      }
    } restore{this, &set};
    bool ok = false;
    for (auto& [h, negf, prio, w, s] : keyed) {
      if (negf == 0 && quota_why_.empty()) continue;  // frees nothing here
      set.push_back(s);
      Apply(dom, s, +1);
      milli += rs_.at(s).gpu_milli;
      if (FeasibleSoFar(base_fit, base_free, milli)) {
        ok = true;
        break;
      }
      if (over_cap_ && CostOf(set.data(), set.size()).milli > cap_milli_) return;
    }
    if (!ok) return;
    // Reprieve: drop the most expensive victims that are not needed.
    std::vector<int32_t> by_cost = set;
    std::sort(by_cost.begin(), by_cost.end(), [&](int32_t a, int32_t b) {
      const RunningJob& x = rs_.at(a);
      const RunningJob& y = rs_.at(b);
      if (x.priority != y.priority) return x.priority > y.priority;
      return x.WorkLost(env_.now) > y.WorkLost(env_.now);
    });
    for (int32_t s : by_cost) {
      std::vector<int32_t> without;
      for (int32_t t : set) {
        if (t != s) without.push_back(t);
      }
      if (without.empty()) continue;
      Apply(dom, s, -1);
      if (FeasibleSoFar(base_fit, base_free, milli - rs_.at(s).gpu_milli)) {
        set = std::move(without);
        milli -= rs_.at(s).gpu_milli;
      } else {
        Apply(dom, s, +1);
      }
    }
    *chosen = set;
    *cost = CostOf(set.data(), set.size());
  }

 public:
  // The shrink search (see the header), after Run(): eligible elastic
  // victims give up members above their minMember. Not found (no slots)
  // when none can make room.
  // Tiers above `max_tier` are not searched (a shrink there could not win).
  VictimPlan RunShrink(int32_t max_tier) {
    VictimPlan plan;
    plan.needed_milli = need_gpus_ * 1000;
    std::vector<int32_t>& cands = shrinkable_;
    std::sort(cands.begin(), cands.end(), [&](int32_t a, int32_t b) {
      return std::tie(rs_.at(a).priority, a) < std::tie(rs_.at(b).priority, b);
    });
    size_t end = 0;
    while (end < cands.size()) {
      const int32_t tier = rs_.at(cands[end]).priority;
      if (tier > max_tier) break;
      while (end < cands.size() && rs_.at(cands[end]).priority == tier) ++end;
      if (env_.policy.gangs_first) end = cands.size();
      // The candidates' members with GPUs on usable nodes, by domain.
      std::map<int, std::vector<Drop>> by_dom;
      for (size_t i = 0; i < end; ++i) {
        const RunningJob& v = rs_.at(cands[i]);
        for (size_t k = 0; k < v.members.size(); ++k) {
          const MemberPlacement& m = v.members[k];
          if (!Usable(m.node) || MilliOf(m) == 0) continue;
          by_dom[DomainOf(m.node)].push_back({cands[i], static_cast<int32_t>(k)});
        }
      }
      std::vector<Drop> best;
      Cost best_cost;
      for (const auto& [dom, drops] : by_dom) {
        std::vector<Drop> chosen = ShrinkInDomain(dom, drops);
        if (chosen.empty()) continue;
        Cost c = ShrinkCost(chosen);
        if (best.empty() || c < best_cost) best = std::move(chosen), best_cost = c;
      }
      if (best.empty()) continue;
      for (const Drop& d : best) {
        if (plan.slots.empty() || plan.slots.back() != d.slot) {
          plan.slots.push_back(d.slot);
          plan.shrinks.push_back({d.slot, {}});
        }
        plan.shrinks.back().dropped.push_back(rs_.at(d.slot).members[d.member]);
      }
      plan.max_priority = best_cost.max_priority;
      plan.sum_priority = best_cost.sum_priority;
      plan.work_lost = best_cost.work;
      plan.evicted_milli = best_cost.milli;
      break;
    }
    plan.evaluations = evals_;
    return plan;
  }
  int64_t evaluations() const { return evals_; }

 private:
  // A member of an elastic victim: rs_.at(slot).members[member].
  struct Drop {
    int32_t slot;
    int32_t member;
    bool operator<(const Drop& o) const {
      return std::tie(slot, member) < std::tie(o.slot, o.member);
    }
  };

  static int32_t Surplus(const RunningJob& v) {
    return static_cast<int32_t>(v.members.size()) - v.job->effective_min_member();
  }

  static int64_t MilliOf(const MemberPlacement& m) {
    int64_t milli = 0;
    for (const GpuGrant& g : m.gpus) milli += g.milli;
    return milli;
  }

  // Feasible() for dropping `drops` (sorted by slot).
  bool FeasibleDrops(int dom, const std::vector<int64_t>& base_fit, int64_t base_free,
                     const std::vector<Drop>& drops) {
    ++evals_;
    int64_t milli = 0;
    for (const Drop& d : drops) {
      const MemberPlacement& m = rs_.at(d.slot).members[d.member];
      milli += MilliOf(m);
      Touch(dom, m, +1);
    }
    const bool fits = Fits(base_fit, base_free, freed_.whole(), freed_.members());
    freed_.Clear();
    if (milli > cap_milli_) {
      over_cap_ = true;
      return false;
    }
    if (!fits) return false;
    if (quota_why_.empty()) return true;
    // Each victim's queue gives back what its dropped members are charged.
    std::vector<ResourceList> freed;
    freed.reserve(drops.size());
    removed_.clear();
    for (size_t i = 0; i < drops.size();) {
      const int32_t slot = drops[i].slot;
      const RunningJob& v = rs_.at(slot);
      std::vector<MemberPlacement> members;
      for (; i < drops.size() && drops[i].slot == slot; ++i) {
        members.push_back(v.members[drops[i].member]);
      }
      if (v.leaf < 0) continue;
      if (env_.placed_usage) {
        freed.push_back(env_.placed_usage(v, members));
      } else {
        const int64_t n = static_cast<int64_t>(members.size());
        const int64_t all = std::max<int64_t>(1, static_cast<int64_t>(v.members.size()));
        ResourceList u = v.usage;
        for (int64_t& x : u) x = x * n / all;
        freed.push_back(std::move(u));
      }
      removed_.push_back({v.leaf, &freed.back()});
    }
    return env_.tree->Admits(env_.leaf, env_.demand, removed_);
  }

  Cost ShrinkCost(const std::vector<Drop>& drops) const {
    Cost c;
    int32_t last = -1;
    for (const Drop& d : drops) {
      const RunningJob& v = rs_.at(d.slot);
      c.milli += MilliOf(v.members[d.member]);
      if (d.slot == last) continue;
      last = d.slot;
      c.max_priority = c.k == 0 ? v.priority : std::max(c.max_priority, v.priority);
      ++c.k;
      c.sum_priority += v.priority;
      c.disruptions += v.times_preempted;
      c.work += v.WorkLost(env_.now);  // every survivor restarts from the checkpoint
    }
    return c;
  }

  // Greedy by node, then reprieve (see the header), over `members` (the
  // candidates' members in `dom`); empty when their surplus cannot make
  // room. Sorted by slot.
  std::vector<Drop> ShrinkInDomain(int dom, const std::vector<Drop>& members) {
    std::vector<int64_t> base_fit;
    int64_t base_free;
    Base(dom, &base_fit, &base_free);
    // Bound: every member's GPUs freed (ignoring surplus) must cover the need.
    int64_t most = base_free;
    for (const Drop& d : members) most += rs_.at(d.slot).members[d.member].gpus.size();
    if (most < need_gpus_) return {};
    // Members per node, and each node's whole free GPUs with all of them dropped.
    absl::flat_hash_map<NodeId, std::vector<Drop>> by_node;
    for (const Drop& d : members) by_node[rs_.at(d.slot).members[d.member].node].push_back(d);
    std::vector<std::pair<int, NodeId>> nodes;  // (-whole free with all dropped, node)
    for (auto& [node, drops] : by_node) {
      for (const Drop& d : drops) Touch(dom, rs_.at(d.slot).members[d.member], +1);
      const int64_t w = freed_.whole() + cs_.state(node).whole_free;
      freed_.Clear();
      nodes.push_back({-static_cast<int>(w), node});
      // Cheapest victim first: lowest priority, fewest earlier preemptions, least work lost.
      std::sort(drops.begin(), drops.end(), [&](const Drop& a, const Drop& b) {
        const RunningJob& x = rs_.at(a.slot);
        const RunningJob& y = rs_.at(b.slot);
        return std::make_tuple(x.priority, x.times_preempted, x.WorkLost(env_.now), a) <
               std::make_tuple(y.priority, y.times_preempted, y.WorkLost(env_.now), b);
      });
    }
    std::sort(nodes.begin(), nodes.end());
    absl::flat_hash_map<int32_t, int32_t> used;  // slot -> members taken
    std::vector<Drop> order;                     // in the order taken
    std::vector<Drop> set;                       // sorted by slot
    bool ok = false;
    for (const auto& [negw, node] : nodes) {
      for (const Drop& d : by_node[node]) {
        if (used[d.slot] >= Surplus(rs_.at(d.slot))) continue;
        ++used[d.slot];
        order.push_back(d);
        set.insert(std::upper_bound(set.begin(), set.end(), d), d);
        if (FeasibleDrops(dom, base_fit, base_free, set)) {
          ok = true;
          break;
        }
        if (over_cap_ && ShrinkCost(set).milli > cap_milli_) return {};
      }
      if (ok) break;
    }
    if (!ok) return {};
    // Reprieve: the most expensive victims' members first, the last taken first.
    std::vector<Drop> by_cost(order.rbegin(), order.rend());
    std::stable_sort(by_cost.begin(), by_cost.end(), [&](const Drop& a, const Drop& b) {
      return rs_.at(a.slot).priority > rs_.at(b.slot).priority;
    });
    for (const Drop& d : by_cost) {
      std::vector<Drop> without;
      for (const Drop& t : set) {
        if (t.slot != d.slot || t.member != d.member) without.push_back(t);
      }
      if (!without.empty() && FeasibleDrops(dom, base_fit, base_free, without)) {
        set = std::move(without);
      }
    }
    return set;
  }

 private:
  AdmissionEnv& env_;
  const ClusterState& cs_;
  const RunningSet& rs_;
  const model::Job& job_;
  const JobContext& ctx_;
  std::vector<Group> groups_;
  int64_t need_gpus_ = 0;
  model::TopologyLevel level_;
  FreedGpus freed_;  // the candidate set being evaluated; empty between evaluations
  std::vector<std::pair<int, const ResourceList*>> removed_;
  std::vector<int32_t> shrinkable_;  // eligible elastic jobs above their minMember (Run)
  absl::flat_hash_map<int, QueueInfo> queue_cache_;
  std::string quota_why_;
  int blocking_ = -2;
  int64_t cap_milli_ = INT64_MAX;
  bool over_cap_ = false;
  int64_t evals_ = 0;
};

}  // namespace

VictimPlan FindVictims(AdmissionEnv& env, const model::Job& job, const JobContext& ctx) {
  Search s(env, job, ctx);
  VictimPlan whole = s.Run();
  VictimPlan shrink =
      s.RunShrink(whole.found() && !env.policy.gangs_first ? whole.max_priority
                                                           : std::numeric_limits<int32_t>::max());
  // (highest priority, jobs touched) - or the reverse with gangs_first - and
  // on a tie the shrink (see the header).
  auto key = [&](const VictimPlan& p) {
    const int64_t k = static_cast<int64_t>(p.slots.size());
    return env.policy.gangs_first ? std::make_pair(k, int64_t{p.max_priority})
                                  : std::make_pair(int64_t{p.max_priority}, k);
  };
  VictimPlan& out =
      shrink.found() && (!whole.found() || key(shrink) <= key(whole)) ? shrink : whole;
  out.evaluations = s.evaluations();
  return std::move(out);
}

PostFilterResult Preemption::PostFilter(CycleState&, const JobContext& ctx, const FailureSummary&) {
  PostFilterResult r;
  last_ = VictimPlan();
  ran_ = true;
  if (!env_->allow_preemption || env_->running == nullptr) {
    r.status = PluginStatus::Unschedulable("preemption not attempted");
    return r;
  }
  last_ = env_->known_failure != nullptr ? *env_->known_failure : FindVictims(*env_, *ctx.job, ctx);
  if (!last_.found()) {
    r.status = PluginStatus::Unschedulable(last_.reason);
    r.message = absl::StrCat("preemption: ", last_.reason);
    return r;
  }
  for (int32_t s : last_.slots) r.victims.push_back(env_->running->at(s).key);
  r.status = PluginStatus::Success();
  if (last_.shrink()) {
    size_t members = 0;
    for (const ShrinkPart& p : last_.shrinks) members += p.dropped.size();
    r.message = absl::StrCat("can run after shrinking ", last_.slots.size(), " elastic gang(s) by ",
                             members, " member(s) (", last_.evicted_milli / 1000,
                             " GPUs) of priority <= ", last_.max_priority);
    return r;
  }
  r.message =
      absl::StrCat("can run after preempting ", last_.slots.size(), " gang(s) (",
                   last_.evicted_milli / 1000, " GPUs) of priority <= ", last_.max_priority);
  return r;
}

}  // namespace tessera::sched
