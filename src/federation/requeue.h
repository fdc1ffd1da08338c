// Requeue: moving a job that its member cluster accepted but does not place.
//
// The hub's fit (member_capacity.h) is an estimate from the member's summary:
// CPU, memory, topology, quotas and nodes cordoned after the dispatch are the
// member's business, so a copy may wait there although another member could
// run it. A copy is *unplaced* while its phase is Pending, Admitted or Queued
// and it has no status.placement (a placed, running, suspended or finished
// copy never is). The hub notes since when, in memory: from the first probe
// that saw it unplaced on that member, or from the copy's creationTimestamp
// when it was never scheduled (so a hub restart does not reset a fresh
// copy's wait). Once it has waited `after` (> 0; 0 disables requeues) and
// another Ready member fits the job now (most free GPUs first, as a dispatch
// chooses), the dispatcher moves it there (dispatcher.h). The wait doubles
// with every move of the same job (after x 2^requeues, at most x 64): a job
// that no member can place, though every estimate says it fits, does not
// travel between them every `after`. Pure functions.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "federation/member_capacity.h"

namespace tessera::federation {

// The copy's status says it waits at its member without a placement.
bool Unplaced(const Json& copy_status);

// Since when the hub counts copy `copy` (unplaced, first seen so at `now`)
// as waiting: its creationTimestamp if it was never scheduled (no
// status.scheduledTime) and that time is not later than `now`; else `now`.
absl::Time UnplacedSince(const Json& copy, absl::Time now);

// A member as the dispatcher last probed it.
struct Candidate {
  std::string name;
  bool ready = false;
  const MemberCapacity* cap = nullptr;
};

// The Ready member other than `exclude` where `demand` fits now with the most
// free GPUs (the first of equals); "" when none.
std::string PickMember(const std::vector<Candidate>& members, const JobDemand& demand,
                       absl::string_view exclude = "");

// How long a job moved `requeues` times before waits unplaced before it moves
// again (zero: never, when `after` is zero).
absl::Duration RequeueWait(absl::Duration after, int64_t requeues);

// Where a copy on member `from`, unplaced since `since`, of a job moved
// `requeues` times before, moves at `now`: "" while it stays (requeues
// disabled, not waited RequeueWait yet, or no other Ready member fits it now).
std::string RequeueTarget(absl::Time since, absl::Time now, absl::Duration after, int64_t requeues,
                          const std::vector<Candidate>& members, const JobDemand& demand,
                          absl::string_view from);

}  // namespace tessera::federation
