#include "kube/rate_limiter.h"

#include <algorithm>
#include <cmath>

namespace tessera::kube {

TokenBucket::TokenBucket(double qps, int burst, const Clock& clock)
    : qps_(qps), burst_(std::max(burst, 1)), clock_(clock), tokens_(burst_), last_(clock.Now()) {}

absl::Duration TokenBucket::Reserve() {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_.Now();
  if (now > last_) {
    tokens_ = std::min(burst_, tokens_ + absl::ToDoubleSeconds(now - last_) * qps_);
    last_ = now;
  }
  // Tokens may go negative: each reservation queues behind the ones before it.
  tokens_ -= 1;
  if (tokens_ >= 0) return absl::ZeroDuration();
  return absl::Seconds(-tokens_ / qps_);
}

ExponentialFailureRateLimiter::ExponentialFailureRateLimiter(absl::Duration base,
                                                             absl::Duration max)
    : base_(base), max_(max) {}

absl::Duration ExponentialFailureRateLimiter::When(const std::string& item) {
  absl::MutexLock lock(&mu_);
  const int exp = failures_[item]++;
  // base * 2^exp, without overflow: past 2^62 it is certainly over any sane max.
  if (exp >= 62) return max_;
  const double d = absl::ToDoubleNanoseconds(base_) * std::ldexp(1.0, exp);
  if (d >= absl::ToDoubleNanoseconds(max_)) return max_;
  return absl::Nanoseconds(static_cast<int64_t>(d));
}

void ExponentialFailureRateLimiter::Forget(const std::string& item) {
  absl::MutexLock lock(&mu_);
  failures_.erase(item);
}

int ExponentialFailureRateLimiter::NumRequeues(const std::string& item) {
  absl::MutexLock lock(&mu_);
  auto it = failures_.find(item);
  return it == failures_.end() ? 0 : it->second;
}

absl::Duration MaxOfRateLimiter::When(const std::string& item) {
  absl::Duration d = absl::ZeroDuration();
  for (auto& p : parts_) d = std::max(d, p->When(item));
  return d;
}

void MaxOfRateLimiter::Forget(const std::string& item) {
  for (auto& p : parts_) p->Forget(item);
}

int MaxOfRateLimiter::NumRequeues(const std::string& item) {
  int n = 0;
  for (auto& p : parts_) n = std::max(n, p->NumRequeues(item));
  return n;
}

std::unique_ptr<ItemRateLimiter> DefaultControllerRateLimiter(const Clock& clock) {
  std::vector<std::unique_ptr<ItemRateLimiter>> parts;
  parts.push_back(
      std::make_unique<ExponentialFailureRateLimiter>(absl::Milliseconds(5), absl::Seconds(1000)));
  parts.push_back(std::make_unique<BucketRateLimiter>(10, 100, clock));
  return std::make_unique<MaxOfRateLimiter>(std::move(parts));
}

}  // namespace tessera::kube
