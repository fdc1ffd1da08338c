// Inventory (MIG strategies) and the Allocate response built from it.
#include "deviceplugin/inventory.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
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
  EXPECT_EQ(MigResourceName("1g.10gb+me"), "nvidia.com/mig-1g.10gb.me");
  EXPECT_EQ(*ParseMigStrategy("mixed"), MigStrategy::kMixed);
  EXPECT_EQ(*ParseMigStrategy("none"), MigStrategy::kNone);
  EXPECT_FALSE(ParseMigStrategy("single").ok());
}

// Every MIG profile NVIDIA documents for A100, A30, H100, H200 and GH200 (NVIDIA Multi-Instance
// GPU User Guide, "Supported MIG Profiles"; the GPU operator's default mig-parted config), and
// the name NVIDIA's k8s-device-plugin gives its resource: "mig-" + profile, '+' -> '.'
// (internal/rm/rm.go: strings.ReplaceAll("mig-"+p.String(), "+", ".")).
TEST(InventoryTest, MigResourceNamesAreNvidias) {
  const std::vector<std::pair<const char*, std::vector<const char*>>> documented = {
      {"A100-40GB", {"1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"}},
      {"A100-80GB, H100-80GB",
       {"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}},
      {"A30-24GB", {"1g.6gb", "1g.6gb+me", "2g.12gb", "2g.12gb+me", "4g.24gb"}},
      {"H100 NVL (94GB)",
       {"1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"}},
      {"H100-96GB, GH200 (96GB)",
       {"1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb"}},
      {"H200-141GB, H200 NVL",
       {"1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"}},
      {"GH200 144GB HBM3e",
       {"1g.18gb", "1g.18gb+me", "1g.36gb", "2g.36gb", "3g.72gb", "4g.72gb", "7g.144gb"}},
  };
  int checked = 0;
  for (const auto& [gpu, profiles] : documented) {
    for (const char* p : profiles) {
      std::string want = absl::StrCat("nvidia.com/mig-", p);
      std::replace(want.begin(), want.end(), '+', '.');
      EXPECT_EQ(MigResourceName(p), want) << gpu << " " << p;
      EXPECT_TRUE(MigProfileIsAdvertised(p)) << gpu << " " << p;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 47);
  // The other attribute forms go-nvlib prints (Blackwell): all media engines, none, graphics.
  EXPECT_EQ(MigResourceName("1g.24gb+me.all"), "nvidia.com/mig-1g.24gb.me.all");
  EXPECT_EQ(MigResourceName("1g.24gb-me"), "nvidia.com/mig-1g.24gb-me");
  EXPECT_EQ(MigResourceName("2g.48gb+gfx"), "nvidia.com/mig-2g.48gb.gfx");
  // Compute-instance profiles: NVIDIA's mixed strategy advertises only c == g.
  EXPECT_FALSE(MigProfileIsAdvertised("1c.3g.40gb"));
  EXPECT_FALSE(MigProfileIsAdvertised("2c.7g.80gb"));
  EXPECT_TRUE(MigProfileIsAdvertised("3c.3g.40gb"));
}

TEST(InventoryTest, MediaExtensionAndComputeInstanceDevices) {
  agent::NodeSnapshot node;
  agent::GpuSnapshot g;
  g.info.uuid = "GPU-h200-0";
  g.info.mig_mode = agent::MigMode{true, true};
  for (const auto& [uuid, profile] : std::vector<std::pair<std::string, std::string>>{
           {"MIG-me", "1g.18gb+me"}, {"MIG-ci", "1c.2g.35gb"}, {"MIG-3g", "3g.71gb"}}) {
    agent::MigInstance m;
    m.uuid = uuid;
    m.profile = profile;
    g.info.mig_instances.push_back(m);
  }
  node.gpus.push_back(g);
  std::vector<Resource> rs = BuildInventory(node, MigStrategy::kMixed);
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0].name, "nvidia.com/mig-1g.18gb.me");
  EXPECT_EQ(rs[0].socket_name, "tessera-mig-1g.18gb.me.sock");
  EXPECT_THAT(Ids(rs[0]), ElementsAre("MIG-me"));
  EXPECT_EQ(rs[1].name, "nvidia.com/mig-3g.71gb");
}

class AllocateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<agent::NodeSnapshot> snap = testing::DiscoverYaml(testing::kPciePairs4);
    ASSERT_TRUE(snap.ok()) << snap.status();
    resource_ = BuildInventory(*snap, MigStrategy::kMixed).at(0);
    // The host's filesystem as the test says: by default every node exists.
    options_.node_exists = [this](const std::string& path) {
      return existing_.empty() || existing_.count(path) > 0;
    };
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
  std::set<std::string> existing_;  // empty: all
};

std::vector<std::string> HostPaths(const v1beta1::ContainerAllocateResponse& c) {
  std::vector<std::string> paths;
  for (const auto& d : c.devices()) paths.push_back(d.host_path());
  return paths;
}

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
  // NVIDIA's default strategy is envvar alone: no CDI names, no annotations.
  EXPECT_EQ(c.cdi_devices_size(), 0);
  EXPECT_TRUE(c.annotations().empty());
}

TEST_F(AllocateTest, OnlyDeviceNodesTheHostHas) {
  // A host without the modeset and UVM tools nodes, and (oddly) without GPU 2's node.
  existing_ = {"/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm"};
  absl::StatusOr<v1beta1::AllocateResponse> r = Allocate({{"GPU-pcie-2", "GPU-pcie-0"}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(HostPaths(r->container_responses(0)),
              ElementsAre("/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm"));
  EXPECT_EQ(r->container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES"), "GPU-pcie-2,GPU-pcie-0");
}

TEST_F(AllocateTest, DevRootIsTheHostSideOnly) {
  options_.dev_root = "/run/nvidia/driver/";
  existing_ = {"/run/nvidia/driver/dev/nvidia1", "/run/nvidia/driver/dev/nvidiactl"};
  absl::StatusOr<v1beta1::AllocateResponse> r = Allocate({{"GPU-pcie-1"}});
  ASSERT_TRUE(r.ok()) << r.status();
  const v1beta1::ContainerAllocateResponse& c = r->container_responses(0);
  ASSERT_EQ(c.devices_size(), 2);
  EXPECT_EQ(c.devices(0).host_path(), "/run/nvidia/driver/dev/nvidia1");
  EXPECT_EQ(c.devices(0).container_path(), "/dev/nvidia1");
  EXPECT_EQ(c.devices(1).container_path(), "/dev/nvidiactl");
}

TEST_F(AllocateTest, CdiStrategies) {
  options_.strategies = *ParseDeviceListStrategies({"cdi-cri"});
  absl::StatusOr<v1beta1::AllocateResponse> r = Allocate({{"GPU-pcie-2", "GPU-pcie-0"}});
  ASSERT_TRUE(r.ok()) << r.status();
  const v1beta1::ContainerAllocateResponse& cri = r->container_responses(0);
  ASSERT_EQ(cri.cdi_devices_size(), 2);
  EXPECT_EQ(cri.cdi_devices(0).name(), "nvidia.com/gpu=GPU-pcie-2");
  EXPECT_EQ(cri.cdi_devices(1).name(), "nvidia.com/gpu=GPU-pcie-0");
  // CDI alone: the CDI spec carries the device nodes and env, as with NVIDIA's plugin.
  EXPECT_TRUE(cri.envs().empty());
  EXPECT_EQ(cri.devices_size(), 0);

  options_.strategies = *ParseDeviceListStrategies({"cdi-annotations"});
  r = Allocate({{"GPU-pcie-2", "GPU-pcie-0"}, {"GPU-pcie-1"}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->container_responses(0).annotations(),
              UnorderedElementsAre(Pair("cdi.k8s.io/tessera-device-plugin_GPU-pcie-2",
                                        "nvidia.com/gpu=GPU-pcie-2,nvidia.com/gpu=GPU-pcie-0")));
  EXPECT_THAT(r->container_responses(1).annotations(),
              UnorderedElementsAre(Pair("cdi.k8s.io/tessera-device-plugin_GPU-pcie-1",
                                        "nvidia.com/gpu=GPU-pcie-1")));
  EXPECT_EQ(r->container_responses(0).cdi_devices_size(), 0);

  options_.strategies = *ParseDeviceListStrategies({"envvar", "cdi-annotations", "cdi-cri"});
  r = Allocate({{"GPU-pcie-1"}});
  ASSERT_TRUE(r.ok()) << r.status();
  const v1beta1::ContainerAllocateResponse& all = r->container_responses(0);
  EXPECT_EQ(all.envs().at("NVIDIA_VISIBLE_DEVICES"), "GPU-pcie-1");
  EXPECT_EQ(all.devices_size(), 5);
  EXPECT_EQ(all.cdi_devices_size(), 1);
  EXPECT_EQ(all.annotations_size(), 1);
}

TEST(DeviceListStrategiesTest, ParsesNvidiasNames) {
  EXPECT_EQ(*ParseDeviceListStrategies({"envvar"}), (DeviceListStrategies{true, false, false}));
  EXPECT_EQ(*ParseDeviceListStrategies({"cdi-cri", "cdi-annotations"}),
            (DeviceListStrategies{false, true, true}));
  EXPECT_EQ(DeviceListStrategiesName(*ParseDeviceListStrategies({"cdi-cri", "envvar"})),
            "envvar,cdi-cri");
  absl::StatusOr<DeviceListStrategies> bad =
      ParseDeviceListStrategies({"volume-mounts", "cdi", "envvar", "envvar"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "device list strategy: 'volume-mounts' is not supported; 'cdi' is not one of envvar, "
            "cdi-annotations, cdi-cri; 'envvar' given twice");
  EXPECT_FALSE(ParseDeviceListStrategies({}).ok());
}

// The annotation key stays within container-device-interface's limits for real UUIDs.
TEST_F(AllocateTest, CdiAnnotationKeyForRealUuids) {
  agent::NodeSnapshot node;
  agent::GpuSnapshot g;
  g.info.uuid = "GPU-3f2a8c41-7b6e-4d19-a0c5-9e1d2b7f4a60";
  node.gpus.push_back(g);
  resource_ = BuildInventory(node, MigStrategy::kMixed).at(0);
  unhealthy_.clear();
  options_.strategies = *ParseDeviceListStrategies({"cdi-annotations"});
  absl::StatusOr<v1beta1::AllocateResponse> r = Allocate({{g.info.uuid}});
  ASSERT_TRUE(r.ok()) << r.status();
  const auto& annotations = r->container_responses(0).annotations();
  ASSERT_EQ(annotations.size(), 1u);
  const std::string key = annotations.begin()->first;
  EXPECT_EQ(key, "cdi.k8s.io/tessera-device-plugin_GPU-3f2a8c41-7b6e-4d19-a0c5-9e1d2b7f4a60");
  EXPECT_LE(key.size() - std::string("cdi.k8s.io/").size(), 63u);
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
