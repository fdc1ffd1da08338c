// EtcdStore's insides, shared by etcd_store.cc (the Store) and etcd_election.cc (leases, the
// election and the fenced view): the gRPC channels and stubs, BASE, and the RPC helpers. Private
// to src/store/etcd; nothing outside includes it (it pulls in gRPC).
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "store/etcd/api/rpc.grpc.pb.h"
#include "store/etcd/etcd_store.h"
#include "store/etcd/watch_cache.h"

namespace tessera::store {

namespace pb = ::etcdserverpb;

// What the marker holds: a different value under the prefix is another format's data.
inline constexpr char kMetaValue[] = "tessera-store v1";

// The smallest string greater than every string with prefix `p` ("" when there is none: etcd's
// range_end "\0" would mean "to the end", but our prefixes always contain a byte below 0xff).
std::string PrefixEnd(std::string_view p);
// Concatenation of std::string_views (Debian's abseil StrCat takes only absl::string_view).
std::string Cat(std::string_view a, std::string_view b, std::string_view c = {});

struct EtcdStore::Impl {
  EtcdStoreOptions options;
  std::string meta_key;     // <prefix>meta
  std::string data_prefix;  // <prefix>data
  int64_t base = 0;         // etcd revision of the marker's creation: store revision 0

  struct Endpoint {
    std::string address;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<pb::KV::Stub> kv;
    std::unique_ptr<pb::Watch::Stub> watch;
    std::unique_ptr<pb::Lease::Stub> lease;
  };
  std::vector<Endpoint> endpoints;
  std::atomic<size_t> current{0};  // the endpoint in use

  std::atomic<int64_t> last_revision{0};  // store revision last seen (CurrentRevision's fallback)
  std::atomic<int64_t> compacted{0};      // store revision compacted, as far as we know
  // The latest store write this process knows of: its own Txns and the marker's mod_revision as
  // CurrentRevision and ReadMeta read it. Events answers from the watch cache only once the cache
  // holds it (read your writes, and monotonic reads after CurrentRevision).
  std::atomic<int64_t> must_see{0};

  static void AtLeast(std::atomic<int64_t>& a, int64_t v) {
    int64_t cur = a.load();
    while (cur < v && !a.compare_exchange_weak(cur, v)) {
    }
  }

  Endpoint& Pick() { return endpoints[current.load() % endpoints.size()]; }

  // Moves off `ep` after it failed, to the next endpoint, unless another caller already moved
  // off it. Idempotent per failure of one member: concurrent failures of the same member move
  // once, never on around the ring and back onto the dead member (a bare increment per failure
  // did: three callers failing on m0 of three endpoints landed on m0 again).
  void MoveOff(const Endpoint& ep) {
    const size_t n = endpoints.size();
    if (n < 2) return;
    const auto i = static_cast<size_t>(&ep - endpoints.data());
    size_t cur = current.load();
    while (cur % n == i && !current.compare_exchange_weak(cur, cur + 1)) {
    }
  }

  // Whether a call should wait for its endpoint to come back rather than fail fast. Only with a
  // single endpoint: with more, a call waiting on a dead member would never move to a live one.
  bool WaitForReady() const { return endpoints.size() == 1; }

  // An RPC's context: a deadline of rpc_timeout, failing fast unless `wait_for_ready`.
  void Prepare(grpc::ClientContext& ctx, bool wait_for_ready = false) const {
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + options.rpc_timeout));
    ctx.set_wait_for_ready(wait_for_ready);
  }

  // Maps a failed RPC to a Status naming the endpoint; moves to the next endpoint when this one
  // is unreachable.
  absl::Status Fail(const Endpoint& ep, const grpc::Status& s, std::string_view what) {
    auto code = static_cast<absl::StatusCode>(s.error_code());
    std::string msg = s.error_message();
    if (code == absl::StatusCode::kDeadlineExceeded) {
      code = absl::StatusCode::kUnavailable;
      msg = absl::StrCat("no answer within ", absl::FormatDuration(options.rpc_timeout),
                         " (a write may or may not have been applied)");
    }
    if (code == absl::StatusCode::kUnavailable) MoveOff(ep);
    return absl::Status(code, absl::StrCat("etcd ", ep.address, ": ", Cat(what, ": ", msg)));
  }

  absl::StatusOr<pb::RangeResponse> Range(const pb::RangeRequest& req, std::string_view what,
                                          bool wait_for_ready = false) {
    Endpoint& ep = Pick();
    grpc::ClientContext ctx;
    Prepare(ctx, wait_for_ready);
    pb::RangeResponse resp;
    grpc::Status s = ep.kv->Range(&ctx, req, &resp);
    if (!s.ok()) return Fail(ep, s, what);
    AtLeast(last_revision, resp.header().revision() - base);
    return resp;
  }

  absl::StatusOr<pb::TxnResponse> DoTxn(const pb::TxnRequest& req, std::string_view what,
                                        bool wait_for_ready = false) {
    Endpoint& ep = Pick();
    grpc::ClientContext ctx;
    Prepare(ctx, wait_for_ready);
    pb::TxnResponse resp;
    grpc::Status s = ep.kv->Txn(&ctx, req, &resp);
    if (!s.ok()) return Fail(ep, s, what);
    return resp;
  }

  // The marker's header revision and mod_revision, read at one etcd revision.
  struct MetaRead {
    int64_t header = 0;  // etcd revision of the read
    int64_t meta_mod = 0;
  };
  absl::StatusOr<MetaRead> ReadMeta(std::string_view what) {
    pb::RangeRequest req;
    req.set_key(meta_key);
    auto resp = Range(req, what);
    if (!resp.ok()) return resp.status();
    if (resp->kvs_size() != 1) {
      return absl::FailedPreconditionError(
          absl::StrCat("etcd: the store's marker ", meta_key, " is gone"));
    }
    AtLeast(must_see, resp->kvs(0).mod_revision() - base);
    return MetaRead{resp->header().revision(), resp->kvs(0).mod_revision()};
  }

  absl::Status Connect();
  absl::Status LearnCompaction(int64_t header);
  KeyValue ToStore(const mvccpb::KeyValue& kv) const {
    return KeyValue{kv.key().substr(data_prefix.size()), kv.value(), kv.create_revision() - base,
                    kv.mod_revision() - base};
  }
  // A watch event as the store's Event; nullopt for keys outside the data (the marker, the
  // election key).
  std::optional<Event> ToStoreEvent(const mvccpb::Event& ev) const;
  absl::Status CompactedError(int64_t since) const {
    return absl::OutOfRangeError(absl::StrCat("required revision ", since,
                                              " has been compacted (compacted revision ",
                                              compacted.load(), ")"));
  }

  // Last, so that it goes first: its thread uses the endpoints. Null when
  // EtcdStoreOptions::event_cache_bytes is 0.
  std::unique_ptr<WatchCache> cache;
};

}  // namespace tessera::store
