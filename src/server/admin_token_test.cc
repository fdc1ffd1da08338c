#include "server/admin_token.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace tessera::server {
namespace {

using ::testing::HasSubstr;

class AdminTokenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = getenv("TMPDIR");
    std::string tmpl = absl::StrCat(tmp ? tmp : "/tmp", "/tessera_admin_token_XXXXXX");
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(AdminTokenTest, CreatedOnceWithMode0600AndReused) {
  absl::StatusOr<AdminToken> first = LoadOrCreateAdminToken(dir_);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->created);
  EXPECT_EQ(first->path, dir_ + "/admin-token");
  EXPECT_EQ(first->token.size(), 64u);  // 32 random bytes, hex
  struct stat st;
  ASSERT_EQ(stat(first->path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  absl::StatusOr<AdminToken> again = LoadOrCreateAdminToken(dir_);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->token, first->token);
  // Another data dir, another token.
  std::filesystem::create_directory(dir_ + "/other");
  absl::StatusOr<AdminToken> other = LoadOrCreateAdminToken(dir_ + "/other");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE(other->token, first->token);
}

TEST_F(AdminTokenTest, AFileOthersMayReadOrAnEmptyOneIsRefused) {
  std::ofstream(dir_ + "/admin-token") << "0123456789abcdef0123\n";
  chmod((dir_ + "/admin-token").c_str(), 0644);
  absl::StatusOr<AdminToken> open = LoadOrCreateAdminToken(dir_);
  ASSERT_FALSE(open.ok());
  EXPECT_THAT(open.status().message(), HasSubstr("mode 0644"));
  EXPECT_THAT(open.status().message(), HasSubstr(dir_ + "/admin-token"));
  std::ofstream(dir_ + "/admin-token", std::ios::trunc) << "\n";
  chmod((dir_ + "/admin-token").c_str(), 0600);
  absl::StatusOr<AdminToken> empty = LoadOrCreateAdminToken(dir_);
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(empty.status().message(), HasSubstr("expected one token"));
}

TEST(IsLoopbackHostTest, OnlyThisMachinesAddresses) {
  for (const char* h : {"127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"}) {
    EXPECT_TRUE(IsLoopbackHost(h)) << h;
  }
  for (const char* h : {"", "0.0.0.0", "::", "[::]", "10.0.0.1", "128.0.0.1", "example.com", "[::1",
                        "::ffff:10.0.0.1"}) {
    EXPECT_FALSE(IsLoopbackHost(h)) << h;
  }
}

}  // namespace
}  // namespace tessera::server
