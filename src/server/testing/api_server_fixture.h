// Test fixture: an ApiServer over real HTTP on loopback, in-process on a free port, on a
// SqliteStore in a temporary directory, with an admin, two tenants' and one node's tokens.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "controller/node_leases.h"
#include "nlohmann/json.hpp"
#include "server/api_server.h"
#include "server/testing/http_call.h"
#include "store/sqlite_store.h"

namespace tessera::server::testing {

using Json = nlohmann::json;

constexpr char kAdmin[] = "admin-token-1";
constexpr char kTeamA[] = "team-a-token";
constexpr char kTeamB[] = "team-b-token";
constexpr char kNode1[] = "node-gpu-01-token";

using Resp = HttpResp;

inline Json Job(const std::string& name, int count = 2, Json labels = Json::object()) {
  return {{"apiVersion", "tessera.dev/v1"},
          {"kind", "TrainingJob"},
          {"metadata", {{"name", name}, {"labels", labels}}},
          {"spec",
           {{"queue", "research"},
            {"groups", {{{"name", "workers"}, {"count", count}, {"gpusPerReplica", 8}}}}}}};
}

inline Json Node(const std::string& name) {
  return {{"apiVersion", "tessera.dev/v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}}},
          {"spec", {{"gpuType", "H100"}, {"gpuCount", 8}}}};
}

class ApiServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = getenv("TMPDIR");
    std::string tmpl = absl::StrCat(tmp ? tmp : "/tmp", "/tessera_api_XXXXXX");
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    auto store = store::SqliteStore::Open(dir_ + "/data");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    auto auth =
        Authenticator::Parse(absl::StrCat(kAdmin, " * admin\n", kTeamA, " team-a user\n", kTeamB,
                                          " team-b user\n", kNode1, " - node:gpu-01\n"));
    ASSERT_TRUE(auth.ok()) << auth.status();
    ApiServerOptions opts;
    opts.threads = 16;
    opts.watch_heartbeat = absl::Milliseconds(300);
    opts.max_watches = 4;
    opts.max_watches_per_token = 2;
    opts.read_timeout = absl::Seconds(1);
    opts.node_leases = &leases_;
    opts.node_status_interval = absl::Seconds(60);
    server_ = std::make_unique<ApiServer>(*store_, clock_, *std::move(auth), opts);
    auto port = server_->Start("127.0.0.1", 0);
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
  }
  void TearDown() override {
    server_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  Resp Do(const std::string& method, const std::string& path, const Json& body = nullptr,
          const std::string& token = kAdmin) {
    return DoRaw(method, path, body.is_null() ? "" : body.dump(), token);
  }
  Resp DoRaw(const std::string& method, const std::string& path, const std::string& body,
             const std::string& token = kAdmin) {
    return HttpCall(port_, method, path, body, token, /*read_timeout_s=*/5);
  }
  // Reads watch events until `n` arrived or the stream ends.
  std::vector<Json> Watch(const std::string& path, size_t n, const std::string& token = kAdmin,
                          int* status = nullptr) {
    httplib::Client cli("127.0.0.1", port_);
    cli.set_read_timeout(10, 0);
    std::vector<Json> events;
    std::string buf;
    int code = 0;
    auto r = cli.Get(
        path, {{"Authorization", absl::StrCat("Bearer ", token)}},
        [&](const httplib::Response& head) {
          code = head.status;
          return true;
        },
        [&](const char* data, size_t len) {
          buf.append(data, len);
          size_t nl;
          while ((nl = buf.find('\n')) != std::string::npos) {
            std::string line = buf.substr(0, nl);
            buf.erase(0, nl + 1);
            if (line.empty()) continue;  // keep-alive
            events.push_back(Json::parse(line));
          }
          return events.size() < n;
        });
    if (status != nullptr) *status = code;
    return events;
  }

  std::string dir_;
  ManualClock clock_{absl::FromUnixSeconds(1767225600)};  // 2026-01-01T00:00:00Z
  std::unique_ptr<store::SqliteStore> store_;
  controller::NodeLeases leases_;
  std::unique_ptr<ApiServer> server_;
  int port_ = 0;
};

const char kJobs[] = "/api/v1/namespaces/team-a/trainingjobs";

}  // namespace tessera::server::testing
