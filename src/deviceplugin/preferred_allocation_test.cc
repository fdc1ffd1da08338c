#include "deviceplugin/preferred_allocation.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "deviceplugin/inventory.h"
#include "deviceplugin/testing/fake_nodes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::deviceplugin {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Devices of nvidia.com/gpu on a fake node, plus its topology.
struct Node {
  std::vector<PluginDevice> devices;
  agent::TopologyMatrix topology;
};

Node Load(const char* yaml) {
  absl::StatusOr<agent::NodeSnapshot> snap = testing::DiscoverYaml(yaml);
  EXPECT_TRUE(snap.ok()) << snap.status();
  std::vector<Resource> resources = BuildInventory(*snap, MigStrategy::kMixed);
  EXPECT_EQ(resources.size(), 1u);
  return Node{resources.at(0).devices, snap->topology};
}

std::vector<std::string> Ids(const std::string& prefix, std::vector<int> gpus) {
  std::vector<std::string> out;
  for (int g : gpus) out.push_back(absl::StrCat(prefix, g));
  return out;
}

class NvSwitchTest : public ::testing::Test {
 protected:
  std::vector<std::string> Prefer(std::vector<int> available, std::vector<int> must, int size) {
    absl::StatusOr<std::vector<std::string>> r = PreferredAllocation(
        node_.devices, node_.topology, Ids("GPU-nvsw-", available), Ids("GPU-nvsw-", must), size);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : std::vector<std::string>{};
  }
  std::vector<std::string> Want(std::vector<int> gpus) { return Ids("GPU-nvsw-", gpus); }
  Node node_ = Load(testing::kNvSwitch8);
};

TEST_F(NvSwitchTest, TopologyIsAllNvLink) {
  for (int a = 0; a < 8; ++a) {
    for (int b = 0; b < 8; ++b) {
      if (a != b) {
        EXPECT_EQ(node_.topology.Link(a, b), agent::LinkClass::kNvLink) << a << "," << b;
      }
    }
  }
}

// Every pair is NVLink (1000); the PCIe level breaks ties: SINGLE 50 > NODE 20 > SYSTEM 10.
TEST_F(NvSwitchTest, PairPrefersSharedPcieSwitch) {
  // (0,1) 1050 ties with (2,3), (4,5), (6,7); the first in inventory order wins.
  EXPECT_EQ(Prefer({0, 1, 2, 3, 4, 5, 6, 7}, {}, 2), Want({0, 1}));
  // (2,3) 1050 beats (1,2) 1020 and (1,5) 1010.
  EXPECT_EQ(Prefer({1, 2, 3, 5}, {}, 2), Want({2, 3}));
}

TEST_F(NvSwitchTest, MustIncludePullsItsNumaNeighbour) {
  // With 4: (4,6) NODE 1020 beats (0,4) and (2,4) SYSTEM 1010.
  EXPECT_EQ(Prefer({0, 2, 4, 6}, {4}, 2), Want({4, 6}));
}

TEST_F(NvSwitchTest, FourStayOnOneSocket) {
  // {0,1,2,3}: 6 x 1000 + 50 + 50 + 4 x 20 = 6180; {0,1,4,5}: 6000 + 50 + 50 + 4 x 10 = 6140.
  EXPECT_EQ(Prefer({0, 1, 2, 3, 4, 5, 6, 7}, {}, 4), Want({0, 1, 2, 3}));
  // Containing 5: {4,5,6,7} 6180 beats {2,3,4,5} 6140.
  EXPECT_EQ(Prefer({0, 1, 2, 3, 4, 5, 6, 7}, {5}, 4), Want({4, 5, 6, 7}));
}

TEST_F(NvSwitchTest, ThreeFromSix) {
  // {0,1,2}: 3000 + 50 + 20 + 20 = 3090 (ties {0,1,3}, {0,2,3}, {1,2,3}); {4,5,0}: 3070.
  EXPECT_EQ(Prefer({0, 1, 2, 3, 4, 5}, {}, 3), Want({0, 1, 2}));
}

TEST_F(NvSwitchTest, AllOfThemAndMustIncludeOnly) {
  EXPECT_EQ(Prefer({3, 7}, {}, 2), Want({3, 7}));
  EXPECT_EQ(Prefer({1, 6, 7}, {6, 1}, 2), Want({1, 6}));
}

class PciePairsTest : public ::testing::Test {
 protected:
  std::vector<std::string> Prefer(std::vector<int> available, std::vector<int> must, int size) {
    absl::StatusOr<std::vector<std::string>> r = PreferredAllocation(
        node_.devices, node_.topology, Ids("GPU-pcie-", available), Ids("GPU-pcie-", must), size);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : std::vector<std::string>{};
  }
  std::vector<std::string> Want(std::vector<int> gpus) { return Ids("GPU-pcie-", gpus); }
  Node node_ = Load(testing::kPciePairs4);
};

TEST_F(PciePairsTest, Topology) {
  EXPECT_EQ(node_.topology.Link(0, 1), agent::LinkClass::kNvLink);
  EXPECT_EQ(node_.topology.Link(2, 3), agent::LinkClass::kNvLink);
  EXPECT_EQ(node_.topology.Link(1, 2), agent::LinkClass::kCrossNuma);
  EXPECT_EQ(node_.topology.Link(0, 3), agent::LinkClass::kCrossNuma);
}

TEST_F(PciePairsTest, BridgedPairsFirst) {
  // (0,1) and (2,3): NVLink + SINGLE = 1050; cross pairs SYSTEM = 10.
  EXPECT_EQ(Prefer({0, 1, 2, 3}, {}, 2), Want({0, 1}));
  EXPECT_EQ(Prefer({0, 1, 2, 3}, {3}, 2), Want({2, 3}));
  EXPECT_EQ(Prefer({0, 2, 3}, {}, 2), Want({2, 3}));
  EXPECT_EQ(Prefer({1, 2}, {}, 2), Want({1, 2}));
  // With 2 forced and its partner gone: (0,2) and (1,2) both 10; the first wins.
  EXPECT_EQ(Prefer({0, 1, 2}, {2}, 2), Want({0, 2}));
  // {0,1,2} = 1050 + 10 + 10 = 1070 ties {0,2,3}; the first wins.
  EXPECT_EQ(Prefer({0, 1, 2, 3}, {}, 3), Want({0, 1, 2}));
  // Containing 3: {0,1,3} = 1050 + 10 + 10 ties {0,2,3} = 1050 + 10 + 10; the first wins.
  EXPECT_EQ(Prefer({0, 1, 2, 3}, {3}, 3), Want({0, 1, 3}));
  // Containing 1 and 3: adding 0 (bridged to 1) or 2 (bridged to 3) both give 1070; 0 wins.
  EXPECT_EQ(Prefer({0, 1, 2, 3}, {1, 3}, 3), Want({0, 1, 3}));
}

TEST_F(PciePairsTest, BadInputNamesTheField) {
  auto err = [&](std::vector<std::string> available, std::vector<std::string> must, int size) {
    absl::StatusOr<std::vector<std::string>> r =
        PreferredAllocation(node_.devices, node_.topology, available, must, size);
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(r.status().message());
  };
  EXPECT_THAT(err({"GPU-pcie-0", "GPU-nope"}, {}, 1),
              HasSubstr("available_deviceIDs[1]: unknown device 'GPU-nope'"));
  EXPECT_THAT(err({"GPU-pcie-0", "GPU-pcie-0"}, {}, 1),
              HasSubstr("available_deviceIDs[1]: duplicated device 'GPU-pcie-0'"));
  EXPECT_THAT(err({"GPU-pcie-0"}, {"GPU-pcie-1"}, 1),
              HasSubstr("must_include_deviceIDs[0]: device 'GPU-pcie-1' is not in"));
  EXPECT_THAT(err({"GPU-pcie-0", "GPU-pcie-1"}, {"GPU-pcie-1", "GPU-pcie-1"}, 2),
              HasSubstr("must_include_deviceIDs[1]: duplicated device 'GPU-pcie-1'"));
  EXPECT_THAT(err({"GPU-pcie-0", "GPU-pcie-1"}, {}, 3),
              HasSubstr("allocation_size: 3 exceeds the 2 available devices"));
  EXPECT_THAT(err({"GPU-pcie-0"}, {}, 0), HasSubstr("allocation_size: must be at least 1"));
  EXPECT_THAT(err({"GPU-pcie-0", "GPU-pcie-1"}, {"GPU-pcie-0", "GPU-pcie-1"}, 1),
              HasSubstr("allocation_size: 1 is less than the 2 must-include devices"));
}

TEST(PreferredAllocationMigTest, SameGpuInstancesFirst) {
  absl::StatusOr<agent::NodeSnapshot> snap = testing::DiscoverYaml(testing::kMigMixed2);
  ASSERT_TRUE(snap.ok()) << snap.status();
  // Make a resource with instances on two GPUs to see the same-GPU preference.
  std::vector<PluginDevice> devices = {
      {"MIG-x-0", "GPU-mig-0", 0, 0, 0, "1g.10gb"},
      {"MIG-y-0", "GPU-mig-1", 1, 1, 0, "1g.10gb"},
      {"MIG-x-1", "GPU-mig-0", 0, 0, 0, "1g.10gb"},
  };
  absl::StatusOr<std::vector<std::string>> r =
      PreferredAllocation(devices, snap->topology, {"MIG-x-0", "MIG-y-0", "MIG-x-1"}, {}, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(*r, ElementsAre("MIG-x-0", "MIG-x-1"));
}

// Beyond the exhaustive limit the greedy search still honours NVLink pairs.
TEST(PreferredAllocationGreedyTest, LargeInventory) {
  constexpr int kGpus = 64;
  agent::TopologyMatrix m;
  m.size = kGpus;
  m.links.assign(kGpus * kGpus, agent::LinkClass::kCrossNuma);
  m.levels.assign(kGpus * kGpus, agent::TopologyLevel::kSystem);
  std::vector<PluginDevice> devices;
  std::vector<std::string> all;
  for (int i = 0; i < kGpus; ++i) {
    devices.push_back({absl::StrCat("G", i), absl::StrCat("G", i), i, i, 0, ""});
    all.push_back(absl::StrCat("G", i));
  }
  for (int i = 40; i < 48; ++i) {
    for (int j = 40; j < 48; ++j) {
      if (i != j) m.links[i * kGpus + j] = agent::LinkClass::kNvLink;
    }
  }
  absl::StatusOr<std::vector<std::string>> r = PreferredAllocation(devices, m, all, {"G41"}, 8);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(*r, ElementsAre("G40", "G41", "G42", "G43", "G44", "G45", "G46", "G47"));
}

}  // namespace
}  // namespace tessera::deviceplugin
