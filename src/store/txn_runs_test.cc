#include "store/txn_runs.h"

#include <gtest/gtest.h>

#include <random>

namespace tessera::store {
namespace {

using Ends = std::vector<size_t>;

TEST(TxnRunsTest, SplitsWhereTheNextItemWouldNotFit) {
  EXPECT_EQ(TxnRuns({}, 5), Ends{});
  EXPECT_EQ(TxnRuns({2, 2, 2}, 0), Ends{3}) << "no limit: one run";
  EXPECT_EQ(TxnRuns({2, 2, 2}, 4), (Ends{2, 3}));
  EXPECT_EQ(TxnRuns({2, 2, 1, 3}, 5), (Ends{3, 4}));
  EXPECT_EQ(TxnRuns({7, 1, 1}, 5), (Ends{1, 3})) << "an oversized item alone";
}

// Property: runs cover every item once, in order; each fits unless it is one oversized item; and
// no run could have taken the next item (so the number of Txns is as small as greedy allows).
TEST(TxnRunsTest, RunsCoverEverythingAndFit) {
  std::mt19937 rng(3);
  for (int round = 0; round < 500; ++round) {
    std::vector<size_t> sizes(rng() % 40);
    for (size_t& s : sizes) s = 1 + rng() % 9;
    const size_t max_ops = 1 + rng() % 20;
    Ends ends = TxnRuns(sizes, max_ops);
    size_t begin = 0;
    for (size_t r = 0; r < ends.size(); ++r) {
      ASSERT_GT(ends[r], begin);
      size_t ops = 0;
      for (size_t i = begin; i < ends[r]; ++i) ops += sizes[i];
      if (ends[r] - begin > 1) {
        ASSERT_LE(ops, max_ops);
      }
      if (ends[r] < sizes.size() && ops <= max_ops) {
        ASSERT_GT(ops + sizes[ends[r]], max_ops);
      }
      begin = ends[r];
    }
    ASSERT_EQ(begin, sizes.size());
  }
}

}  // namespace
}  // namespace tessera::store
