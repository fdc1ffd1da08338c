// SqliteStore specifics beyond the conformance suite: opening bad directories, counting commits.
#include "store/sqlite_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace tessera::store {
namespace {

using ::testing::HasSubstr;

SqliteStoreOptions NoCreate() {
  SqliteStoreOptions o;
  o.create_if_missing = false;
  return o;
}

class SqliteStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = getenv("TMPDIR");
    std::string tmpl = absl::StrCat(tmp ? tmp : "/tmp", "/tessera_sqlite_XXXXXX");
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::string root_;
};

TEST_F(SqliteStoreTest, MissingDirWithoutCreateIsNotFound) {
  auto s = SqliteStore::Open(root_ + "/nope", NoCreate());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.status().message(), HasSubstr("/nope"));
}

TEST_F(SqliteStoreTest, MissingParentIsAnError) {
  auto s = SqliteStore::Open(root_ + "/a/b/c");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.status().message(), HasSubstr("cannot create"));
}

TEST_F(SqliteStoreTest, FileInsteadOfDirIsAnError) {
  std::ofstream(root_ + "/file") << "x";
  auto s = SqliteStore::Open(root_ + "/file");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.status().message(), HasSubstr("not a directory"));
}

TEST_F(SqliteStoreTest, CorruptDatabaseIsDataLoss) {
  std::filesystem::create_directory(root_ + "/d");
  std::ofstream(root_ + "/d/store.db") << std::string(8192, 'g');
  auto s = SqliteStore::Open(root_ + "/d");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kDataLoss) << s.status();
  EXPECT_THAT(s.status().message(), HasSubstr("store.db"));
}

TEST_F(SqliteStoreTest, ForeignSqliteDatabaseIsDataLoss) {
  std::filesystem::create_directory(root_ + "/d");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((root_ + "/d/store.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE photos(id INTEGER)", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto s = SqliteStore::Open(root_ + "/d");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kDataLoss) << s.status();
  EXPECT_THAT(s.status().message(), HasSubstr("not Tessera's"));
}

TEST_F(SqliteStoreTest, SecondOpenOfTheSameDirIsRefused) {
  auto first = SqliteStore::Open(root_ + "/d");
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = SqliteStore::Open(root_ + "/d");
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(), HasSubstr("in use"));
  first->reset();
  EXPECT_TRUE(SqliteStore::Open(root_ + "/d").ok()) << "the lock goes with the store";
}

TEST_F(SqliteStoreTest, ReopenWithoutCreateFindsExistingData) {
  {
    auto s = SqliteStore::Open(root_ + "/d");
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*s)->Create("/k", "v").ok());
  }
  auto s = SqliteStore::Open(root_ + "/d", NoCreate());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->Get("/k")->value, "v");
}

// DurableCommits counts SQLite COMMITs (fsyncs): one per committed Txn or batch and per
// compaction, none for a Txn that wrote nothing.
TEST_F(SqliteStoreTest, DurableCommitsCountWhatWasCommitted) {
  auto s = SqliteStore::Open(root_ + "/d");
  ASSERT_TRUE(s.ok()) << s.status();
  SqliteStore& st = **s;
  const int64_t c0 = st.DurableCommits();
  ASSERT_TRUE(st.Create("/a", "1").ok());
  ASSERT_TRUE(st.Create("/b", "2").ok());
  absl::StatusOr<int64_t> rev = st.Put("/a", "3");
  ASSERT_TRUE(rev.ok());
  EXPECT_EQ(st.DurableCommits(), c0 + 3);
  EXPECT_FALSE(st.Create("/a", "again").ok());  // exists: nothing written
  EXPECT_EQ(st.DurableCommits(), c0 + 3);
  ASSERT_TRUE(st.Compact(*rev - 1).ok());
  EXPECT_EQ(st.DurableCommits(), c0 + 4);
}

// Commits do not copy the write-ahead log back into the database: a thread of the store's own
// does, so the log stays small and the database file grows. (Its connection used to take the
// database for a rollback-journal one, and every checkpoint did nothing, until the writer's own
// backstop copied a log of 50,000 pages inside a commit.)
TEST_F(SqliteStoreTest, TheWriteAheadLogIsCheckpointedInTheBackground) {
  auto s = SqliteStore::Open(root_ + "/db", {});
  ASSERT_TRUE(s.ok()) << s.status();
  const std::string db = root_ + "/db/store.db";
  auto db_size = [&] { return std::filesystem::file_size(db); };
  const auto empty = db_size();
  const std::string value(2000, 'x');
  for (int i = 0; i < 300; ++i) {
    ASSERT_TRUE((*s)->Put(absl::StrCat("/k/", i), value).ok());
  }
  // No more writes: only the checkpointer (every 200 ms) can grow the file now.
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (db_size() <= empty && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
  EXPECT_GT(db_size(), 300u * 2000u);
}

}  // namespace
}  // namespace tessera::store
