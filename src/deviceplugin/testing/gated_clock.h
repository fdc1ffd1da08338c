// GatedClock: a test clock whose Sleep blocks until the test advances time past the sleeper's
// deadline. A FakeBackend's scripted events then happen exactly when the test says so, while
// the code under test runs on its own threads. Release() turns it into a ManualClock (Sleep
// advances time at once) so that threads blocked on it can finish at teardown.
// Thread safety: all methods may be called concurrently.
#pragma once

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace tessera::deviceplugin::testing {

class GatedClock final : public Clock {
 public:
  explicit GatedClock(absl::Time start = absl::UnixEpoch()) : now_(start) {}

  absl::Time Now() const override;
  void Sleep(absl::Duration d) override;

  void Advance(absl::Duration d);
  void Release();
  // Threads currently blocked in Sleep.
  int sleepers() const;
  // Blocks (real time, up to `timeout`) until at least `n` threads sleep; false on timeout.
  bool AwaitSleepers(int n, absl::Duration timeout) const;

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  int sleepers_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tessera::deviceplugin::testing
