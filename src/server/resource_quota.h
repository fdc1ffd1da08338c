// ResourceQuota enforcement: the most objects of each kind a namespace may hold, checked when
// objects are created through the API (create and batch create), as Kubernetes' ResourceQuota
// admission does for `count/<resource>`.
//
// Algorithm, for a create of n objects of kind K in namespace NS: read NS's ResourceQuotas (a
// short list); for each whose spec.hard has "count/<K's plural>" = H, count K's objects in NS,
// reading at most H + 1 of them (so a check costs O(H), never the namespace's size); refuse when
// used + n > H, naming the quota, what was requested, what is used and the limit. Namespaces
// without a quota for K pay one short list per create and take no lock.
//
// Concurrency: where a quota applies, the check and the write run under one mutex, so two
// concurrent creates cannot both take the last slot. Objects the controller writes itself
// (Events, status) are not API creates and are not counted against anything but the Event's TTL.
//
// Thread safety: all methods may be called from any request thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
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

 private:
  struct Limit {
    std::string quota;  // the ResourceQuota's name
    int64_t hard = 0;
    const Demand* demand = nullptr;
  };
  // The quotas that count `d`.
  absl::Status LimitsFor(const Demand& d, std::vector<Limit>& out);
  // Objects of d.kind in d.ns, counting at most up to `cap`.
  absl::StatusOr<int64_t> Count(const Demand& d, int64_t cap);

  store::Store& store_;
  absl::Mutex mu_;  // held across check and write where a quota applies
};

}  // namespace tessera::server
