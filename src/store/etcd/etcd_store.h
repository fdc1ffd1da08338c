// EtcdStore: the Store (store.h) kept in an etcd v3 cluster, spoken to over etcd's gRPC API
// (KV Range/Txn/Compact, Watch, Lease; the protos in api/ are etcd's, trimmed to what is used).
//
// Key space. Everything lives under `prefix` (default "/tessera/"):
//   <prefix>data<key>   the store's key <key>, its value stored as is;
//   <prefix>meta        the store's marker, created by the first Open. Its create_revision is the
//                       store's BASE; every Txn the store commits also puts it, so its
//                       mod_revision is the etcd revision of the store's latest write.
// Revisions. The store's revision is etcd's minus BASE: 0 for a new store, and every Txn (one etcd
// Txn) bumps it by exactly one -- as long as nothing else writes to the same etcd. Other writers
// (other prefixes, other programs) make the store's revision skip numbers; nothing else breaks.
// Keys' create_revision/mod_revision are likewise etcd's minus BASE.
// CAS. A Txn is one etcd Txn: each op's expected_revision becomes a Compare (create_revision == 0
// for kMustNotExist, mod_revision == BASE+N for N > 0, create_revision > 0 for a delete), the
// success branch holds the puts/deletes and the meta put, the failure branch reads every key of
// the Txn so that the error (code and message) is the one txn_check.h gives every backend.
// Events and WaitForRevision are served from a watch cache (watch_cache.h): one long-lived Watch
// of the whole key space keeps the recent history (event_cache_bytes) in memory, so they cost no
// RPC; a process reads its own writes (Events waits for the cache to hold them). What the cache
// cannot answer (older revisions, the cache disconnected) is read with a Watch from the wanted
// revision (prev_kv on, for deletes and prev_mod_revision); the meta key's event ends each store
// revision, so a read knows when it has everything up to the revision it started at. etcd's own
// watch catch-up runs every 100 ms, so such a read takes up to ~100 ms.
// Compaction. Compact(r) compacts etcd at BASE+r (etcd keeps events at and above its compaction
// revision, the store promises those above r). A Watch from a compacted revision reports etcd's
// compaction revision; the store's is that minus BASE. Open finds it by bisecting Range reads at
// old revisions (etcd answers "compacted" below it). CompactedRevision() is the latest known to
// this process (Open, its own Compact, an Events call or the cache's watch that ran into a newer
// one). Events from a compacted revision fail with OutOfRange, as SqliteStore's; the cache keeps
// serving what it holds after another process compacted etcd (as kube-apiserver's watch cache).
// Errors. gRPC codes map to absl codes one to one, except that an RPC deadline (rpc_timeout) is
// Unavailable ("no answer"; a write may or may not have been applied). A down etcd gives
// Unavailable at once (calls fail fast); the channels reconnect with a short backoff (<= 1 s), so
// calls succeed again as soon as etcd is back. WaitForRevision instead waits for etcd up to its
// deadline. With several endpoints, the store talks to one and moves to the next after an
// Unavailable.
// Limits. etcd refuses a Txn of more than --max-txn-ops operations (default 128) including the
// meta put, and requests over --max-request-bytes (default 1.5 MiB).
//
// Thread safety: all methods are thread-safe (see store.h).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "store/store.h"

namespace tessera::store {

struct EtcdStoreOptions {
  // "host:port" of one or more members of one etcd cluster.
  std::vector<std::string> endpoints;
  // TLS: when set, connect with TLS, verifying the server against ca_file (PEM; "" = the system
  // roots) and presenting cert_file/key_file (PEM) as the client certificate when both are set.
  bool tls = false;
  std::string ca_file, cert_file, key_file;
  // The store's key space in etcd; must be non-empty.
  std::string prefix = "/tessera/";
  // Deadline of each RPC (WaitForRevision's own deadline excepted).
  absl::Duration rpc_timeout = absl::Seconds(10);
  // As SqliteStoreOptions::retain_revisions: keep the history of at most this many recent
  // revisions, compacting etcd after writes. 0 = never compact automatically.
  int64_t retain_revisions = 0;
  // Memory for the watch cache's recent events (keys and values); 0 = no cache (every Events call
  // and WaitForRevision asks etcd).
  size_t event_cache_bytes = size_t{64} << 20;
  // The etcd cluster's --max-txn-ops (default 128) less the store's marker put: MaxTxnOps().
  size_t max_txn_ops = 127;
};

// Parses "etcd://host:port[,host:port...][/prefix]" or the same with "etcds://" (TLS). The
// optional path is the key prefix ("/a/b" -> "/a/b/"); none keeps the default. InvalidArgument
// naming the URL and what is wrong otherwise. Leaves the other fields of `base` as they are.
absl::StatusOr<EtcdStoreOptions> ParseEtcdUrl(std::string_view url, EtcdStoreOptions base = {});

// What a leader's writes are fenced on (etcd_election.h): the election key and the etcd
// revision (etcd's own, not the store's) at which this leader created it.
struct EtcdFence {
  std::string key;
  int64_t create_revision = 0;
};

class EtcdStore final : public Store {
 public:
  // Connects (waiting up to rpc_timeout for etcd), creates the store's marker when missing and
  // learns BASE and the compaction. Unavailable when etcd does not answer; InvalidArgument for bad
  // options or unreadable TLS files (naming them); FailedPrecondition when the prefix holds a
  // marker that is not this format's.
  static absl::StatusOr<std::unique_ptr<EtcdStore>> Open(const EtcdStoreOptions& options);
  ~EtcdStore() override;

  absl::StatusOr<KeyValue> Get(std::string_view key) override;
  absl::StatusOr<ListResult> List(std::string_view prefix, const ListOptions& options) override;
  absl::StatusOr<int64_t> Txn(const std::vector<Op>& ops) override;
  // Txn, fenced: the same etcd Txn also compares the create_revision of `fence.key` with
  // `fence.create_revision`. When that differs (the key is gone or another replica created it
  // since), nothing is written and the result is PermissionDenied ("fenced: ..."), whatever the
  // ops' own checks say; otherwise exactly Txn's result. A deposed leader's late write therefore
  // fails however late it arrives. (FencedEtcdStore in etcd_election.h wraps this as a Store.)
  absl::StatusOr<int64_t> FencedTxn(const std::vector<Op>& ops, const EtcdFence& fence);
  absl::StatusOr<EventsResult> Events(std::string_view prefix, int64_t since_revision,
                                      int64_t limit) override;
  absl::Status WaitForRevision(int64_t revision, absl::Time deadline) override;
  // Asks etcd; when it cannot be reached, the latest revision this process has seen.
  int64_t CurrentRevision() override;
  int64_t CompactedRevision() override;
  absl::Status Compact(int64_t revision) override;
  size_t MaxTxnOps() const override;

  // The etcd revision of the store's revision 0 (tests, diagnostics).
  int64_t base_revision() const;
  // The key prefix (EtcdStoreOptions::prefix): the replicas' election key lives under it.
  const std::string& prefix() const;

  struct Impl;
  // The insides (etcd_store_internal.h), for the election in the same module.
  Impl& impl() { return *impl_; }

 private:
  explicit EtcdStore(std::unique_ptr<Impl> impl);
  absl::StatusOr<int64_t> DoTxn(const std::vector<Op>& ops, const EtcdFence* fence);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::store
