#include "common/clock.h"

namespace tessera {

absl::Time RealClock::Now() const { return absl::Now(); }
void RealClock::Sleep(absl::Duration d) { absl::SleepFor(d); }

absl::Time ManualClock::Now() const {
  absl::MutexLock l(&mu_);
  return now_;
}

void ManualClock::Advance(absl::Duration d) {
  absl::MutexLock l(&mu_);
  if (d > absl::ZeroDuration()) now_ += d;
}

void ManualClock::SetTime(absl::Time t) {
  absl::MutexLock l(&mu_);
  if (t > now_) now_ = t;
}

}  // namespace tessera
