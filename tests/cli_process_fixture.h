// CliProcessTest: a real `tessera server` process on loopback (env TESSERA_BIN) for the CLI's
// process tests, and helpers to run the CLI against it. Not thread-safe; one per test.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "nlohmann/json.hpp"
#include "server_process.h"

namespace tessera::testing {

using Json = nlohmann::json;

using Result = CliResult;

class CliProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (TesseraBin().empty()) GTEST_SKIP() << "TESSERA_BIN is not set";
    dir_ = MakeTempDir("tessera_cli");
    ASSERT_FALSE(dir_.empty());
    setenv("HOME", dir_.c_str(), 1);  // no ~/.tessera/config of the user
    StartServer();
  }

  void StartServer() {
    std::vector<std::string> args = {"--data-dir", dir_ + "/data"};
    args.insert(args.end(), extra_args_.begin(), extra_args_.end());
    int port = server_.Start(args);
    ASSERT_GT(port, 0) << server_.error();
    url_ = "http://127.0.0.1:" + std::to_string(port);
    setenv("TESSERA_SERVER", url_.c_str(), 1);
    // No --tokens-file: the server made itself an admin token; the CLI finds it in the env.
    // A test that passes its own tokens file sets admin_token_ first.
    std::string token = admin_token_;
    if (token.empty()) {
      token = Slurp(dir_ + "/data/admin-token");
      ASSERT_FALSE(token.empty()) << "no admin token in the data dir";
      token.pop_back();  // the newline
    }
    setenv("TESSERA_TOKEN", token.c_str(), 1);
    token_ = token;
  }

  Result Run(const std::string& args) { return RunTessera(args); }

  static std::string Example(const std::string& name) {
    return std::string(TESSERA_SOURCE_DIR) + "/examples/" + name;
  }

  // Polls `get RESOURCE NAME -o json` until `pred` holds (20 s at most).
  Json WaitFor(const std::string& resource, const std::string& name,
               const std::function<bool(const Json&)>& pred) {
    Json last;
    for (int i = 0; i < 200; ++i) {
      Result r = Run("get " + resource + " " + name + " -o json");
      if (r.rc == 0) {
        last = Json::parse(r.out, nullptr, false);
        if (!last.is_discarded() && pred(last)) return last;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "timed out waiting for " << resource << "/" << name << ": " << last.dump();
    return last;
  }

  static bool Scheduled(const Json& j) {
    return j["status"].value("phase", "") == "Scheduled" && j["status"].contains("placement");
  }

  std::string dir_, url_, token_;
  std::string admin_token_;  // with a --tokens-file of the test's in extra_args_
  std::vector<std::string> extra_args_;
  ServerProcess server_;
};

}  // namespace tessera::testing
