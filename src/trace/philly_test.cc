#include "trace/philly.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

namespace tessera::trace {
namespace {

using ::testing::HasSubstr;

constexpr const char* kHead = "timestamp,duration,num_gpus,gpu_time,cluster\n";

TEST(PhillyTest, ParsesRowsInFileOrder) {
  auto jobs = ParsePhillyJobs(std::string(kHead) +
                                  "2017-10-09 07:01:55,66.0,1,66.0,11cb48\r\n"
                                  "2017-10-09 06:13:03,2951.0,8,23608.0,6214e9\n\n",
                              "philly.csv");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0], (PhillyJob{1507532515, 66.0, 1, 66.0, "11cb48"}));
  EXPECT_EQ((*jobs)[1].num_gpus, 8);
  EXPECT_EQ((*jobs)[1].timestamp - (*jobs)[0].timestamp, -(48 * 60 + 52));
}

TEST(PhillyTest, ErrorsNameFileLineAndColumn) {
  struct Case {
    std::string text, want;
  };
  std::vector<Case> cases = {
      {std::string(kHead) + "2017-10-09 07:01:55,66.0,zero,66.0,a\n",
       "philly.csv:2: column 3 (num_gpus): expected an integer, got \"zero\""},
      {std::string(kHead) + "2017-10-09 07:01:55,66.0,0,66.0,a\n",
       "philly.csv:2: column 3 (num_gpus): must be in 1.."},
      {std::string(kHead) + "2017-10-09 07:01:55,-1,1,66.0,a\n",
       "philly.csv:2: column 2 (duration): must be in 0.."},
      {std::string(kHead) + "2017-13-09 07:01:55,1,1,66.0,a\n",
       "philly.csv:2: column 1 (timestamp): \"2017-13-09 07:01:55\" is not YYYY-MM-DD HH:MM:SS"},
      {std::string(kHead) + "2017-10-09 07:01:55,1,1,66.0\n",
       "philly.csv:2: expected 5 columns, got 4"},
      {std::string(kHead) + "2017-10-09 07:01:55,1,1,66.0,\n",
       "philly.csv:2: column 5 (cluster): must not be empty"},
      {"time,duration\n", "philly.csv:1: unexpected header"},
      {kHead, "philly.csv: no jobs"},
  };
  for (const Case& c : cases) {
    auto jobs = ParsePhillyJobs(c.text, "philly.csv");
    ASSERT_FALSE(jobs.ok()) << c.text;
    EXPECT_THAT(std::string(jobs.status().message()), HasSubstr(c.want)) << c.text;
  }
  EXPECT_EQ(LoadPhillyJobs("/nonexistent/philly.csv").status().code(), absl::StatusCode::kNotFound);
}

TEST(PhillyTest, ParseDateTime) {
  int64_t t = 0;
  EXPECT_TRUE(ParseDateTime("1970-01-02 00:00:01", &t));
  EXPECT_EQ(t, 86401);
  EXPECT_TRUE(ParseDateTime("2000-03-01 00:00:00", &t));  // after a leap day
  EXPECT_EQ(t, 951868800);
  EXPECT_FALSE(ParseDateTime("2017-13-01 00:00:00", &t));
  EXPECT_FALSE(ParseDateTime("2017-10-09T07:01:55", &t));
  EXPECT_FALSE(ParseDateTime("2017-10-09 07:01", &t));
}

TEST(PhillyTest, SharedTrace) {
  const char* d = std::getenv("TESSERA_SHARED_DIR");
  std::string path = d ? std::string(d) + "/traces/philly-pollux/philly.csv" : "";
  if (path.empty() || !std::filesystem::exists(path)) {
    GTEST_SKIP() << "TESSERA_SHARED_DIR/traces/philly-pollux is absent";
  }
  auto jobs = LoadPhillyJobs(path);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  // 82,247 data rows (the README's 82,248 counts the header).
  EXPECT_EQ(jobs->size(), 82247u);
  double gpu_s = 0;
  for (const PhillyJob& j : *jobs) gpu_s += j.num_gpus * j.duration_s;
  EXPECT_NEAR(gpu_s, 3.521e9, 0.01e9);
}

}  // namespace
}  // namespace tessera::trace
