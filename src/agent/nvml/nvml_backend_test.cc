// Runs NvmlBackend's real dlopen/dlsym path against the stub libraries in testdata/.
#include "agent/nvml/nvml_backend.h"

#include <cstdlib>

#include "absl/strings/match.h"
#include "agent/discovery.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::agent {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

constexpr uint64_t kMiB = 1024ULL * 1024ULL;

class NvmlBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v :
         {"TESSERA_STUB_NVML_GPUS", "TESSERA_STUB_NVML_MIG_GPU", "TESSERA_STUB_NVML_XID",
          "TESSERA_STUB_NVML_WAIT_ERROR", "TESSERA_STUB_NVML_INIT_ERROR",
          "TESSERA_STUB_NVML_LOST_GPU", "TESSERA_STUB_NVML_NO_HANDLE", "TESSERA_NVML_LIB",
          "TESSERA_STUB_NVML_NO_NUMA_ID"}) {
      unsetenv(v);
    }
  }
  ManualClock clock_{absl::FromUnixSeconds(1700000000)};
};

TEST_F(NvmlBackendTest, DiscoversEightGpuNvSwitchNode) {
  NvmlBackend nvml(clock_, STUB_NVML_PATH);
  ASSERT_TRUE(nvml.Init().ok());
  EXPECT_EQ(nvml.DriverVersion(), "550.90.07");
  EXPECT_TRUE(nvml.MissingSymbols().empty()) << nvml.MissingSymbols().front();
  ASSERT_EQ(*nvml.DeviceCount(), 8);

  absl::StatusOr<GpuInfo> info = nvml.GetDeviceInfo(3);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->index, 3);
  EXPECT_EQ(info->uuid, "GPU-5d1f0e2a-0000-4000-8000-000000000003");
  EXPECT_EQ(info->name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(info->pci_bus_id, "00000000:5D:00.0");
  EXPECT_EQ(info->minor, 3);
  EXPECT_EQ(info->numa_node, 0);
  ASSERT_TRUE(info->memory.has_value());
  EXPECT_EQ(info->memory->total_bytes, 81559 * kMiB);
  // nvmlDeviceGetMemoryInfo_v2: allocated memory, the driver's reservation apart (v1 would say
  // 3584 MiB used), as nvidia-smi's "Used".
  EXPECT_EQ(info->memory->used_bytes, 3072 * kMiB);
  EXPECT_EQ(info->memory->reserved_bytes, 512 * kMiB);
  EXPECT_EQ(info->memory->free_bytes, (81559 - 512 - 3072) * kMiB);
  ASSERT_TRUE(info->ecc_mode.has_value());
  EXPECT_TRUE(info->ecc_mode->current);
  EXPECT_TRUE(info->ecc_mode->pending);
  EXPECT_FALSE(nvml.GetDeviceInfo(2)->ecc_mode->pending);
  EXPECT_EQ(nvml.CudaDriverVersion(), "12.4");
  ASSERT_EQ(info->nvlinks.size(), 18u);
  EXPECT_TRUE(info->nvlinks[17].active);
  EXPECT_EQ(info->nvlinks[17].remote_pci_bus_id, "00000000:08:00.0");
  ASSERT_TRUE(info->mig_mode.has_value());
  EXPECT_FALSE(info->mig_mode->current);
  EXPECT_TRUE(info->mig_instances.empty());
  EXPECT_EQ(nvml.GetDeviceInfo(7)->numa_node, 1);

  absl::StatusOr<GpuMetrics> m = nvml.GetMetrics(2);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->gpu_util_percent, 20u);
  EXPECT_EQ(m->mem_copy_util_percent, 10u);
  EXPECT_EQ(m->pcie_tx_bytes_per_s, 1002u * 1024);  // NVML's KB/s, as bytes/s
  EXPECT_EQ(m->pcie_rx_bytes_per_s, 2002u * 1024);
  // NVLink: a rate needs two readings of the cumulative counters.
  EXPECT_FALSE(m->nvlink_tx_bytes_per_s.has_value());
  absl::StatusOr<GpuMetrics> again = nvml.GetMetrics(2);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->nvlink_tx_bytes_per_s, 3000u * 1024);  // 3,000 KiB in one NVML second
  EXPECT_EQ(again->nvlink_rx_bytes_per_s, 6000u * 1024);
  EXPECT_EQ(m->temperature_c, 42u);  // nvmlDeviceGetTemperatureV
  EXPECT_EQ(m->fb_used_bytes, 2048 * kMiB);
  EXPECT_DOUBLE_EQ(*m->power_watts, 302.0);
  EXPECT_EQ(m->total_energy_mj, 123456791u);
  EXPECT_EQ(m->sm_clock_mhz, 1980u);
  EXPECT_EQ(m->mem_clock_mhz, 2619u);
  EXPECT_EQ(m->throttle_reasons, 0u);
  EXPECT_EQ(m->ecc_sbe_volatile, 3u);
  EXPECT_EQ(m->ecc_dbe_volatile, 0u);
  EXPECT_EQ(m->ecc_sbe_aggregate, 13u);
  EXPECT_EQ(m->ecc_dbe_aggregate, 10u);
  EXPECT_EQ(m->remapped_rows_uncorrectable, 0u);
  EXPECT_EQ(nvml.GetMetrics(5)->remapped_rows_uncorrectable, 1u);
  EXPECT_EQ(nvml.GetMetrics(0)->throttle_reasons, kThrottleGpuIdle);

  EXPECT_EQ(*nvml.GetTopologyLevel(0, 1), TopologyLevel::kSingle);
  EXPECT_EQ(*nvml.GetTopologyLevel(0, 3), TopologyLevel::kNode);
  EXPECT_EQ(*nvml.GetTopologyLevel(2, 6), TopologyLevel::kSystem);
  EXPECT_EQ(nvml.GetTopologyLevel(0, 8).status().code(), absl::StatusCode::kInvalidArgument);

  absl::StatusOr<NodeSnapshot> snap = Discover(nvml);
  ASSERT_TRUE(snap.ok()) << snap.status();
  ASSERT_EQ(snap->topology.size, 8);
  for (int a = 0; a < 8; ++a) {
    for (int b = 0; b < 8; ++b) {
      EXPECT_EQ(snap->topology.Link(a, b), a == b ? LinkClass::kSelf : LinkClass::kNvLink)
          << a << "," << b;
    }
  }
  EXPECT_EQ(snap->topology.Level(0, 5), TopologyLevel::kSystem);
  EXPECT_TRUE(nvml.Shutdown().ok());
  EXPECT_EQ(nvml.DeviceCount().status().code(), absl::StatusCode::kFailedPrecondition);
}

// Without a NUMA id of the GPU's own and without one in sysfs (a VM), the nearest node comes
// from the driver's memory affinity, when it names exactly one.
TEST_F(NvmlBackendTest, NumaNodeFromMemoryAffinityWhenTheGpuHasNoNumaId) {
  setenv("TESSERA_STUB_NVML_NO_NUMA_ID", "1", 1);
  NvmlBackend nvml(clock_, STUB_NVML_PATH);
  ASSERT_TRUE(nvml.Init().ok());
  EXPECT_EQ(nvml.GetDeviceInfo(2)->numa_node, 0);
  EXPECT_EQ(nvml.GetDeviceInfo(5)->numa_node, 1);
  EXPECT_EQ(nvml.GetDeviceInfo(7)->numa_node, std::nullopt);  // near two nodes
}

TEST_F(NvmlBackendTest, ReportsMigInstances) {
  setenv("TESSERA_STUB_NVML_MIG_GPU", "7", 1);
  NvmlBackend nvml(clock_, STUB_NVML_PATH);
  ASSERT_TRUE(nvml.Init().ok());
  absl::StatusOr<GpuInfo> info = nvml.GetDeviceInfo(7);
  ASSERT_TRUE(info.ok());
  ASSERT_TRUE(info->mig_mode && info->mig_mode->current);
  ASSERT_EQ(info->mig_instances.size(), 2u);
  EXPECT_EQ(info->mig_instances[0].profile, "3g.40gb");
  EXPECT_EQ(info->mig_instances[1].uuid, "MIG-9a3c7b1e-0007-4000-8000-000000000001");
  EXPECT_EQ(info->mig_instances[1].gpu_instance_id, 2);
  EXPECT_EQ(info->mig_instances[1].compute_instance_id, 0);
  EXPECT_EQ(info->mig_instances[0].memory_bytes, 40192 * kMiB);
  EXPECT_FALSE(nvml.GetDeviceInfo(6)->mig_mode->current);
}

TEST_F(NvmlBackendTest, DeliversXidEventsThenTimesOut) {
  setenv("TESSERA_STUB_NVML_XID", "3:79,9:13,1:13", 1);
  NvmlBackend nvml(clock_, STUB_NVML_PATH);
  ASSERT_TRUE(nvml.Init().ok());
  absl::StatusOr<std::optional<GpuEvent>> ev = nvml.WaitForEvent(absl::Milliseconds(10));
  ASSERT_TRUE(ev.ok()) << ev.status();
  ASSERT_TRUE(ev->has_value());
  EXPECT_EQ((*ev)->kind, GpuEventKind::kXid);
  EXPECT_EQ((*ev)->xid, 79u);
  EXPECT_EQ((*ev)->gpu_uuid, "GPU-5d1f0e2a-0000-4000-8000-000000000003");
  EXPECT_EQ((*ev)->time, clock_.Now());
  // GPU 9 does not exist: skipped by the stub; GPU 1's XID 13 follows.
  ev = nvml.WaitForEvent(absl::Milliseconds(10));
  ASSERT_TRUE(ev.ok() && ev->has_value());
  EXPECT_EQ((*ev)->xid, 13u);
  EXPECT_EQ((*ev)->gpu_uuid, "GPU-5d1f0e2a-0000-4000-8000-000000000001");
  ev = nvml.WaitForEvent(absl::Milliseconds(10));
  ASSERT_TRUE(ev.ok());
  EXPECT_FALSE(ev->has_value());
}

TEST_F(NvmlBackendTest, LostGpuDuringWaitIsAnEvent) {
  setenv("TESSERA_STUB_NVML_WAIT_ERROR", "15", 1);
  NvmlBackend nvml(clock_, STUB_NVML_PATH);
  ASSERT_TRUE(nvml.Init().ok());
  absl::StatusOr<std::optional<GpuEvent>> ev = nvml.WaitForEvent(absl::Milliseconds(10));
  ASSERT_TRUE(ev.ok() && ev->has_value());
  EXPECT_EQ((*ev)->kind, GpuEventKind::kGpuLost);
  EXPECT_THAT((*ev)->detail, HasSubstr("GPU is lost"));
}

TEST_F(NvmlBackendTest, FailingWaitIsAnEvent) {
  setenv("TESSERA_STUB_NVML_WAIT_ERROR", "999", 1);
  NvmlBackend nvml(clock_, STUB_NVML_PATH);
  ASSERT_TRUE(nvml.Init().ok());
  absl::StatusOr<std::optional<GpuEvent>> ev = nvml.WaitForEvent(absl::Milliseconds(10));
  ASSERT_TRUE(ev.ok() && ev->has_value());
  EXPECT_EQ((*ev)->kind, GpuEventKind::kEventWaitFailed);
  EXPECT_THAT((*ev)->detail, HasSubstr("Unknown Error"));
}

TEST_F(NvmlBackendTest, LostGpuFailsItsQueriesOnly) {
  setenv("TESSERA_STUB_NVML_LOST_GPU", "2", 1);
  NvmlBackend nvml(clock_, STUB_NVML_PATH);
  ASSERT_TRUE(nvml.Init().ok());
  EXPECT_EQ(nvml.GetDeviceInfo(2).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(nvml.GetMetrics(2).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(nvml.GetMetrics(2).status().message()), HasSubstr("GPU is lost"));
  EXPECT_TRUE(nvml.GetMetrics(1).ok());
  absl::StatusOr<NodeSnapshot> snap = Discover(nvml);
  ASSERT_TRUE(snap.ok());
  EXPECT_THAT(snap->gpus[2].error, HasSubstr("GPU is lost"));
  EXPECT_TRUE(snap->gpus[1].error.empty());
  EXPECT_EQ(snap->topology.Link(1, 2), LinkClass::kUnknown);
}

TEST_F(NvmlBackendTest, GpuWithoutHandleDoesNotFailInit) {
  setenv("TESSERA_STUB_NVML_NO_HANDLE", "5", 1);
  setenv("TESSERA_STUB_NVML_XID", "6:79", 1);
  NvmlBackend nvml(clock_, STUB_NVML_PATH);
  ASSERT_TRUE(nvml.Init().ok());
  EXPECT_EQ(*nvml.DeviceCount(), 8);
  absl::StatusOr<GpuInfo> info = nvml.GetDeviceInfo(5);
  EXPECT_EQ(info.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(info.status().message()),
              HasSubstr("nvmlDeviceGetHandleByIndex(5): GPU is lost"));
  EXPECT_EQ(nvml.GetMetrics(5).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(nvml.GetTopologyLevel(4, 5).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(nvml.GetDeviceInfo(6).ok());
  absl::StatusOr<NodeSnapshot> snap = Discover(nvml);
  ASSERT_TRUE(snap.ok());
  EXPECT_THAT(snap->gpus[5].error, HasSubstr("GPU is lost"));
  EXPECT_EQ(snap->topology.Link(4, 6), LinkClass::kNvLink);
  // The other GPUs are still watched.
  absl::StatusOr<std::optional<GpuEvent>> ev = nvml.WaitForEvent(absl::Milliseconds(10));
  ASSERT_TRUE(ev.ok() && ev->has_value());
  EXPECT_EQ((*ev)->gpu_uuid, "GPU-5d1f0e2a-0000-4000-8000-000000000006");
}

TEST_F(NvmlBackendTest, InitErrorCarriesNvmlErrorString) {
  setenv("TESSERA_STUB_NVML_INIT_ERROR", "9", 1);
  NvmlBackend nvml(clock_, STUB_NVML_PATH);
  absl::Status st = nvml.Init();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(st.message()), HasSubstr("Driver Not Loaded"));
  EXPECT_FALSE(nvml.DeviceCount().ok());
}

TEST_F(NvmlBackendTest, MissingLibraryIsAClearError) {
  NvmlBackend nvml(clock_, "/nonexistent/libnvidia-ml.so.1");
  absl::Status st = nvml.Init();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(st.message()), HasSubstr("cannot load NVML"));
}

TEST_F(NvmlBackendTest, LibraryPathFromEnvironment) {
  setenv("TESSERA_NVML_LIB", STUB_NVML_OLD_PATH, 1);
  NvmlBackend nvml(clock_);
  EXPECT_EQ(nvml.library_path(), STUB_NVML_OLD_PATH);
  ASSERT_TRUE(nvml.Init().ok());
  EXPECT_EQ(nvml.DriverVersion(), "470.256.02");
  NvmlBackend explicit_path(clock_, STUB_NVML_PATH);
  EXPECT_EQ(explicit_path.library_path(), STUB_NVML_PATH);
}

TEST_F(NvmlBackendTest, OldDriverFallsBackAndLeavesFieldsUnavailable) {
  setenv("TESSERA_STUB_NVML_XID", "4:48", 1);
  NvmlBackend nvml(clock_, STUB_NVML_OLD_PATH);
  ASSERT_TRUE(nvml.Init().ok());  // via nvmlInit, nvmlDeviceGetCount, GetHandleByIndex
  std::vector<std::string> missing = nvml.MissingSymbols();
  for (const char* sym :
       {"nvmlErrorString", "nvmlDeviceGetNvLinkState", "nvmlDeviceGetMigMode",
        "nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetTemperatureV", "nvmlDeviceGetEccMode",
        "nvmlSystemGetCudaDriverVersion", "nvmlDeviceGetNumaNodeId",
        "nvmlDeviceGetTopologyCommonAncestor", "nvmlDeviceGetTotalEnergyConsumption",
        "nvmlDeviceGetRemappedRows", "nvmlDeviceGetSupportedEventTypes"}) {
    EXPECT_THAT(missing, Contains(std::string(sym)));
  }
  ASSERT_EQ(*nvml.DeviceCount(), 8);
  absl::StatusOr<GpuInfo> info = nvml.GetDeviceInfo(3);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->pci_bus_id, "0000:5D:00.0");  // v1 layout: reserved words are not read
  EXPECT_TRUE(info->nvlinks.empty());
  EXPECT_FALSE(info->mig_mode.has_value());
  EXPECT_EQ(info->minor, 3);
  // v1 memory info: the reservation is inside `used` and not known apart.
  ASSERT_TRUE(info->memory.has_value());
  EXPECT_EQ(info->memory->used_bytes, (3072 + 512) * kMiB);
  EXPECT_FALSE(info->memory->reserved_bytes.has_value());
  EXPECT_FALSE(info->ecc_mode.has_value());
  EXPECT_EQ(nvml.CudaDriverVersion(), "");
  absl::StatusOr<GpuMetrics> m = nvml.GetMetrics(3);
  ASSERT_TRUE(m.ok());
  EXPECT_FALSE(m->total_energy_mj.has_value());
  EXPECT_FALSE(m->remapped_rows_uncorrectable.has_value());
  EXPECT_EQ(m->temperature_c, 43u);
  EXPECT_EQ(nvml.GetTopologyLevel(0, 1).status().code(), absl::StatusCode::kUnimplemented);

  absl::StatusOr<NodeSnapshot> snap = Discover(nvml);
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(snap->topology.Link(0, 1), LinkClass::kUnknown);

  // XID via nvmlEventSetWait (v1), registered without nvmlDeviceGetSupportedEventTypes.
  absl::StatusOr<std::optional<GpuEvent>> ev = nvml.WaitForEvent(absl::Milliseconds(10));
  ASSERT_TRUE(ev.ok() && ev->has_value());
  EXPECT_EQ((*ev)->xid, 48u);
  EXPECT_EQ((*ev)->gpu_uuid, "GPU-5d1f0e2a-0000-4000-8000-000000000004");
}

TEST_F(NvmlBackendTest, OldDriverErrorsWithoutErrorString) {
  setenv("TESSERA_STUB_NVML_INIT_ERROR", "9", 1);
  NvmlBackend nvml(clock_, STUB_NVML_OLD_PATH);
  absl::Status st = nvml.Init();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(st.message()), HasSubstr("(nvml 9)"));
}

TEST(NvmlReturnToStatusTest, MapsCodes) {
  EXPECT_TRUE(NvmlReturnToStatus(0, nullptr, "x").ok());
  EXPECT_EQ(NvmlReturnToStatus(3, nullptr, "x").code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(NvmlReturnToStatus(4, nullptr, "x").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(NvmlReturnToStatus(15, nullptr, "x").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(NvmlReturnToStatus(999, nullptr, "x").code(), absl::StatusCode::kUnknown);
  // Codes added after NVML 11 are known, not "unknown".
  EXPECT_EQ(NvmlReturnToStatus(25, nullptr, "x").code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(NvmlReturnToStatus(27, nullptr, "x").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(NvmlReturnToStatus(28, nullptr, "x").code(), absl::StatusCode::kNotFound);
  auto err = +[](int) -> const char* { return "Boom"; };
  EXPECT_EQ(NvmlReturnToStatus(2, err, "nvmlFoo").message(), "nvmlFoo: Boom (nvml 2)");
}

}  // namespace
}  // namespace tessera::agent
