// Pins nvml_api.h, the project's hand-written NVML declarations, to NVIDIA's real ABI. No GPU or
// NVML header is needed: the expected sizes, offsets, values and names below were read from
// NVIDIA's nvml.h as shipped with CUDA 13.3 (NVML_API_VERSION 13; NVIDIA/go-nvml
// gen/nvml/nvml.h at commit 2f9e261fe40a7a1c54783d66805e8920564763b4), for x86-64 Linux, and are
// written out here rather than derived from nvml_api.h, so a wrong declaration fails to compile.
// When NVML changes, update the values from the new nvml.h (and cite it) together with
// nvml_api.h.
#include "agent/nvml/nvml_api.h"

#include <cstddef>
#include <set>
#include <string>
#include <type_traits>

#include "agent/nvml/nvml_backend.h"
#include "common/clock.h"
#include "gtest/gtest.h"

namespace tessera::agent {
namespace {

// --- Structs: size and every field's offset (nvml.h typedefs of the same name). ---
static_assert(sizeof(nvmlMemory_t) == 24);
static_assert(offsetof(nvmlMemory_t, total) == 0);
static_assert(offsetof(nvmlMemory_t, free) == 8);
static_assert(offsetof(nvmlMemory_t, used) == 16);

// nvmlMemory_v2_t: version, total, reserved, free, used; the version is
// NVML_STRUCT_VERSION(Memory, 2) = sizeof | 2 << 24.
static_assert(sizeof(nvmlMemory_v2_t) == 40);
static_assert(offsetof(nvmlMemory_v2_t, version) == 0);
static_assert(offsetof(nvmlMemory_v2_t, total) == 8);
static_assert(offsetof(nvmlMemory_v2_t, reserved) == 16);
static_assert(offsetof(nvmlMemory_v2_t, free) == 24);
static_assert(offsetof(nvmlMemory_v2_t, used) == 32);
// nvmlFieldValue_t: fieldId, scopeId, timestamp, latencyUsec, valueType, nvmlReturn, value (a
// union of at most 8 bytes); the NVLink data-throughput field ids and the value types used.
static_assert(sizeof(nvmlValue_t) == 8);
static_assert(sizeof(nvmlFieldValue_t) == 40);
static_assert(offsetof(nvmlFieldValue_t, fieldId) == 0);
static_assert(offsetof(nvmlFieldValue_t, scopeId) == 4);
static_assert(offsetof(nvmlFieldValue_t, timestamp) == 8);
static_assert(offsetof(nvmlFieldValue_t, latencyUsec) == 16);
static_assert(offsetof(nvmlFieldValue_t, valueType) == 24);
static_assert(offsetof(nvmlFieldValue_t, nvmlReturn) == 28);
static_assert(offsetof(nvmlFieldValue_t, value) == 32);
static_assert(NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX == 138);
static_assert(NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX == 139);
static_assert(NVML_VALUE_TYPE_UNSIGNED_INT == 1 && NVML_VALUE_TYPE_UNSIGNED_LONG == 2 &&
              NVML_VALUE_TYPE_UNSIGNED_LONG_LONG == 3);
// nvmlPcieUtilCounter_t (nvml.h: NVML_PCIE_UTIL_TX_BYTES = 0, NVML_PCIE_UTIL_RX_BYTES = 1).
static_assert(NVML_PCIE_UTIL_TX_BYTES == 0 && NVML_PCIE_UTIL_RX_BYTES == 1);
static_assert(sizeof(nvmlPcieUtilCounter_t) == 4);
static_assert(nvmlMemory_v2 == 0x02000028u);

// nvmlPciInfo_t (the _v2/_v3 layout).
static_assert(sizeof(nvmlPciInfo_t) == 68);
static_assert(offsetof(nvmlPciInfo_t, busIdLegacy) == 0);
static_assert(offsetof(nvmlPciInfo_t, domain) == 16);
static_assert(offsetof(nvmlPciInfo_t, bus) == 20);
static_assert(offsetof(nvmlPciInfo_t, device) == 24);
static_assert(offsetof(nvmlPciInfo_t, pciDeviceId) == 28);
static_assert(offsetof(nvmlPciInfo_t, pciSubSystemId) == 32);
static_assert(offsetof(nvmlPciInfo_t, busId) == 36);

static_assert(sizeof(nvmlUtilization_t) == 8);
static_assert(offsetof(nvmlUtilization_t, gpu) == 0);
static_assert(offsetof(nvmlUtilization_t, memory) == 4);

static_assert(sizeof(nvmlEventData_t) == 32);
static_assert(offsetof(nvmlEventData_t, device) == 0);
static_assert(offsetof(nvmlEventData_t, eventType) == 8);
static_assert(offsetof(nvmlEventData_t, eventData) == 16);
static_assert(offsetof(nvmlEventData_t, gpuInstanceId) == 24);
static_assert(offsetof(nvmlEventData_t, computeInstanceId) == 28);

// nvmlTemperature_v1_t: version, sensorType, temperature; NVML_STRUCT_VERSION(Temperature, 1).
static_assert(sizeof(nvmlTemperature_v1_t) == 12);
static_assert(offsetof(nvmlTemperature_v1_t, version) == 0);
static_assert(offsetof(nvmlTemperature_v1_t, sensorType) == 4);
static_assert(offsetof(nvmlTemperature_v1_t, temperature) == 8);
static_assert(nvmlTemperature_v1 == 0x0100000Cu);

// Enums are int-sized in the C ABI.
static_assert(sizeof(nvmlReturn_t) == 4 && sizeof(nvmlEnableState_t) == 4);
static_assert(sizeof(nvmlGpuTopologyLevel_t) == 4 && sizeof(nvmlTemperatureSensors_t) == 4);

// --- Buffer sizes and limits. ---
static_assert(NVML_DEVICE_UUID_V2_BUFFER_SIZE == 96);
static_assert(NVML_DEVICE_NAME_V2_BUFFER_SIZE == 96);
static_assert(NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE == 32);
static_assert(NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE == 16);
static_assert(NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE == 80);
static_assert(NVML_NVLINK_MAX_LINKS == 36);  // 18 in NVML 12.x headers

// --- nvmlReturn_t. ---
static_assert(NVML_SUCCESS == 0 && NVML_ERROR_UNINITIALIZED == 1);
static_assert(NVML_ERROR_INVALID_ARGUMENT == 2 && NVML_ERROR_NOT_SUPPORTED == 3);
static_assert(NVML_ERROR_NO_PERMISSION == 4 && NVML_ERROR_ALREADY_INITIALIZED == 5);
static_assert(NVML_ERROR_NOT_FOUND == 6 && NVML_ERROR_INSUFFICIENT_SIZE == 7);
static_assert(NVML_ERROR_INSUFFICIENT_POWER == 8 && NVML_ERROR_DRIVER_NOT_LOADED == 9);
static_assert(NVML_ERROR_TIMEOUT == 10 && NVML_ERROR_IRQ_ISSUE == 11);
static_assert(NVML_ERROR_LIBRARY_NOT_FOUND == 12 && NVML_ERROR_FUNCTION_NOT_FOUND == 13);
static_assert(NVML_ERROR_CORRUPTED_INFOROM == 14 && NVML_ERROR_GPU_IS_LOST == 15);
static_assert(NVML_ERROR_RESET_REQUIRED == 16 && NVML_ERROR_OPERATING_SYSTEM == 17);
static_assert(NVML_ERROR_LIB_RM_VERSION_MISMATCH == 18 && NVML_ERROR_IN_USE == 19);
static_assert(NVML_ERROR_MEMORY == 20 && NVML_ERROR_NO_DATA == 21);
static_assert(NVML_ERROR_VGPU_ECC_NOT_SUPPORTED == 22 && NVML_ERROR_INSUFFICIENT_RESOURCES == 23);
static_assert(NVML_ERROR_FREQ_NOT_SUPPORTED == 24 && NVML_ERROR_ARGUMENT_VERSION_MISMATCH == 25);
static_assert(NVML_ERROR_DEPRECATED == 26 && NVML_ERROR_NOT_READY == 27);
static_assert(NVML_ERROR_GPU_NOT_FOUND == 28 && NVML_ERROR_INVALID_STATE == 29);
static_assert(NVML_ERROR_RESET_TYPE_NOT_SUPPORTED == 30 && NVML_ERROR_UNKNOWN == 999);

// --- Other enums and bit masks. ---
static_assert(NVML_FEATURE_DISABLED == 0 && NVML_FEATURE_ENABLED == 1);
static_assert(NVML_TEMPERATURE_GPU == 0);
static_assert(NVML_CLOCK_GRAPHICS == 0 && NVML_CLOCK_SM == 1 && NVML_CLOCK_MEM == 2);
static_assert(NVML_MEMORY_ERROR_TYPE_CORRECTED == 0 && NVML_MEMORY_ERROR_TYPE_UNCORRECTED == 1);
static_assert(NVML_VOLATILE_ECC == 0 && NVML_AGGREGATE_ECC == 1);
static_assert(NVML_DEVICE_MIG_DISABLE == 0 && NVML_DEVICE_MIG_ENABLE == 1);
static_assert(nvmlEventTypeSingleBitEccError == 0x1ULL);
static_assert(nvmlEventTypeDoubleBitEccError == 0x2ULL);
static_assert(nvmlEventTypeXidCriticalError == 0x8ULL);
// nvmlGpuTopologyLevel_t: INTERNAL 0, SINGLE 10, MULTIPLE 20, HOSTBRIDGE 30, NODE 40, SYSTEM 50.
static_assert(static_cast<int>(TopologyLevel::kInternal) == 0);
static_assert(static_cast<int>(TopologyLevel::kSingle) == 10);
static_assert(static_cast<int>(TopologyLevel::kMultiple) == 20);
static_assert(static_cast<int>(TopologyLevel::kHostBridge) == 30);
static_assert(static_cast<int>(TopologyLevel::kNode) == 40);
static_assert(static_cast<int>(TopologyLevel::kSystem) == 50);
// nvmlClocksEventReason* bits, as gpu_info.h's kThrottle*.
static_assert(kThrottleGpuIdle == 0x1 && kThrottleApplicationsClocksSetting == 0x2);
static_assert(kThrottleSwPowerCap == 0x4 && kThrottleHwSlowdown == 0x8);
static_assert(kThrottleSyncBoost == 0x10 && kThrottleSwThermalSlowdown == 0x20);
static_assert(kThrottleHwThermalSlowdown == 0x40 && kThrottleHwPowerBrakeSlowdown == 0x80);
static_assert(kThrottleDisplayClockSetting == 0x100);

// --- Entry-point signatures (parameter and return types as nvml.h declares them). ---
static_assert(std::is_same_v<nvmlDeviceGetMemoryInfo_v2_fn,
                             nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_v2_t*)>);
static_assert(std::is_same_v<nvmlDeviceGetMigDeviceHandleByIndex_fn,
                             nvmlReturn_t (*)(nvmlDevice_t, unsigned int, nvmlDevice_t*)>);
static_assert(std::is_same_v<nvmlDeviceGetMigMode_fn,
                             nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, unsigned int*)>);
static_assert(std::is_same_v<nvmlDeviceGetEccMode_fn, nvmlReturn_t (*)(nvmlDevice_t, int*, int*)>);
static_assert(std::is_same_v<nvmlEventSetWait_fn,
                             nvmlReturn_t (*)(nvmlEventSet_t, nvmlEventData_t*, unsigned int)>);
static_assert(std::is_same_v<nvmlDeviceGetRemappedRows_fn,
                             nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, unsigned int*,
                                              unsigned int*, unsigned int*)>);
static_assert(std::is_same_v<nvmlSystemGetCudaDriverVersion_fn, nvmlReturn_t (*)(int*)>);

// Every entry point NvmlBackend may look up, as nvml.h (CUDA 13.3) declares it: the current
// versioned names and the older names it still declares for old drivers.
const std::set<std::string>& RealEntryPoints() {
  static const std::set<std::string> kNames = {
      "nvmlInit_v2",
      "nvmlInit",
      "nvmlShutdown",
      "nvmlErrorString",
      "nvmlSystemGetDriverVersion",
      "nvmlSystemGetCudaDriverVersion_v2",
      "nvmlSystemGetCudaDriverVersion",
      "nvmlDeviceGetCount_v2",
      "nvmlDeviceGetCount",
      "nvmlDeviceGetHandleByIndex_v2",
      "nvmlDeviceGetHandleByIndex",
      "nvmlDeviceGetUUID",
      "nvmlDeviceGetName",
      "nvmlDeviceGetMemoryInfo_v2",
      "nvmlDeviceGetMemoryInfo",
      "nvmlDeviceGetEccMode",
      "nvmlDeviceGetPciInfo_v3",
      "nvmlDeviceGetPciInfo_v2",
      "nvmlDeviceGetPciInfo",
      "nvmlDeviceGetMinorNumber",
      "nvmlDeviceGetNumaNodeId",
      "nvmlDeviceGetMemoryAffinity",
      "nvmlDeviceGetNvLinkState",
      "nvmlDeviceGetNvLinkRemotePciInfo_v2",
      "nvmlDeviceGetNvLinkRemotePciInfo",
      "nvmlDeviceGetTopologyCommonAncestor",
      "nvmlDeviceGetMigMode",
      "nvmlDeviceGetMaxMigDeviceCount",
      "nvmlDeviceGetMigDeviceHandleByIndex",
      "nvmlDeviceGetGpuInstanceId",
      "nvmlDeviceGetComputeInstanceId",
      "nvmlDeviceGetUtilizationRates",
      "nvmlDeviceGetPcieThroughput",
      "nvmlDeviceGetFieldValues",
      "nvmlDeviceGetTemperatureV",
      "nvmlDeviceGetTemperature",
      "nvmlDeviceGetPowerUsage",
      "nvmlDeviceGetTotalEnergyConsumption",
      "nvmlDeviceGetClockInfo",
      "nvmlDeviceGetCurrentClocksEventReasons",
      "nvmlDeviceGetCurrentClocksThrottleReasons",
      "nvmlDeviceGetTotalEccErrors",
      "nvmlDeviceGetRemappedRows",
      "nvmlEventSetCreate",
      "nvmlEventSetFree",
      "nvmlDeviceGetSupportedEventTypes",
      "nvmlDeviceRegisterEvents",
      "nvmlEventSetWait_v2",
      "nvmlEventSetWait",
  };
  return kNames;
}

// Both stubs export only real names, and the backend resolves only real names: a misspelt
// versioned name (say "nvmlDeviceGetMemoryInfoV2") would silently fall back on a real driver.
TEST(NvmlApiTest, BackendResolvesOnlyNamesNvmlDeclares) {
  ManualClock clock(absl::FromUnixSeconds(1700000000));
  for (const char* lib : {STUB_NVML_PATH, STUB_NVML_OLD_PATH}) {
    NvmlBackend nvml(clock, lib);
    ASSERT_TRUE(nvml.Init().ok()) << lib;
    std::vector<std::string> resolved = nvml.ResolvedSymbols();
    EXPECT_GE(resolved.size(), 20u) << lib;
    for (const std::string& name : resolved) {
      EXPECT_EQ(RealEntryPoints().count(name), 1u) << name << " is not in nvml.h (" << lib << ")";
    }
  }
}

// The current stub is a current driver: the backend finds the newest name of every entry point.
TEST(NvmlApiTest, CurrentDriverResolvesVersionedNames) {
  ManualClock clock(absl::FromUnixSeconds(1700000000));
  NvmlBackend nvml(clock, STUB_NVML_PATH);
  ASSERT_TRUE(nvml.Init().ok());
  std::vector<std::string> resolved = nvml.ResolvedSymbols();
  std::set<std::string> got(resolved.begin(), resolved.end());
  for (const char* name :
       {"nvmlInit_v2", "nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex_v2",
        "nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetPciInfo_v3",
        "nvmlDeviceGetNvLinkRemotePciInfo_v2", "nvmlEventSetWait_v2", "nvmlDeviceGetTemperatureV",
        "nvmlSystemGetCudaDriverVersion_v2", "nvmlDeviceGetEccMode"}) {
    EXPECT_EQ(got.count(name), 1u) << name;
  }
}

}  // namespace
}  // namespace tessera::agent
