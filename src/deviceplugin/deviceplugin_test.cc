// End to end: the plugin (DevicePluginManager on a FakeBackend) against the test kubelet, over
// real gRPC on Unix sockets in a temporary directory. Scripted GPU events fire when the test
// advances a GatedClock; every wait is on a condition with a timeout.
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "agent/fake/fake_backend.h"
#include "agent/fake/fake_config.h"
#include "deviceplugin/plugin_manager.h"
#include "deviceplugin/testing/fake_nodes.h"
#include "deviceplugin/testing/gated_clock.h"
#include "deviceplugin/testing/test_kubelet.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::deviceplugin {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::HealthById;
using ::testing::Pair;
using testing::PluginClient;
using testing::TestKubelet;

constexpr absl::Duration kWait = absl::Seconds(10);

// A backend whose MIG layout the test changes while the plugin runs (FakeBackend scripts have no
// MIG reconfiguration); everything else comes from the wrapped FakeBackend.
class ReconfigurableBackend final : public agent::GpuBackend {
 public:
  explicit ReconfigurableBackend(agent::GpuBackend& inner) : inner_(inner) {}

  void SetMig(int index, std::vector<agent::MigInstance> instances) {
    absl::MutexLock l(&mu_);
    mig_[index] = std::move(instances);
  }

  absl::Status Init() override { return inner_.Init(); }
  absl::Status Shutdown() override { return inner_.Shutdown(); }
  std::string BackendName() const override { return inner_.BackendName(); }
  std::string DriverVersion() override { return inner_.DriverVersion(); }
  std::string CudaDriverVersion() override { return inner_.CudaDriverVersion(); }
  absl::StatusOr<int> DeviceCount() override { return inner_.DeviceCount(); }
  absl::StatusOr<agent::GpuInfo> GetDeviceInfo(int index) override {
    absl::StatusOr<agent::GpuInfo> info = inner_.GetDeviceInfo(index);
    absl::MutexLock l(&mu_);
    if (info.ok() && mig_.count(index) > 0) {
      info->mig_mode = agent::MigMode{true, true};
      info->mig_instances = mig_[index];
    }
    return info;
  }
  absl::StatusOr<agent::GpuMetrics> GetMetrics(int index) override {
    return inner_.GetMetrics(index);
  }
  absl::StatusOr<agent::TopologyLevel> GetTopologyLevel(int a, int b) override {
    return inner_.GetTopologyLevel(a, b);
  }
  absl::StatusOr<std::optional<agent::GpuEvent>> WaitForEvent(absl::Duration timeout) override {
    return inner_.WaitForEvent(timeout);
  }

 private:
  agent::GpuBackend& inner_;
  absl::Mutex mu_;
  std::map<int, std::vector<agent::MigInstance>> mig_ ABSL_GUARDED_BY(mu_);
};

// Fake node + plugin + test kubelet in a fresh temporary directory.
class PluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tessera-dp-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    kubelet_ = std::make_unique<TestKubelet>(dir_);
  }

  void TearDown() override {
    clock_.Release();  // let the plugin's event thread run out
    plugin_.reset();
    if (backend_) backend_->Shutdown().IgnoreError();
    kubelet_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Starts the plugin on `yaml` (a FakeBackend description with an optional event script).
  void StartPlugin(const std::string& yaml, MigStrategy strategy = MigStrategy::kMixed) {
    absl::StatusOr<agent::FakeConfig> config = agent::ParseFakeConfig(yaml);
    ASSERT_TRUE(config.ok()) << config.status();
    backend_ = std::make_unique<agent::FakeBackend>(*std::move(config), clock_);
    ASSERT_TRUE(backend_->Init().ok());
    reconfigurable_ = std::make_unique<ReconfigurableBackend>(*backend_);
    PluginOptions options;
    options.plugin_dir = dir_;
    options.mig_strategy = strategy;
    // Device nodes as on a GPU machine; CDI names too (inventory_test covers the strategies).
    options.allocate.node_exists = [](const std::string&) { return true; };
    options.allocate.strategies.cdi_cri = true;
    options.log = [this](absl::string_view line) {
      absl::MutexLock l(&log_mu_);
      log_.push_back(std::string(line));
    };
    plugin_ = std::make_unique<DevicePluginManager>(*reconfigurable_, clock_, options);
    absl::Status st = plugin_->Start();
    ASSERT_TRUE(st.ok()) << st;
  }

  // Starts the kubelet and the plugin, waits for `resources` registrations, and connects to the
  // endpoint of `resource`, watching.
  std::unique_ptr<PluginClient> StartAndWatch(const std::string& yaml,
                                              const std::string& resource = kGpuResource,
                                              size_t resources = 1) {
    EXPECT_TRUE(kubelet_->Start().ok());
    StartPlugin(yaml);
    EXPECT_TRUE(kubelet_->WaitForRegistrations(resources, kWait));
    std::unique_ptr<PluginClient> client;
    for (const v1beta1::RegisterRequest& r : kubelet_->registrations()) {
      if (r.resource_name() == resource) client = kubelet_->Connect(r.endpoint());
    }
    EXPECT_NE(client, nullptr) << "no registration for " << resource;
    if (client) {
      client->StartWatch();
      EXPECT_TRUE(client->WaitForList([](const auto&) { return true; }, 0, kWait).has_value());
    }
    return client;
  }

  std::string dir_;
  testing::GatedClock clock_;
  std::unique_ptr<agent::FakeBackend> backend_;
  std::unique_ptr<ReconfigurableBackend> reconfigurable_;
  std::unique_ptr<TestKubelet> kubelet_;
  std::unique_ptr<DevicePluginManager> plugin_;
  absl::Mutex log_mu_;
  std::vector<std::string> log_ ABSL_GUARDED_BY(log_mu_);
};

auto HealthIs(std::string id, std::string health) {
  return [id, health](const v1beta1::ListAndWatchResponse& list) {
    auto h = HealthById(list);
    return h.count(id) > 0 && h[id] == health;
  };
}

bool AllHealthy(const v1beta1::ListAndWatchResponse& list) {
  for (const auto& d : list.devices()) {
    if (d.health() != "Healthy") return false;
  }
  return list.devices_size() > 0;
}

TEST_F(PluginTest, ServesThenRegistersAndListsDevicesWithNumaHints) {
  std::unique_ptr<PluginClient> client = StartAndWatch(testing::kPciePairs4);
  ASSERT_NE(client, nullptr);
  ASSERT_EQ(kubelet_->registrations().size(), 1u);
  const v1beta1::RegisterRequest reg = kubelet_->registrations()[0];
  EXPECT_EQ(reg.version(), "v1beta1");
  EXPECT_EQ(reg.endpoint(), "tessera-gpu.sock");
  EXPECT_EQ(reg.resource_name(), "nvidia.com/gpu");
  EXPECT_TRUE(reg.options().get_preferred_allocation_available());
  EXPECT_FALSE(reg.options().pre_start_required());
  EXPECT_THAT(kubelet_->rejections(), ::testing::IsEmpty());

  v1beta1::DevicePluginOptions options;
  ASSERT_TRUE(client->GetDevicePluginOptions(&options).ok());
  EXPECT_TRUE(options.get_preferred_allocation_available());

  const v1beta1::ListAndWatchResponse first = client->lists().at(0);
  ASSERT_EQ(first.devices_size(), 4);
  EXPECT_TRUE(AllHealthy(first));
  EXPECT_EQ(first.devices(0).id(), "GPU-pcie-0");
  ASSERT_EQ(first.devices(0).topology().nodes_size(), 1);
  EXPECT_EQ(first.devices(0).topology().nodes(0).id(), 0);
  EXPECT_EQ(first.devices(3).id(), "GPU-pcie-3");
  EXPECT_EQ(first.devices(3).topology().nodes(0).id(), 1);

  v1beta1::PreStartContainerRequest pre;
  pre.add_devices_ids("GPU-pcie-0");
  EXPECT_TRUE(client->PreStartContainer(pre).ok());
}

TEST_F(PluginTest, RegistersWhenKubeletComesUpAfterThePlugin) {
  StartPlugin(testing::kPciePairs4);
  EXPECT_EQ(plugin_->registrations(), 0);
  ASSERT_TRUE(kubelet_->Start().ok());
  ASSERT_TRUE(kubelet_->WaitForRegistrations(1, kWait));
  EXPECT_EQ(kubelet_->registrations()[0].resource_name(), "nvidia.com/gpu");
}

// A kubelet that refuses Register (its device manager not ready) is asked again on a timer,
// 1 s then 2 s later, without kubelet.sock being created again.
TEST_F(PluginTest, RefusedRegistrationIsRetriedWithExponentialBackoff) {
  kubelet_->RefuseNext(2);
  ASSERT_TRUE(kubelet_->Start().ok());
  StartPlugin(testing::kPciePairs4);
  ASSERT_TRUE(kubelet_->WaitForRejections(1, kWait));
  EXPECT_EQ(plugin_->registrations(), 0);

  ASSERT_TRUE(clock_.AwaitSleepers(1, kWait));
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(kubelet_->WaitForRejections(2, kWait));
  // Backing off: nothing one second later...
  ASSERT_TRUE(clock_.AwaitSleepers(1, kWait));
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(clock_.AwaitSleepers(1, kWait));
  EXPECT_EQ(kubelet_->rejections().size(), 2u);
  EXPECT_TRUE(kubelet_->registrations().empty());
  // ...and the third try, two seconds after the second, is accepted.
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(kubelet_->WaitForRegistrations(1, kWait));
  EXPECT_EQ(kubelet_->registrations()[0].resource_name(), "nvidia.com/gpu");
  absl::MutexLock l(&log_mu_);
  std::vector<std::string> retries;
  for (const std::string& line : log_) {
    if (line.find("retrying in") != std::string::npos)
      retries.push_back(line.substr(line.rfind(' ') + 1));
  }
  EXPECT_THAT(retries, ElementsAre("1s", "2s"));
}

TEST_F(PluginTest, KubeletRestartLeadsToReRegistration) {
  std::unique_ptr<PluginClient> client = StartAndWatch(testing::kPciePairs4);
  ASSERT_NE(client, nullptr);
  const std::string socket = dir_ + "/tessera-gpu.sock";

  // Kubelet restarts: every socket is deleted, then kubelet.sock is created again.
  ASSERT_TRUE(kubelet_->Restart().ok());
  ASSERT_TRUE(kubelet_->WaitForRegistrations(2, kWait));
  EXPECT_EQ(kubelet_->registrations()[1].endpoint(), "tessera-gpu.sock");
  EXPECT_THAT(kubelet_->rejections(), ::testing::IsEmpty());
  struct stat st;
  ASSERT_EQ(stat(socket.c_str(), &st), 0) << "plugin socket not re-created";
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  // The old server stopped, ending its stream; the new one serves the same devices.
  EXPECT_TRUE(client->WaitForStreamEnd(kWait));
  std::unique_ptr<PluginClient> again = kubelet_->Connect("tessera-gpu.sock");
  again->StartWatch();
  std::optional<v1beta1::ListAndWatchResponse> list = again->WaitForList(AllHealthy, 0, kWait);
  ASSERT_TRUE(list.has_value());
  EXPECT_EQ(list->devices_size(), 4);

  // And once more.
  ASSERT_TRUE(kubelet_->Restart().ok());
  ASSERT_TRUE(kubelet_->WaitForRegistrations(3, kWait));
}

// The hardware XID comes from the FakeBackend's script, through the agent's HealthTracker.
TEST_F(PluginTest, ListAndWatchResendsOnScriptedXidAndOnRecovery) {
  const std::string yaml = absl::StrCat(testing::kPciePairs4, R"(
events:
  - {at: 10s, gpu: 1, type: xid, xid: 13}   # application fault: no change
  - {at: 30s, gpu: 2, type: xid, xid: 79}   # fell off the bus: unhealthy
  - {at: 60s, gpu: 2, type: reset}          # recovered
)");
  std::unique_ptr<PluginClient> client = StartAndWatch(yaml);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(AllHealthy(client->lists().at(0)));

  clock_.Advance(absl::Seconds(30));
  std::optional<v1beta1::ListAndWatchResponse> down =
      client->WaitForList(HealthIs("GPU-pcie-2", "Unhealthy"), 1, kWait);
  ASSERT_TRUE(down.has_value());
  EXPECT_THAT(HealthById(*down),
              ElementsAre(Pair("GPU-pcie-0", "Healthy"), Pair("GPU-pcie-1", "Healthy"),
                          Pair("GPU-pcie-2", "Unhealthy"), Pair("GPU-pcie-3", "Healthy")));
  // The application XID before it sent nothing: the unhealthy list is the second one.
  EXPECT_EQ(client->lists().size(), 2u);

  // An unhealthy GPU cannot be allocated, alone or with a healthy one.
  v1beta1::AllocateRequest req;
  req.add_container_requests()->add_devices_ids("GPU-pcie-3");
  req.mutable_container_requests(0)->add_devices_ids("GPU-pcie-2");
  v1beta1::AllocateResponse resp;
  grpc::Status s = client->Allocate(req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("'GPU-pcie-2' is unhealthy"));

  clock_.Advance(absl::Seconds(30));
  std::optional<v1beta1::ListAndWatchResponse> up = client->WaitForList(AllHealthy, 2, kWait);
  ASSERT_TRUE(up.has_value());
  EXPECT_EQ(client->lists().size(), 3u);
  ASSERT_TRUE(client->Allocate(req, &resp).ok());
}

// The same through the HealthTracker directly (an XID and an operator's recovery).
TEST_F(PluginTest, ListAndWatchResendsOnTrackerXidAndMarkHealthy) {
  std::unique_ptr<PluginClient> client = StartAndWatch(testing::kNvSwitch8);
  ASSERT_NE(client, nullptr);
  agent::GpuEvent xid;
  xid.kind = agent::GpuEventKind::kXid;
  xid.gpu_uuid = "GPU-nvsw-5";
  xid.xid = 48;
  xid.time = clock_.Now();
  plugin_->health().OnEvent(xid);
  ASSERT_TRUE(client->WaitForList(HealthIs("GPU-nvsw-5", "Unhealthy"), 1, kWait).has_value());
  ASSERT_TRUE(plugin_->health().MarkHealthy("GPU-nvsw-5", "operator", clock_.Now()).ok());
  ASSERT_TRUE(client->WaitForList(AllHealthy, 2, kWait).has_value());
  EXPECT_EQ(client->lists().size(), 3u);
}

TEST_F(PluginTest, MigMixedStrategyServesOneSocketPerResource) {
  std::unique_ptr<PluginClient> mig =
      StartAndWatch(testing::kMigMixed2, "nvidia.com/mig-1g.10gb", 3);
  ASSERT_NE(mig, nullptr);
  std::vector<std::string> resources;
  for (const auto& r : kubelet_->registrations()) {
    resources.push_back(absl::StrCat(r.resource_name(), " @ ", r.endpoint()));
  }
  std::sort(resources.begin(), resources.end());
  EXPECT_THAT(resources, ElementsAre("nvidia.com/gpu @ tessera-gpu.sock",
                                     "nvidia.com/mig-1g.10gb @ tessera-mig-1g.10gb.sock",
                                     "nvidia.com/mig-3g.40gb @ tessera-mig-3g.40gb.sock"));
  EXPECT_THAT(HealthById(mig->lists().at(0)),
              ElementsAre(Pair("MIG-a-0", "Healthy"), Pair("MIG-a-1", "Healthy")));

  v1beta1::AllocateRequest req;
  req.add_container_requests()->add_devices_ids("MIG-a-1");
  v1beta1::AllocateResponse resp;
  ASSERT_TRUE(mig->Allocate(req, &resp).ok());
  EXPECT_EQ(resp.container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES"), "MIG-a-1");
  EXPECT_EQ(resp.container_responses(0).devices(0).host_path(), "/dev/nvidia0");
  EXPECT_EQ(resp.container_responses(0).cdi_devices(0).name(), "nvidia.com/gpu=MIG-a-1");
  // A whole GPU's id is not a device of a MIG resource.
  req.mutable_container_requests(0)->set_devices_ids(0, "GPU-mig-1");
  EXPECT_EQ(mig->Allocate(req, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // A hardware XID on the parent GPU takes down its MIG devices.
  std::unique_ptr<PluginClient> gpu = kubelet_->Connect("tessera-gpu.sock");
  gpu->StartWatch();
  ASSERT_TRUE(gpu->WaitForList(AllHealthy, 0, kWait).has_value());
  agent::GpuEvent xid;
  xid.kind = agent::GpuEventKind::kXid;
  xid.gpu_uuid = "GPU-mig-0";
  xid.xid = 94;
  plugin_->health().OnEvent(xid);
  std::optional<v1beta1::ListAndWatchResponse> down =
      mig->WaitForList(HealthIs("MIG-a-0", "Unhealthy"), 1, kWait);
  ASSERT_TRUE(down.has_value());
  EXPECT_EQ(HealthById(*down)["MIG-a-1"], "Unhealthy");
  EXPECT_EQ(gpu->lists().size(), 1u) << "nvidia.com/gpu has no device on GPU-mig-0";
}

// A MIG reconfiguration is picked up by the periodic rediscovery, without a restart: changed
// and new resources are served and registered, vanished ones stop, unchanged ones stay.
TEST_F(PluginTest, MigReconfigurationWithoutRestart) {
  std::unique_ptr<PluginClient> old_mig =
      StartAndWatch(testing::kMigMixed2, "nvidia.com/mig-1g.10gb", 3);
  ASSERT_NE(old_mig, nullptr);
  std::unique_ptr<PluginClient> gpu = kubelet_->Connect("tessera-gpu.sock");
  gpu->StartWatch();
  ASSERT_TRUE(gpu->WaitForList(AllHealthy, 0, kWait).has_value());

  auto instance = [](std::string profile, std::string uuid) {
    agent::MigInstance m;
    m.profile = std::move(profile);
    m.uuid = std::move(uuid);
    return m;
  };
  reconfigurable_->SetMig(0, {instance("2g.20gb", "MIG-b-0"), instance("2g.20gb", "MIG-b-1"),
                              instance("2g.20gb", "MIG-b-2")});
  clock_.Advance(absl::Seconds(30));  // the rescan interval
  ASSERT_TRUE(kubelet_->WaitForRegistrations(4, kWait));
  EXPECT_EQ(kubelet_->registrations()[3].resource_name(), "nvidia.com/mig-2g.20gb");
  EXPECT_EQ(kubelet_->registrations()[3].endpoint(), "tessera-mig-2g.20gb.sock");
  EXPECT_TRUE(old_mig->WaitForStreamEnd(kWait));
  EXPECT_NE(access((dir_ + "/tessera-mig-1g.10gb.sock").c_str(), F_OK), 0);
  EXPECT_NE(access((dir_ + "/tessera-mig-3g.40gb.sock").c_str(), F_OK), 0);
  std::vector<std::string> names;
  for (const Resource& r : plugin_->resources()) names.push_back(r.name);
  EXPECT_THAT(names, ElementsAre("nvidia.com/gpu", "nvidia.com/mig-2g.20gb"));

  std::unique_ptr<PluginClient> mig = kubelet_->Connect("tessera-mig-2g.20gb.sock");
  mig->StartWatch();
  std::optional<v1beta1::ListAndWatchResponse> list = mig->WaitForList(AllHealthy, 0, kWait);
  ASSERT_TRUE(list.has_value());
  EXPECT_THAT(HealthById(*list), ElementsAre(Pair("MIG-b-0", "Healthy"), Pair("MIG-b-1", "Healthy"),
                                             Pair("MIG-b-2", "Healthy")));

  // One instance fewer: the same resource is served anew and registered again.
  reconfigurable_->SetMig(0, {instance("2g.20gb", "MIG-b-0"), instance("2g.20gb", "MIG-b-1")});
  clock_.Advance(absl::Seconds(30));
  ASSERT_TRUE(kubelet_->WaitForRegistrations(5, kWait));
  EXPECT_EQ(kubelet_->registrations()[4].resource_name(), "nvidia.com/mig-2g.20gb");
  std::unique_ptr<PluginClient> mig2 = kubelet_->Connect("tessera-mig-2g.20gb.sock");
  mig2->StartWatch();
  list = mig2->WaitForList([](const auto& l) { return l.devices_size() == 2; }, 0, kWait);
  ASSERT_TRUE(list.has_value());

  // nvidia.com/gpu never changed: not re-registered, its stream still open with one list.
  const std::vector<v1beta1::RegisterRequest> regs = kubelet_->registrations();
  for (size_t i = 3; i < regs.size(); ++i) {
    EXPECT_NE(regs[i].resource_name(), "nvidia.com/gpu");
  }
  EXPECT_FALSE(gpu->WaitForStreamEnd(absl::ZeroDuration()));
  EXPECT_EQ(gpu->lists().size(), 1u);
}

TEST_F(PluginTest, PreferredAllocationOverGrpc) {
  std::unique_ptr<PluginClient> client = StartAndWatch(testing::kNvSwitch8);
  ASSERT_NE(client, nullptr);
  v1beta1::PreferredAllocationRequest req;
  auto* c = req.add_container_requests();
  for (int i : {0, 2, 4, 6, 7}) c->add_available_deviceids(absl::StrCat("GPU-nvsw-", i));
  c->add_must_include_deviceids("GPU-nvsw-4");
  c->set_allocation_size(2);
  auto* c2 = req.add_container_requests();
  for (int i = 0; i < 8; ++i) c2->add_available_deviceids(absl::StrCat("GPU-nvsw-", i));
  c2->set_allocation_size(4);
  v1beta1::PreferredAllocationResponse resp;
  grpc::Status s = client->GetPreferredAllocation(req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(resp.container_responses_size(), 2);
  // 4 and 6 share NUMA node 1 (NODE); 7 too, but 6 comes first; 0 and 2 are across sockets.
  EXPECT_THAT(resp.container_responses(0).deviceids(), ElementsAre("GPU-nvsw-4", "GPU-nvsw-6"));
  EXPECT_THAT(resp.container_responses(1).deviceids(),
              ElementsAre("GPU-nvsw-0", "GPU-nvsw-1", "GPU-nvsw-2", "GPU-nvsw-3"));
}

TEST_F(PluginTest, AllocateHealthyUnhealthyAndUnknownIds) {
  std::unique_ptr<PluginClient> client = StartAndWatch(testing::kPciePairs4);
  ASSERT_NE(client, nullptr);
  v1beta1::AllocateRequest ok;
  ok.add_container_requests()->add_devices_ids("GPU-pcie-1");
  ok.mutable_container_requests(0)->add_devices_ids("GPU-pcie-0");
  v1beta1::AllocateResponse resp;
  ASSERT_TRUE(client->Allocate(ok, &resp).ok());
  const auto& c = resp.container_responses(0);
  EXPECT_EQ(c.envs().at("NVIDIA_VISIBLE_DEVICES"), "GPU-pcie-1,GPU-pcie-0");
  ASSERT_GE(c.devices_size(), 3);
  EXPECT_EQ(c.devices(0).host_path(), "/dev/nvidia1");
  EXPECT_EQ(c.devices(1).host_path(), "/dev/nvidia0");
  EXPECT_EQ(c.devices(2).host_path(), "/dev/nvidiactl");
  ASSERT_EQ(c.cdi_devices_size(), 2);
  EXPECT_EQ(c.cdi_devices(0).name(), "nvidia.com/gpu=GPU-pcie-1");

  agent::GpuEvent xid;
  xid.kind = agent::GpuEventKind::kXid;
  xid.gpu_uuid = "GPU-pcie-3";
  xid.xid = 79;
  plugin_->health().OnEvent(xid);
  ASSERT_TRUE(client->WaitForList(HealthIs("GPU-pcie-3", "Unhealthy"), 1, kWait).has_value());

  v1beta1::AllocateRequest bad;
  bad.add_container_requests()->add_devices_ids("GPU-pcie-3");
  grpc::Status s = client->Allocate(bad, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(),
              HasSubstr("container_requests[0].devices_ids[0]: device 'GPU-pcie-3' is unhealthy"));

  bad.mutable_container_requests(0)->set_devices_ids(0, "GPU-pcie-0");
  bad.mutable_container_requests(0)->add_devices_ids("GPU-does-not-exist");
  s = client->Allocate(bad, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("container_requests[0].devices_ids[1]: unknown device "
                                           "'GPU-does-not-exist' for resource nvidia.com/gpu"));
}

// Bad input gets a gRPC error naming the field, and changes nothing: no ListAndWatch update,
// and the same valid requests answer the same afterwards.
TEST_F(PluginTest, BadInputIsRejectedAndChangesNothing) {
  std::unique_ptr<PluginClient> client = StartAndWatch(testing::kPciePairs4);
  ASSERT_NE(client, nullptr);
  v1beta1::PreferredAllocationRequest good;
  auto* g = good.add_container_requests();
  for (int i = 0; i < 4; ++i) g->add_available_deviceids(absl::StrCat("GPU-pcie-", i));
  g->set_allocation_size(2);
  v1beta1::PreferredAllocationResponse before;
  ASSERT_TRUE(client->GetPreferredAllocation(good, &before).ok());
  EXPECT_THAT(before.container_responses(0).deviceids(), ElementsAre("GPU-pcie-0", "GPU-pcie-1"));

  struct Case {
    std::vector<std::string> available, must;
    int size;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"GPU-pcie-0", "GPU-zz"},
       {},
       1,
       "container_requests[0].available_deviceIDs[1]: unknown device 'GPU-zz'"},
      {{"GPU-pcie-0", "GPU-pcie-1"},
       {},
       3,
       "container_requests[0].allocation_size: 3 exceeds the 2 available devices"},
      {{"GPU-pcie-0", "GPU-pcie-1", "GPU-pcie-0"},
       {},
       2,
       "container_requests[0].available_deviceIDs[2]: duplicated device 'GPU-pcie-0'"},
      {{"GPU-pcie-0", "GPU-pcie-1"},
       {"GPU-pcie-1", "GPU-pcie-1"},
       2,
       "container_requests[0].must_include_deviceIDs[1]: duplicated device 'GPU-pcie-1'"},
      {{"GPU-pcie-0"},
       {"GPU-pcie-2"},
       1,
       "container_requests[0].must_include_deviceIDs[0]: device 'GPU-pcie-2' is not in "
       "available_deviceIDs"},
  };
  for (const Case& k : cases) {
    v1beta1::PreferredAllocationRequest req;
    auto* c = req.add_container_requests();
    for (const auto& id : k.available) c->add_available_deviceids(id);
    for (const auto& id : k.must) c->add_must_include_deviceids(id);
    c->set_allocation_size(k.size);
    v1beta1::PreferredAllocationResponse resp;
    grpc::Status s = client->GetPreferredAllocation(req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << k.message;
    EXPECT_THAT(s.error_message(), HasSubstr(k.message));
  }

  v1beta1::AllocateRequest dup;
  dup.add_container_requests()->add_devices_ids("GPU-pcie-0");
  dup.mutable_container_requests(0)->add_devices_ids("GPU-pcie-0");
  v1beta1::AllocateResponse aresp;
  grpc::Status s = client->Allocate(dup, &aresp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("devices_ids[1]: device 'GPU-pcie-0' is requested "
                                           "more than once"));
  v1beta1::AllocateRequest unknown;
  unknown.add_container_requests()->add_devices_ids("GPU-pcie-0");
  unknown.add_container_requests()->add_devices_ids("nope");
  s = client->Allocate(unknown, &aresp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("container_requests[1].devices_ids[0]: unknown"));

  // Nothing changed.
  v1beta1::PreferredAllocationResponse after;
  ASSERT_TRUE(client->GetPreferredAllocation(good, &after).ok());
  EXPECT_EQ(after.SerializeAsString(), before.SerializeAsString());
  EXPECT_EQ(client->lists().size(), 1u);
  EXPECT_TRUE(AllHealthy(client->lists().back()));
  v1beta1::AllocateRequest fine;
  fine.add_container_requests()->add_devices_ids("GPU-pcie-0");
  EXPECT_TRUE(client->Allocate(fine, &aresp).ok());
}

}  // namespace
}  // namespace tessera::deviceplugin
