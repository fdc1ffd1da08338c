#include "agent/topology.h"

#include "gtest/gtest.h"

namespace tessera::agent {
namespace {

GpuInfo Gpu(const std::string& bus, std::vector<std::string> remotes) {
  GpuInfo g;
  g.pci_bus_id = bus;
  int i = 0;
  for (const std::string& r : remotes) g.nvlinks.push_back(NvLinkInfo{i++, true, r});
  return g;
}

TEST(TopologyTest, LevelsFromNvml) {
  TopologyLevel l;
  for (int v : {0, 10, 20, 30, 40, 50}) {
    ASSERT_TRUE(TopologyLevelFromNvml(v, &l)) << v;
    EXPECT_EQ(static_cast<int>(l), v);
  }
  EXPECT_FALSE(TopologyLevelFromNvml(15, &l));
  EXPECT_FALSE(TopologyLevelFromNvml(-1, &l));
  EXPECT_EQ(TopologyLevelName(TopologyLevel::kHostBridge), "HOSTBRIDGE");
}

TEST(TopologyTest, LinkClassFromLevel) {
  EXPECT_EQ(LinkClassFromLevel(TopologyLevel::kInternal), LinkClass::kPcieSwitch);
  EXPECT_EQ(LinkClassFromLevel(TopologyLevel::kSingle), LinkClass::kPcieSwitch);
  EXPECT_EQ(LinkClassFromLevel(TopologyLevel::kMultiple), LinkClass::kPcieSwitch);
  EXPECT_EQ(LinkClassFromLevel(TopologyLevel::kHostBridge), LinkClass::kHostBridge);
  EXPECT_EQ(LinkClassFromLevel(TopologyLevel::kNode), LinkClass::kHostBridge);
  EXPECT_EQ(LinkClassFromLevel(TopologyLevel::kSystem), LinkClass::kCrossNuma);
  EXPECT_EQ(LinkClassShortName(LinkClass::kNvLink), "NV");
  EXPECT_EQ(LinkClassName(LinkClass::kCrossNuma), "cross-numa");
}

TEST(TopologyTest, DirectBridgeMatchesBusIdsLoosely) {
  // NVML may report the peer in the 4-digit-domain form and in other case.
  std::vector<GpuInfo> gpus = {Gpu("00000000:17:00.0", {"0000:31:00.0"}),
                               Gpu("00000000:31:00.0", {}), Gpu("00000000:B1:00.0", {})};
  EXPECT_TRUE(SharesNvLink(gpus, 0, 1));
  EXPECT_TRUE(SharesNvLink(gpus, 1, 0));
  EXPECT_FALSE(SharesNvLink(gpus, 0, 2));
  gpus[0].nvlinks[0].remote_pci_bus_id = "00000000:31:00.0";
  gpus[1].pci_bus_id = "00000000:31:00.0";
  EXPECT_TRUE(SharesNvLink(gpus, 0, 1));
  gpus[0].nvlinks[0].active = false;
  EXPECT_FALSE(SharesNvLink(gpus, 0, 1));
}

TEST(TopologyTest, NvSwitchNeedsBothEnds) {
  std::vector<GpuInfo> gpus = {Gpu("00000000:18:00.0", {"00000000:05:00.0"}),
                               Gpu("00000000:2a:00.0", {"00000000:06:00.0"}),
                               Gpu("00000000:3a:00.0", {})};
  EXPECT_TRUE(SharesNvLink(gpus, 0, 1));
  EXPECT_FALSE(SharesNvLink(gpus, 0, 2));
}

TEST(TopologyTest, MatrixPrefersNvLinkAndKeepsLevels) {
  std::vector<GpuInfo> gpus = {Gpu("00000000:17:00.0", {"00000000:31:00.0"}),
                               Gpu("00000000:31:00.0", {"00000000:17:00.0"}),
                               Gpu("00000000:B1:00.0", {})};
  TopologyMatrix m = BuildTopologyMatrix(gpus, [](int a, int b) -> absl::StatusOr<TopologyLevel> {
    if (b == 2 && a == 1) return absl::UnavailableError("lost");
    return a / 2 == b / 2 ? TopologyLevel::kSingle : TopologyLevel::kSystem;
  });
  EXPECT_EQ(m.Link(0, 0), LinkClass::kSelf);
  EXPECT_EQ(m.Link(0, 1), LinkClass::kNvLink);
  EXPECT_EQ(m.Level(1, 0), TopologyLevel::kSingle);
  EXPECT_EQ(m.Link(2, 0), LinkClass::kCrossNuma);
  EXPECT_EQ(m.Link(1, 2), LinkClass::kUnknown);
  EXPECT_FALSE(m.Level(2, 1).has_value());
}

}  // namespace
}  // namespace tessera::agent
