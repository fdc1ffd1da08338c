#include "agent/member_logs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "nlohmann/json.hpp"

namespace tessera::agent {
namespace {

namespace fs = std::filesystem;

class MemberLogsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "tessera_logs_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    launcher_ = std::make_unique<Launcher>(Launcher::Options{dir_, ""}, clock_);
    ASSERT_TRUE(launcher_->Init().ok());
    logs_ = launcher_->LogDir("team-a", "train");
    fs::create_directories(logs_);
  }
  void TearDown() override {
    if (server_) server_->stop();
    if (thread_.joinable()) thread_.join();
    fs::remove_all(dir_);
  }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(logs_ + "/" + name, std::ios::app) << text;
  }
  std::string Get(const std::string& query, int* status = nullptr) {
    if (!server_) {
      server_ = std::make_unique<httplib::Server>();
      server_->Get("/logs", [this](const httplib::Request& req, httplib::Response& res) {
        ServeLogs(req, res, *launcher_, stop_);
      });
      port_ = server_->bind_to_any_port("127.0.0.1");
      thread_ = std::thread([this] { server_->listen_after_bind(); });
      while (!server_->is_running()) std::this_thread::yield();
    }
    httplib::Client c("127.0.0.1", port_);
    auto r = c.Get("/logs?namespace=team-a&job=train" + query);
    if (status != nullptr) *status = r ? r->status : -1;
    return r ? r->body : "";
  }

  std::string dir_, logs_;
  RealClock clock_;
  std::unique_ptr<Launcher> launcher_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
};

TEST_F(MemberLogsTest, FilesAreListedByMemberGenerationAndStream) {
  Write("worker-0.g2.stdout", "");
  Write("worker-0.g10.stdout", "");
  Write("worker-0.g2.stderr", "");
  Write("worker-1.stdout", "");  // an agent before generations were in the name
  Write("worker-1.g3.stdout.idx", "");
  Write("notes.txt", "");
  std::vector<std::string> got;
  for (const LogFile& f : ListLogFiles(logs_)) {
    got.push_back(absl::StrCat(f.member, "/", f.generation, "/", f.stream));
  }
  EXPECT_THAT(got, ::testing::ElementsAre("worker-0/2/stderr", "worker-0/2/stdout",
                                          "worker-0/10/stdout", "worker-1/0/stdout"));
}

TEST_F(MemberLogsTest, TheIndexFindsWhereOutputAfterATimeBegins) {
  const std::string path = logs_ + "/worker-0.g1.stdout";
  const absl::Time t0 = absl::FromUnixSeconds(1767225600);
  LogIndexer indexer;
  Write("worker-0.g1.stdout", "a\n");
  indexer.Sample({path}, t0);
  indexer.Sample({path}, t0 + absl::Seconds(1));  // unchanged: no sample
  Write("worker-0.g1.stdout", "bb\n");
  indexer.Sample({path}, t0 + absl::Seconds(2));
  Write("worker-0.g1.stdout", "ccc\n");
  indexer.Sample({path}, t0 + absl::Seconds(4));
  std::ifstream idx(path + ".idx");
  std::string text((std::istreambuf_iterator<char>(idx)), std::istreambuf_iterator<char>());
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3) << text;
  EXPECT_EQ(OffsetSince(path, t0 - absl::Seconds(1)), 0);  // before the first sample: all
  EXPECT_EQ(OffsetSince(path, t0), 2);
  EXPECT_EQ(OffsetSince(path, t0 + absl::Seconds(3)), 5);
  EXPECT_EQ(OffsetSince(path, t0 + absl::Seconds(9)), 9);
  EXPECT_EQ(OffsetSince(logs_ + "/none.stdout", t0), 0);
}

TEST_F(MemberLogsTest, ServesEachMembersNewestGenerationOrTheOneAskedFor) {
  Write("worker-0.g1.stdout", "old 1\nold 2\n");
  Write("worker-0.g2.stdout", "new 1\nnew 2\npartial");
  Write("worker-1.stdout", "legacy\n");
  EXPECT_EQ(Get(""), "[worker-0] new 1\n[worker-0] new 2\n[worker-1] legacy\n");
  EXPECT_EQ(Get("&generation=1"), "[worker-0] old 1\n[worker-0] old 2\n");
  EXPECT_EQ(Get("&members=worker-1"), "[worker-1] legacy\n");
  EXPECT_EQ(Get("&member=worker-0&tail=1"), "[worker-0] new 2\n");
  int status = 0;
  Get("&generation=7", &status);
  EXPECT_EQ(status, 404);
  Get("&generation=x", &status);
  EXPECT_EQ(status, 400);
  nlohmann::json list = nlohmann::json::parse(Get("&list=1"));
  ASSERT_EQ(list["files"].size(), 3u) << list.dump();
  EXPECT_EQ(list["files"][1]["generation"], 2);
  EXPECT_EQ(list["files"][1]["bytes"], 19);
  // sinceSeconds: from the size at the last sample before then.
  const std::string path = logs_ + "/worker-0.g2.stdout";
  std::ofstream(path + ".idx") << absl::ToUnixMillis(absl::Now() - absl::Hours(2)) << " 6\n"
                               << absl::ToUnixMillis(absl::Now() - absl::Seconds(1)) << " 12\n";
  EXPECT_EQ(Get("&member=worker-0&sinceSeconds=3600"), "[worker-0] new 2\n");
  EXPECT_EQ(Get("&member=worker-0&sinceSeconds=0"), "");
}

}  // namespace
}  // namespace tessera::agent
