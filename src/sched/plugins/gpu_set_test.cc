#include "sched/plugins/gpu_set.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sched/test_util.h"

namespace tessera::sched {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

NodeState Free(int n) {
  NodeState st;
  st.present = st.schedulable = true;
  st.num_gpus = static_cast<int8_t>(n);
  for (int i = 0; i < n; ++i) {
    st.free_milli[i] = 1000;
    st.healthy_mask |= 1u << i;
  }
  return st;
}

std::vector<int> Gpus(const GpuSetChoice& c) { return {c.gpus.begin(), c.gpus.end()}; }

TEST(GpuSetTest, NvLinkPairNodeTakesABridgedPair) {
  // 8 GPUs bridged in pairs (0-1, 2-3, ...). GPUs 0 and 2 are busy, so the
  // free GPUs are 1, 3, 4, 5, 6, 7: a 2-GPU member must get a whole pair.
  auto topo = model::NodeTopology::NvLinkGroups(8, 2);
  NodeState st = Free(8);
  st.free_milli[0] = 0;
  st.free_milli[2] = 0;
  GpuSetChoice c;
  ASSERT_TRUE(ChooseWholeGpus(topo, st, 2, &c));
  EXPECT_EQ(c.worst, model::LinkClass::kNvLink);
  EXPECT_THAT(Gpus(c), ElementsAre(4, 5));
}

TEST(GpuSetTest, SingleGpuKeepsWholePairsFree) {
  // Free: 1 (its partner is busy) and the full pairs 4-5, 6-7. One GPU should
  // come from the broken pair, so both full pairs stay available.
  auto topo = model::NodeTopology::NvLinkGroups(8, 2);
  NodeState st = Free(8);
  for (int g : {0, 2, 3}) st.free_milli[g] = 0;
  GpuSetChoice c;
  ASSERT_TRUE(ChooseWholeGpus(topo, st, 1, &c));
  EXPECT_THAT(Gpus(c), ElementsAre(1));
}

TEST(GpuSetTest, QuadNodeKeepsFourInOneIsland) {
  // NVLink quads 0-3 and 4-7; GPU 0 busy. A 4-GPU member must take 4-7, not
  // 1,2,3 plus one GPU across the host bridge.
  auto topo = model::NodeTopology::NvLinkGroups(8, 4);
  NodeState st = Free(8);
  st.free_milli[0] = 0;
  GpuSetChoice c;
  ASSERT_TRUE(ChooseWholeGpus(topo, st, 4, &c));
  EXPECT_THAT(Gpus(c), ElementsAre(4, 5, 6, 7));
  EXPECT_EQ(c.domains, 1);
}

TEST(GpuSetTest, PcieNodePrefersSameSwitchThenSameNuma) {
  auto topo = model::NodeTopology::PcieSwitchPairs(8);
  NodeState st = Free(8);
  st.free_milli[0] = 0;  // 1's switch partner busy
  st.free_milli[3] = 0;  // 2's switch partner busy
  GpuSetChoice c;
  ASSERT_TRUE(ChooseWholeGpus(topo, st, 2, &c));
  EXPECT_EQ(c.worst, model::LinkClass::kPcieSwitch);
  EXPECT_THAT(Gpus(c), ElementsAre(4, 5));
  // 3 GPUs: best is within one NUMA half (host bridge), never cross-NUMA.
  ASSERT_TRUE(ChooseWholeGpus(topo, st, 3, &c));
  EXPECT_EQ(c.worst, model::LinkClass::kPcieHostBridge);
}

TEST(GpuSetTest, NvSwitchAnyGpusAreEqual) {
  auto topo = model::NodeTopology::NvSwitch(8);
  NodeState st = Free(8);
  st.free_milli[1] = 0;
  GpuSetChoice c;
  ASSERT_TRUE(ChooseWholeGpus(topo, st, 4, &c));
  EXPECT_EQ(c.worst, model::LinkClass::kNvSwitch);
  EXPECT_THAT(Gpus(c), ElementsAre(0, 2, 3, 4));
  EXPECT_FALSE(ChooseWholeGpus(topo, st, 8, &c)) << "only 7 free";
}

TEST(GpuSetTest, UnhealthyGpusAreNeverChosen) {
  auto topo = model::NodeTopology::NvSwitch(4);
  NodeState st = Free(4);
  st.healthy_mask &= ~(1u << 0);
  GpuSetChoice c;
  ASSERT_TRUE(ChooseWholeGpus(topo, st, 3, &c));
  EXPECT_THAT(Gpus(c), UnorderedElementsAre(1, 2, 3));
  EXPECT_EQ(ChooseFractionalGpu(topo, st, 500, true), 1);
}

TEST(GpuSetTest, SixteenGpuNodeUsesGreedy) {
  auto topo = model::NodeTopology::NvLinkGroups(16, 4);
  NodeState st = Free(16);
  GpuSetChoice c;
  ASSERT_TRUE(ChooseWholeGpus(topo, st, 8, &c));
  EXPECT_EQ(c.domains, 2);
  ASSERT_EQ(c.gpus.size(), 8u);
}

TEST(GpuSetTest, FractionalBestFitAndSpread) {
  auto topo = model::NodeTopology::NvSwitch(4);
  NodeState st = Free(4);
  st.free_milli[0] = 300;
  st.free_milli[1] = 600;
  EXPECT_EQ(ChooseFractionalGpu(topo, st, 500, /*pack=*/true), 1) << "tightest share that fits";
  EXPECT_EQ(ChooseFractionalGpu(topo, st, 200, /*pack=*/true), 0);
  EXPECT_EQ(ChooseFractionalGpu(topo, st, 200, /*pack=*/false), 2) << "spread: most free";
  EXPECT_EQ(ChooseFractionalGpu(topo, st, 1000, true), 2);
}

}  // namespace
}  // namespace tessera::sched
