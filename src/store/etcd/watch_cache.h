// WatchCache: EtcdStore's recent history, kept by one long-lived etcd watch, so that Events and
// WaitForRevision cost no RPC (as kube-apiserver's watch cache serves its watchers).
//
// Without it, each Events call opened an etcd watch from the wanted revision (etcd catches old
// watches up every 100 ms, so a call took up to ~100 ms) after a Range for the current revision,
// and each WaitForRevision opened a watch of its own: under the control plane's watchers that was
// most of the etcd backend's latency.
//
// How: a thread watches the store's whole key space (prev_kv on) from the revision after the
// window's end; each response's events go into an EventWindow (event_window.h) and wake waiters.
// When the stream breaks (etcd down, the member lost) the cache is "disconnected" until the
// thread's next watch is created (backoff 100 ms doubling to 1 s, moving to the next endpoint);
// it resumes from where the window ends, so nothing is missed. When etcd has compacted that
// revision meanwhile, the window restarts empty at etcd's current revision.
//
// Read() answers only what the window can answer exactly: the cache connected, `since` inside the
// window, and the window caught up with the revision the caller must see (this process's own
// writes and the latest write CurrentRevision saw: read your writes, monotonic reads; a `since`
// ahead of the window after a check of the store's marker). Otherwise it
// says so (nullopt) and EtcdStore reads etcd directly, which gives the errors (Unavailable,
// compacted, a future revision) exactly as before.
//
// Thread safety: all methods are thread-safe. The destructor stops the thread (cancelling its
// watch) and must not race other calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "store/etcd/etcd_store.h"
#include "store/etcd/event_window.h"

namespace grpc {
class Channel;
class ClientContext;
}  // namespace grpc

namespace tessera::store {

class WatchCache {
 public:
  // Starts watching after store revision `revision` (the store's current one). `m` must outlive
  // the cache.
  WatchCache(EtcdStore::Impl& m, size_t max_bytes, int64_t revision);
  ~WatchCache();
  WatchCache(const WatchCache&) = delete;
  WatchCache& operator=(const WatchCache&) = delete;

  // Events(prefix, since, limit) from the window, once it holds everything up to `must_see` (the
  // latest store write this process knows of) and `since`; waits for that at most until `deadline`.
  // nullopt when the window cannot answer (see the file comment).
  std::optional<EventsResult> Read(std::string_view prefix, int64_t since, int64_t limit,
                                   int64_t must_see, absl::Time deadline);

  // Blocks until the window reaches `revision` (OK) or `deadline` (DeadlineExceeded), also while
  // etcd is away (the watch resumes when it is back).
  absl::Status Wait(int64_t revision, absl::Time deadline);

  // For tests and metrics.
  bool connected() const;
  int64_t to() const;

 private:
  void Run();
  // One watch stream, until it breaks or the cache stops. Returns whether any response came (the
  // backoff starts over then).
  bool WatchOnce();
  // Waits until the window reaches `revision`, the cache disconnects or `deadline`; whether the
  // window got there while connected.
  bool WaitUntil(int64_t revision, absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Connected, and the channel still up.
  bool Usable() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  EtcdStore::Impl& m_;
  mutable absl::Mutex mu_;
  EventWindow window_ ABSL_GUARDED_BY(mu_);
  bool connected_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* active_ ABSL_GUARDED_BY(mu_) = nullptr;  // the stream's, to cancel it
  grpc::Channel* channel_ ABSL_GUARDED_BY(mu_) = nullptr;       // the stream's
  std::thread thread_;
};

}  // namespace tessera::store
