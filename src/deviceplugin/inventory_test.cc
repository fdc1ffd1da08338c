// Inventory (MIG strategies) and the Allocate response built from it.
#include "deviceplugin/inventory.h"

#include "deviceplugin/allocate.h"
#include "deviceplugin/testing/fake_nodes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::deviceplugin {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

std::vector<std::string> Ids(const Resource& r) {
  std::vector<std::string> out;
  for (const PluginDevice& d : r.devices) out.push_back(d.id);
  return out;
}

TEST(InventoryTest, MixedStrategySplitsMigGpus) {
  absl::StatusOr<agent::NodeSnapshot> snap = testing::DiscoverYaml(testing::kMigMixed2);
  ASSERT_TRUE(snap.ok()) << snap.status();
  std::vector<Resource> rs = BuildInventory(*snap, MigStrategy::kMixed);
  ASSERT_EQ(rs.size(), 3u);
  EXPECT_EQ(rs[0].name, "nvidia.com/gpu");
  EXPECT_EQ(rs[0].socket_name, "tessera-gpu.sock");
  EXPECT_THAT(Ids(rs[0]), ElementsAre("GPU-mig-1"));
  EXPECT_EQ(rs[1].name, "nvidia.com/mig-1g.10gb");
  EXPECT_EQ(rs[1].socket_name, "tessera-mig-1g.10gb.sock");
  EXPECT_THAT(Ids(rs[1]), ElementsAre("MIG-a-0", "MIG-a-1"));
  EXPECT_EQ(rs[1].devices[0].gpu_uuid, "GPU-mig-0");
  EXPECT_EQ(rs[1].devices[0].mig_profile, "1g.10gb");
  EXPECT_EQ(rs[2].name, "nvidia.com/mig-3g.40gb");
  EXPECT_THAT(Ids(rs[2]), ElementsAre("MIG-a-2"));
}

TEST(InventoryTest, NoneStrategyAdvertisesWholeGpus) {
  absl::StatusOr<agent::NodeSnapshot> snap = testing::DiscoverYaml(testing::kMigMixed2);
  ASSERT_TRUE(snap.ok()) << snap.status();
  std::vector<Resource> rs = BuildInventory(*snap, MigStrategy::kNone);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_THAT(Ids(rs[0]), ElementsAre("GPU-mig-0", "GPU-mig-1"));
}

TEST(InventoryTest, ResourceNamesAndStrategies) {
  EXPECT_EQ(MigResourceName("1g.10gb+me"), "nvidia.com/mig-1g.10gb-me");
  EXPECT_EQ(*ParseMigStrategy("mixed"), MigStrategy::kMixed);
  EXPECT_EQ(*ParseMigStrategy("none"), MigStrategy::kNone);
  EXPECT_FALSE(ParseMigStrategy("single").ok());
}

class AllocateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<agent::NodeSnapshot> snap = testing::DiscoverYaml(testing::kPciePairs4);
    ASSERT_TRUE(snap.ok()) << snap.status();
    resource_ = BuildInventory(*snap, MigStrategy::kMixed).at(0);
  }
  absl::StatusOr<v1beta1::AllocateResponse> Allocate(
      std::vector<std::vector<std::string>> containers) {
    v1beta1::AllocateRequest req;
    for (const auto& ids : containers) {
      auto* c = req.add_container_requests();
      for (const auto& id : ids) c->add_devices_ids(id);
    }
    return BuildAllocateResponse(
        req, resource_, [this](const std::string& uuid) { return uuid != unhealthy_; }, options_);
  }
  Resource resource_;
  std::string unhealthy_ = "GPU-pcie-3";
  AllocateOptions options_;
};

TEST_F(AllocateTest, HealthyDevices) {
  absl::StatusOr<v1beta1::AllocateResponse> r = Allocate({{"GPU-pcie-2", "GPU-pcie-0"}});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->container_responses_size(), 1);
  const v1beta1::ContainerAllocateResponse& c = r->container_responses(0);
  EXPECT_THAT(c.envs(),
              UnorderedElementsAre(Pair("NVIDIA_VISIBLE_DEVICES", "GPU-pcie-2,GPU-pcie-0")));
  std::vector<std::string> paths;
  for (const auto& d : c.devices()) {
    EXPECT_EQ(d.host_path(), d.container_path());
    EXPECT_EQ(d.permissions(), "rw");
    paths.push_back(d.host_path());
  }
  EXPECT_THAT(paths,
              ElementsAre("/dev/nvidia2", "/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm",
                          "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"));
  ASSERT_EQ(c.cdi_devices_size(), 2);
  EXPECT_EQ(c.cdi_devices(0).name(), "nvidia.com/gpu=GPU-pcie-2");
  EXPECT_EQ(c.cdi_devices(1).name(), "nvidia.com/gpu=GPU-pcie-0");
}

TEST_F(AllocateTest, CdiCanBeTurnedOff) {
  options_.cdi = false;
  absl::StatusOr<v1beta1::AllocateResponse> r = Allocate({{"GPU-pcie-1"}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->container_responses(0).cdi_devices_size(), 0);
}

TEST_F(AllocateTest, WholeRequestFailsOnAnyBadId) {
  absl::StatusOr<v1beta1::AllocateResponse> r = Allocate({{"GPU-pcie-0"}, {"GPU-x"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(),
              HasSubstr("container_requests[1].devices_ids[0]: unknown device 'GPU-x' for "
                        "resource nvidia.com/gpu"));

  r = Allocate({{"GPU-pcie-0", "GPU-pcie-3"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("devices_ids[1]: device 'GPU-pcie-3' is unhealthy"));

  r = Allocate({{"GPU-pcie-0"}, {"GPU-pcie-0"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("'GPU-pcie-0' is requested more than once"));

  r = Allocate({{}});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("container_requests[0].devices_ids: empty"));
}

}  // namespace
}  // namespace tessera::deviceplugin
