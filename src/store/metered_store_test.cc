#include "store/metered_store.h"

#include <gtest/gtest.h>

#include "store/memory_store.h"

namespace tessera::store {
namespace {

TEST(MeteredStoreTest, CountsAndForwardsUnchanged) {
  MemoryStore inner;
  ManualClock clock;
  MeteredStore store(inner, clock);
  ASSERT_EQ(*store.Create("/a", "1"), 1);
  EXPECT_EQ(store.Create("/a", "1").status().code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(store.Txn({Op::Put("/b", "2"), Op::Put("/c", "3")}).ok());
  EXPECT_EQ(store.Get("/a")->value, "1");
  EXPECT_EQ(store.List("/", {})->kvs.size(), 3u);
  EXPECT_EQ(store.Events("/", 0, 0)->events.size(), 3u);
  EXPECT_EQ(inner.CurrentRevision(), 2);

  StoreMetrics m = store.Metrics();
  EXPECT_EQ(m.txns, 3);
  EXPECT_EQ(m.txn_ops, 4);
  EXPECT_EQ(m.txn_errors, 1);
  EXPECT_EQ(m.gets, 1);
  EXPECT_EQ(m.lists, 1);
  EXPECT_EQ(m.events_calls, 1);
  EXPECT_EQ(m.commit_count, 3);
  // The manual clock never moved, so every commit took zero time.
  EXPECT_EQ(m.commit_latency_buckets[0], 3);
  EXPECT_EQ(m.CommitLatencyQuantile(0.99), absl::Microseconds(50));
  std::string text = FormatPrometheus(m);
  EXPECT_NE(text.find("tessera_store_txns_total 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("tessera_store_commit_latency_seconds_bucket{le=\"+Inf\"} 3\n"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace tessera::store
