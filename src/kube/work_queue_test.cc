#include "kube/work_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tessera::kube {
namespace {

std::unique_ptr<ItemRateLimiter> Exponential(int base_ms, int max_ms) {
  return std::make_unique<ExponentialFailureRateLimiter>(absl::Milliseconds(base_ms),
                                                         absl::Milliseconds(max_ms));
}

TEST(WorkQueueTest, DeduplicatesAndKeepsFifoOrder) {
  ManualClock clock;
  WorkQueue q(clock);
  q.Add("a");
  q.Add("b");
  q.Add("a");
  EXPECT_EQ(q.Len(), 2);
  EXPECT_EQ(q.TryGet(), "a");
  EXPECT_EQ(q.TryGet(), "b");
  EXPECT_EQ(q.TryGet(), std::nullopt);
}

TEST(WorkQueueTest, AnItemAddedWhileProcessingIsRequeuedByDoneNotHandedOutTwice) {
  ManualClock clock;
  WorkQueue q(clock);
  q.Add("a");
  ASSERT_EQ(q.TryGet(), "a");
  q.Add("a");  // dirty again while processing
  q.Add("a");
  EXPECT_EQ(q.Len(), 0);
  EXPECT_EQ(q.TryGet(), std::nullopt);  // never to a second worker
  q.Done("a");
  EXPECT_EQ(q.Len(), 1);
  EXPECT_EQ(q.TryGet(), "a");
  q.Done("a");
  EXPECT_EQ(q.Len(), 0);
}

TEST(WorkQueueTest, AddAfterWaitsForTheClockAndTheEarliestTimeWins) {
  ManualClock clock;
  WorkQueue q(clock);
  q.AddAfter("x", absl::Seconds(10));
  q.AddAfter("x", absl::Seconds(3));
  q.AddAfter("x", absl::Seconds(7));
  q.AddAfter("now", absl::ZeroDuration());
  EXPECT_EQ(q.Delayed(), 1);
  EXPECT_EQ(q.TryGet(), "now");
  clock.Advance(absl::Seconds(2));
  EXPECT_EQ(q.TryGet(), std::nullopt);
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(q.TryGet(), "x");
  q.Done("x");
  clock.Advance(absl::Seconds(10));  // the stale 7 s and 10 s entries add nothing
  EXPECT_EQ(q.TryGet(), std::nullopt);
  EXPECT_EQ(q.Delayed(), 0);
}

TEST(WorkQueueTest, RateLimitedRetriesBackOffExponentiallyUntilForgotten) {
  ManualClock clock;
  WorkQueue q(clock, Exponential(5, 1000));
  std::vector<int64_t> delays;
  for (int i = 0; i < 10; ++i) {
    const absl::Time before = clock.Now();
    q.AddRateLimited("item");
    // Advance millisecond by millisecond to the first moment the item is ready.
    std::optional<std::string> got;
    while (!(got = q.TryGet())) clock.Advance(absl::Milliseconds(1));
    delays.push_back(absl::ToInt64Milliseconds(clock.Now() - before));
    q.Done(*got);
  }
  EXPECT_EQ(delays, (std::vector<int64_t>{5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000}));
  EXPECT_EQ(q.NumRequeues("item"), 10);
  q.Forget("item");
  EXPECT_EQ(q.NumRequeues("item"), 0);
}

TEST(WorkQueueTest, DefaultLimiterIsTheMaxOfExponentialAndAnOverallBucket) {
  ManualClock clock;
  std::unique_ptr<ItemRateLimiter> l = DefaultControllerRateLimiter(clock);
  EXPECT_EQ(l->When("a"), absl::Milliseconds(5));
  EXPECT_EQ(l->When("a"), absl::Milliseconds(10));
  // 100 burst tokens at 10 qps: after they are spent, new items wait for the bucket.
  for (int i = 0; i < 98; ++i) l->When(absl::StrCat("item", i));
  EXPECT_EQ(l->When("fresh"), absl::Milliseconds(100));
  EXPECT_EQ(l->When("fresh2"), absl::Milliseconds(200));
}

TEST(WorkQueueTest, TokenBucketAllowsABurstThenPaces) {
  ManualClock clock;
  TokenBucket b(2, 3, clock);
  EXPECT_EQ(b.Reserve(), absl::ZeroDuration());
  EXPECT_EQ(b.Reserve(), absl::ZeroDuration());
  EXPECT_EQ(b.Reserve(), absl::ZeroDuration());
  EXPECT_EQ(b.Reserve(), absl::Milliseconds(500));
  EXPECT_EQ(b.Reserve(), absl::Milliseconds(1000));
  clock.Advance(absl::Seconds(10));  // refills to the burst, no more
  EXPECT_EQ(b.Reserve(), absl::ZeroDuration());
  EXPECT_EQ(b.Reserve(), absl::ZeroDuration());
  EXPECT_EQ(b.Reserve(), absl::ZeroDuration());
  EXPECT_EQ(b.Reserve(), absl::Milliseconds(500));
}

TEST(WorkQueueTest, ShutDownDrainsQueuedItemsThenEndsGet) {
  RealClock clock;
  WorkQueue q(clock);
  q.Add("a");
  q.ShutDown();
  q.Add("b");  // dropped
  EXPECT_EQ(q.Get(), "a");
  EXPECT_EQ(q.Get(), std::nullopt);
  EXPECT_TRUE(q.ShuttingDown());
}

TEST(WorkQueueTest, ShutDownWithDrainWaitsForItemsInProcessing) {
  RealClock clock;
  WorkQueue q(clock);
  q.Add("a");
  ASSERT_EQ(q.Get(), "a");
  std::atomic<bool> drained{false};
  std::thread t([&] {
    q.ShutDownWithDrain();
    drained = true;
  });
  while (!q.ShuttingDown()) std::this_thread::yield();
  EXPECT_FALSE(drained.load());
  q.Done("a");
  t.join();
  EXPECT_TRUE(drained.load());
}

TEST(WorkQueueTest, ConcurrentWorkersNeverProcessOneItemTwiceAtOnce) {
  RealClock clock;
  WorkQueue q(clock);
  constexpr int kKeys = 20, kAdds = 4000;
  std::atomic<int> processed{0};
  std::mutex mu;
  std::map<std::string, int> in_flight;
  bool overlap = false;
  std::vector<std::thread> workers;
  workers.reserve(4);
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&] {
      while (std::optional<std::string> item = q.Get()) {
        {
          std::lock_guard<std::mutex> lock(mu);
          if (++in_flight[*item] > 1) overlap = true;
        }
        std::this_thread::yield();
        {
          std::lock_guard<std::mutex> lock(mu);
          --in_flight[*item];
        }
        processed.fetch_add(1);
        q.Done(*item);
      }
    });
  }
  for (int i = 0; i < kAdds; ++i) q.Add(absl::StrCat("k", i % kKeys));
  q.ShutDownWithDrain();
  for (std::thread& t : workers) t.join();
  EXPECT_FALSE(overlap);
  EXPECT_GE(processed.load(), kKeys);  // every key at least once
  EXPECT_LE(processed.load(), kAdds);  // de-duplicated, never more than added
}

TEST(WorkQueueTest, BlockedGetWakesForADelayedItem) {
  RealClock clock;
  WorkQueue q(clock);
  q.AddAfter("later", absl::Milliseconds(30));
  const absl::Time start = clock.Now();
  EXPECT_EQ(q.Get(), "later");
  EXPECT_GE(clock.Now() - start, absl::Milliseconds(30));
}

}  // namespace
}  // namespace tessera::kube
