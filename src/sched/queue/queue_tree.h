// QueueTree: hierarchical quotas with borrowing/lending, and weighted
// dominant-resource fair share on decayed usage with burst credit.
//
// Quota algorithm. Resources are named ("cpu" in milli-CPU, "memory" in MiB,
// "gpu/<model>" in milli-GPU); a resource no queue names is not limited. Every
// queue q has, per resource, a guarantee g, a borrowing limit b (-1: no limit)
// and a lending limit l (-1: all of its idle guarantee may be lent). Jobs run
// only in leaf queues. Usage u(q) is the sum over q's subtree. The footprint
// of q at its parent is fp(q) = max(agg(q), g - l) when l >= 0, else agg(q),
// where agg(leaf) = u(leaf) and agg(inner) = sum of its children's fp: the
// part of a guarantee that may not be lent is always held. A usage is within
// quota when, for every queue q, agg(q) <= g + b (b = -1: unbounded), and at
// the root the sum of the top-level footprints <= the fleet capacity. A queue
// above its guarantee is borrowing; its jobs may be reclaimed by a queue that
// is within its own guarantee (see plugins/preemption.h).
//
// Fair-share algorithm. Entitlement e(q) is a fraction of the fleet:
// e(root) = 1, e(child) = e(parent) * w(child) / sum of sibling weights. The
// instantaneous dominant share is s(q) = max_r u_r(q) / capacity_r. Decayed
// usage D(q) is an exponential moving average of s(q) with the configured
// half-life H: D <- D * a + s * (1 - a), a = 2^(-dt/H). Burst credit, in
// share-seconds, accrues while a queue is below its entitlement and is spent
// while it is above: c <- clamp(c + (e - s) dt, 0, e * H / ln 2). Pending
// work is ordered by D / w among siblings (lowest first) from the root down;
// a queue above its entitlement with no credit left goes after every queue
// that is not (it still gets otherwise idle capacity: work conserving).
//
// Plain state, no clock: Advance(now) is called by the owner. Not thread-safe.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace tessera::sched {

inline constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max() / 4;

struct QuotaSpec {
  int64_t guaranteed = 0;
  int64_t borrowing_limit = -1;  // -1: may borrow without limit
  int64_t lending_limit = -1;    // -1: all idle guarantee may be lent
};

struct QueueSpec {
  std::string name;
  std::string parent;  // "" for a top-level queue
  double weight = 1.0;
  // Resource name ("gpu/H100", "cpu", "memory") -> quota, in the units above.
  std::map<std::string, QuotaSpec> quotas;
};

struct QueueTreeSpec {
  std::vector<QueueSpec> queues;
  absl::Duration half_life = absl::Hours(1);
};

// Names the field in every message ("queues[2].parent: ...").
absl::Status ValidateQueueTree(const QueueTreeSpec& spec);

// "12 H100 GPUs", "4000 milli-CPU", "512 MiB" for an amount of `resource`.
std::string FormatAmount(absl::string_view resource, int64_t v);

// A vector indexed by QueueTree resource id.
using ResourceList = std::vector<int64_t>;

struct QueueStatus {
  std::string name;
  double entitlement = 0;    // static weighted share of the fleet
  double fair_share = 0;     // weighted share among siblings that have work now
  double usage = 0;          // instantaneous dominant share
  double decayed_usage = 0;  // D(q)
  double credit = 0;         // share-seconds
  double credit_gpu_seconds = 0;
  bool borrowing = false;
};

class QueueTree {
 public:
  static absl::StatusOr<QueueTree> Create(const QueueTreeSpec& spec);

  int num_queues() const { return static_cast<int>(nodes_.size()); }
  int Find(absl::string_view name) const;  // -1 if absent
  bool IsLeaf(int q) const { return nodes_[q].children.empty(); }
  const std::string& name(int q) const { return nodes_[q].name; }
  int parent(int q) const { return nodes_[q].parent; }
  const std::vector<std::string>& resources() const { return resources_; }
  int FindResource(absl::string_view name) const;  // -1 if not limited

  // Fleet capacity per resource (the root's limit); unset ones are unlimited.
  void SetCapacity(absl::string_view resource, int64_t amount);

  // Usage accounting (leaf queues).
  void Add(int leaf, const ResourceList& r);
  void Remove(int leaf, const ResourceList& r);
  int64_t usage(int q, int r) const { return nodes_[q].usage[r]; }
  // Bumped by every Add, Remove and capacity change (not by Check's
  // temporary removals): lets callers cache what depends on usage and limits.
  uint64_t usage_generation() const { return usage_generation_; }

  // "" when `demand` fits in `leaf` with `removed` (leaf, usage) pairs taken
  // away; else why not, in words ("queue team-a over quota: ...").
  // `blocking` (optional) receives the queue whose limit failed (-1: root).
  std::string Check(int leaf, const ResourceList& demand,
                    const std::vector<std::pair<int, const ResourceList*>>& removed,
                    int* blocking = nullptr);
  // A search's what-if: takes `v` out of `leaf`'s usage (and puts it back) without counting it
  // as a change (usage_generation unchanged), as Check's `removed` does for one call. The
  // caller puts back all it took out before anything else reads the tree.
  void TakeOutForSearch(int leaf, const ResourceList& v) { Charge(leaf, v, -1); }
  void PutBackAfterSearch(int leaf, const ResourceList& v) { Charge(leaf, v, 1); }
  // Check(...).empty() without the words: for searches that try many candidate sets.
  bool Admits(int leaf, const ResourceList& demand,
              const std::vector<std::pair<int, const ResourceList*>>& removed);
  // True when q is within its guarantee on every resource after adding `extra`.
  bool WithinGuarantee(int q, const ResourceList& extra) const;
  // True when q uses more than its guarantee of any resource in `mask` (nonzero
  // entries); a queue with no quota for a resource has a guarantee of 0.
  // `leaving` (optional): usage already on its way out, not counted.
  bool Borrowing(int q, const ResourceList& mask, const ResourceList* leaving = nullptr) const;
  bool IsAncestor(int a, int q) const;  // a == q counts
  // Some queue has a nonzero guarantee of some resource.
  bool any_guarantee() const { return any_guarantee_; }
  int Lca(int a, int b) const;  // -1: the (implicit) root

  // Every queue within its limit (guarantee + borrowing limit) and the
  // top-level footprints within the fleet: the quota invariant. O(tree).
  absl::Status CheckInvariants() const;

  // Fair share.
  void Advance(absl::Time now);
  // Takes over `old`'s fair-share history: decayed usage and burst credit of
  // every queue present in both (matched by name; credit clamped to this
  // tree's cap), and the time of the last Advance. Queues new to this tree
  // start with none. Used when a Queue change rebuilds the tree, so editing
  // one queue does not wipe every team's history.
  void CarryHistoryFrom(const QueueTree& old);
  // Sets q's decayed usage and burst credit (share-seconds, clamped to
  // [0, cap]), e.g. from a stored status after a restart.
  void SetHistory(int q, double decayed_usage, double credit);
  void SetPending(int leaf, int count) { nodes_[leaf].pending = count; }
  // Ordering key of a leaf for its next job; lower first. `tier` is 1 when the
  // leaf or an ancestor is above its entitlement with no credit left; `path`
  // holds D/w from the top-level queue down to the leaf.
  struct OrderKey {
    int tier = 0;
    std::vector<double> path;
    bool operator<(const OrderKey& o) const {
      if (tier != o.tier) return tier < o.tier;
      return path < o.path;
    }
  };
  OrderKey Key(int leaf) const;
  QueueStatus Status(int q) const;
  double DominantShare(int q) const;
  double credit(int q) const { return nodes_[q].credit; }
  double entitlement(int q) const { return nodes_[q].entitlement; }

 private:
  // Check and Admits: true when it fits; the reason in *why when why is not null.
  bool Evaluate(int leaf, const ResourceList& demand,
                const std::vector<std::pair<int, const ResourceList*>>& removed, int* blocking,
                std::string* why);

  struct Node {
    std::string name;
    int parent = -1;
    std::vector<int> children;
    double weight = 1;
    ResourceList guaranteed, borrowing, lending, usage;
    std::vector<bool> limited;  // the spec names this resource
    ResourceList fp;            // cached footprint at the parent
    double entitlement = 0;
    double decayed = 0;
    double credit = 0;
    int pending = 0;
  };
  int64_t Agg(int q, int r) const;
  double CreditCap(int q) const;  // e(q) * H / ln 2
  int64_t Footprint(int q, int r) const;
  void Refresh(int q);                                     // recompute fp on q and its ancestors
  void Charge(int leaf, const ResourceList& v, int sign);  // Add (1) or Remove (-1)
  int64_t Limit(int q, int r) const;
  std::string Describe(int r, int64_t v) const;

  std::vector<std::string> resources_;
  std::vector<Node> nodes_;
  std::vector<int> top_;
  ResourceList capacity_;
  absl::Duration half_life_ = absl::Hours(1);
  absl::Time last_ = absl::InfinitePast();
  bool any_guarantee_ = false;
  uint64_t usage_generation_ = 0;
};

}  // namespace tessera::sched
