#include "store/etcd/watch_cache.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "store/etcd/etcd_store_internal.h"

namespace tessera::store {

WatchCache::WatchCache(EtcdStore::Impl& m, size_t max_bytes, int64_t revision)
    : m_(m), window_(max_bytes, revision) {
  thread_ = std::thread([this] { Run(); });
}

WatchCache::~WatchCache() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
    if (active_ != nullptr) active_->TryCancel();
  }
  thread_.join();
}

bool WatchCache::connected() const {
  absl::MutexLock l(&mu_);
  return connected_;
}

int64_t WatchCache::to() const {
  absl::MutexLock l(&mu_);
  return window_.to();
}

void WatchCache::Run() {
  absl::Duration backoff = absl::Milliseconds(100);
  while (true) {
    if (WatchOnce()) backoff = absl::Milliseconds(100);
    absl::MutexLock l(&mu_);
    if (stopping_) return;
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), backoff);
    if (stopping_) return;
    backoff = std::min(backoff * 2, absl::Seconds(1));
  }
}

bool WatchCache::WatchOnce() {
  EtcdStore::Impl::Endpoint& ep = m_.Pick();
  grpc::ClientContext ctx;
  // With one endpoint, while etcd is away the watch waits for it (and keeps the channel
  // reconnecting) rather than failing at once; the destructor cancels it. With several it fails
  // fast on a dead member and the next try moves to another (waiting there, the cache and every
  // WaitForRevision stalled until that member came back).
  ctx.set_wait_for_ready(m_.WaitForReady());
  int64_t from = 0;
  {
    absl::MutexLock l(&mu_);
    if (stopping_) return false;
    active_ = &ctx;
    channel_ = ep.channel.get();
    from = window_.to();
  }
  auto stream = ep.watch->Watch(&ctx);
  pb::WatchRequest req;
  pb::WatchCreateRequest* create = req.mutable_create_request();
  create->set_key(m_.options.prefix);
  create->set_range_end(PrefixEnd(m_.options.prefix));
  create->set_start_revision(m_.base + from + 1);
  create->set_prev_kv(true);
  bool any = false, left = false, compacted = false;
  if (stream->Write(req)) {
    pb::WatchResponse resp;
    while (stream->Read(&resp)) {
      any = true;
      if (resp.compact_revision() > 0) {
        EtcdStore::Impl::AtLeast(m_.compacted, resp.compact_revision() - m_.base);
        compacted = left = true;
        break;
      }
      if (resp.canceled()) {
        left = true;
        break;
      }
      if (resp.created()) {
        absl::MutexLock l(&mu_);
        connected_ = true;
        continue;
      }
      if (resp.events_size() == 0) continue;  // a progress notification
      std::vector<Event> events;
      events.reserve(resp.events_size());
      for (const mvccpb::Event& ev : resp.events()) {
        if (std::optional<Event> e = m_.ToStoreEvent(ev)) events.push_back(*std::move(e));
      }
      // etcd never splits one revision's events over two responses: the window is complete up
      // to the last event's revision.
      const int64_t rev = resp.events(resp.events_size() - 1).kv().mod_revision() - m_.base;
      EtcdStore::Impl::AtLeast(m_.last_revision, rev);
      absl::MutexLock l(&mu_);
      window_.Append(std::move(events), rev);
    }
  }
  {
    absl::MutexLock l(&mu_);
    connected_ = false;
  }
  if (left) ctx.TryCancel();
  grpc::Status s = stream->Finish();
  {
    absl::MutexLock l(&mu_);
    active_ = nullptr;
    channel_ = nullptr;
  }
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE) m_.MoveOff(ep);
  if (compacted) {
    // The history after the window is gone: start again, empty, at etcd's current revision.
    // Events calls for older revisions read etcd and get its "compacted" answer.
    if (auto meta = m_.ReadMeta("watch cache: restart after compaction"); meta.ok()) {
      absl::MutexLock l(&mu_);
      window_.Reset(std::max(window_.to(), meta->header - m_.base));
    }
  }
  return any;
}

bool WatchCache::WaitUntil(int64_t revision, absl::Time deadline) {
  auto ready = [&] { return stopping_ || !connected_ || window_.to() >= revision; };
  mu_.AwaitWithDeadline(absl::Condition(&ready), deadline);
  return connected_ && window_.to() >= revision;
}

bool WatchCache::Usable() const {
  // The connection too: a stream whose etcd just died may not have told the thread yet.
  return connected_ && channel_ != nullptr &&
         channel_->GetState(/*try_to_connect=*/false) == GRPC_CHANNEL_READY;
}

std::optional<EventsResult> WatchCache::Read(std::string_view prefix, int64_t since, int64_t limit,
                                             int64_t must_see, absl::Time deadline) {
  int64_t target = must_see;
  {
    absl::MutexLock l(&mu_);
    if (!Usable() || since < window_.from()) return std::nullopt;
    if (since <= window_.to() && must_see <= window_.to()) {
      return window_.Read(prefix, since, limit);
    }
    if (since <= window_.to()) {
      if (!WaitUntil(must_see, deadline) || since < window_.from()) return std::nullopt;
      return window_.Read(prefix, since, limit);
    }
  }
  // `since` is ahead of the window: the watch lags, or the revision came from writes outside the
  // store (a List's revision counts them). The marker says whether the store wrote after it.
  auto meta = m_.ReadMeta("events");
  if (!meta.ok() || since > meta->header - m_.base) return std::nullopt;
  target = std::max(target, meta->meta_mod - m_.base);
  absl::MutexLock l(&mu_);
  if (!WaitUntil(target, deadline) || since < window_.from()) return std::nullopt;
  if (since > window_.to()) return EventsResult{{}, since};  // nothing of the store's after it
  return window_.Read(prefix, since, limit);
}

absl::Status WatchCache::Wait(int64_t revision, absl::Time deadline) {
  absl::MutexLock l(&mu_);
  auto reached = [&] { return stopping_ || window_.to() >= revision; };
  mu_.AwaitWithDeadline(absl::Condition(&reached), deadline);
  if (window_.to() >= revision) return absl::OkStatus();
  return absl::DeadlineExceededError(absl::StrCat("revision ", revision, " not reached"));
}

}  // namespace tessera::store
