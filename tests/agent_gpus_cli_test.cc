// Runs the tessera binary's `gpus` subcommand as a real process (TESSERA_BIN) against a fake
// node description and against the stub NVML library.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace {

using ::testing::HasSubstr;

struct Output {
  int status;
  std::string out;
};

Output Tessera(const std::string& args) {
  const char* bin = std::getenv("TESSERA_BIN");
  std::string cmd = std::string(bin ? bin : "tessera") + " " + args + " 2>&1";
  Output o{-1, ""};
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return o;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) o.out.append(buf, n);
  int st = pclose(p);
  o.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return o;
}

TEST(GpusCliTest, FakeNodeAsJson) {
  Output o = Tessera(std::string("gpus --backend fake --fake-config ") + TESSERA_SOURCE_DIR +
                     "/deploy/fake-gpus/h100-nvswitch-8.yaml -o json");
  ASSERT_EQ(o.status, 0) << o.out;
  nlohmann::json j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j["gpus"].size(), 8u);
  EXPECT_EQ(j["topology"]["links"][0][7], "nvlink");
}

TEST(GpusCliTest, StubNvmlTable) {
  Output o = Tessera(std::string("gpus --nvml-lib ") + STUB_NVML_PATH);
  ASSERT_EQ(o.status, 0) << o.out;
  EXPECT_THAT(o.out, HasSubstr("Backend: nvml   Driver: 550.90.07   GPUs: 8"));
  EXPECT_THAT(o.out, HasSubstr("GPU-5d1f0e2a-0000-4000-8000-000000000007"));
}

TEST(GpusCliTest, WatchWithCommaSeparatedIgnoreList) {
  Output o = Tessera(std::string("gpus --backend fake --fake-config ") + TESSERA_SOURCE_DIR +
                     "/deploy/fake-gpus/pcie-4.yaml --watch 1s --ignore-xid 48,79");
  ASSERT_EQ(o.status, 0) << o.out;
  EXPECT_THAT(o.out, HasSubstr("Watching GPU events for 1s"));
}

TEST(GpusCliTest, MissingDriverFails) {
  Output o = Tessera("gpus --nvml-lib /nonexistent/libnvidia-ml.so.1");
  EXPECT_EQ(o.status, 1);
  EXPECT_THAT(o.out, HasSubstr("cannot load NVML"));
}

TEST(GpusCliTest, BadFlagValue) {
  Output o = Tessera("gpus --backend cuda");
  EXPECT_NE(o.status, 0);
  EXPECT_THAT(o.out, HasSubstr("--backend"));
}

}  // namespace
