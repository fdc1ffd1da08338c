#include "sched/framework/decision_trace.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sched/test_util.h"

namespace tessera::sched {
namespace {

using ::testing::HasSubstr;

TEST(CompressNodeNamesTest, FoldsRuns) {
  EXPECT_EQ(CompressNodeNames({"n00403", "n00401", "n00402", "n00408", "x"}),
            "n00401-n00403, n00408, x");
  EXPECT_EQ(CompressNodeNames({"a1", "a1", "a2"}), "a1-a2");
  EXPECT_EQ(CompressNodeNames({"n1", "n3", "n5", "n7"}, 2), "n1, n3, +2 more");
  EXPECT_EQ(CompressNodeNames({}), "");
}

TEST(DecisionTraceTest, ExplainsPlacementAndWaiting) {
  ClusterState cs;
  testing::AddNodes(&cs, {.nodes = 8, .gpus_per_node = 8, .nodes_per_rack = 4,
                          .racks_per_block = 1});
  auto s = testing::MakeScheduler(&cs);
  ManualClock clock(absl::FromUnixSeconds(1000));
  s->set_clock(&clock);
  s->set_explain(true);
  model::Job g = testing::MakeJob("gang", 2, 8);
  g.topology = {model::TopologyLevel::kRack, true};
  ScheduleResult r = s->Schedule(g);
  ASSERT_TRUE(r.placed());
  EXPECT_THAT(r.trace.explanation, HasSubstr("placed 2 member(s) on rack r000 (block b00): nodes "
                                             "n00000-n00001; because topology required rack; "
                                             "tightest of 2 racks that fit"));
  EXPECT_THAT(r.trace.explanation, HasSubstr("linked by NVSWITCH"));
  ASSERT_EQ(r.trace.spans.size(), 6u);
  EXPECT_EQ(r.trace.spans[0].name, "prefilter");
  EXPECT_EQ(r.trace.spans[0].feasible, 2) << "two racks fit";
  EXPECT_EQ(r.trace.spans[1].name, "filter");
  EXPECT_GT(r.trace.spans[1].candidates, 0);
  EXPECT_EQ(r.trace.spans[3].feasible, 2) << "two members reserved";
  EXPECT_EQ(r.trace.spans[5].name, "bind");

  model::Job big = testing::MakeJob("big", 5, 8);
  big.topology = {model::TopologyLevel::kRack, true};
  r = s->Schedule(big);
  ASSERT_FALSE(r.placed());
  EXPECT_EQ(r.trace.explanation, "waiting: needs 40 GPUs in one rack; largest free in any rack: 32");
}

}  // namespace
}  // namespace tessera::sched
