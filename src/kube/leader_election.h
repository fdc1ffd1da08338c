// LeaderElector: leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics
// (k8s.io/client-go/tools/leaderelection).
//
// Algorithm:
//   TryAcquireOrRenew(): read the Lease (create it, held by us, if absent). When its record
//   (holder, times, transitions) differs from the one last observed, note the new record and the
//   local time it was observed (observed time, not the record's renewTime, decides expiry: the
//   clocks of candidates need not agree). If another identity holds it and observed time +
//   leaseDurationSeconds is still ahead, give up this round. Otherwise write our record (renewTime
//   now; acquireTime and leaseTransitions kept when we already held it, transitions + 1 when it
//   changes hands) with the resourceVersion we read: optimistic concurrency, so of two candidates
//   racing for an expired lease exactly one update succeeds (the other gets 409 Conflict).
//   Run(): try every retry_period (jittered by up to 20%) until acquired; call on_started_leading;
//   then renew every retry_period; a renewal round that has not succeeded within renew_deadline
//   loses leadership (on_stopped_leading) and Run returns. Stop() ends Run; with
//   release_on_cancel the lease is released (holder cleared, duration 1 s) so a standby takes
//   over at once instead of after the lease duration.
// Config requirements (as client-go): lease_duration > renew_deadline > 1.2 * retry_period.
// Time: lease expiry and the renew deadline are judged by the injected Clock; Run paces its
// retries in real time. With a ManualClock, drive TryAcquireOrRenew() directly.
// Thread safety: Run on one thread; Stop, IsLeader and GetLeader from any; TryAcquireOrRenew
// not concurrently with itself or Run. Callbacks run on Run's thread and must not block.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "kube/objects.h"
#include "kube/rest_client.h"
#include "obs/log.h"

namespace tessera::kube {

struct LeaderElectionConfig {
  std::string lease_namespace, lease_name;
  std::string identity;  // unique per candidate (e.g. hostname + random suffix)
  absl::Duration lease_duration = absl::Seconds(15);
  absl::Duration renew_deadline = absl::Seconds(10);
  absl::Duration retry_period = absl::Seconds(2);
  bool release_on_cancel = true;
  std::function<void()> on_started_leading;
  std::function<void()> on_stopped_leading;
  std::function<void(const std::string& identity)> on_new_leader;  // any holder, us included
  uint64_t seed = 1;                                               // the retry jitter
  obs::Logger log;
};

class LeaderElector {
 public:
  // InvalidArgument naming the field when the config breaks the requirements above.
  static absl::StatusOr<std::unique_ptr<LeaderElector>> Create(RestClient& client,
                                                               const Clock& clock,
                                                               LeaderElectionConfig config);

  // One attempt (see the algorithm); true when we hold the lease afterwards.
  bool TryAcquireOrRenew();
  void Run();
  void Stop();
  // Clears our hold on the lease if we have it (what Run does on Stop with release_on_cancel).
  absl::Status Release();

  bool IsLeader() const;
  // The holder last observed ("" when none).
  std::string GetLeader() const;
  // Why the last attempt did not hold the lease: a read or write error, or the other holder
  // ("" after a success).
  std::string last_error() const;

 private:
  LeaderElector(RestClient& client, const Clock& clock, LeaderElectionConfig config);
  bool WaitJittered(absl::Duration d);
  void Observe(const Lease& l, const std::string& raw_record) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  RestClient& client_;
  const Clock& clock_;
  const LeaderElectionConfig config_;
  absl::Notification stop_;
  std::mt19937_64 rng_;
  mutable absl::Mutex mu_;
  std::optional<Lease> observed_ ABSL_GUARDED_BY(mu_);  // the last lease read or written
  std::string observed_record_ ABSL_GUARDED_BY(mu_);    // its spec, serialized
  absl::Time observed_time_ ABSL_GUARDED_BY(mu_);
  std::string reported_leader_ ABSL_GUARDED_BY(mu_);
  std::string last_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::kube
