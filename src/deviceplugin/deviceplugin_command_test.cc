// The `tessera device-plugin` process (found through env TESSERA_BIN) against the test kubelet:
// it registers, serves ListAndWatch, and on SIGTERM stops and removes its socket.
#include "deviceplugin/deviceplugin_command.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "deviceplugin/testing/fake_nodes.h"
#include "deviceplugin/testing/test_kubelet.h"
#include "gtest/gtest.h"

extern char** environ;

namespace tessera::deviceplugin {
namespace {

class DevicePluginCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* bin = getenv("TESSERA_BIN");
    if (bin == nullptr) GTEST_SKIP() << "TESSERA_BIN not set (run through ctest)";
    bin_ = bin;
    char tmpl[] = "/tmp/tessera-dpcmd-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::ofstream(dir_ + "/node.yaml") << testing::kPciePairs4;
  }
  void TearDown() override {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // Starts tessera with `args`; stdout/stderr go to <dir>/out.
  void Spawn(std::vector<std::string> args) {
    args.insert(args.begin(), bin_);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    const std::string out = dir_ + "/out";
    posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    ASSERT_EQ(posix_spawn(&pid_, bin_.c_str(), &actions, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
  }

  int Wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  std::string Output() {
    std::ifstream in(dir_ + "/out");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  std::string bin_;
  std::string dir_;
  pid_t pid_ = -1;
};

TEST_F(DevicePluginCommandTest, RegistersServesAndStopsOnSigterm) {
  testing::TestKubelet kubelet(dir_);
  ASSERT_TRUE(kubelet.Start().ok());
  Spawn({"device-plugin", "--backend", "fake", "--fake-config", dir_ + "/node.yaml", "--plugin-dir",
         dir_,
         // Stopping waits for the health monitor's event wait, bounded by this interval.
         "--metrics-interval", "200ms"});
  ASSERT_TRUE(kubelet.WaitForRegistrations(1, absl::Seconds(20))) << Output();
  const v1beta1::RegisterRequest reg = kubelet.registrations()[0];
  EXPECT_EQ(reg.resource_name(), "nvidia.com/gpu");
  std::unique_ptr<testing::PluginClient> client = kubelet.Connect(reg.endpoint());
  client->StartWatch();
  std::optional<v1beta1::ListAndWatchResponse> list = client->WaitForList(
      [](const auto& l) { return l.devices_size() == 4; }, 0, absl::Seconds(20));
  ASSERT_TRUE(list.has_value());
  v1beta1::AllocateRequest req;
  req.add_container_requests()->add_devices_ids("GPU-pcie-1");
  v1beta1::AllocateResponse resp;
  ASSERT_TRUE(client->Allocate(req, &resp).ok());
  // NVIDIA's default device-list strategy, envvar alone.
  EXPECT_EQ(resp.container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES"), "GPU-pcie-1");
  EXPECT_EQ(resp.container_responses(0).cdi_devices_size(), 0);
  EXPECT_TRUE(resp.container_responses(0).annotations().empty());

  ASSERT_EQ(kill(pid_, SIGTERM), 0);
  EXPECT_EQ(Wait(), 0) << Output();
  EXPECT_TRUE(client->WaitForStreamEnd(absl::Seconds(10)));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/" + reg.endpoint()));
}

// The NVML backend against the agent's stub libnvidia-ml: 8 NVSwitch GPUs, GPU 1 in MIG mode
// (two 3g.40gb instances), XID 79 on GPU 3 delivered by the event wait.
TEST_F(DevicePluginCommandTest, NvmlBackendWithStubDriver) {
  testing::TestKubelet kubelet(dir_);
  ASSERT_TRUE(kubelet.Start().ok());
  setenv("TESSERA_STUB_NVML_MIG_GPU", "1", 1);
  setenv("TESSERA_STUB_NVML_XID", "3:79", 1);
  // The host's device nodes, under --dev-root: GPU 1's and two of the four control nodes.
  const std::string root = dir_ + "/host";
  std::filesystem::create_directories(root + "/dev");
  for (const char* node : {"nvidia1", "nvidiactl", "nvidia-uvm"}) {
    std::ofstream(root + "/dev/" + node) << "";
  }
  Spawn({"device-plugin", "--backend", "nvml", "--nvml-lib", STUB_NVML_PATH, "--plugin-dir", dir_,
         "--metrics-interval", "200ms", "--dev-root", root, "--device-list-strategy",
         "envvar,cdi-cri"});
  unsetenv("TESSERA_STUB_NVML_MIG_GPU");
  unsetenv("TESSERA_STUB_NVML_XID");
  ASSERT_TRUE(kubelet.WaitForRegistrations(2, absl::Seconds(20))) << Output();
  std::map<std::string, std::string> endpoints;
  for (const auto& r : kubelet.registrations()) endpoints[r.resource_name()] = r.endpoint();
  ASSERT_EQ(endpoints.size(), 2u) << Output();
  ASSERT_EQ(endpoints.count("nvidia.com/gpu"), 1u) << Output();
  ASSERT_EQ(endpoints.count("nvidia.com/mig-3g.40gb"), 1u) << Output();

  std::unique_ptr<testing::PluginClient> gpu = kubelet.Connect(endpoints["nvidia.com/gpu"]);
  gpu->StartWatch();
  const std::string gpu3 = "GPU-5d1f0e2a-0000-4000-8000-000000000003";
  std::optional<v1beta1::ListAndWatchResponse> list = gpu->WaitForList(
      [&](const auto& l) {
        auto h = testing::HealthById(l);
        return h.size() == 7 && h[gpu3] == "Unhealthy";
      },
      0, absl::Seconds(20));
  ASSERT_TRUE(list.has_value()) << Output();

  // 4..7 are NVSwitch peers on NUMA node 1; (4,5) also share a PCIe switch.
  v1beta1::PreferredAllocationRequest preq;
  auto* c = preq.add_container_requests();
  for (int i : {4, 5, 6, 7}) {
    c->add_available_deviceids("GPU-5d1f0e2a-0000-4000-8000-00000000000" + std::to_string(i));
  }
  c->set_allocation_size(2);
  v1beta1::PreferredAllocationResponse presp;
  ASSERT_TRUE(gpu->GetPreferredAllocation(preq, &presp).ok());
  ASSERT_EQ(presp.container_responses(0).deviceids_size(), 2);
  EXPECT_EQ(presp.container_responses(0).deviceids(0), "GPU-5d1f0e2a-0000-4000-8000-000000000004");
  EXPECT_EQ(presp.container_responses(0).deviceids(1), "GPU-5d1f0e2a-0000-4000-8000-000000000005");

  std::unique_ptr<testing::PluginClient> mig = kubelet.Connect(endpoints["nvidia.com/mig-3g.40gb"]);
  mig->StartWatch();
  list =
      mig->WaitForList([](const auto& l) { return l.devices_size() == 2; }, 0, absl::Seconds(20));
  ASSERT_TRUE(list.has_value());
  v1beta1::AllocateRequest req;
  req.add_container_requests()->add_devices_ids(list->devices(0).id());
  v1beta1::AllocateResponse resp;
  grpc::Status s = mig->Allocate(req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const v1beta1::ContainerAllocateResponse& cr = resp.container_responses(0);
  EXPECT_EQ(cr.envs().at("NVIDIA_VISIBLE_DEVICES"), list->devices(0).id());
  // Only the nodes that exist: not nvidia-uvm-tools or nvidia-modeset.
  std::vector<std::string> host, container;
  for (const auto& d : cr.devices()) {
    host.push_back(d.host_path());
    container.push_back(d.container_path());
  }
  EXPECT_EQ(host, (std::vector<std::string>{root + "/dev/nvidia1", root + "/dev/nvidiactl",
                                            root + "/dev/nvidia-uvm"}));
  EXPECT_EQ(container,
            (std::vector<std::string>{"/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-uvm"}));
  ASSERT_EQ(cr.cdi_devices_size(), 1);
  EXPECT_EQ(cr.cdi_devices(0).name(), "nvidia.com/gpu=" + list->devices(0).id());

  ASSERT_EQ(kill(pid_, SIGTERM), 0);
  EXPECT_EQ(Wait(), 0) << Output();
}

// --node-name without a usable API config: a warning, and kubelet is served all the same (the
// annotation itself is tested on a real apiserver, tests/kube/kube_device_plugin_test.cc).
TEST_F(DevicePluginCommandTest, NodeNameWithoutApiConfigWarnsAndServesKubelet) {
  testing::TestKubelet kubelet(dir_);
  ASSERT_TRUE(kubelet.Start().ok());
  const std::string missing = dir_ + "/missing.kubeconfig";
  Spawn({"device-plugin", "--backend", "fake", "--fake-config", dir_ + "/node.yaml", "--plugin-dir",
         dir_, "--metrics-interval", "200ms", "--node-name", "gpu-1", "--kubeconfig", missing});
  ASSERT_TRUE(kubelet.WaitForRegistrations(1, absl::Seconds(20))) << Output();
  EXPECT_NE(Output().find("warning: --kubeconfig " + missing), std::string::npos) << Output();
  EXPECT_NE(Output().find("not writing tessera.dev/nvlink-domains on node gpu-1"),
            std::string::npos)
      << Output();
  ASSERT_EQ(kill(pid_, SIGTERM), 0);
  EXPECT_EQ(Wait(), 0) << Output();

  // $NODE_NAME is --node-name's default; outside a Pod there is no in-cluster config.
  std::optional<std::string> host;
  if (const char* h = getenv("KUBERNETES_SERVICE_HOST")) host = h;
  unsetenv("KUBERNETES_SERVICE_HOST");
  setenv("NODE_NAME", "gpu-2", 1);
  Spawn({"device-plugin", "--backend", "fake", "--fake-config", dir_ + "/node.yaml", "--plugin-dir",
         dir_, "--metrics-interval", "200ms"});
  unsetenv("NODE_NAME");
  if (host) setenv("KUBERNETES_SERVICE_HOST", host->c_str(), 1);
  ASSERT_TRUE(kubelet.WaitForRegistrations(2, absl::Seconds(20))) << Output();
  EXPECT_NE(Output().find("warning: in-cluster config: "), std::string::npos) << Output();
  EXPECT_NE(Output().find("on node gpu-2"), std::string::npos) << Output();
  ASSERT_EQ(kill(pid_, SIGTERM), 0);
  EXPECT_EQ(Wait(), 0) << Output();
}

TEST_F(DevicePluginCommandTest, BadUsage) {
  Spawn({"device-plugin", "--backend", "fake", "--plugin-dir", dir_});
  EXPECT_EQ(Wait(), 2);
  EXPECT_NE(Output().find("--fake-config: required"), std::string::npos) << Output();
  Spawn({"device-plugin", "--backend", "fake", "--fake-config", dir_ + "/node.yaml",
         "--rescan-interval", "soon"});
  EXPECT_NE(Wait(), 0);
  EXPECT_NE(Output().find("--rescan-interval"), std::string::npos) << Output();
  Spawn({"device-plugin", "--backend", "fake", "--fake-config", dir_ + "/node.yaml",
         "--device-list-strategy", "volume-mounts"});
  EXPECT_EQ(Wait(), 2);
  EXPECT_NE(Output().find("--device-list-strategy: device list strategy: 'volume-mounts' is not "
                          "supported"),
            std::string::npos)
      << Output();
  Spawn({"device-plugin", "--backend", "fake", "--fake-config", dir_ + "/node.yaml", "--cdi",
         "true", "--device-list-strategy", "cdi-cri"});
  EXPECT_EQ(Wait(), 2);
  EXPECT_NE(Output().find("--cdi: not with --device-list-strategy"), std::string::npos) << Output();
}

}  // namespace
}  // namespace tessera::deviceplugin
