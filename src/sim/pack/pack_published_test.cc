// The published-means check on the real openb trace: 70 runs, a few seconds
// in a release build, minutes under the sanitizers (labelled slow).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "sim/pack/openb_test_util.h"
#include "sim/pack/pack_sim.h"

namespace tessera::sim::pack {
namespace {

// The validation target on `default`: every baseline's mean over the
// protocol's ten seeds (42-51) within 0.7 points of the authors' published
// mean at 130% arrived, and tessera's mean above FGD's.
TEST(PackSimTest, SharedTraceBaselinesMatchThePublishedMeans) {
  std::string dir = OpenbDir();
  if (dir.empty()) GTEST_SKIP() << kNoTrace;
  std::vector<model::Node> nodes;
  PackTrace t;
  ASSERT_NO_FATAL_FAILURE(LoadDefault(dir, &nodes, &t));
  const std::vector<std::pair<std::string, double>> published = {
      {"random", 87.47},   {"dotprod", 90.85}, {"gpu-clustering", 91.88}, {"gpu-packing", 92.00},
      {"best-fit", 93.08}, {"fgd", 95.39},     {"tessera", 95.39}};
  PackConfig cfg;
  for (const auto& [policy, mean] : published) {
    double sum = 0;
    for (uint64_t seed = 42; seed <= 51; ++seed) {
      auto r = RunPack(nodes, t, policy, seed, cfg);
      ASSERT_TRUE(r.ok()) << r.status();
      sum += r->alloc_pct[130];
    }
    if (policy == "tessera") {
      EXPECT_GT(sum / 10, mean) << "tessera must beat FGD's published mean";
    } else {
      EXPECT_NEAR(sum / 10, mean, 0.7) << policy;
    }
  }
}

// The 97% target on `default`, reached by tessera when it knows the
// arriving stream (--lookahead all); and a look-ahead of 30% of capacity
// does better than none at both 100% and 130% arrived.
TEST(PackSimTest, SharedTraceLookaheadReaches97Percent) {
  std::string dir = OpenbDir();
  if (dir.empty()) GTEST_SKIP() << kNoTrace;
  std::vector<model::Node> nodes;
  PackTrace t;
  ASSERT_NO_FATAL_FAILURE(LoadDefault(dir, &nodes, &t));
  // Mean allocation % over the ten seeds at 100% and at 130% arrived.
  auto mean = [&](double lookahead) {
    PackConfig cfg;
    cfg.lookahead = lookahead;
    std::pair<double, double> m{0, 0};
    for (uint64_t seed = 42; seed <= 51; ++seed) {
      auto r = RunPack(nodes, t, "tessera", seed, cfg);
      EXPECT_TRUE(r.ok()) << r.status();
      if (!r.ok()) continue;
      m.first += r->alloc_pct[100] / 10;
      m.second += r->alloc_pct[kMaxArrivalPct] / 10;
    }
    return m;
  };
  EXPECT_GE(mean(kLookaheadAll).second, 97.0);
  auto none = mean(0), window = mean(0.3);
  EXPECT_GT(window.first, none.first);
  EXPECT_GT(window.second, none.second);
}

}  // namespace
}  // namespace tessera::sim::pack
