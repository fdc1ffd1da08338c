// The serving replicas' metrics file (replica_metrics.h): what is read, what is refused and why.
#include "agent/replica_metrics.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

namespace tessera::agent {
namespace {

class ReplicaMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = "/tmp/replica_metrics_test_XXXXXX";
    ASSERT_NE(mkdtemp(dir_.data()), nullptr);
    path_ = dir_ + "/metrics.json";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& text) { std::ofstream(path_) << text; }
  std::string dir_, path_;
};

TEST_F(ReplicaMetricsTest, ReadsBothFieldsAndStampsTheFileTime) {
  const absl::Time before = absl::Now() - absl::Seconds(2);
  Write(R"({"p99LatencyMs": 140.5, "rps": 32, "extra": "ignored"})");
  absl::StatusOr<std::optional<ReplicaMetrics>> m = ReadReplicaMetrics(path_);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE(m->has_value());
  EXPECT_DOUBLE_EQ(*(*m)->p99_latency_ms, 140.5);
  EXPECT_DOUBLE_EQ(*(*m)->rps, 32);
  EXPECT_GE((*m)->time, before);
  EXPECT_LE((*m)->time, absl::Now() + absl::Seconds(2));
}

TEST_F(ReplicaMetricsTest, AMissingFileIsNoReadingAndFieldsAreOptional) {
  absl::StatusOr<std::optional<ReplicaMetrics>> m = ReadReplicaMetrics(path_);
  ASSERT_TRUE(m.ok());
  EXPECT_FALSE(m->has_value());
  Write(R"({"rps": 3})");
  m = ReadReplicaMetrics(path_);
  ASSERT_TRUE(m.ok() && m->has_value());
  EXPECT_FALSE((*m)->p99_latency_ms.has_value());
}

TEST_F(ReplicaMetricsTest, MalformedFilesAreRefusedNamingTheField) {
  Write(R"({"p99LatencyMs": "fast"})");
  EXPECT_EQ(ReadReplicaMetrics(path_).status().message(),
            "p99LatencyMs: must be a non-negative number");
  Write(R"({"p99LatencyMs": 10, "rps": -1})");
  EXPECT_EQ(ReadReplicaMetrics(path_).status().message(), "rps: must be a non-negative number");
  Write(R"({"p99LatencyMs": 10)");
  EXPECT_EQ(ReadReplicaMetrics(path_).status().message(), "file: not a JSON object");
  Write("[1, 2]");
  EXPECT_EQ(ReadReplicaMetrics(path_).status().message(), "file: not a JSON object");
  Write(std::string(5000, ' '));
  EXPECT_EQ(ReadReplicaMetrics(path_).status().message(), "file: larger than 4096 bytes");
}

}  // namespace
}  // namespace tessera::agent
