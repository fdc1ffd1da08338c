// Rate limiters with client-go's semantics (k8s.io/client-go/util/workqueue and flowcontrol).
//
// TokenBucket: `qps` tokens a second accrue up to `burst`; Reserve() takes one and returns how
// long the caller must wait before using it (golang.org/x/time/rate's Reserve().Delay()), so a
// burst goes through at once and a steady stream at `qps`.
// ItemRateLimiter (per work-queue item): When(item) is the delay before the item's next retry,
// Forget(item) clears its history, NumRequeues(item) counts When calls since the last Forget.
//   ExponentialFailureRateLimiter: base * 2^failures, capped at `max`.
//   BucketRateLimiter: a TokenBucket shared by all items (overall retry rate).
//   MaxOfRateLimiter: the longest delay of its parts.
//   DefaultControllerRateLimiter: max(exponential 5 ms..1000 s, bucket 10 qps burst 100), as
//   workqueue.DefaultTypedControllerRateLimiter.
// Thread safety: all are safe for concurrent use. Time comes from the injected Clock.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace tessera::kube {

class TokenBucket {
 public:
  // `clock` must outlive the bucket. qps > 0, burst >= 1.
  TokenBucket(double qps, int burst, const Clock& clock);
  absl::Duration Reserve();

 private:
  const double qps_;
  const double burst_;
  const Clock& clock_;
  absl::Mutex mu_;
  double tokens_ ABSL_GUARDED_BY(mu_);
  absl::Time last_ ABSL_GUARDED_BY(mu_);
};

class ItemRateLimiter {
 public:
  virtual ~ItemRateLimiter() = default;
  virtual absl::Duration When(const std::string& item) = 0;
  virtual void Forget(const std::string& item) = 0;
  virtual int NumRequeues(const std::string& item) = 0;
};

class ExponentialFailureRateLimiter final : public ItemRateLimiter {
 public:
  ExponentialFailureRateLimiter(absl::Duration base, absl::Duration max);
  absl::Duration When(const std::string& item) override;
  void Forget(const std::string& item) override;
  int NumRequeues(const std::string& item) override;

 private:
  const absl::Duration base_, max_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, int> failures_ ABSL_GUARDED_BY(mu_);
};

class BucketRateLimiter final : public ItemRateLimiter {
 public:
  BucketRateLimiter(double qps, int burst, const Clock& clock) : bucket_(qps, burst, clock) {}
  absl::Duration When(const std::string&) override { return bucket_.Reserve(); }
  void Forget(const std::string&) override {}
  int NumRequeues(const std::string&) override { return 0; }

 private:
  TokenBucket bucket_;
};

class MaxOfRateLimiter final : public ItemRateLimiter {
 public:
  explicit MaxOfRateLimiter(std::vector<std::unique_ptr<ItemRateLimiter>> parts)
      : parts_(std::move(parts)) {}
  absl::Duration When(const std::string& item) override;
  void Forget(const std::string& item) override;
  int NumRequeues(const std::string& item) override;

 private:
  std::vector<std::unique_ptr<ItemRateLimiter>> parts_;
};

std::unique_ptr<ItemRateLimiter> DefaultControllerRateLimiter(const Clock& clock);

}  // namespace tessera::kube
