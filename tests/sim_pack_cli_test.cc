// End to end: `tessera sim pack` on a tiny openb-format trace, through the
// real binary (env TESSERA_BIN).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "nlohmann/json.hpp"

namespace {

struct Output {
  int rc = -1;
  std::string text;
};

Output RunCommand(const std::string& cmd) {
  Output out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.text.append(buf.data(), n);
  int status = pclose(p);
  out.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

class SimPackCli : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* bin = std::getenv("TESSERA_BIN");
    if (bin == nullptr || !std::filesystem::exists(bin)) GTEST_SKIP() << "TESSERA_BIN not set";
    bin_ = bin;
    dir_ =
        std::filesystem::temp_directory_path() / ("tessera_sim_pack_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "nodes.csv") << "sn,cpu_milli,memory_mib,gpu,model\n"
                                         "n0,32000,65536,2,T4\nn1,96000,393216,8,G2\n"
                                         "n2,96000,393216,8,G2\n";
    std::ofstream pods(dir_ / "openb_pod_list_tiny.csv");
    pods << "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
            "deletion_time,scheduled_time\n";
    for (int i = 0; i < 12; ++i) {
      pods << "p" << i << "," << 2000 + 1000 * (i % 3) << ",4096," << (i % 6 == 5 ? 0 : 1) << ","
           << (i % 6 == 5 ? 0 : (i % 2 ? 1000 : 400)) << "," << (i == 3 ? "T4" : "")
           << ",LS,Running,0,,\n";
    }
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::string bin_;
  std::filesystem::path dir_;
};

TEST_F(SimPackCli, PrintsJsonKeyedByPolicyAndWritesFiles) {
  std::string cmd = bin_ + " sim pack --nodes " + (dir_ / "nodes.csv").string() + " --pods " +
                    (dir_ / "openb_pod_list_tiny.csv").string() +
                    " --policy FGD,tessera,BestFit --seeds 1-3 --lookahead all --json --csv " +
                    (dir_ / "runs.csv").string() + " --chart " + (dir_ / "alloc.svg").string();
  Output o = RunCommand(cmd);
  ASSERT_EQ(o.rc, 0) << o.text;
  auto j = nlohmann::json::parse(o.text);
  for (const char* p : {"fgd", "tessera", "best-fit"}) {
    ASSERT_TRUE(j.contains(p)) << o.text;
    EXPECT_EQ(j[p]["runs"], 3);
    EXPECT_LE(j[p]["alloc_pct_at_130"]["max"].get<double>(), 100.0);
    EXPECT_TRUE(j[p].contains("unallocated_gpus"));
    EXPECT_TRUE(j[p].contains("fragmented_gpus"));
    EXPECT_TRUE(j[p].contains("failed_pods"));
    EXPECT_TRUE(j[p].contains("held_pods"));
    EXPECT_TRUE(j[p].contains("held_failed_pods"));
    EXPECT_TRUE(j[p].contains("pods_per_s"));
  }
  EXPECT_TRUE(std::filesystem::exists(dir_ / "runs.csv"));
  std::ifstream svg(dir_ / "alloc.svg");
  std::string head;
  std::getline(svg, head);
  EXPECT_THAT(head, ::testing::HasSubstr("<svg"));
}

TEST_F(SimPackCli, BadInputFailsWithAMessage) {
  Output o = RunCommand(bin_ + " sim pack --nodes " + (dir_ / "nodes.csv").string() + " --pods " +
                        (dir_ / "openb_pod_list_tiny.csv").string() + " --policy worst-fit");
  EXPECT_NE(o.rc, 0);
  EXPECT_THAT(o.text, ::testing::HasSubstr("unknown policy"));
  std::ofstream(dir_ / "bad.csv") << "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1,1,x,1\n";
  o = RunCommand(bin_ + " sim pack --nodes " + (dir_ / "nodes.csv").string() + " --pods " +
                 (dir_ / "bad.csv").string());
  EXPECT_NE(o.rc, 0);
  EXPECT_THAT(o.text, ::testing::HasSubstr("bad.csv:2: column 4 (num_gpu)"));
  o = RunCommand(bin_ + " sim pack --nodes " + (dir_ / "nodes.csv").string() + " --pods " +
                 (dir_ / "openb_pod_list_tiny.csv").string() + " --lookahead most");
  EXPECT_NE(o.rc, 0);
  EXPECT_THAT(o.text, ::testing::HasSubstr("--lookahead: expected a percentage"));
}

}  // namespace
