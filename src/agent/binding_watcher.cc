#include "agent/binding_watcher.h"

#include <iostream>
#include <random>

namespace tessera::agent {

BindingWatcher::BindingWatcher(ControlPlaneClient& client, NodeAgent& agent, std::string node,
                               absl::Duration poll_timeout, std::function<void()> cancel,
                               uint64_t seed)
    : client_(client),
      agent_(agent),
      node_(std::move(node)),
      poll_timeout_(poll_timeout),
      cancel_(std::move(cancel)),
      seed_(seed) {}

BindingWatcher::~BindingWatcher() { Stop(); }

void BindingWatcher::Start() {
  {
    absl::MutexLock l(&mu_);
    done_ = false;
  }
  thread_ = std::thread([this] {
    Loop();
    absl::MutexLock l(&mu_);
    done_ = true;
  });
}

void BindingWatcher::Stop() {
  {
    absl::MutexLock l(&mu_);
    if (stop_ && !thread_.joinable()) return;
    stop_ = true;
  }
  // A cancel can land just before a poll starts; repeat it until the loop has left.
  for (;;) {
    {
      absl::MutexLock l(&mu_);
      if (done_) break;
    }
    if (cancel_) cancel_();
    absl::MutexLock l(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&done_), absl::Milliseconds(50));
  }
  if (thread_.joinable()) thread_.join();
}

int64_t BindingWatcher::polls() const {
  absl::MutexLock l(&mu_);
  return polls_;
}

void BindingWatcher::Loop() {
  std::mt19937_64 rng(seed_);
  const absl::Duration initial = absl::Milliseconds(500);
  absl::Duration backoff = initial;
  int64_t since = 0;
  for (;;) {
    {
      absl::MutexLock l(&mu_);
      if (stop_) return;
      ++polls_;
    }
    absl::StatusOr<BindingSet> set = client_.WatchBindings(node_, since, poll_timeout_);
    if (!set.ok()) {
      std::uniform_real_distribution<double> jitter(0.8, 1.2);
      const absl::Duration wait = backoff * jitter(rng);
      backoff = std::min(backoff * 2, absl::Seconds(30));
      absl::MutexLock l(&mu_);
      if (stop_) return;
      std::cerr << "agent: binding watch failed: " << set.status().message() << "; retrying in "
                << absl::FormatDuration(wait) << "\n";
      mu_.AwaitWithTimeout(absl::Condition(&stop_), wait);
      continue;
    }
    backoff = initial;
    since = set->revision;
    if (set->changed) agent_.OfferBindings(*std::move(set));
  }
}

}  // namespace tessera::agent
