// Clock: the one source of time for everything above `model`.
//
// Production code takes a `Clock&` and never calls absl::Now() or
// std::chrono directly, so that tests and the simulator control time.
// Thread safety: every implementation here is safe for concurrent use.
#pragma once

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tessera {

class Clock {
 public:
  virtual ~Clock() = default;
  // Wall-clock time now.
  virtual absl::Time Now() const = 0;
  // Blocks (or, for a manual clock, advances) for `d`.
  virtual void Sleep(absl::Duration d) = 0;
};

// The real clock, backed by absl::Now().
class RealClock final : public Clock {
 public:
  absl::Time Now() const override;
  void Sleep(absl::Duration d) override;
};

// A clock that moves only when told to. Sleep(d) advances it by d at once,
// which is what a discrete-event simulation wants.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(absl::Time start = absl::UnixEpoch()) : now_(start) {}
  absl::Time Now() const override;
  void Sleep(absl::Duration d) override { Advance(d); }
  void Advance(absl::Duration d);
  // Moves the clock to `t`; a `t` in the past is ignored (time never runs backwards).
  void SetTime(absl::Time t);

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera
