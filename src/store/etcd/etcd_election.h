// EtcdElection: leader election among `tessera server` replicas sharing one etcd, and
// FencedEtcdStore, the Store through which the leader's controller writes.
//
// Algorithm (etcd's own election recipe, as go.etcd.io/etcd/client/v3/concurrency, simplified to
// one key):
//   Campaign: grant a lease of `ttl`; one Txn: if the election key's create_revision is 0 (no
//   leader), put key = identity bound to that lease; read the key either way. We lead when the
//   key is the one we created: the fence is {key, its create_revision}. Otherwise revoke the lease
//   and follow.
//   Lead: every ttl/3 renew the lease (a LeaseKeepAlive exchange whose deadline is the local lease
//   end) and read the key. The local lease end is the send time of the last answered keep-alive
//   plus the TTL etcd answered: etcd counts the TTL from when it got the request, so its own
//   expiry is never earlier. Leadership ends -- on_stopped_leading at once, on the election
//   thread -- when the local lease end passes without an answer, when etcd says the lease is gone,
//   when the key is no longer the one we created, or on Stop() (which revokes the lease, so that
//   the key goes at once and a standby takes over without waiting for the TTL).
//   Follow: watch the key from the revision read, until it is deleted (then campaign at once) or
//   for at most `ttl` (then campaign again, which re-reads it).
// Why fencing as well: a leader paused (SIGSTOP, a long GC-like stall, a partition) past its TTL
// may still have a write in flight or about to be sent when it wakes, before its election thread
// notices. Every Txn of FencedEtcdStore compares the election key's create_revision with the one
// this leader created in the same etcd Txn, so such a write fails (PermissionDenied) instead of
// overwriting the new leader's decisions.
// Time: lease ends are judged by the injected Clock, which also gives the gRPC deadlines: use a
// real clock (etcd's TTLs are real time). Waits between renewals are real time.
// Thread safety: Run on one thread (RunInBackground starts one); Stop, IsLeader, leader() from
// any. Callbacks run on the election thread; they may block (the server stops its controller in
// on_stopped_leading), but on_started_leading must return well within ttl/3, or the first renewal
// is late.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "store/etcd/etcd_store.h"
#include "store/store.h"

namespace grpc {
class ClientContext;
}

namespace tessera::store {

struct EtcdElectionOptions {
  // The election key (etcd's key, e.g. the store's prefix + "leader").
  std::string key;
  // This candidate's value of the key, unique per replica ("NAME api=HOST:PORT").
  std::string identity;
  // The lease's TTL: how long a leader that stopped renewing keeps the key. etcd rounds it up to
  // its minimum (1.5 x its election timeout, 2 s by default). Failover after a crash takes about
  // this long plus the new leader's start.
  absl::Duration ttl = absl::Seconds(3);
  std::function<void(const EtcdFence&)> on_started_leading;
  // `why`: stopped, the lease not renewed in time, etcd says it expired, the key changed.
  std::function<void(const std::string& why)> on_stopped_leading;
  // Any change of the observed holder ("" when none), us included.
  std::function<void(const std::string& identity)> on_new_leader;
};

class EtcdElection {
 public:
  // Neither `store` nor `clock` is owned; both must outlive the election.
  EtcdElection(EtcdStore& store, Clock& clock, EtcdElectionOptions options);
  ~EtcdElection();  // Stop()

  // Campaigns, leads and follows until Stop().
  void Run();
  void RunInBackground();
  // Ends Run; when leading, calls on_stopped_leading and revokes the lease. Idempotent.
  void Stop();

  bool IsLeader() const { return leading_.load(); }
  // The holder last observed ("" when none).
  std::string leader() const ABSL_LOCKS_EXCLUDED(mu_);
  // Times this replica became leader.
  int64_t terms() const { return terms_.load(); }

 private:
  struct Won {
    int64_t lease = 0;
    absl::Time lease_end;
    EtcdFence fence;
  };
  // One campaign: Won when we hold the key; else the etcd revision to watch from.
  std::optional<Won> Campaign(int64_t* watch_from);
  // Renews and checks until leadership ends; returns why.
  std::string Lead(Won& won);
  // Waits (at most ttl) until the key is deleted after `from`.
  void Follow(int64_t from);
  void Revoke(int64_t lease);
  void SetLeader(const std::string& holder) ABSL_LOCKS_EXCLUDED(mu_);
  // Waits up to `d` or until Stop; true when stopping.
  bool WaitOrStop(absl::Duration d) ABSL_LOCKS_EXCLUDED(mu_);

  EtcdStore& store_;
  Clock& clock_;
  const EtcdElectionOptions options_;
  std::atomic<bool> leading_{false};
  std::atomic<int64_t> terms_{0};
  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Follow's watch, so that Stop() ends it at once (a standby exits promptly on SIGTERM).
  grpc::ClientContext* follow_ctx_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::string leader_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

// The leader's view of an EtcdStore: reads as the store's; every Txn is the store's FencedTxn with
// the current fence, and with none (not the leader) fails with PermissionDenied at once. The
// Store interface is unchanged, so the controller runs on it as on any Store.
// Does not own `store`. Thread-safe.
class FencedEtcdStore final : public Store {
 public:
  explicit FencedEtcdStore(EtcdStore& store) : store_(store) {}
  void SetFence(std::optional<EtcdFence> fence) ABSL_LOCKS_EXCLUDED(mu_);
  // Txns refused by the fence (a deposed leader's late writes).
  int64_t fenced() const { return fenced_.load(); }

  absl::StatusOr<KeyValue> Get(std::string_view key) override { return store_.Get(key); }
  absl::StatusOr<ListResult> List(std::string_view prefix, const ListOptions& options) override {
    return store_.List(prefix, options);
  }
  absl::StatusOr<int64_t> Txn(const std::vector<Op>& ops) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<EventsResult> Events(std::string_view prefix, int64_t since_revision,
                                      int64_t limit) override {
    return store_.Events(prefix, since_revision, limit);
  }
  absl::Status WaitForRevision(int64_t revision, absl::Time deadline) override {
    return store_.WaitForRevision(revision, deadline);
  }
  int64_t CurrentRevision() override { return store_.CurrentRevision(); }
  int64_t CompactedRevision() override { return store_.CompactedRevision(); }
  absl::Status Compact(int64_t revision) override { return store_.Compact(revision); }
  size_t MaxTxnOps() const override { return store_.MaxTxnOps(); }

 private:
  EtcdStore& store_;
  mutable absl::Mutex mu_;
  std::optional<EtcdFence> fence_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> fenced_{0};
};

}  // namespace tessera::store
