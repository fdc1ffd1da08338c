#include "agent/agent_command.h"

#include <sstream>

#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tessera::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Example(const std::string& name) {
  return std::string(TESSERA_SOURCE_DIR) + "/deploy/fake-gpus/" + name;
}

struct Result {
  int code;
  std::string out;
  std::string err;
};

Result RunGpus(const GpusOptions& o, Clock& clock) {
  std::ostringstream out, err;
  int code = RunGpusCommand(o, clock, out, err);
  return {code, out.str(), err.str()};
}

GpusOptions Fake(const std::string& file) {
  GpusOptions o;
  o.backend = "fake";
  o.fake_config = Example(file);
  return o;
}

TEST(GpusCommandTest, TableShowsGpusMigAndTopology) {
  ManualClock clock(absl::FromUnixSeconds(1750000000));
  Result r = RunGpus(Fake("a100-mig.yaml"), clock);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Backend: fake   Driver: 535.183.01   GPUs: 8"));
  EXPECT_THAT(r.out, HasSubstr("GPU-0c6e9d52-1f4a-4b3c-a7d8-5e6f70819203"));
  EXPECT_THAT(r.out, HasSubstr("NVIDIA A100-SXM4-80GB"));
  EXPECT_THAT(r.out, HasSubstr("81920 MiB"));
  EXPECT_THAT(r.out, HasSubstr("enabled"));
  EXPECT_THAT(r.out,
              HasSubstr("GPU 1  3g.40gb  MIG-1d2c3b4a-0001-4000-8000-000000000000  40192 MiB"));
  EXPECT_THAT(r.out, HasSubstr("GPU0  X     NV    NV"));
}

TEST(GpusCommandTest, TableForPcieNode) {
  ManualClock clock;
  Result r = RunGpus(Fake("pcie-4.yaml"), clock);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("GPU0  X     NV    SYS   SYS   0"));
  EXPECT_THAT(r.out, HasSubstr("GpuIdle"));
}

TEST(GpusCommandTest, JsonIsParseableAndComplete) {
  ManualClock clock;
  GpusOptions o = Fake("h100-nvswitch-8.yaml");
  o.output = "json";
  Result r = RunGpus(o, clock);
  ASSERT_EQ(r.code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["backend"], "fake");
  ASSERT_EQ(j["gpus"].size(), 8u);
  EXPECT_EQ(j["gpus"][4]["uuid"], "GPU-4a8c1f36-98c1-4b7e-9d0a-1c2b3d4e5f04");
  EXPECT_EQ(j["gpus"][4]["numa_node"], 1);
  EXPECT_EQ(j["gpus"][4]["memory"]["total_bytes"], 81559ULL * 1024 * 1024);
  EXPECT_EQ(j["gpus"][4]["metrics"]["temperature_c"], 33);
  EXPECT_TRUE(j["gpus"][4]["mig"].is_null());
  EXPECT_EQ(j["topology"]["links"][0][1], "nvlink");
  EXPECT_EQ(j["topology"]["links"][0][0], "self");
  EXPECT_EQ(j["topology"]["pcie_levels"][0][1], "SINGLE");
  EXPECT_EQ(j["topology"]["pcie_levels"][0][7], "SYSTEM");
}

TEST(GpusCommandTest, Prometheus) {
  ManualClock clock;
  GpusOptions o = Fake("pcie-4.yaml");
  o.output = "prometheus";
  o.hostname = "gpu-node-3";
  Result r = RunGpus(o, clock);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n"));
  EXPECT_THAT(r.out, HasSubstr("DCGM_FI_DEV_GPU_TEMP{gpu=\"3\",UUID=\"GPU-7b2e0c11-5a3d-4f60-8e21-"
                               "0a1b2c3d4e03\",pci_bus_id=\"00000000:CA:00.0\",device=\"nvidia3\","
                               "modelName=\"NVIDIA A100 80GB "
                               "PCIe\",Hostname=\"gpu-node-3\"} 30\n"));
}

TEST(GpusCommandTest, WatchPrintsEventsAndHealthTransitions) {
  ManualClock clock(absl::FromUnixSeconds(1750000000));
  GpusOptions o = Fake("h100-nvswitch-8.yaml");
  o.watch = absl::Seconds(120);
  o.ignore_xids = {};
  Result r = RunGpus(o, clock);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("event xid 13 (Graphics Engine Exception, not hardware)"));
  EXPECT_THAT(r.out, HasSubstr("GPU-4a8c1f36-98c1-4b7e-9d0a-1c2b3d4e5f03  healthy -> unhealthy: "
                               "XID 79: GPU has fallen off the bus"));
  EXPECT_THAT(r.out, HasSubstr("healthy -> unhealthy: temperature 97C at or above 95C"));
  EXPECT_THAT(r.out, HasSubstr("GPU-4a8c1f36-98c1-4b7e-9d0a-1c2b3d4e5f03  unhealthy -> healthy: "
                               "GPU reset"));
  EXPECT_THAT(r.out, HasSubstr("GPU-4a8c1f36-98c1-4b7e-9d0a-1c2b3d4e5f02  unhealthy  (double-bit "
                               "ECC error)"));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(1750000000) + absl::Seconds(120));
}

TEST(GpusCommandTest, WatchWithIgnoredXid) {
  ManualClock clock;
  GpusOptions o = Fake("h100-nvswitch-8.yaml");
  o.watch = absl::Seconds(60);
  o.ignore_xids = {79};
  Result r = RunGpus(o, clock);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, Not(HasSubstr("XID 79: GPU has fallen off the bus")));
}

TEST(GpusCommandTest, NvmlBackendAgainstStub) {
  ManualClock clock;
  GpusOptions o;
  o.nvml_lib = STUB_NVML_PATH;
  o.output = "json";
  Result r = RunGpus(o, clock);
  ASSERT_EQ(r.code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["backend"], "nvml");
  EXPECT_EQ(j["driver_version"], "550.90.07");
  EXPECT_EQ(j["gpus"].size(), 8u);
  EXPECT_EQ(j["topology"]["links"][2][6], "nvlink");
  // What gpu-check compares with nvidia-smi's <cuda_version>, <ecc_mode> and <fb_memory_usage>.
  EXPECT_EQ(j["cuda_driver_version"], "12.4");
  EXPECT_EQ(j["gpus"][2]["ecc_mode"]["enabled"], true);
  EXPECT_EQ(j["gpus"][2]["ecc_mode"]["pending"], false);
  EXPECT_EQ(j["gpus"][2]["memory"]["reserved_bytes"], 512ULL * 1024 * 1024);
  EXPECT_EQ(j["gpus"][2]["memory"]["used_bytes"], 2048ULL * 1024 * 1024);
}

TEST(GpusCommandTest, UsageErrorsNameTheFlag) {
  ManualClock clock;
  GpusOptions o;
  o.backend = "fake";
  Result r = RunGpus(o, clock);
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--fake-config: required"));
  o.fake_config = "/nonexistent.yaml";
  r = RunGpus(o, clock);
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("cannot read fake GPU config /nonexistent.yaml"));
  o.backend = "cuda";
  EXPECT_THAT(RunGpus(o, clock).err, HasSubstr("--backend: expected nvml or fake, got 'cuda'"));
  o = Fake("pcie-4.yaml");
  o.output = "yaml";
  EXPECT_EQ(RunGpus(o, clock).code, 2);
}

TEST(GpusCommandTest, MissingDriverIsABackendFailure) {
  ManualClock clock;
  GpusOptions o;
  o.nvml_lib = "/nonexistent/libnvidia-ml.so.1";
  Result r = RunGpus(o, clock);
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("GPU backend nvml: cannot load NVML"));
}

}  // namespace
}  // namespace tessera::agent
