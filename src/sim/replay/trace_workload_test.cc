// Replay workloads from the trace loaders: inline samples, and the shared
// traces when present.
#include "sim/replay/trace_workload.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

namespace tessera::sim::replay {
namespace {

using ::testing::HasSubstr;

constexpr const char* kOpenbHead =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n";

TEST(PhillyWorkload, StartsAtZeroSortsAndMapsClustersToQueues) {
  auto w = ParsePhillyCsv(
      "timestamp,duration,num_gpus,gpu_time,cluster\n"
      "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n"
      "2017-10-09 06:13:03,2951.0,8,23608.0,6214e9\n"
      "2017-10-09 06:13:03,10.0,2,20.0,11cb48\n\n");
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->jobs.size(), 3u);
  EXPECT_EQ(w->queues, (std::vector<std::string>{"11cb48", "6214e9"}));
  EXPECT_EQ(w->jobs[0].submit_s, 0);
  EXPECT_EQ(w->jobs[0].gpus, 8);
  EXPECT_EQ(w->jobs[1].gpus, 2);  // same time: file order kept
  EXPECT_EQ(w->jobs[2].submit_s, 48 * 60 + 52);
  EXPECT_EQ(w->jobs[2].duration_s, 66);
  EXPECT_EQ(w->jobs[2].gpu_milli, 1000);
}

TEST(PhillyWorkload, ErrorsNameFileLineAndColumn) {
  auto w = ParsePhillyCsv(
      "timestamp,duration,num_gpus,gpu_time,cluster\n"
      "2017-10-09 07:01:55,66.0,zero,66.0,11cb48\n");
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(std::string(w.status().message()), HasSubstr("philly.csv:2: column 3 (num_gpus)"));
}

TEST(OpenbWorkload, TimeModeSkipsCpuPodsAndKeepsGpuShares) {
  auto w = ParseOpenbPodCsv(std::string(kOpenbHead) +
                            "p0,12000,16384,1,1000,,LS,Running,0,100,10\n"
                            "p1,1000,16384,0,0,,BE,Running,5,100,5\n"
                            "p2,1000,16384,2,1000,,BE,Running,20,50,\n"
                            "p3,2000,4096,1,250,,BE,Running,30,90,40\n");
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->jobs.size(), 3u);
  EXPECT_EQ(w->queues, (std::vector<std::string>{"LS", "BE"}));
  EXPECT_EQ(w->jobs[0].duration_s, 90);  // deletion - scheduled
  EXPECT_EQ(w->jobs[1].duration_s, 30);  // never scheduled: deletion - creation
  EXPECT_EQ(w->jobs[1].gpus, 2);
  EXPECT_EQ(w->jobs[2].gpus, 1);
  EXPECT_EQ(w->jobs[2].gpu_milli, 250);
  EXPECT_DOUBLE_EQ(w->jobs[2].gpu_units(), 0.25);
  EXPECT_DOUBLE_EQ(w->GpuSeconds(), 90 + 2 * 30 + 0.25 * 50);
  EXPECT_TRUE(ValidateWorkload(*w).ok());
}

TEST(OpenbWorkload, RejectsListsWithoutTimesAndBadRows) {
  auto five = ParseOpenbPodCsv("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1,1,1,1000\n");
  ASSERT_FALSE(five.ok());
  EXPECT_THAT(std::string(five.status().message()), HasSubstr("no creation_time column"));
  auto early = ParseOpenbPodCsv(std::string(kOpenbHead) + "p0,1,1,1,1000,,LS,Running,50,40,50\n");
  ASSERT_FALSE(early.ok());
  EXPECT_THAT(std::string(early.status().message()), HasSubstr("pod p0: deletion_time 40"));
  auto share = ParseOpenbPodCsv(std::string(kOpenbHead) + "p0,1,1,2,500,,LS,Running,0,40,0\n");
  ASSERT_FALSE(share.ok());
  EXPECT_THAT(std::string(share.status().message()), HasSubstr("openb.csv:2: column 5"));
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
  int64_t shared = 0;
  for (const SimJob& j : w->jobs) shared += j.gpu_milli < 1000 ? 1 : 0;
  EXPECT_EQ(shared, 3078);  // pods with num_gpu 1 and gpu_milli < 1000 in the file
}

}  // namespace
}  // namespace tessera::sim::replay
