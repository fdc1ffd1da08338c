// The real `tessera server` process: tokens file, a clean restart keeps
// everything, and bad flags fail with a clear message.
#include "server_process.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <vector>

#include "http/testing/raw_http.h"
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

// Without --tokens-file authentication is still on: the server makes itself an admin token
// (0600, in the data dir), says where on stderr, and keeps it across restarts.
TEST_F(ServerProcessTest, AuthenticationIsOnByDefault) {
  const std::string token_file = dir_ + "/data/admin-token";
  std::string token;
  for (int start = 0; start < 2; ++start) {
    ServerProcess server;
    server.set_stderr_path(dir_ + "/server.log");
    int port = server.Start({"--data-dir", dir_ + "/data", "--no-scheduler"});
    ASSERT_GT(port, 0) << server.error();
    struct stat st;
    ASSERT_EQ(stat(token_file.c_str(), &st), 0) << "no " << token_file;
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    std::string now = Slurp(token_file);
    while (!now.empty() && now.back() == '\n') now.pop_back();
    if (start == 0) token = now;
    EXPECT_EQ(now, token) << "the token is kept across restarts";
    httplib::Client cli("127.0.0.1", port);
    auto anon = cli.Get("/api/v1/nodes");
    ASSERT_TRUE(anon);
    EXPECT_EQ(anon->status, 401);
    auto admin = cli.Get("/api/v1/nodes", {{"Authorization", "Bearer " + token}});
    ASSERT_TRUE(admin);
    EXPECT_EQ(admin->status, 200);
  }
  EXPECT_NE(Slurp(dir_ + "/server.log").find(token_file), std::string::npos)
      << "the server says where its admin token is";
}

// Serving without authentication takes --insecure-no-auth, and only on loopback.
TEST_F(ServerProcessTest, NoAuthenticationOnlyWhenAskedAndOnlyOnLoopback) {
  CliResult everywhere =
      RunTessera("server --data-dir " + dir_ + "/d1 --listen 0.0.0.0:0 --insecure-no-auth");
  EXPECT_EQ(everywhere.rc, 2) << everywhere.out;
  EXPECT_NE(everywhere.out.find("refused on a non-loopback address"), std::string::npos)
      << everywhere.out;
  CliResult both = RunTessera("server --data-dir " + dir_ +
                              "/d2 --insecure-no-auth --tokens-file " + dir_ + "/tokens");
  EXPECT_EQ(both.rc, 2) << both.out;
  ServerProcess open;
  int port = open.Start({"--data-dir", dir_ + "/d3", "--insecure-no-auth", "--no-scheduler"});
  ASSERT_GT(port, 0) << open.error();
  httplib::Client cli("127.0.0.1", port);
  auto r = cli.Get("/api/v1/nodes");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/d3/admin-token"));
}

// The server's peak memory (VmHWM) for a process.
int64_t PeakRssKiB(pid_t pid) {
  std::string status = Slurp("/proc/" + std::to_string(pid) + "/status");
  size_t at = status.find("VmHWM:");
  return at == std::string::npos ? -1 : std::atoll(status.c_str() + at + 6);
}

// Chunked bodies far over the 1 MiB limit, with and without a token, never ending: the server
// answers 401 / 413 without buffering them (its peak memory does not grow by their size) and
// stores nothing.
TEST_F(ServerProcessTest, ChunkedBodiesOverTheLimitDoNotGrowTheServer) {
  ServerProcess server;
  int port = server.Start(Args());
  ASSERT_GT(port, 0) << server.error();
  const std::string jobs = "/api/v1/namespaces/team-a/trainingjobs";
  httplib::Client cli("127.0.0.1", port);
  httplib::Headers admin = {{"Authorization", "Bearer admin-token-xyz"}};
  ASSERT_EQ(cli.Get(jobs, admin)->status, 200);  // warm: threads and store pages in
  const int64_t before = PeakRssKiB(server.pid());
  ASSERT_GT(before, 0);
  constexpr size_t kBody = 48 << 20;
  http::testing::RawReply anon =
      http::testing::SendUnendingChunkedBody(port, http::testing::ChunkedPostHead(jobs, ""), kBody);
  EXPECT_NE(anon.text.find("HTTP/1.1 401"), std::string::npos) << anon.text;
  http::testing::RawReply big = http::testing::SendUnendingChunkedBody(
      port, http::testing::ChunkedPostHead(jobs, "admin-token-xyz"), kBody);
  EXPECT_NE(big.text.find("HTTP/1.1 413"), std::string::npos) << big.text;
  EXPECT_NE(big.text.find("over the limit of 1048576 bytes"), std::string::npos) << big.text;
  const int64_t after = PeakRssKiB(server.pid());
  EXPECT_LT(after - before, 16 << 10) << "peak RSS grew from " << before << " KiB to " << after
                                      << " KiB for " << (kBody >> 20) << " MiB bodies";
  auto list = cli.Get(jobs, admin);
  ASSERT_TRUE(list);
  EXPECT_EQ(Json::parse(list->body)["items"].size(), 0u) << "nothing stored";
}

// Slow-loris: clients trickling their headers a byte every 100 ms (each byte well inside the 5 s
// read timeout), most without a token, are answered 400 and closed at the header timeout instead
// of holding a request thread each for as long as they trickle; the server counts them, and a
// well-behaved client is served meanwhile.
TEST_F(ServerProcessTest, SlowLorisClientsAreCutAtTheHeaderTimeout) {
  ServerProcess server;
  std::vector<std::string> args = Args();
  args.insert(args.end(), {"--header-timeout-seconds", "1"});
  int port = server.Start(args);
  ASSERT_GT(port, 0) << server.error();
  const std::string jobs = "/api/v1/namespaces/team-a/trainingjobs";
  // The request line at once, then 600 header bytes at 10 per second: a minute, unless cut.
  const std::string line = "GET " + jobs + " HTTP/1.1\r\nHost: x\r\n";
  const std::string head = "X-Slow: " + std::string(600, 'a');
  constexpr int kClients = 40;
  std::vector<std::future<http::testing::RawReply>> loris;
  for (int i = 0; i < kClients; ++i) {
    loris.push_back(std::async(std::launch::async, [port, line, head] {
      return http::testing::Trickle(port, line, head, 100);
    }));
  }
  httplib::Client cli("127.0.0.1", port);
  httplib::Headers admin = {{"Authorization", "Bearer admin-token-xyz"}};
  auto ok = cli.Get(jobs, admin);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  for (auto& f : loris) {
    http::testing::RawReply r = f.get();
    EXPECT_NE(r.text.find("HTTP/1.1 400"), std::string::npos) << r.text;
    EXPECT_TRUE(r.closed);
    EXPECT_LT(r.body_bytes_sent, head.size() / 2) << "not cut at the header timeout";
  }
  auto metrics = cli.Get("/metrics", admin);
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("tessera_api_connections_cut_total{reason=\"header_timeout\"} " +
                               std::to_string(kClients)),
            std::string::npos)
      << metrics->body.substr(0, 4000);
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

// Runs a `tessera bench ...` command line; it must exit 0 and print one JSON object.
void RunBench(const std::string& cmd, std::string* out) {
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out->append(buf, n);
  ASSERT_EQ(pclose(p), 0) << *out;
  ASSERT_TRUE(Json::parse(*out, nullptr, false).is_object()) << *out;
}

TEST_F(ServerProcessTest, BenchApiPrintsJson) {
  std::string cmd = TesseraBin();
  cmd.append(" bench api --seconds 0.2 --clients 4 --batch 5 --restart-jobs 50 --dir ");
  cmd.append(dir_).append("/bench");
  std::string out;
  ASSERT_NO_FATAL_FAILURE(RunBench(cmd, &out));
  Json j = Json::parse(out, nullptr, false);
  EXPECT_GT(j["one_per_request"]["submissions_per_s"].get<double>(), 0);
  EXPECT_EQ(j["one_per_request"]["errors"], 0);
  EXPECT_GT(j["batched"]["submissions_per_s"].get<double>(), 0);
  EXPECT_EQ(j["restart"]["jobs_stored"], 50);
  EXPECT_EQ(j["restart"]["table_rows"], 50);
  // As the server runs by default: a token on every request, the controller admitting the jobs.
  EXPECT_EQ(j["authentication"], true);
  EXPECT_EQ(j["scheduler"], true);
  EXPECT_GT(j["jobs_submitted"].get<int64_t>(), 0);
}

// `bench restart` rebuilds every stored placement and binds the one queued job in its first step.
TEST_F(ServerProcessTest, BenchRestartRebuildsAndBindsTheQueuedJob) {
  std::string cmd = TesseraBin();
  cmd.append(" bench restart --nodes 8 --gpus-per-node 8 --jobs 32 --dir ");
  cmd.append(dir_).append("/restart");
  std::string out;
  ASSERT_NO_FATAL_FAILURE(RunBench(cmd, &out));
  Json j = Json::parse(out, nullptr, false);
  EXPECT_EQ(j["gpus"], 64) << out;
  EXPECT_EQ(j["gpus_per_job"], 2) << out;
  EXPECT_EQ(j["placements_restored"], 31) << out;
  EXPECT_EQ(j["bound_in_first_step"], 1) << out;
  EXPECT_EQ(j["allocated_gpus"], 64) << out;
  for (const char* phase : {"store_read_ms", "decode_and_rebuild_ms", "first_step_ms"}) {
    EXPECT_GE(j[phase].get<double>(), 0) << phase;
  }
}

}  // namespace
}  // namespace tessera::testing
