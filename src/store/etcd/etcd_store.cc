#include "store/etcd/etcd_store.h"

#include <algorithm>
#include <atomic>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "store/etcd/etcd_store_internal.h"
#include "store/txn_check.h"

namespace tessera::store {
namespace {

bool Consume(std::string_view* s, std::string_view prefix) {
  if (s->substr(0, prefix.size()) != prefix) return false;
  s->remove_prefix(prefix.size());
  return true;
}

absl::StatusOr<std::string> ReadFile(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(what, " ", path, ": cannot read"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

// The smallest string greater than every string with prefix `p` ("" when there is none: etcd's
// range_end "\0" would mean "to the end", but our prefixes always contain a byte below 0xff).
std::string PrefixEnd(std::string_view p) {
  std::string end(p);
  while (!end.empty()) {
    unsigned char c = static_cast<unsigned char>(end.back());
    if (c != 0xff) {
      end.back() = static_cast<char>(c + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

// Concatenation of std::string_views (Debian's abseil StrCat takes only absl::string_view).
std::string Cat(std::string_view a, std::string_view b, std::string_view c) {
  std::string out;
  out.reserve(a.size() + b.size() + c.size());
  out.append(a).append(b).append(c);
  return out;
}

absl::StatusOr<EtcdStoreOptions> ParseEtcdUrl(std::string_view url, EtcdStoreOptions base) {
  std::string_view rest = url;
  if (Consume(&rest, "etcds://")) {
    base.tls = true;
  } else if (!Consume(&rest, "etcd://")) {
    return absl::InvalidArgumentError(
        Cat("etcd URL \"", url,
            "\": want etcd://host:port[,host:port...][/prefix] (or etcds:// for TLS)"));
  }
  std::string_view hosts = rest;
  if (size_t slash = rest.find('/'); slash != std::string_view::npos) {
    hosts = rest.substr(0, slash);
    std::string prefix(rest.substr(slash));
    while (prefix.size() > 1 && prefix.back() == '/') prefix.pop_back();
    base.prefix = prefix == "/" ? base.prefix : prefix + "/";
  }
  base.endpoints.clear();
  for (absl::string_view part :
       absl::StrSplit(absl::string_view(hosts.data(), hosts.size()), ',')) {
    std::string_view hp(part.data(), part.size());
    size_t colon = hp.rfind(':');
    int port = 0;
    bool port_ok = colon != std::string_view::npos && colon > 0 && colon + 1 < hp.size();
    if (port_ok) {
      for (char c : hp.substr(colon + 1)) {
        if (c < '0' || c > '9' || port > 65535) port_ok = false;
        port = port * 10 + (c - '0');
      }
      port_ok = port_ok && port > 0 && port <= 65535;
    }
    if (!port_ok) {
      return absl::InvalidArgumentError(Cat("etcd URL \"", url, "\": ") +
                                        Cat("endpoint \"", hp, "\" is not host:port"));
    }
    base.endpoints.emplace_back(hp);
  }
  return base;
}

absl::Status EtcdStore::Impl::Connect() {
  if (options.endpoints.empty()) return absl::InvalidArgumentError("etcd: no endpoints");
  if (options.prefix.empty()) return absl::InvalidArgumentError("etcd: empty key prefix");
  meta_key = options.prefix + "meta";
  data_prefix = options.prefix + "data";
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (options.tls) {
    grpc::SslCredentialsOptions ssl;
    if (!options.ca_file.empty()) {
      auto ca = ReadFile(options.ca_file, "--etcd-cacert");
      if (!ca.ok()) return ca.status();
      ssl.pem_root_certs = *ca;
    }
    if (options.cert_file.empty() != options.key_file.empty()) {
      return absl::InvalidArgumentError("etcd TLS: --etcd-cert and --etcd-key go together");
    }
    if (!options.cert_file.empty()) {
      auto cert = ReadFile(options.cert_file, "--etcd-cert");
      if (!cert.ok()) return cert.status();
      auto key = ReadFile(options.key_file, "--etcd-key");
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *cert;
      ssl.pem_private_key = *key;
    }
    creds = grpc::SslCredentials(ssl);
  }
  grpc::ChannelArguments args;
  // Reconnect promptly once etcd is back (gRPC's default backoff grows to two minutes). The
  // "min" backoff is also each connection attempt's timeout: keep it generous.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 5000);
  args.SetMaxReceiveMessageSize(-1);  // a List without a limit may be large
  // A member cut off without a reset (a partition) fails the calls and the watch cache's stream
  // within ~15 s instead of the kernel's TCP timeout. etcd allows pings every 5 s (its
  // --grpc-keepalive-min-time default).
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  for (const std::string& address : options.endpoints) {
    Endpoint ep;
    ep.address = address;
    ep.channel = grpc::CreateCustomChannel(address, creds, args);
    ep.kv = pb::KV::NewStub(ep.channel);
    ep.watch = pb::Watch::NewStub(ep.channel);
    ep.lease = pb::Lease::NewStub(ep.channel);
    endpoints.push_back(std::move(ep));
  }
  // Create the marker unless it exists; read it either way.
  pb::TxnRequest txn;
  pb::Compare* c = txn.add_compare();
  c->set_key(meta_key);
  c->set_target(pb::Compare::CREATE);
  c->set_result(pb::Compare::EQUAL);
  c->set_create_revision(0);
  pb::PutRequest* put = txn.add_success()->mutable_request_put();
  put->set_key(meta_key);
  put->set_value(kMetaValue);
  txn.add_success()->mutable_request_range()->set_key(meta_key);
  txn.add_failure()->mutable_request_range()->set_key(meta_key);
  absl::StatusOr<pb::TxnResponse> resp = absl::UnavailableError("no endpoint");
  for (size_t i = 0; i < endpoints.size(); ++i) {
    resp = DoTxn(txn, "open", /*wait_for_ready=*/true);
    if (resp.ok() || !absl::IsUnavailable(resp.status())) break;
  }
  if (!resp.ok()) return resp.status();
  const pb::RangeResponse& r = resp->responses(resp->succeeded() ? 1 : 0).response_range();
  if (r.kvs_size() != 1) return absl::InternalError("etcd: the store's marker cannot be read");
  if (r.kvs(0).value() != kMetaValue) {
    return absl::FailedPreconditionError(absl::StrCat("etcd: ", meta_key, " holds \"",
                                                      r.kvs(0).value().substr(0, 64),
                                                      "\", not a Tessera store's marker"));
  }
  base = r.kvs(0).create_revision();
  AtLeast(last_revision, resp->header().revision() - base);
  return LearnCompaction(resp->header().revision());
}

// etcd answers a Range at a revision below its compaction with OutOfRange, so its compaction
// revision C is the lowest revision in [base, header] that reads: bisect.
absl::Status EtcdStore::Impl::LearnCompaction(int64_t header) {
  auto readable = [&](int64_t rev) -> absl::StatusOr<bool> {
    pb::RangeRequest req;
    req.set_key(meta_key);
    req.set_revision(rev);
    req.set_count_only(true);
    auto resp = Range(req, "open: find the compaction");
    if (resp.ok()) return true;
    if (absl::IsOutOfRange(resp.status())) return false;
    return resp.status();
  };
  int64_t lo = base, hi = header;  // invariant: hi reads; the answer is in [lo, hi]
  auto first = readable(lo);
  if (!first.ok()) return first.status();
  if (*first) return absl::OkStatus();
  while (hi - lo > 1) {
    int64_t mid = lo + (hi - lo) / 2;
    auto r = readable(mid);
    if (!r.ok()) return r.status();
    (*r ? hi : lo) = mid;
  }
  AtLeast(compacted, hi - base);
  return absl::OkStatus();
}

std::optional<Event> EtcdStore::Impl::ToStoreEvent(const mvccpb::Event& ev) const {
  if (std::string_view(ev.kv().key()).substr(0, data_prefix.size()) != data_prefix) {
    return std::nullopt;  // not the store's
  }
  Event e;
  e.revision = ev.kv().mod_revision() - base;
  if (ev.type() == mvccpb::Event::PUT) {
    e.type = Event::Type::kPut;
    e.kv = ToStore(ev.kv());
    if (ev.kv().version() > 1 && ev.has_prev_kv()) {
      e.prev_mod_revision = ev.prev_kv().mod_revision() - base;
    }
  } else {
    e.type = Event::Type::kDelete;
    e.kv = KeyValue{ev.kv().key().substr(data_prefix.size()), ev.prev_kv().value(),
                    ev.prev_kv().create_revision() - base, e.revision};
    e.prev_mod_revision = ev.prev_kv().mod_revision() - base;
  }
  return e;
}

EtcdStore::EtcdStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EtcdStore::~EtcdStore() { impl_->cache.reset(); }

absl::StatusOr<std::unique_ptr<EtcdStore>> EtcdStore::Open(const EtcdStoreOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  if (absl::Status s = impl->Connect(); !s.ok()) return s;
  if (options.event_cache_bytes > 0) {
    impl->cache =
        std::make_unique<WatchCache>(*impl, options.event_cache_bytes, impl->last_revision.load());
  }
  return std::unique_ptr<EtcdStore>(new EtcdStore(std::move(impl)));
}

size_t EtcdStore::MaxTxnOps() const { return impl_->options.max_txn_ops; }
int64_t EtcdStore::base_revision() const { return impl_->base; }
const std::string& EtcdStore::prefix() const { return impl_->options.prefix; }

absl::StatusOr<KeyValue> EtcdStore::Get(std::string_view key) {
  pb::RangeRequest req;
  req.set_key(Cat(impl_->data_prefix, key));
  auto resp = impl_->Range(req, "get");
  if (!resp.ok()) return resp.status();
  if (resp->kvs_size() == 0) {
    return absl::NotFoundError(absl::StrCat("key ", std::string(key), " not found"));
  }
  return impl_->ToStore(resp->kvs(0));
}

absl::StatusOr<ListResult> EtcdStore::List(std::string_view prefix, const ListOptions& options) {
  if (options.limit < 0) return absl::InvalidArgumentError("list: negative limit");
  Impl& m = *impl_;
  std::string start = Cat(m.data_prefix, prefix);
  if (!options.continue_after.empty()) {
    // Strictly after continue_after: its smallest successor is itself plus a NUL byte.
    std::string after = Cat(m.data_prefix, options.continue_after, std::string_view("\0", 1));
    start = std::max(start, after);
  }
  pb::RangeRequest req;
  req.set_key(start);
  req.set_range_end(PrefixEnd(Cat(m.data_prefix, prefix)));
  req.set_limit(options.limit);
  auto resp = m.Range(req, "list");
  if (!resp.ok()) return resp.status();
  ListResult result;
  result.revision = resp->header().revision() - m.base;
  result.kvs.reserve(resp->kvs_size());
  for (const mvccpb::KeyValue& kv : resp->kvs()) result.kvs.push_back(m.ToStore(kv));
  result.more = resp->more() && !result.kvs.empty();
  if (result.more) result.next_key = result.kvs.back().key;
  return result;
}

absl::StatusOr<int64_t> EtcdStore::Txn(const std::vector<Op>& ops) { return DoTxn(ops, nullptr); }

absl::StatusOr<int64_t> EtcdStore::FencedTxn(const std::vector<Op>& ops, const EtcdFence& fence) {
  return DoTxn(ops, &fence);
}

absl::StatusOr<int64_t> EtcdStore::DoTxn(const std::vector<Op>& ops, const EtcdFence* fence) {
  if (absl::Status s = ValidateTxnShape(ops); !s.ok()) return s;
  Impl& m = *impl_;
  pb::TxnRequest txn;
  for (const Op& op : ops) {
    const std::string key = Cat(m.data_prefix, op.key);
    auto compare = [&](pb::Compare::CompareTarget target, pb::Compare::CompareResult result,
                       int64_t rev) {
      pb::Compare* c = txn.add_compare();
      c->set_key(key);
      c->set_target(target);
      c->set_result(result);
      if (target == pb::Compare::CREATE) {
        c->set_create_revision(rev);
      } else {
        c->set_mod_revision(rev);
      }
    };
    if (op.expected_revision == kMustNotExist) {
      compare(pb::Compare::CREATE, pb::Compare::EQUAL, 0);
    } else if (op.expected_revision > 0) {
      compare(pb::Compare::MOD, pb::Compare::EQUAL, m.base + op.expected_revision);
    } else if (op.kind == Op::Kind::kDelete) {
      compare(pb::Compare::CREATE, pb::Compare::GREATER, 0);
    }
    if (op.kind == Op::Kind::kPut) {
      pb::PutRequest* put = txn.add_success()->mutable_request_put();
      put->set_key(key);
      put->set_value(op.value);
    } else {
      txn.add_success()->mutable_request_delete_range()->set_key(key);
    }
    txn.add_failure()->mutable_request_range()->set_key(key);
  }
  if (fence != nullptr) {
    // The fence: the election key as this leader created it. Its read comes last in the failure
    // branch, after the ops' reads.
    pb::Compare* c = txn.add_compare();
    c->set_key(fence->key);
    c->set_target(pb::Compare::CREATE);
    c->set_result(pb::Compare::EQUAL);
    c->set_create_revision(fence->create_revision);
    txn.add_failure()->mutable_request_range()->set_key(fence->key);
  }
  pb::PutRequest* meta = txn.add_success()->mutable_request_put();
  meta->set_key(m.meta_key);
  meta->set_value(kMetaValue);
  auto resp = m.DoTxn(txn, "txn");
  if (!resp.ok()) {
    if (absl::StrContains(resp.status().message(), "too many operations in txn request")) {
      return absl::InvalidArgumentError(
          absl::StrCat("txn: ", ops.size(), " operations (plus the store's marker) exceed etcd's ",
                       "--max-txn-ops: ", resp.status().message()));
    }
    return resp.status();
  }
  if (!resp->succeeded()) {
    if (fence != nullptr) {
      const pb::RangeResponse& r = resp->responses(static_cast<int>(ops.size())).response_range();
      const int64_t now = r.kvs_size() > 0 ? r.kvs(0).create_revision() : 0;
      if (now != fence->create_revision) {
        return absl::PermissionDeniedError(
            absl::StrCat("fenced: not the leader any more (", fence->key,
                         " was created at etcd revision ", fence->create_revision, ", is now ",
                         now == 0 ? std::string("gone") : absl::StrCat("created at ", now),
                         "); nothing written"));
      }
    }
    // Which check failed, judged on the keys as the Txn saw them (read in the same etcd Txn).
    for (size_t i = 0; i < ops.size(); ++i) {
      const pb::RangeResponse& r = resp->responses(static_cast<int>(i)).response_range();
      std::optional<KeyValue> cur;
      if (r.kvs_size() > 0) cur = m.ToStore(r.kvs(0));
      if (absl::Status s = CheckOp(ops[i], cur ? &*cur : nullptr); !s.ok()) return s;
    }
    return absl::AbortedError("txn: etcd refused a compare that holds; retry");
  }
  const int64_t rev = resp->header().revision() - m.base;
  Impl::AtLeast(m.last_revision, rev);
  Impl::AtLeast(m.must_see, rev);
  const int64_t retain = m.options.retain_revisions;
  if (retain > 0 && rev - m.compacted.load() > retain + retain / 10) {
    // Best effort: the write itself succeeded; a failed compaction is retried by a later write.
    Compact(rev - retain).IgnoreError();
  }
  return rev;
}

absl::StatusOr<EventsResult> EtcdStore::Events(std::string_view prefix, int64_t since_revision,
                                               int64_t limit) {
  Impl& m = *impl_;
  if (m.cache != nullptr && since_revision >= m.compacted.load()) {
    // Waits (briefly) only for this process's own latest write or a `since` ahead of the cache.
    const absl::Time wait = absl::Now() + std::min(absl::Seconds(1), m.options.rpc_timeout);
    if (std::optional<EventsResult> r =
            m.cache->Read(prefix, since_revision, limit, m.must_see.load(), wait)) {
      return *std::move(r);
    }
  }
  auto meta = m.ReadMeta("events");
  if (!meta.ok()) return meta.status();
  const int64_t rev = meta->header - m.base;
  if (since_revision < 0 || since_revision > rev) {
    return absl::InvalidArgumentError(
        absl::StrCat("events: revision ", since_revision, " is not in [0, ", rev, "]"));
  }
  if (since_revision < m.compacted.load()) return m.CompactedError(since_revision);
  EventsResult result;
  result.revision = rev;
  const int64_t start = m.base + since_revision;  // etcd reports compaction above it
  if (meta->meta_mod <= start) return result;     // no store write since

  Impl::Endpoint& ep = m.Pick();
  grpc::ClientContext ctx;
  m.Prepare(ctx);
  std::unique_ptr<grpc::ClientReaderWriter<pb::WatchRequest, pb::WatchResponse>> stream =
      ep.watch->Watch(&ctx);
  pb::WatchRequest req;
  pb::WatchCreateRequest* create = req.mutable_create_request();
  create->set_key(m.options.prefix);
  create->set_range_end(PrefixEnd(m.options.prefix));
  create->set_start_revision(start);
  create->set_prev_kv(true);
  absl::Status status = absl::OkStatus();
  bool done = false;
  if (stream->Write(req)) {
    pb::WatchResponse resp;
    while (!done && stream->Read(&resp)) {
      if (resp.compact_revision() > 0) {
        Impl::AtLeast(m.compacted, resp.compact_revision() - m.base);
        status = m.CompactedError(since_revision);
        break;
      }
      if (resp.canceled()) {
        status = absl::InternalError(
            absl::StrCat("etcd ", ep.address, ": events: watch canceled: ", resp.cancel_reason()));
        break;
      }
      for (const mvccpb::Event& ev : resp.events()) {
        const int64_t erev = ev.kv().mod_revision();
        if (erev <= start) continue;
        if (limit > 0 && static_cast<int64_t>(result.events.size()) >= limit &&
            erev - m.base != result.events.back().revision) {
          result.revision = erev - m.base - 1;
          done = true;
          break;
        }
        if (ev.kv().key() == m.meta_key) {
          if (erev >= meta->meta_mod) {
            done = true;
            break;
          }
          continue;
        }
        std::optional<Event> e = m.ToStoreEvent(ev);
        if (!e || !HasPrefix(e->kv.key, prefix)) continue;
        result.events.push_back(*std::move(e));
      }
    }
  }
  // Cancel only a stream we leave early: one that ended by itself carries the reason (etcd gone:
  // Unavailable), which our cancel would replace.
  if (done || !status.ok()) ctx.TryCancel();
  grpc::Status finish = stream->Finish();
  if (!status.ok()) return status;
  if (!done) {
    if (finish.ok()) finish = grpc::Status(grpc::StatusCode::UNAVAILABLE, "watch ended early");
    return m.Fail(ep, finish, "events");
  }
  return result;
}

absl::Status EtcdStore::WaitForRevision(int64_t revision, absl::Time deadline) {
  Impl& m = *impl_;
  if (revision <= 0) return absl::OkStatus();
  if (m.last_revision.load() >= revision) return absl::OkStatus();
  if (m.cache != nullptr) return m.cache->Wait(revision, deadline);
  while (absl::Now() < deadline) {
    // Watch the marker from the wanted revision: its first event (or etcd saying that revision is
    // compacted) means the store got there. With one endpoint, while etcd is down, wait for it.
    Impl::Endpoint& ep = m.Pick();
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(deadline));
    ctx.set_wait_for_ready(m.WaitForReady());
    auto stream = ep.watch->Watch(&ctx);
    pb::WatchRequest req;
    pb::WatchCreateRequest* create = req.mutable_create_request();
    create->set_key(m.meta_key);
    create->set_start_revision(m.base + revision);
    bool reached = false, left = false;
    if (stream->Write(req)) {
      pb::WatchResponse resp;
      while (stream->Read(&resp)) {
        if (resp.compact_revision() > 0 || resp.events_size() > 0) {
          reached = true;
          break;
        }
        if (resp.canceled()) {
          left = true;
          break;
        }
      }
    }
    if (reached || left) ctx.TryCancel();
    grpc::Status s = stream->Finish();
    if (reached) {
      Impl::AtLeast(m.last_revision, revision);
      return absl::OkStatus();
    }
    if (left) {
      return absl::UnavailableError(
          absl::StrCat("etcd ", ep.address, ": wait for revision: watch canceled by etcd"));
    }
    if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) break;
    if (s.error_code() != grpc::StatusCode::UNAVAILABLE) {
      return m.Fail(ep, s, "wait for revision");
    }
    m.MoveOff(ep);
    // Failing fast on a dead member (several endpoints): a pause before the next one, so that
    // all of them down is not a busy loop.
    if (!m.WaitForReady())
      absl::SleepFor(std::min(absl::Milliseconds(100), deadline - absl::Now()));
  }
  return absl::DeadlineExceededError(absl::StrCat("revision ", revision, " not reached"));
}

int64_t EtcdStore::CurrentRevision() {
  // The marker itself (a few bytes), not just a count: its mod_revision is the store's latest
  // write, which Events must then show (Impl::must_see).
  auto meta = impl_->ReadMeta("current revision");
  if (!meta.ok()) return impl_->last_revision.load();
  return meta->header - impl_->base;
}

int64_t EtcdStore::CompactedRevision() { return impl_->compacted.load(); }

absl::Status EtcdStore::Compact(int64_t revision) {
  Impl& m = *impl_;
  const int64_t current = CurrentRevision();
  if (revision > current) {
    return absl::OutOfRangeError(
        absl::StrCat("compact: revision ", revision, " is above current revision ", current));
  }
  if (revision <= m.compacted.load()) return absl::OkStatus();
  Impl::Endpoint& ep = m.Pick();
  grpc::ClientContext ctx;
  m.Prepare(ctx);
  pb::CompactionRequest req;
  req.set_revision(m.base + revision);
  pb::CompactionResponse resp;
  grpc::Status s = ep.kv->Compact(&ctx, req, &resp);
  // OutOfRange: etcd is already compacted at or above it (another client did): done too.
  if (!s.ok() && s.error_code() != grpc::StatusCode::OUT_OF_RANGE) {
    return m.Fail(ep, s, "compact");
  }
  Impl::AtLeast(m.compacted, revision);
  return absl::OkStatus();
}

}  // namespace tessera::store
