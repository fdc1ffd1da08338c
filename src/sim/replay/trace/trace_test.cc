// Trace readers: inline samples, and the shared traces when present.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "sim/replay/trace/openb_reader.h"
#include "sim/replay/trace/philly_reader.h"

namespace tessera::sim::replay {
namespace {

TEST(PhillyReader, ParsesAndSortsRows) {
  auto w = ParsePhillyCsv(
      "timestamp,duration,num_gpus,gpu_time,cluster\n"
      "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n"
      "2017-10-09 06:13:03,2951.0,8,23608.0,6214e9\n"
      "2017-10-09 06:13:03,10.0,2,20.0,11cb48\n\n");
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->jobs.size(), 3u);
  EXPECT_EQ(w->queues.size(), 2u);
  EXPECT_EQ(w->jobs[0].submit_s, 0);
  EXPECT_EQ(w->jobs[0].gpus, 8);
  EXPECT_EQ(w->jobs[1].gpus, 2);  // same time: file order kept
  EXPECT_EQ(w->jobs[2].submit_s, 48 * 60 + 52);
  EXPECT_EQ(w->jobs[2].duration_s, 66);
}

TEST(PhillyReader, ErrorsNameLineAndColumn) {
  auto w = ParsePhillyCsv(
      "timestamp,duration,num_gpus,gpu_time,cluster\n"
      "2017-10-09 07:01:55,66.0,zero,66.0,11cb48\n");
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("line 2: num_gpus"), std::string::npos);
  int64_t t;
  EXPECT_TRUE(ParseDateTime("1970-01-02 00:00:01", &t));
  EXPECT_EQ(t, 86401);
  EXPECT_FALSE(ParseDateTime("2017-13-01 00:00:00", &t));
}

TEST(OpenbReader, TimeModeSkipsCpuPods) {
  auto w = ParseOpenbPodCsv(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
      "deletion_time,scheduled_time\n"
      "p0,12000,16384,1,1000,,LS,Running,0,100,10\n"
      "p1,1000,16384,0,0,,BE,Running,5,100,5\n"
      "p2,1000,16384,2,1000,,BE,Running,20,50,\n");
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->jobs.size(), 2u);
  EXPECT_EQ(w->jobs[0].duration_s, 90);
  EXPECT_EQ(w->jobs[1].duration_s, 30);
  EXPECT_EQ(w->jobs[1].gpus, 2);
}

std::string SharedTraces() {
  const char* d = std::getenv("TESSERA_SHARED_DIR");
  if (d == nullptr) return "";
  std::string p = std::string(d) + "/traces";
  return std::filesystem::exists(p) ? p : "";
}

TEST(SharedTraces, PhillyFullTrace) {
  std::string dir = SharedTraces();
  if (dir.empty()) GTEST_SKIP() << "TESSERA_SHARED_DIR/traces is absent; skipping the Philly trace";
  auto w = ReadPhillyTrace(dir + "/philly-pollux/philly.csv");
  ASSERT_TRUE(w.ok()) << w.status();
  // The file has 82,247 data rows (the README's 82,248 counts the header).
  EXPECT_EQ(w->jobs.size(), 82247u);
  EXPECT_EQ(w->queues.size(), 15u);
  EXPECT_NEAR(w->GpuSeconds(), 3.521e9, 0.01e9);
}

TEST(SharedTraces, OpenbDefaultPodList) {
  std::string dir = SharedTraces();
  if (dir.empty()) GTEST_SKIP() << "TESSERA_SHARED_DIR/traces is absent; skipping openb";
  auto w = ReadOpenbPodList(dir + "/alibaba-gpu-v2023/csv/openb_pod_list_default.csv");
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->jobs.size(), 8152u - 1088u);
}

}  // namespace
}  // namespace tessera::sim::replay
