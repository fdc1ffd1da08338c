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
         dir_, "--cdi", "false",
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
  EXPECT_EQ(resp.container_responses(0).cdi_devices_size(), 0) << "--cdi false";

  ASSERT_EQ(kill(pid_, SIGTERM), 0);
  EXPECT_EQ(Wait(), 0) << Output();
  EXPECT_TRUE(client->WaitForStreamEnd(absl::Seconds(10)));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/" + reg.endpoint()));
}

TEST_F(DevicePluginCommandTest, BadUsage) {
  Spawn({"device-plugin", "--backend", "fake", "--plugin-dir", dir_});
  EXPECT_EQ(Wait(), 2);
  EXPECT_NE(Output().find("--fake-config: required"), std::string::npos) << Output();
  Spawn({"device-plugin", "--backend", "fake", "--fake-config", dir_ + "/node.yaml",
         "--rescan-interval", "soon"});
  EXPECT_NE(Wait(), 0);
  EXPECT_NE(Output().find("--rescan-interval"), std::string::npos) << Output();
}

}  // namespace
}  // namespace tessera::deviceplugin
