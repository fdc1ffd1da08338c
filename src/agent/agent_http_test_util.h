// Test support for the node agent's HTTP tests: a real in-process API server
// on loopback over a store the test owns, and one node agent "n1" (fake
// 8 x H100 backend, real launcher, real processes) syncing through the
// long-poll watch, started and stopped in the order both need (the agent
// before its members, the members before the server).
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/api_client.h"
#include "agent/binding_watcher.h"
#include "agent/fake/fake_backend.h"
#include "agent/http_control_plane.h"
#include "agent/node_agent.h"
#include "gtest/gtest.h"
#include "server/api_server.h"

namespace tessera::agent::testing {

// Polls `pred` every 20 ms until it holds or `limit` passes; its last answer.
inline bool WaitFor(const std::function<bool()>& pred, absl::Duration limit) {
  const absl::Time end = absl::Now() + limit;
  while (absl::Now() < end) {
    if (pred()) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return pred();
}

inline std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class AgentOverHttpTest : public ::testing::Test {
 protected:
  // A fresh directory from `dir_template` (mkdtemp) and the API server over
  // `store` on an ephemeral port; `so` may set leases and the like.
  void StartServer(store::Store& store, const char* dir_template,
                   server::ApiServerOptions so = {}) {
    dir_ = dir_template;
    ASSERT_NE(mkdtemp(dir_.data()), nullptr);
    so.threads = 8;
    server_ =
        std::make_unique<server::ApiServer>(store, clock_, server::Authenticator::AllowAll(), so);
    absl::StatusOr<int> port = server_->Start("127.0.0.1", 0);
    ASSERT_TRUE(port.ok()) << port.status();
    url_ = absl::StrCat("http://127.0.0.1:", *port);
    admin_ = std::make_unique<ApiClient>(url_, "");
  }

  // Agent "n1" with `ao` (its node name is set here) and its binding watcher.
  void StartAgent(NodeAgentOptions ao) {
    auto backend = FakeBackend::FromFile(
        std::string(TESSERA_SOURCE_DIR) + "/deploy/fake-gpus/h100-nvswitch-8.yaml", clock_);
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = std::move(*backend);
    ASSERT_TRUE(backend_->Init().ok());
    Launcher::Options lo;
    lo.state_dir = dir_ + "/state";
    lo.cgroup_parent = "";
    launcher_ = std::make_unique<Launcher>(lo, clock_);
    ASSERT_TRUE(launcher_->Init().ok());
    ao.node_name = "n1";
    client_ = std::make_unique<HttpControlPlaneClient>(url_, "");
    agent_ = std::make_unique<NodeAgent>(*backend_, tracker_, *launcher_, *client_, clock_, ao);
    ASSERT_TRUE(agent_->Init().ok());
    watch_client_ = std::make_unique<HttpControlPlaneClient>(url_, "", absl::Seconds(30));
    watcher_ = std::make_unique<BindingWatcher>(
        *watch_client_, *agent_, "n1", absl::Seconds(10), [this] { watch_client_->Cancel(); }, 7);
    watcher_->Start();
    run_ = std::thread([this] { agent_->Run(); });
  }

  // Idempotent; the agent object stays for its stats.
  void StopAgent() {
    if (agent_ == nullptr || !run_.joinable()) return;
    agent_->Stop();
    run_.join();
    watcher_->Stop();
  }

  // Ends the members the agent left running (members outlive their agent
  // by design), then the server, and removes the directory.
  void StopMembersAndServer() {
    if (launcher_ != nullptr) {
      for (const MemberStatus& m : launcher_->List()) (void)launcher_->Stop(m.spec.Id(), false);
      absl::SleepFor(absl::Milliseconds(100));
      launcher_->Poll();
    }
    if (server_ != nullptr) server_->Stop();
    server_.reset();  // before the test's store, which a subclass owns
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  std::string dir_;
  RealClock clock_;
  std::unique_ptr<server::ApiServer> server_;
  std::string url_;
  std::unique_ptr<ApiClient> admin_;
  std::unique_ptr<FakeBackend> backend_;
  std::unique_ptr<Launcher> launcher_;
  HealthTracker tracker_;
  std::unique_ptr<HttpControlPlaneClient> client_;
  std::unique_ptr<NodeAgent> agent_;
  std::unique_ptr<HttpControlPlaneClient> watch_client_;
  std::unique_ptr<BindingWatcher> watcher_;
  std::thread run_;
};

}  // namespace tessera::agent::testing
