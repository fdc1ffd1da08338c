// When the hub moves a copy its member accepted but does not place.
#include "federation/requeue.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace tessera::federation {
namespace {

MemberCapacity Cap(int nodes, int64_t free_per_node) {
  MemberCapacity c;
  for (int i = 0; i < nodes; ++i) {
    c.nodes.push_back({absl::StrCat("n", i), "H100", std::vector<int64_t>(8, 0)});
    for (int64_t g = 0; g < free_per_node; ++g) c.nodes.back().free_milli[g] = 1000;
  }
  c.gpus = 8 * nodes;
  c.free_gpus = free_per_node * nodes;
  return c;
}

JobDemand Eight() { return {{{8, 1000}}, {}}; }

TEST(RequeueTest, OnlyACopyWithoutPlacementInAWaitingPhaseIsUnplaced) {
  EXPECT_TRUE(Unplaced(Json()));  // not looked at by its member yet
  for (const char* p : {"Pending", "Admitted", "Queued"}) {
    EXPECT_TRUE(Unplaced({{"phase", p}})) << p;
    EXPECT_TRUE(Unplaced({{"phase", p}, {"placement", Json::array()}})) << p;
  }
  const Json placed = Json::array({{{"node", "n0"}}});
  EXPECT_FALSE(Unplaced({{"phase", "Queued"}, {"placement", placed}}));
  for (const char* p : {"Scheduled", "Running", "Suspended", "Succeeded", "Failed", "Preempted",
                        "NodeLost", "Ready", "Deploying", "Degraded"}) {
    EXPECT_FALSE(Unplaced({{"phase", p}})) << p;
  }
}

TEST(RequeueTest, WaitCountsFromCreationUnlessTheCopyWasScheduledBefore) {
  absl::Time now = absl::FromUnixSeconds(1767225900);  // 2026-01-01T00:05:00Z
  Json copy = {{"metadata", {{"creationTimestamp", "2026-01-01T00:00:00Z"}}},
               {"status", {{"phase", "Queued"}}}};
  EXPECT_EQ(UnplacedSince(copy, now), now - absl::Minutes(5));
  copy["status"]["scheduledTime"] = "2026-01-01T00:01:00Z";  // placed once, preempted since
  EXPECT_EQ(UnplacedSince(copy, now), now);
  copy["status"].erase("scheduledTime");
  copy["metadata"]["creationTimestamp"] = "2026-01-01T01:00:00Z";  // the member's clock is ahead
  EXPECT_EQ(UnplacedSince(copy, now), now);
  copy["metadata"].erase("creationTimestamp");
  EXPECT_EQ(UnplacedSince(copy, now), now);
}

TEST(RequeueTest, PickMemberTakesTheReadyFitWithMostFreeGpusNotTheExcludedOne) {
  const MemberCapacity east = Cap(2, 8), west = Cap(1, 8), full = Cap(4, 4);
  std::vector<Candidate> ms = {{"east", true, &east}, {"full", true, &full}, {"west", true, &west}};
  EXPECT_EQ(PickMember(ms, Eight()), "east");
  EXPECT_EQ(PickMember(ms, Eight(), "east"), "west");  // full has 16 free but no node with 8
  ms[2].ready = false;
  EXPECT_EQ(PickMember(ms, Eight(), "east"), "");
}

TEST(RequeueTest, MovesOnlyAfterTheWaitAndOnlyWhereItFitsNow) {
  const MemberCapacity east = Cap(2, 8), west = Cap(1, 8), busy = Cap(1, 0);
  const std::vector<Candidate> ms = {{"east", true, &east}, {"west", true, &west}};
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  const absl::Duration after = absl::Seconds(300);
  EXPECT_EQ(RequeueTarget(t0, t0 + absl::Seconds(299), after, 0, ms, Eight(), "east"), "");
  EXPECT_EQ(RequeueTarget(t0, t0 + absl::Seconds(300), after, 0, ms, Eight(), "east"), "west");
  // Disabled.
  EXPECT_EQ(RequeueTarget(t0, t0 + absl::Hours(9), absl::ZeroDuration(), 0, ms, Eight(), "east"),
            "");
  // Never back to the member it waits on, even if that one seems to fit best.
  EXPECT_EQ(RequeueTarget(t0, t0 + absl::Hours(1), after, 0, ms, Eight(), "west"), "east");
  // No other member has room now: it stays.
  const std::vector<Candidate> none = {{"east", true, &east}, {"west", true, &busy}};
  EXPECT_EQ(RequeueTarget(t0, t0 + absl::Hours(1), after, 0, none, Eight(), "east"), "");
  const std::vector<Candidate> lost = {{"east", true, &east}, {"west", false, &west}};
  EXPECT_EQ(RequeueTarget(t0, t0 + absl::Hours(1), after, 0, lost, Eight(), "east"), "");
}

TEST(RequeueTest, EachMoveDoublesTheWaitForTheNext) {
  const absl::Duration after = absl::Seconds(300);
  EXPECT_EQ(RequeueWait(after, 0), after);
  EXPECT_EQ(RequeueWait(after, 1), absl::Seconds(600));
  EXPECT_EQ(RequeueWait(after, 3), absl::Seconds(2400));
  EXPECT_EQ(RequeueWait(after, 50), after * 64);  // capped
  EXPECT_EQ(RequeueWait(absl::ZeroDuration(), 2), absl::ZeroDuration());
  const MemberCapacity east = Cap(1, 8), west = Cap(1, 8);
  const std::vector<Candidate> ms = {{"east", true, &east}, {"west", true, &west}};
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  EXPECT_EQ(RequeueTarget(t0, t0 + absl::Seconds(599), after, 1, ms, Eight(), "west"), "");
  EXPECT_EQ(RequeueTarget(t0, t0 + absl::Seconds(600), after, 1, ms, Eight(), "west"), "east");
}

}  // namespace
}  // namespace tessera::federation
