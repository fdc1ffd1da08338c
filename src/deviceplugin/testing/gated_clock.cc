#include "deviceplugin/testing/gated_clock.h"

namespace tessera::deviceplugin::testing {

absl::Time GatedClock::Now() const {
  absl::MutexLock l(&mu_);
  return now_;
}

void GatedClock::Sleep(absl::Duration d) {
  absl::MutexLock l(&mu_);
  if (released_) {
    if (d > absl::ZeroDuration()) now_ += d;
    return;
  }
  const absl::Time until = now_ + d;
  ++sleepers_;
  auto done = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return released_ || now_ >= until; };
  mu_.Await(absl::Condition(&done));
  --sleepers_;
}

void GatedClock::Advance(absl::Duration d) {
  absl::MutexLock l(&mu_);
  if (d > absl::ZeroDuration()) now_ += d;
}

void GatedClock::Release() {
  absl::MutexLock l(&mu_);
  released_ = true;
}

int GatedClock::sleepers() const {
  absl::MutexLock l(&mu_);
  return sleepers_;
}

bool GatedClock::AwaitSleepers(int n, absl::Duration timeout) const {
  absl::MutexLock l(&mu_);
  auto enough = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return sleepers_ >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
}

}  // namespace tessera::deviceplugin::testing
