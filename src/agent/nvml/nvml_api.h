// The small subset of NVML's C API that Tessera uses, declared from NVIDIA's NVML API reference
// so that nothing at build time depends on NVML headers or libraries. Layouts and numeric values
// must match the driver's ABI exactly; only add what is used, with the documented types.
// nvml_api_test.cc pins every size, offset, value and entry-point name below to NVIDIA's nvml.h
// (CUDA 13.3, NVML_API_VERSION 13); change both together.
//
// The stub library in testdata/ implements these same declarations.
#pragma once

#include <cstdint>

extern "C" {

typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct nvmlEventSet_st* nvmlEventSet_t;
typedef int nvmlReturn_t;  // an enum in nvml.h; int-sized in the C ABI

enum : int {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_ALREADY_INITIALIZED = 5,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_INSUFFICIENT_POWER = 8,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_IRQ_ISSUE = 11,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_CORRUPTED_INFOROM = 14,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_RESET_REQUIRED = 16,
  NVML_ERROR_OPERATING_SYSTEM = 17,
  NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
  NVML_ERROR_IN_USE = 19,
  NVML_ERROR_MEMORY = 20,
  NVML_ERROR_NO_DATA = 21,
  NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
  NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
  NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
  NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,  // a versioned struct this driver does not know
  NVML_ERROR_DEPRECATED = 26,
  NVML_ERROR_NOT_READY = 27,
  NVML_ERROR_GPU_NOT_FOUND = 28,
  NVML_ERROR_INVALID_STATE = 29,
  NVML_ERROR_RESET_TYPE_NOT_SUPPORTED = 30,
  NVML_ERROR_UNKNOWN = 999,
};

// Buffer sizes (NVML_DEVICE_*_V2_BUFFER_SIZE and friends).
enum : unsigned {
  NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96,
  NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96,
  NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE = 32,
  NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE = 16,
  NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE = 80,
  NVML_NVLINK_MAX_LINKS = 36,  // 18 up to NVML 12.x; the driver answers past a GPU's last link
};

// NVML_STRUCT_VERSION(Name, ver): a versioned struct's first field holds its size and version.
#define TESSERA_NVML_STRUCT_VERSION(type, ver) \
  (static_cast<unsigned int>(sizeof(type)) | (static_cast<unsigned int>(ver) << 24U))

// nvmlDeviceGetMemoryInfo (v1): `used` includes the memory the driver reserves.
typedef struct {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

// nvmlDeviceGetMemoryInfo_v2: `reserved` apart, `used` is allocated memory only (what nvidia-smi
// and DCGM report as used). `version` must be nvmlMemory_v2.
typedef struct {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_v2_t;
inline constexpr unsigned int nvmlMemory_v2 = TESSERA_NVML_STRUCT_VERSION(nvmlMemory_v2_t, 2);

// nvmlPciInfo_t as of the _v2/_v3 entry points.
typedef struct {
  char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} nvmlPciInfo_t;

typedef struct {
  unsigned int gpu;
  unsigned int memory;
} nvmlUtilization_t;

// nvmlEventData_t as filled by nvmlEventSetWait_v2 (the v1 call fills the first three fields).
typedef struct {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlEventData_t;

typedef int nvmlEnableState_t;  // NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1
typedef int nvmlGpuTopologyLevel_t;
typedef int nvmlTemperatureSensors_t;

// nvmlDeviceGetTemperatureV (nvmlDeviceGetTemperature is deprecated as of NVML 13).
typedef struct {
  unsigned int version;  // nvmlTemperature_v1
  nvmlTemperatureSensors_t sensorType;
  int temperature;
} nvmlTemperature_v1_t;
inline constexpr unsigned int nvmlTemperature_v1 =
    TESSERA_NVML_STRUCT_VERSION(nvmlTemperature_v1_t, 1);
typedef int nvmlClockType_t;
typedef int nvmlMemoryErrorType_t;
typedef int nvmlEccCounterType_t;

enum : int {
  NVML_FEATURE_DISABLED = 0,
  NVML_FEATURE_ENABLED = 1,
  NVML_TEMPERATURE_GPU = 0,
  NVML_CLOCK_GRAPHICS = 0,
  NVML_CLOCK_SM = 1,
  NVML_CLOCK_MEM = 2,
  NVML_MEMORY_ERROR_TYPE_CORRECTED = 0,
  NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1,
  NVML_VOLATILE_ECC = 0,
  NVML_AGGREGATE_ECC = 1,
  NVML_DEVICE_MIG_DISABLE = 0,
  NVML_DEVICE_MIG_ENABLE = 1,
  NVML_PCIE_UTIL_TX_BYTES = 0,
  NVML_PCIE_UTIL_RX_BYTES = 1,
  // Cumulative NVLink data (payload) sent and received, in KiB, since the driver loaded.
  NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX = 138,
  NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX = 139,
  NVML_VALUE_TYPE_UNSIGNED_INT = 1,
  NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
  NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
};

// nvmlEventType* bits.
inline constexpr unsigned long long nvmlEventTypeSingleBitEccError = 0x1ULL;
inline constexpr unsigned long long nvmlEventTypeDoubleBitEccError = 0x2ULL;
inline constexpr unsigned long long nvmlEventTypeXidCriticalError = 0x8ULL;

// Function pointer types, one per entry point used.
typedef nvmlReturn_t (*nvmlInit_fn)(void);
typedef nvmlReturn_t (*nvmlShutdown_fn)(void);
typedef const char* (*nvmlErrorString_fn)(nvmlReturn_t);
typedef nvmlReturn_t (*nvmlSystemGetDriverVersion_fn)(char*, unsigned int);
typedef nvmlReturn_t (*nvmlSystemGetCudaDriverVersion_fn)(int*);  // 13000 = CUDA 13.0
typedef nvmlReturn_t (*nvmlDeviceGetCount_fn)(unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetHandleByIndex_fn)(unsigned int, nvmlDevice_t*);
typedef nvmlReturn_t (*nvmlDeviceGetString_fn)(nvmlDevice_t, char*, unsigned int);  // UUID, Name
typedef nvmlReturn_t (*nvmlDeviceGetUInt_fn)(nvmlDevice_t, unsigned int*);  // minor, power, NUMA
typedef int nvmlAffinityScope_t;  // NVML_AFFINITY_SCOPE_NODE = 0, NVML_AFFINITY_SCOPE_SOCKET = 1
// The NUMA nodes nearest the GPU as a bit set of nodeSetSize unsigned longs (nvidia-smi topo -m's
// "NUMA Affinity").
typedef nvmlReturn_t (*nvmlDeviceGetMemoryAffinity_fn)(nvmlDevice_t, unsigned int, unsigned long*,
                                                       nvmlAffinityScope_t);
typedef nvmlReturn_t (*nvmlDeviceGetULL_fn)(nvmlDevice_t, unsigned long long*);  // energy, throttle
typedef nvmlReturn_t (*nvmlDeviceGetMemoryInfo_fn)(nvmlDevice_t, nvmlMemory_t*);
typedef nvmlReturn_t (*nvmlDeviceGetMemoryInfo_v2_fn)(nvmlDevice_t, nvmlMemory_v2_t*);
typedef nvmlReturn_t (*nvmlDeviceGetPciInfo_fn)(nvmlDevice_t, nvmlPciInfo_t*);
typedef nvmlReturn_t (*nvmlDeviceGetNvLinkState_fn)(nvmlDevice_t, unsigned int, nvmlEnableState_t*);
typedef nvmlReturn_t (*nvmlDeviceGetNvLinkRemotePciInfo_fn)(nvmlDevice_t, unsigned int,
                                                            nvmlPciInfo_t*);
typedef nvmlReturn_t (*nvmlDeviceGetTopologyCommonAncestor_fn)(nvmlDevice_t, nvmlDevice_t,
                                                               nvmlGpuTopologyLevel_t*);
typedef nvmlReturn_t (*nvmlDeviceGetMigMode_fn)(nvmlDevice_t, unsigned int*, unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetEccMode_fn)(nvmlDevice_t, nvmlEnableState_t*,
                                                nvmlEnableState_t*);
typedef nvmlReturn_t (*nvmlDeviceGetMigDeviceHandleByIndex_fn)(nvmlDevice_t, unsigned int,
                                                               nvmlDevice_t*);
typedef nvmlReturn_t (*nvmlDeviceGetUtilizationRates_fn)(nvmlDevice_t, nvmlUtilization_t*);
// nvmlPcieUtilCounter_t: the bytes sent (TX) or received (RX) over PCIe in a 20 ms window, in
// KB/s (1 KB granularity).
typedef int nvmlPcieUtilCounter_t;
typedef nvmlReturn_t (*nvmlDeviceGetPcieThroughput_fn)(nvmlDevice_t, nvmlPcieUtilCounter_t,
                                                       unsigned int*);
// nvmlValue_t / nvmlFieldValue_t (nvmlDeviceGetFieldValues): one field of one device; the value's
// member is chosen by valueType (NVML_VALUE_TYPE_*).
typedef union {
  double dVal;
  int siVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  long long sllVal;
  unsigned short usVal;
} nvmlValue_t;
typedef struct {
  unsigned int fieldId;  // NVML_FI_*
  unsigned int scopeId;  // a link for per-link fields; UINT_MAX: all links
  long long timestamp;   // when the value was read, in microseconds
  long long latencyUsec;
  int valueType;            // nvmlValueType_t
  nvmlReturn_t nvmlReturn;  // this field's own result
  nvmlValue_t value;
} nvmlFieldValue_t;
typedef nvmlReturn_t (*nvmlDeviceGetFieldValues_fn)(nvmlDevice_t, int, nvmlFieldValue_t*);
typedef nvmlReturn_t (*nvmlDeviceGetTemperature_fn)(nvmlDevice_t, nvmlTemperatureSensors_t,
                                                    unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetTemperatureV_fn)(nvmlDevice_t, nvmlTemperature_v1_t*);
typedef nvmlReturn_t (*nvmlDeviceGetClockInfo_fn)(nvmlDevice_t, nvmlClockType_t, unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetTotalEccErrors_fn)(nvmlDevice_t, nvmlMemoryErrorType_t,
                                                       nvmlEccCounterType_t, unsigned long long*);
typedef nvmlReturn_t (*nvmlDeviceGetRemappedRows_fn)(nvmlDevice_t, unsigned int*, unsigned int*,
                                                     unsigned int*, unsigned int*);
typedef nvmlReturn_t (*nvmlEventSetCreate_fn)(nvmlEventSet_t*);
typedef nvmlReturn_t (*nvmlEventSetFree_fn)(nvmlEventSet_t);
typedef nvmlReturn_t (*nvmlDeviceRegisterEvents_fn)(nvmlDevice_t, unsigned long long,
                                                    nvmlEventSet_t);
typedef nvmlReturn_t (*nvmlEventSetWait_fn)(nvmlEventSet_t, nvmlEventData_t*, unsigned int);

}  // extern "C"
