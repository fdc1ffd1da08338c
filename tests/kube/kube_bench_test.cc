// `tessera bench kube` through the real binary (env TESSERA_BIN) at a tiny size with both
// schedulers, each on its own fresh bed: the JSON has every field, every Pod is bound and no gang
// is partly bound. The figures themselves are not judged (docs/CONVENTIONS.md: performance is
// printed by benchmarks, never asserted).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>

#include "kube/testing/kube_bed.h"
#include "nlohmann/json.hpp"

namespace tessera::testing {
namespace {

using Json = nlohmann::json;

struct Output {
  int rc = -1;
  std::string out, err;
};

// Runs `cmd`, stdout and stderr apart.
Output RunCommand(const std::string& cmd) {
  Output o;
  const std::string err_file =
      (std::filesystem::temp_directory_path() / ("kube_bench_test_" + std::to_string(getpid())))
          .string();
  FILE* p = popen((cmd + " 2>" + err_file).c_str(), "r");
  if (p == nullptr) return o;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) o.out.append(buf.data(), n);
  const int status = pclose(p);
  o.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::stringstream ss;
  ss << std::ifstream(err_file).rdbuf();
  o.err = ss.str();
  std::filesystem::remove(err_file);
  return o;
}

std::string Bin() {
  const char* bin = getenv("TESSERA_BIN");
  return bin != nullptr && std::filesystem::exists(bin) ? bin : "";
}

TEST(KubeBenchTest, BothSchedulersBindEveryPodAndTheJsonHasEveryField) {
  const std::string bin = Bin();
  if (bin.empty()) GTEST_SKIP() << "TESSERA_BIN not set";
  std::string why;
  KubeBedOptions bo;
  bo.source_dir = TESSERA_SOURCE_DIR;
  const std::string bed_bin = KubeBed::FindBin(&why, bo);
  if (bed_bin.empty()) GTEST_SKIP() << "kube bed unavailable: " << why;

  const Output o = RunCommand(
      bin +
      " bench kube --nodes 20 --rack-size 4 --single 40 --gangs 4 --gang-size 2"
      " --phases latency,throughput,burst --paced-single 6 --paced-gangs 3 --paced-rate 20"
      " --raw-bindings 100 --timeout-s 240 --idle-s 60 --bed-bin " +
      bed_bin);
  ASSERT_EQ(o.rc, 0) << o.err << o.out;
  const Json j = Json::parse(o.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << o.out;
  for (const char* name : {"tessera", "kube-scheduler"}) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(j["schedulers"].contains(name)) << j.dump(2);
    const Json& sched = j["schedulers"][name];
    ASSERT_TRUE(sched["node_create_s"].is_number());
    EXPECT_GT(sched["node_create_s"].get<double>(), 0);
    // phase, single Pods, gangs
    for (const auto& [phase, singles, gangs] : {std::tuple<const char*, int, int>{"latency", 6, 3},
                                                {"throughput", 40, 4},
                                                {"burst", 40, 4}}) {
      SCOPED_TRACE(phase);
      ASSERT_TRUE(sched.contains(phase)) << sched.dump(2);
      const Json& s = sched[phase];
      for (const char* f : {"pods_bound_per_s", "wall_s", "first_bound_s"}) {
        ASSERT_TRUE(s.contains(f) && s[f].is_number()) << f << ": " << s.dump(2);
        EXPECT_GT(s[f].get<double>(), 0) << f;
      }
      for (const char* q : {"single", "gang_all_bound"}) {
        ASSERT_TRUE(s.contains(q)) << q;
        EXPECT_TRUE(s[q]["p50_ms"].is_number()) << q;
        EXPECT_TRUE(s[q]["p99_ms"].is_number()) << q;
        EXPECT_LE(s[q]["p50_ms"].get<double>(), s[q]["p99_ms"].get<double>()) << q;
      }
      EXPECT_EQ(s["single"]["n"], singles);
      EXPECT_EQ(s["gang_all_bound"]["n"], gangs);
      EXPECT_EQ(s["partially_bound_gangs"], 0);
      EXPECT_EQ(s["unbound"], 0);
      EXPECT_EQ(s["bound"], singles + gangs * 2);
      EXPECT_EQ(s["create_errors"], 0) << s["first_create_error"];
      EXPECT_TRUE(s["cpu_s"].is_object());
      EXPECT_TRUE(s["apiserver_requests"].contains("POST pods/binding")) << s["apiserver_requests"];
      // Started after its work was created, the scheduler had no probe to bind.
      EXPECT_EQ(s.contains("ready_s"), std::string(phase) != "throughput");
    }
  }
  ASSERT_TRUE(j["raw_binding_per_s"].is_number()) << j.dump(2);
  EXPECT_GT(j["raw_binding_per_s"].get<double>(), 0);
  EXPECT_TRUE(j["ratios"]["tessera_over_kube_scheduler"].is_number()) << j["ratios"];
  EXPECT_TRUE(j["ratios"]["tessera_over_raw"].is_number()) << j["ratios"];
  EXPECT_GE(j["machine"]["nproc"].get<int>(), 1);
  EXPECT_TRUE(j["machine"]["loadavg_before"].is_string());
  EXPECT_TRUE(j["machine"]["loadavg_after"].is_string());
  for (const char* t : {"pods_bound_per_s_vs_kube_scheduler", "pods_bound_per_s_vs_raw_binding",
                        "gang_all_bound_p99_ms", "partially_bound_gangs"}) {
    ASSERT_TRUE(j["targets"].contains(t)) << t;
    EXPECT_TRUE(j["targets"][t]["met"].is_boolean()) << t << ": " << j["targets"][t];
    EXPECT_TRUE(j["targets"][t].contains("target")) << t;
  }
  EXPECT_TRUE(j["targets"]["partially_bound_gangs"]["met"].get<bool>());
}

TEST(KubeBenchTest, WorkThatCannotFitIsRefusedBeforeAnyBedStarts) {
  const std::string bin = Bin();
  if (bin.empty()) GTEST_SKIP() << "TESSERA_BIN not set";
  const Output o = RunCommand(bin +
                              " bench kube --nodes 2 --single 9 --gangs 1 --gang-size 1"
                              " --phases throughput");
  EXPECT_EQ(o.rc, 2) << o.err;
  EXPECT_NE(o.err.find("the throughput work asks 17 GPUs"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("the nodes have 16"), std::string::npos) << o.err;
  const Output bad = RunCommand(bin + " bench kube --schedulers tessera,volcano --phases warmup");
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.err.find("unknown scheduler 'volcano'"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("unknown phase 'warmup'"), std::string::npos) << bad.err;
  const Output paced = RunCommand(bin + " bench kube --nodes 2 --single 1 --gangs 0 --paced-single 0 --paced-gangs 1"
                                        " --gang-size 3 --phases latency");
  EXPECT_EQ(paced.rc, 2);
  EXPECT_NE(paced.err.find("the latency work asks 24 GPUs"), std::string::npos) << paced.err;
}

}  // namespace
}  // namespace tessera::testing
