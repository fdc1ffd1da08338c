// ResourceQuota enforcement: the most objects of each kind a namespace may hold, checked when
// objects are created through the API (create and batch create), as Kubernetes' ResourceQuota
// admission does for `count/<resource>`.
//
// Algorithm, for a create of n objects of kind K in namespace NS: take NS's ResourceQuotas (from
// memory; read from the store the first time and after any quota was written); for each whose
// spec.hard has "count/<K's plural>" = H, count K's objects in NS, reading at most H + 1 of them
// (so a check costs O(H), never the namespace's size); refuse when used + n > H, naming the quota,
// what was requested, what is used and the limit. Namespaces without a quota for K cost no store
// read and take no lock.
//
// The cache: the API server is the only writer of ResourceQuota objects (the store belongs to one
// server: SQLite's lock file), and it calls Written() after each such write, which makes every
// cached namespace read again. (A replicated control plane would follow the store's events
// instead, as NodeBindingIndex does.)
//
// Concurrency: where a quota applies, the check and the write run under one mutex, so two
// concurrent creates cannot both take the last slot. Objects the controller writes itself
// (Events, status) are not API creates and are not counted against anything but the Event's TTL.
//
// Thread safety: all methods may be called from any request thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "api/kinds.h"
#include "store/store.h"

namespace tessera::server {

class QuotaGate {
 public:
  // Objects to create, by kind and namespace (a batch may mix them).
  struct Demand {
    const api::KindInfo* kind = nullptr;
    std::string ns;
    int64_t count = 0;
  };

  explicit QuotaGate(store::Store& store) : store_(store) {}

  // Runs `write` if creating `demands` stays within every quota that applies, under the quota
  // lock when any applies. PermissionDenied (nothing written) with Kubernetes' wording when a
  // quota would be exceeded; a store error as is.
  absl::Status Create(const std::vector<Demand>& demands, absl::FunctionRef<absl::Status()> write);
  // Call after every API write of an object of `kind` (successful or not); for a ResourceQuota
  // it drops the cached quotas. Cheap for every other kind.
  void Written(const api::KindInfo& kind);

 private:
  struct Limit {
    std::string quota;  // the ResourceQuota's name
    int64_t hard = 0;
    const Demand* demand = nullptr;
  };
  // One ResourceQuota's name and its spec.hard.
  struct Quota {
    std::string name;
    std::vector<std::pair<std::string, int64_t>> hard;  // "count/<plural>" -> limit
  };
  // The quotas of namespace `ns`, from the cache or the store.
  absl::StatusOr<std::shared_ptr<const std::vector<Quota>>> QuotasOf(const std::string& ns);
  // The quotas that count `d`.
  absl::Status LimitsFor(const Demand& d, std::vector<Limit>& out);
  // Objects of d.kind in d.ns, counting at most up to `cap`.
  absl::StatusOr<int64_t> Count(const Demand& d, int64_t cap);

  store::Store& store_;
  absl::Mutex mu_;  // held across check and write where a quota applies
  // Bumped by Written(); a cached entry read at an older epoch is read again.
  std::atomic<int64_t> epoch_{0};
  struct Cached {
    int64_t epoch = -1;
    std::shared_ptr<const std::vector<Quota>> quotas;
  };
  absl::Mutex cache_mu_;
  absl::flat_hash_map<std::string, Cached> cache_ ABSL_GUARDED_BY(cache_mu_);  // by namespace
};

}  // namespace tessera::server
