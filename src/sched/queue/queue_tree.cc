#include "sched/queue/queue_tree.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace tessera::sched {

std::string FormatAmount(absl::string_view resource, int64_t v) {
  if (absl::StartsWith(resource, "gpu/")) {
    std::string model(resource.substr(4));
    if (v % 1000 == 0) return absl::StrCat(v / 1000, " ", model, " GPUs");
    return absl::StrFormat("%.3f %s GPUs", v / 1000.0, model);
  }
  if (resource == "cpu") return absl::StrCat(v, " milli-CPU");
  if (resource == "memory") return absl::StrCat(v, " MiB");
  return absl::StrCat(v, " ", resource);
}

absl::Status ValidateQueueTree(const QueueTreeSpec& spec) {
  if (spec.half_life <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("fairShare.halfLife: must be > 0");
  }
  absl::flat_hash_map<std::string, int> index;
  for (size_t i = 0; i < spec.queues.size(); ++i) {
    const QueueSpec& q = spec.queues[i];
    std::string f = absl::StrCat("queues[", i, "]");
    if (q.name.empty())
      return absl::InvalidArgumentError(absl::StrCat(f, ".name: must not be empty"));
    if (!index.emplace(q.name, static_cast<int>(i)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(f, ".name: queue \"", q.name, "\" is defined twice"));
    }
    if (!(q.weight > 0) || !std::isfinite(q.weight)) {
      return absl::InvalidArgumentError(
          absl::StrCat(f, ".weight: must be a positive number, got ", q.weight));
    }
    for (const auto& [res, quota] : q.quotas) {
      std::string rf = absl::StrCat(f, ".quotas[\"", res, "\"]");
      bool known =
          res == "cpu" || res == "memory" || (absl::StartsWith(res, "gpu/") && res.size() > 4);
      if (!known) {
        return absl::InvalidArgumentError(
            absl::StrCat(rf, ": unknown resource; use \"cpu\", \"memory\" or \"gpu/<model>\""));
      }
      if (quota.guaranteed < 0) {
        return absl::InvalidArgumentError(absl::StrCat(rf, ".guaranteed: must be >= 0"));
      }
      if (quota.borrowing_limit < -1) {
        return absl::InvalidArgumentError(
            absl::StrCat(rf, ".borrowingLimit: must be >= 0 (omit it for no limit)"));
      }
      if (quota.lending_limit < -1) {
        return absl::InvalidArgumentError(
            absl::StrCat(rf, ".lendingLimit: must be >= 0 (omit it to lend all idle quota)"));
      }
    }
  }
  for (size_t i = 0; i < spec.queues.size(); ++i) {
    const QueueSpec& q = spec.queues[i];
    if (q.parent.empty()) continue;
    std::string f = absl::StrCat("queues[", i, "].parent");
    if (!index.contains(q.parent)) {
      return absl::InvalidArgumentError(absl::StrCat(f, ": unknown queue \"", q.parent, "\""));
    }
    // Walk up; a walk longer than the number of queues is a cycle.
    std::vector<std::string> path = {q.name};
    std::string cur = q.parent;
    while (!cur.empty()) {
      path.push_back(cur);
      if (cur == q.name || path.size() > spec.queues.size() + 1) {
        return absl::InvalidArgumentError(
            absl::StrCat(f, ": cycle in the queue tree: ", absl::StrJoin(path, " -> ")));
      }
      auto it = index.find(cur);
      if (it == index.end()) break;
      cur = spec.queues[it->second].parent;
    }
  }
  // A parent's guarantee must cover its children's.
  for (size_t i = 0; i < spec.queues.size(); ++i) {
    const QueueSpec& p = spec.queues[i];
    for (const auto& [res, quota] : p.quotas) {
      int64_t sum = 0;
      std::vector<std::string> parts;
      for (const QueueSpec& c : spec.queues) {
        if (c.parent != p.name) continue;
        auto it = c.quotas.find(res);
        if (it == c.quotas.end()) continue;
        sum += it->second.guaranteed;
        parts.push_back(absl::StrCat(c.name, " ", FormatAmount(res, it->second.guaranteed)));
      }
      if (sum > quota.guaranteed) {
        return absl::InvalidArgumentError(absl::StrCat(
            "queues[", i, "].quotas[\"", res, "\"].guaranteed: ",
            FormatAmount(res, quota.guaranteed), " is below the sum of its children's guarantees (",
            FormatAmount(res, sum), ": ", absl::StrJoin(parts, ", "), ")"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<QueueTree> QueueTree::Create(const QueueTreeSpec& spec) {
  absl::Status s = ValidateQueueTree(spec);
  if (!s.ok()) return s;
  QueueTree t;
  t.half_life_ = spec.half_life;
  for (const QueueSpec& q : spec.queues) {
    for (const auto& [res, quota] : q.quotas) {
      if (t.FindResource(res) < 0) t.resources_.push_back(res);
    }
  }
  const size_t R = t.resources_.size();
  t.capacity_.assign(R, kUnlimited);
  for (const QueueSpec& q : spec.queues) {
    Node n;
    n.name = q.name;
    n.weight = q.weight;
    n.guaranteed.assign(R, 0);
    n.borrowing.assign(R, -1);
    n.lending.assign(R, -1);
    n.usage.assign(R, 0);
    n.fp.assign(R, 0);
    n.limited.assign(R, false);
    for (const auto& [res, quota] : q.quotas) {
      int r = t.FindResource(res);
      n.guaranteed[r] = quota.guaranteed;
      n.borrowing[r] = quota.borrowing_limit;
      n.lending[r] = quota.lending_limit;
      n.limited[r] = true;
      t.any_guarantee_ |= quota.guaranteed > 0;
    }
    t.nodes_.push_back(std::move(n));
  }
  for (size_t i = 0; i < spec.queues.size(); ++i) {
    if (spec.queues[i].parent.empty()) {
      t.top_.push_back(static_cast<int>(i));
    } else {
      int p = t.Find(spec.queues[i].parent);
      t.nodes_[i].parent = p;
      t.nodes_[p].children.push_back(static_cast<int>(i));
    }
  }
  std::function<void(int, double)> entitle = [&](int q, double e) {
    t.nodes_[q].entitlement = e;
    double sum = 0;
    for (int c : t.nodes_[q].children) sum += t.nodes_[c].weight;
    for (int c : t.nodes_[q].children) entitle(c, e * t.nodes_[c].weight / sum);
  };
  double top_sum = 0;
  for (int q : t.top_) top_sum += t.nodes_[q].weight;
  for (int q : t.top_) entitle(q, t.nodes_[q].weight / top_sum);
  for (int q = 0; q < t.num_queues(); ++q) {
    if (t.IsLeaf(q)) t.Refresh(q);
  }
  return t;
}

int QueueTree::Find(absl::string_view name) const {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

int QueueTree::FindResource(absl::string_view name) const {
  for (size_t i = 0; i < resources_.size(); ++i) {
    if (resources_[i] == name) return static_cast<int>(i);
  }
  return -1;
}

void QueueTree::SetCapacity(absl::string_view resource, int64_t amount) {
  int r = FindResource(resource);
  if (r >= 0 && capacity_[r] != amount) {
    capacity_[r] = amount;
    ++usage_generation_;
  }
}

int64_t QueueTree::Agg(int q, int r) const {
  const Node& n = nodes_[q];
  if (n.children.empty()) return n.usage[r];
  int64_t s = 0;
  for (int c : n.children) s += nodes_[c].fp[r];
  return s;
}

int64_t QueueTree::Footprint(int q, int r) const {
  const Node& n = nodes_[q];
  int64_t a = Agg(q, r);
  if (n.lending[r] >= 0) a = std::max(a, n.guaranteed[r] - n.lending[r]);
  return a;
}

int64_t QueueTree::Limit(int q, int r) const {
  const Node& n = nodes_[q];
  return n.borrowing[r] < 0 ? kUnlimited : n.guaranteed[r] + n.borrowing[r];
}

void QueueTree::Refresh(int q) {
  for (; q >= 0; q = nodes_[q].parent) {
    for (size_t r = 0; r < resources_.size(); ++r) nodes_[q].fp[r] = Footprint(q, r);
  }
}

void QueueTree::Add(int leaf, const ResourceList& v) {
  ++usage_generation_;
  Charge(leaf, v, 1);
}

void QueueTree::Remove(int leaf, const ResourceList& v) {
  ++usage_generation_;
  Charge(leaf, v, -1);
}

void QueueTree::Charge(int leaf, const ResourceList& v, int sign) {
  for (int q = leaf; q >= 0; q = nodes_[q].parent) {
    for (size_t r = 0; r < resources_.size(); ++r) nodes_[q].usage[r] += sign * v[r];
  }
  Refresh(leaf);
}

std::string QueueTree::Check(int leaf, const ResourceList& demand,
                             const std::vector<std::pair<int, const ResourceList*>>& removed,
                             int* blocking) {
  std::string why;
  Evaluate(leaf, demand, removed, blocking, &why);
  return why;
}

bool QueueTree::Admits(int leaf, const ResourceList& demand,
                       const std::vector<std::pair<int, const ResourceList*>>& removed) {
  return Evaluate(leaf, demand, removed, nullptr, nullptr);
}

bool QueueTree::Evaluate(int leaf, const ResourceList& demand,
                         const std::vector<std::pair<int, const ResourceList*>>& removed,
                         int* blocking, std::string* why_out) {
  // Taken out and put back below: not a change (usage_generation unchanged).
  for (const auto& [q, r] : removed) Charge(q, *r, -1);
  std::string scratch;
  std::string& why = why_out != nullptr ? *why_out : scratch;
  bool fits = true;
  int block = -2;
  for (size_t r = 0; r < resources_.size() && fits; ++r) {
    if (demand[r] <= 0) continue;
    const std::string& res = resources_[r];
    int64_t delta = demand[r];
    int q = leaf;
    for (; q >= 0 && delta > 0; q = nodes_[q].parent) {
      const Node& n = nodes_[q];
      int64_t agg = Agg(q, r);
      int64_t lim = Limit(q, r);
      if (agg + delta > lim) {
        block = q;
        fits = false;
        if (why_out == nullptr) break;
        if (q == leaf) {
          why = absl::StrCat("queue ", n.name, " over quota: ", FormatAmount(res, agg), " of ",
                             FormatAmount(res, n.guaranteed[r]), " guaranteed in use, job needs ",
                             FormatAmount(res, demand[r]), ", borrowing limit ",
                             FormatAmount(res, n.borrowing[r]));
        } else {
          why = absl::StrCat("queue ", n.name, " (parent of ", nodes_[leaf].name,
                             ") over quota: ", FormatAmount(res, agg), " of ",
                             FormatAmount(res, n.guaranteed[r]),
                             " guaranteed in use or held, job needs ", FormatAmount(res, delta),
                             " more, borrowing limit ", FormatAmount(res, n.borrowing[r]));
        }
        break;
      }
      int64_t fp_old = n.fp[r];
      int64_t fp_new = agg + delta;
      if (n.lending[r] >= 0) fp_new = std::max(fp_new, n.guaranteed[r] - n.lending[r]);
      delta = fp_new - fp_old;
    }
    if (fits && q < 0 && delta > 0) {
      int64_t sum = 0;
      for (int t : top_) sum += nodes_[t].fp[r];
      if (sum + delta > capacity_[r]) {
        block = -1;
        fits = false;
        if (why_out == nullptr) break;
        why = absl::StrCat("no ", FormatAmount(res, 0).substr(2),
                           " left to borrow in the fleet: ", FormatAmount(res, sum), " of ",
                           FormatAmount(res, capacity_[r]), " in use or held by guarantees; queue ",
                           nodes_[leaf].name, " needs ", FormatAmount(res, demand[r]));
      }
    }
  }
  for (const auto& [q, r] : removed) Charge(q, *r, 1);
  if (blocking) *blocking = block;
  return fits;
}

absl::Status QueueTree::CheckInvariants() const {
  for (size_t r = 0; r < resources_.size(); ++r) {
    int64_t top = 0;
    for (int q = 0; q < num_queues(); ++q) {
      if (nodes_[q].fp[r] != Footprint(q, r)) {
        return absl::InternalError(absl::StrCat("queue ", nodes_[q].name, ": stale footprint"));
      }
      if (Agg(q, r) > Limit(q, r)) {
        return absl::InternalError(absl::StrCat("queue ", nodes_[q].name, " exceeds its limit: ",
                                                FormatAmount(resources_[r], Agg(q, r)), " > ",
                                                FormatAmount(resources_[r], Limit(q, r))));
      }
      if (nodes_[q].usage[r] < 0) {
        return absl::InternalError(absl::StrCat("queue ", nodes_[q].name, ": negative usage"));
      }
    }
    for (int t : top_) top += nodes_[t].usage[r];
    if (top > capacity_[r]) {
      return absl::InternalError(absl::StrCat("fleet over capacity in ", resources_[r]));
    }
  }
  return absl::OkStatus();
}

bool QueueTree::WithinGuarantee(int q, const ResourceList& extra) const {
  const Node& n = nodes_[q];
  for (size_t r = 0; r < resources_.size(); ++r) {
    // A resource the queue names no quota for has no guarantee.
    if (extra[r] > 0 && (!n.limited[r] || n.usage[r] + extra[r] > n.guaranteed[r])) return false;
  }
  return true;
}

bool QueueTree::Borrowing(int q, const ResourceList& mask, const ResourceList* leaving) const {
  const Node& n = nodes_[q];
  for (size_t r = 0; r < resources_.size(); ++r) {
    const int64_t used = n.usage[r] - (leaving != nullptr ? (*leaving)[r] : 0);
    // Without a quota for r the queue has no guarantee: all its use is borrowed.
    if (mask[r] > 0 && used > (n.limited[r] ? n.guaranteed[r] : 0)) return true;
  }
  return false;
}

bool QueueTree::IsAncestor(int a, int q) const {
  for (; q >= 0; q = nodes_[q].parent) {
    if (q == a) return true;
  }
  return false;
}

int QueueTree::Lca(int a, int b) const {
  for (int x = a; x >= 0; x = nodes_[x].parent) {
    if (IsAncestor(x, b)) return x;
  }
  return -1;
}

double QueueTree::DominantShare(int q) const {
  double s = 0;
  for (size_t r = 0; r < resources_.size(); ++r) {
    if (capacity_[r] <= 0 || capacity_[r] >= kUnlimited) continue;
    s = std::max(s, static_cast<double>(nodes_[q].usage[r]) / capacity_[r]);
  }
  return s;
}

void QueueTree::Advance(absl::Time now) {
  if (last_ == absl::InfinitePast() || now <= last_) {
    if (last_ == absl::InfinitePast()) last_ = now;
    return;
  }
  double dt = absl::ToDoubleSeconds(now - last_);
  last_ = now;
  double h = absl::ToDoubleSeconds(half_life_);
  double a = std::exp2(-dt / h);
  for (int q = 0; q < num_queues(); ++q) {
    Node& n = nodes_[q];
    double s = DominantShare(q);
    n.decayed = n.decayed * a + s * (1 - a);
    n.credit = std::clamp(n.credit + (n.entitlement - s) * dt, 0.0, CreditCap(q));
  }
}

double QueueTree::CreditCap(int q) const {
  return nodes_[q].entitlement * absl::ToDoubleSeconds(half_life_) / std::log(2.0);
}

void QueueTree::SetHistory(int q, double decayed_usage, double credit) {
  nodes_[q].decayed = std::max(0.0, decayed_usage);
  nodes_[q].credit = std::clamp(credit, 0.0, CreditCap(q));
}

void QueueTree::CarryHistoryFrom(const QueueTree& old) {
  for (int q = 0; q < num_queues(); ++q) {
    const int o = old.Find(nodes_[q].name);
    if (o >= 0) SetHistory(q, old.nodes_[o].decayed, old.nodes_[o].credit);
  }
  last_ = old.last_;
}

QueueTree::OrderKey QueueTree::Key(int leaf) const {
  OrderKey k;
  for (int q = leaf; q >= 0; q = nodes_[q].parent) {
    const Node& n = nodes_[q];
    if (DominantShare(q) >= n.entitlement && n.credit <= 0) k.tier = 1;
    k.path.push_back(n.decayed / n.weight);
  }
  std::reverse(k.path.begin(), k.path.end());
  return k;
}

QueueStatus QueueTree::Status(int q) const {
  const Node& n = nodes_[q];
  QueueStatus st;
  st.name = n.name;
  st.entitlement = n.entitlement;
  st.usage = DominantShare(q);
  st.decayed_usage = n.decayed;
  st.credit = n.credit;
  int64_t gpus = 0;
  for (size_t r = 0; r < resources_.size(); ++r) {
    if (absl::StartsWith(resources_[r], "gpu/") && capacity_[r] < kUnlimited) {
      gpus += capacity_[r] / 1000;
    }
    if (n.limited[r] && n.usage[r] > n.guaranteed[r]) st.borrowing = true;
  }
  st.credit_gpu_seconds = n.credit * gpus;
  // Fair share: weighted among siblings with work (usage or pending) now.
  std::function<bool(int)> active = [&](int x) {
    const Node& m = nodes_[x];
    if (m.pending > 0) return true;
    for (int64_t u : m.usage) {
      if (u > 0) return true;
    }
    for (int c : m.children) {
      if (active(c)) return true;
    }
    return false;
  };
  double share = 1;
  std::vector<int> path;
  for (int x = q; x >= 0; x = nodes_[x].parent) path.push_back(x);
  std::reverse(path.begin(), path.end());
  for (int x : path) {
    const std::vector<int>& sibs = nodes_[x].parent < 0 ? top_ : nodes_[nodes_[x].parent].children;
    double sum = 0;
    for (int s : sibs) {
      if (s == x || active(s)) sum += nodes_[s].weight;
    }
    share *= nodes_[x].weight / sum;
  }
  st.fair_share = share;
  return st;
}

}  // namespace tessera::sched
