// The real `tessera server` process: tokens file, a clean restart keeps
// everything, and bad flags fail with a clear message.
#include "server_process.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <fstream>

#include "nlohmann/json.hpp"

namespace tessera::testing {
namespace {

using Json = nlohmann::json;

Json Job(const std::string& name) {
  return {{"apiVersion", "tessera.dev/v1"},
          {"kind", "TrainingJob"},
          {"metadata", {{"name", name}}},
          {"spec", {{"groups", {{{"name", "w"}, {"count", 1}, {"gpusPerReplica", 8}}}}}}};
}

class ServerProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (TesseraBin().empty()) GTEST_SKIP() << "TESSERA_BIN is not set";
    dir_ = MakeTempDir("tessera_proc");
    std::ofstream(std::string(dir_).append("/tokens")) << "# test tokens\nadmin-token-xyz * admin\n"
                                                          "user-token-xyz team-a user\n";
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  // API only: the scheduling controller would write statuses and move the
  // revisions this test counts (cli_process_test covers scheduling).
  std::vector<std::string> Args() {
    return {"--data-dir", dir_ + "/data", "--tokens-file", dir_ + "/tokens", "--no-scheduler"};
  }
  std::string dir_;
};

TEST_F(ServerProcessTest, ServesAuthenticatesAndSurvivesRestart) {
  ServerProcess server;
  int port = server.Start(Args());
  ASSERT_GT(port, 0) << server.error();
  {
    httplib::Client cli("127.0.0.1", port);
    auto r =
        cli.Post("/api/v1/namespaces/team-a/trainingjobs", Job("a").dump(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401);
    httplib::Headers user = {{"Authorization", "Bearer user-token-xyz"}};
    for (int i = 0; i < 20; ++i) {
      r = cli.Post("/api/v1/namespaces/team-a/trainingjobs", user,
                   Job(std::string("j").append(std::to_string(i))).dump(), "application/json");
      ASSERT_TRUE(r);
      ASSERT_EQ(r->status, 201) << r->body;
    }
    r = cli.Get("/api/v1/namespaces/team-b/trainingjobs", user);
    EXPECT_EQ(r->status, 403);
  }
  int status = server.Kill(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;

  ServerProcess again;
  port = again.Start(Args());
  ASSERT_GT(port, 0) << again.error();
  EXPECT_NE(again.listening_line().find("revision 20"), std::string::npos)
      << again.listening_line();
  httplib::Client cli("127.0.0.1", port);
  auto r = cli.Get("/api/v1/namespaces/team-a/trainingjobs",
                   {{"Authorization", "Bearer admin-token-xyz"}});
  ASSERT_TRUE(r);
  Json list = Json::parse(r->body);
  EXPECT_EQ(list["items"].size(), 20u);
  EXPECT_EQ(list["metadata"]["resourceVersion"], "20");
}

TEST_F(ServerProcessTest, BadFlagsFailClearly) {
  std::ofstream(dir_ + "/bad_tokens") << "only-two fields\n";
  ServerProcess s1;
  EXPECT_LT(s1.Start({"--data-dir", dir_ + "/data", "--tokens-file", dir_ + "/bad_tokens"}), 0);
  ServerProcess s2;
  EXPECT_LT(s2.Start({"--data-dir", dir_ + "/missing/parent/data"}), 0);
  std::ofstream(dir_ + "/plainfile") << "x";
  ServerProcess s3;
  EXPECT_LT(s3.Start({"--data-dir", dir_ + "/plainfile"}), 0);
}

// --profile: a bad profile refuses to start, naming the field; the shipped packing profile
// (the packing plugins are linked into the server) starts and schedules.
TEST_F(ServerProcessTest, ProfileFlag) {
  std::ofstream(dir_ + "/bad.yaml") << "name: x\nplugins:\n  - name: resource-fit\n"
                                       "  - name: pack-tessera\n    weight: 500\n";
  ServerProcess bad;
  bad.set_stderr_path(dir_ + "/bad.log");
  EXPECT_LT(bad.Start({"--data-dir", dir_ + "/data", "--tokens-file", dir_ + "/tokens", "--profile",
                       dir_ + "/bad.yaml"}),
            0);
  std::ifstream log(dir_ + "/bad.log");
  std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("--profile"), std::string::npos) << text;
  EXPECT_NE(text.find("bad.yaml: profile.plugins[1].weight: must be in 1..100, got 500"),
            std::string::npos)
      << text;
  ServerProcess good;
  int port = good.Start({"--data-dir", dir_ + "/data", "--tokens-file", dir_ + "/tokens",
                         "--profile", TESSERA_SOURCE_DIR "/deploy/profiles/tessera.yaml"});
  ASSERT_GT(port, 0) << good.error();
  httplib::Client cli("127.0.0.1", port);
  httplib::Headers admin = {{"Authorization", "Bearer admin-token-xyz"}};
  Json node = {{"apiVersion", "tessera.dev/v1"},
               {"kind", "Node"},
               {"metadata", {{"name", "n0"}}},
               {"spec", {{"gpuType", "H100"}, {"gpuCount", 8}}}};
  auto r = cli.Post("/api/v1/nodes", admin, node.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 201) << r->body;
  r = cli.Post("/api/v1/namespaces/team-a/trainingjobs", admin, Job("a").dump(),
               "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 201) << r->body;
  // Scheduled by the packing profile: a watch (bounded by timeoutSeconds) ends at the binding.
  bool scheduled = false;
  std::string buf;
  cli.set_read_timeout(30, 0);
  cli.Get("/api/v1/namespaces/team-a/trainingjobs?watch=true&timeoutSeconds=20", admin,
          [&](const char* data, size_t n) {
            buf.append(data, n);
            for (size_t nl; (nl = buf.find('\n')) != std::string::npos; buf.erase(0, nl + 1)) {
              Json ev = Json::parse(buf.substr(0, nl), nullptr, false);
              if (ev.is_object() && ev["object"]["status"].value("phase", "") == "Scheduled") {
                scheduled = true;
              }
            }
            return !scheduled;
          });
  EXPECT_TRUE(scheduled);
}

TEST_F(ServerProcessTest, BenchApiPrintsJson) {
  std::string cmd = TesseraBin();
  cmd.append(" bench api --seconds 0.2 --clients 4 --batch 5 --restart-jobs 50 --dir ");
  cmd.append(dir_).append("/bench");
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  ASSERT_EQ(pclose(p), 0) << out;
  Json j = Json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  EXPECT_GT(j["one_per_request"]["submissions_per_s"].get<double>(), 0);
  EXPECT_EQ(j["one_per_request"]["errors"], 0);
  EXPECT_GT(j["batched"]["submissions_per_s"].get<double>(), 0);
  EXPECT_EQ(j["restart"]["jobs_stored"], 50);
}

}  // namespace
}  // namespace tessera::testing
