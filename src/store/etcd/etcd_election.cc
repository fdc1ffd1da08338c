#include "store/etcd/etcd_election.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "store/etcd/etcd_store_internal.h"

namespace tessera::store {

EtcdElection::EtcdElection(EtcdStore& store, Clock& clock, EtcdElectionOptions options)
    : store_(store), clock_(clock), options_(std::move(options)) {}

EtcdElection::~EtcdElection() { Stop(); }

void EtcdElection::RunInBackground() {
  thread_ = std::thread([this] { Run(); });
}

void EtcdElection::Stop() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
    if (follow_ctx_ != nullptr) follow_ctx_->TryCancel();
  }
  if (thread_.joinable()) thread_.join();
}

std::string EtcdElection::leader() const {
  absl::MutexLock l(&mu_);
  return leader_;
}

void EtcdElection::SetLeader(const std::string& holder) {
  {
    absl::MutexLock l(&mu_);
    if (leader_ == holder) return;
    leader_ = holder;
  }
  if (options_.on_new_leader) options_.on_new_leader(holder);
}

bool EtcdElection::WaitOrStop(absl::Duration d) {
  absl::MutexLock l(&mu_);
  auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
  mu_.AwaitWithTimeout(absl::Condition(&stopping), std::max(d, absl::ZeroDuration()));
  return stop_;
}

void EtcdElection::Run() {
  while (true) {
    {
      absl::MutexLock l(&mu_);
      if (stop_) return;
    }
    int64_t watch_from = 0;
    std::optional<Won> won = Campaign(&watch_from);
    if (won) {
      leading_ = true;
      ++terms_;
      SetLeader(options_.identity);
      if (options_.on_started_leading) options_.on_started_leading(won->fence);
      const std::string why = Lead(*won);
      leading_ = false;
      if (options_.on_stopped_leading) options_.on_stopped_leading(why);
      Revoke(won->lease);  // best effort: the key goes now rather than at the TTL
      continue;
    }
    if (watch_from > 0) {
      Follow(watch_from);
    } else if (WaitOrStop(std::min(options_.ttl / 3, absl::Seconds(1)))) {
      return;  // etcd did not answer: try again shortly
    }
  }
}

std::optional<EtcdElection::Won> EtcdElection::Campaign(int64_t* watch_from) {
  EtcdStore::Impl& m = store_.impl();
  const int64_t ttl_s =
      std::max<int64_t>(1, absl::ToInt64Seconds(absl::Ceil(options_.ttl, absl::Seconds(1))));
  EtcdStore::Impl::Endpoint& ep = m.Pick();
  pb::LeaseGrantRequest greq;
  greq.set_ttl(ttl_s);
  pb::LeaseGrantResponse gresp;
  const absl::Time sent = clock_.Now();
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(sent + options_.ttl));
    grpc::Status s = ep.lease->LeaseGrant(&ctx, greq, &gresp);
    if (!s.ok()) {
      (void)m.Fail(ep, s, "lease grant");
      return std::nullopt;
    }
  }
  if (gresp.id() == 0 || !gresp.error().empty()) return std::nullopt;
  pb::TxnRequest txn;
  pb::Compare* c = txn.add_compare();
  c->set_key(options_.key);
  c->set_target(pb::Compare::CREATE);
  c->set_result(pb::Compare::EQUAL);
  c->set_create_revision(0);
  pb::PutRequest* put = txn.add_success()->mutable_request_put();
  put->set_key(options_.key);
  put->set_value(options_.identity);
  put->set_lease(gresp.id());
  txn.add_success()->mutable_request_range()->set_key(options_.key);
  txn.add_failure()->mutable_request_range()->set_key(options_.key);
  absl::StatusOr<pb::TxnResponse> resp = m.DoTxn(txn, "campaign");
  if (!resp.ok()) {
    // Whether the put landed is unknown: revoking the lease removes the key if it did.
    Revoke(gresp.id());
    return std::nullopt;
  }
  const pb::RangeResponse& r = resp->responses(resp->succeeded() ? 1 : 0).response_range();
  if (resp->succeeded() && r.kvs_size() == 1 && r.kvs(0).lease() == gresp.id()) {
    Won won;
    won.lease = gresp.id();
    won.lease_end = sent + absl::Seconds(gresp.ttl());
    won.fence = EtcdFence{options_.key, r.kvs(0).create_revision()};
    return won;
  }
  Revoke(gresp.id());
  SetLeader(r.kvs_size() == 1 ? r.kvs(0).value() : "");
  *watch_from = resp->header().revision() + 1;
  return std::nullopt;
}

std::string EtcdElection::Lead(Won& won) {
  EtcdStore::Impl& m = store_.impl();
  const absl::Duration every = options_.ttl / 3;
  absl::Time next = clock_.Now() + every;
  while (true) {
    if (WaitOrStop(std::min(next, won.lease_end) - clock_.Now())) return "stopped";
    if (clock_.Now() >= won.lease_end) return "lease not renewed in time";
    // Renew: one keep-alive on a stream of its own, answered before the local lease end.
    EtcdStore::Impl::Endpoint& ep = m.Pick();
    const absl::Time sent = clock_.Now();
    pb::LeaseKeepAliveResponse kresp;
    bool answered = false;
    {
      grpc::ClientContext ctx;
      ctx.set_deadline(absl::ToChronoTime(won.lease_end));
      auto stream = ep.lease->LeaseKeepAlive(&ctx);
      pb::LeaseKeepAliveRequest kreq;
      kreq.set_id(won.lease);
      answered = stream->Write(kreq) && stream->Read(&kresp);
      ctx.TryCancel();
      grpc::Status s = stream->Finish();
      if (!answered) (void)m.Fail(ep, s, "lease keep-alive");
    }
    if (!answered) {
      next = clock_.Now() + absl::Milliseconds(100);  // retry until the lease end
      continue;
    }
    if (kresp.ttl() <= 0) return "etcd says the lease expired";
    won.lease_end = sent + absl::Seconds(kresp.ttl());
    // Still our key? (Someone may have deleted it, or etcd revoked the lease meanwhile.)
    pb::RangeRequest req;
    req.set_key(options_.key);
    absl::StatusOr<pb::RangeResponse> r = m.Range(req, "election key");
    if (r.ok() &&
        (r->kvs_size() != 1 || r->kvs(0).create_revision() != won.fence.create_revision)) {
      return "the election key changed";
    }
    next = sent + every;
  }
}

void EtcdElection::Follow(int64_t from) {
  EtcdStore::Impl& m = store_.impl();
  EtcdStore::Impl::Endpoint& ep = m.Pick();
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(clock_.Now() + options_.ttl));
  {
    absl::MutexLock l(&mu_);
    if (stop_) return;
    follow_ctx_ = &ctx;
  }
  auto stream = ep.watch->Watch(&ctx);
  pb::WatchRequest req;
  pb::WatchCreateRequest* create = req.mutable_create_request();
  create->set_key(options_.key);
  create->set_start_revision(from);
  bool gone = false, left = false;
  if (stream->Write(req)) {
    pb::WatchResponse resp;
    while (!gone && !left && stream->Read(&resp)) {
      if (resp.canceled() || resp.compact_revision() > 0) left = true;
      for (const mvccpb::Event& ev : resp.events()) {
        if (ev.type() == mvccpb::Event::DELETE) {
          gone = true;
          SetLeader("");
        } else {
          SetLeader(ev.kv().value());
        }
      }
      absl::MutexLock l(&mu_);
      if (stop_) left = true;
    }
  }
  ctx.TryCancel();
  (void)stream->Finish();
  absl::MutexLock l(&mu_);
  follow_ctx_ = nullptr;
}

void EtcdElection::Revoke(int64_t lease) {
  EtcdStore::Impl& m = store_.impl();
  EtcdStore::Impl::Endpoint& ep = m.Pick();
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(clock_.Now() + std::min(options_.ttl, absl::Seconds(2))));
  pb::LeaseRevokeRequest req;
  req.set_id(lease);
  pb::LeaseRevokeResponse resp;
  (void)ep.lease->LeaseRevoke(&ctx, req, &resp);  // the TTL ends it anyway
}

void FencedEtcdStore::SetFence(std::optional<EtcdFence> fence) {
  absl::MutexLock l(&mu_);
  fence_ = std::move(fence);
}

absl::StatusOr<int64_t> FencedEtcdStore::Txn(const std::vector<Op>& ops) {
  std::optional<EtcdFence> fence;
  {
    absl::MutexLock l(&mu_);
    fence = fence_;
  }
  if (!fence) {
    ++fenced_;
    return absl::PermissionDeniedError("fenced: this replica is not the leader; nothing written");
  }
  absl::StatusOr<int64_t> r = store_.FencedTxn(ops, *fence);
  if (absl::IsPermissionDenied(r.status())) ++fenced_;
  return r;
}

}  // namespace tessera::store
