// `tessera server --store etcd://...`: a bad URL is refused naming the flag; against the bed's
// etcd (ServerEtcdTest, skipped without it) the server accepts a job, and a new server process on
// the same etcd still has it, at the same revision.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "httplib.h"
#include "nlohmann/json.hpp"
#include "server_process.h"
#include "store/etcd/testing/etcd_process.h"

namespace tessera::testing {
namespace {

using Json = nlohmann::json;

Json Job(const std::string& name) {
  return {{"apiVersion", "tessera.dev/v1"},
          {"kind", "TrainingJob"},
          {"metadata", {{"name", name}}},
          {"spec", {{"groups", {{{"name", "w"}, {"count", 1}, {"gpusPerReplica", 8}}}}}}};
}

TEST(ServerEtcdFlagsTest, BadStoreUrlNamesTheFlag) {
  if (TesseraBin().empty()) GTEST_SKIP() << "TESSERA_BIN is not set";
  CliResult r = RunTessera("server --insecure-no-auth --store etcd://no-port");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("--store: etcd URL \"etcd://no-port\""), std::string::npos) << r.out;
  r = RunTessera("server --insecure-no-auth --store mysql://x:1");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("--store"), std::string::npos) << r.out;
  r = RunTessera("server --insecure-no-auth");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("--data-dir is required"), std::string::npos) << r.out;
}

TEST(ServerEtcdTest, JobSurvivesAServerRestartOnEtcd) {
  if (TesseraBin().empty()) GTEST_SKIP() << "TESSERA_BIN is not set";
  std::string why;
  EtcdProcess* etcd = EtcdProcess::Shared(TESSERA_SOURCE_DIR, &why);
  if (etcd == nullptr) GTEST_SKIP() << why;
  const std::string dir = MakeTempDir("tessera_etcd_server");
  const std::vector<std::string> args = {
      "--store", "etcd://" + etcd->endpoint() + "/server-etcd-test", "--insecure-no-auth"};
  const std::string kJobs = "/api/v1/namespaces/default/trainingjobs";
  {
    ServerProcess server;
    server.set_stderr_path(dir + "/server1.log");
    int port = server.Start(args);
    ASSERT_GT(port, 0) << server.error() << Slurp(dir + "/server1.log");
    httplib::Client cli("127.0.0.1", port);
    auto r = cli.Post(kJobs, Job("a").dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 201) << r->body;
    int status = server.Kill(SIGTERM);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << Slurp(dir + "/server1.log");
  }
  ServerProcess again;
  again.set_stderr_path(dir + "/server2.log");
  int port = again.Start(args);
  ASSERT_GT(port, 0) << again.error() << Slurp(dir + "/server2.log");
  httplib::Client cli("127.0.0.1", port);
  auto r = cli.Get(kJobs + "/a");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(Json::parse(r->body)["metadata"]["name"], "a");
  // A second job is accepted by the new process too: the revision went on from etcd's.
  r = cli.Post(kJobs, Job("b").dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 201) << r->body;
  r = cli.Get(kJobs);
  ASSERT_TRUE(r);
  EXPECT_EQ(Json::parse(r->body)["items"].size(), 2u) << r->body;
  again.Kill(SIGTERM);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessera::testing
