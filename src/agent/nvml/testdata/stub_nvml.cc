// A stand-in for libnvidia-ml.so.1, built only for tests: it exports the NVML entry points that
// NvmlBackend uses and simulates an 8-GPU NVSwitch H100 node (DGX-like: 18 NVLinks per GPU to 4
// NVSwitches, GPUs 0-3 on NUMA node 0 and 4-7 on node 1, pairs behind shared PCIe switches).
//
// Built twice from this file:
//  - libstub_nvml.so: a current driver; exports only the versioned entry points (_v2/_v3).
//  - libstub_nvml_old.so (-DSTUB_NVML_OLD_DRIVER): an old driver; only the unversioned entry
//    points, the v1 nvmlPciInfo_t layout, and no nvmlErrorString, NVLink, MIG, NUMA, topology,
//    energy, remapped rows, supported-event query, memory info v2, TemperatureV, ECC mode or CUDA
//    version, to exercise NvmlBackend's fallbacks.
//
// State is read from the environment at nvmlInit:
//  TESSERA_STUB_NVML_GPUS=N            number of GPUs (default 8, at most 8)
//  TESSERA_STUB_NVML_MIG_GPU=i         GPU i is in MIG mode with two 3g.40gb instances
//  TESSERA_STUB_NVML_XID=g:x[,g:x...]  XID events that nvmlEventSetWait delivers, in order
//  TESSERA_STUB_NVML_WAIT_ERROR=code   nvmlEventSetWait returns `code` once the XIDs are delivered
//  TESSERA_STUB_NVML_INIT_ERROR=code   nvmlInit fails with `code`
//  TESSERA_STUB_NVML_LOST_GPU=i        queries on GPU i return NVML_ERROR_GPU_IS_LOST
//  TESSERA_STUB_NVML_NO_HANDLE=i       nvmlDeviceGetHandleByIndex(i) returns NVML_ERROR_GPU_IS_LOST
// Test-only code: the process-wide state below is what a real driver library has too.
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <utility>

#include "agent/nvml/nvml_api.h"

struct nvmlDevice_st {
  int gpu = -1;  // physical GPU index
  int mig = -1;  // MIG slot, -1 for the physical GPU
};

struct nvmlEventSet_st {
  unsigned long long mask[8] = {};
};

namespace {

constexpr int kMaxGpus = 8;
constexpr int kMigSlots = 7;
// MIG and NVSwitch calls are absent from the STUB_NVML_OLD_DRIVER build.
[[maybe_unused]] constexpr int kMigInstances = 2;
constexpr unsigned long long kMiB = 1024ULL * 1024ULL;
// What the driver sets aside on each GPU: v1 memory info counts it as used, v2 apart.
constexpr unsigned long long kReservedMiB = 512;
// An H100 has 18 NVLinks; NVML answers INVALID_ARGUMENT past the last (up to its 36-link maximum).
[[maybe_unused]] constexpr unsigned int kNvLinksPerGpu = 18;
const char* const kBusIds[kMaxGpus] = {"00000000:18:00.0", "00000000:2A:00.0", "00000000:3A:00.0",
                                       "00000000:5D:00.0", "00000000:9A:00.0", "00000000:AB:00.0",
                                       "00000000:BA:00.0", "00000000:DB:00.0"};
[[maybe_unused]] const char* const kNvSwitchBusIds[4] = {"00000000:05:00.0", "00000000:06:00.0",
                                                         "00000000:07:00.0", "00000000:08:00.0"};

struct State {
  bool initialized = false;
  int gpus = kMaxGpus;
  int mig_gpu = -1;
  int lost_gpu = -1;
  int no_handle_gpu = -1;
  int wait_error = 0;
  std::deque<std::pair<int, unsigned long long>> xids;
  nvmlDevice_st devices[kMaxGpus];
  nvmlDevice_st migs[kMaxGpus][kMigSlots];
};

State& S() {
  static State s;
  return s;
}

int EnvInt(const char* name, int dflt) {
  const char* v = std::getenv(name);
  return (v && *v) ? std::atoi(v) : dflt;
}

int CheckDevice(nvmlDevice_t d) {
  State& s = S();
  if (!s.initialized) return NVML_ERROR_UNINITIALIZED;
  if (d == nullptr || d->gpu < 0 || d->gpu >= s.gpus) return NVML_ERROR_INVALID_ARGUMENT;
  if (d->gpu == s.lost_gpu) return NVML_ERROR_GPU_IS_LOST;
  return NVML_SUCCESS;
}

int CopyString(const std::string& v, char* buf, unsigned int len) {
  if (buf == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (v.size() + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(buf, v.c_str(), v.size() + 1);
  return NVML_SUCCESS;
}

std::string Uuid(const nvmlDevice_st& d) {
  char buf[64];
  if (d.mig < 0) {
    std::snprintf(buf, sizeof(buf), "GPU-5d1f0e2a-0000-4000-8000-00000000000%d", d.gpu);
  } else {
    std::snprintf(buf, sizeof(buf), "MIG-9a3c7b1e-000%d-4000-8000-00000000000%d", d.gpu, d.mig);
  }
  return buf;
}

// Which NVSwitch a link of a GPU ends at: links 0-4 -> switch 0, 5-8 -> 1, 9-12 -> 2, 13-17 -> 3.
[[maybe_unused]] int SwitchOfLink(unsigned int link) {
  return link < 5 ? 0 : link < 9 ? 1 : link < 13 ? 2 : 3;
}

int DoInit() {
  State& s = S();
  int err = EnvInt("TESSERA_STUB_NVML_INIT_ERROR", 0);
  if (err != 0) return err;
  s.gpus = EnvInt("TESSERA_STUB_NVML_GPUS", kMaxGpus);
  if (s.gpus < 0 || s.gpus > kMaxGpus) s.gpus = kMaxGpus;
  s.mig_gpu = EnvInt("TESSERA_STUB_NVML_MIG_GPU", -1);
  s.lost_gpu = EnvInt("TESSERA_STUB_NVML_LOST_GPU", -1);
  s.no_handle_gpu = EnvInt("TESSERA_STUB_NVML_NO_HANDLE", -1);
  s.wait_error = EnvInt("TESSERA_STUB_NVML_WAIT_ERROR", 0);
  s.xids.clear();
  if (const char* v = std::getenv("TESSERA_STUB_NVML_XID"); v && *v) {
    std::string spec = v;
    size_t pos = 0;
    while (pos < spec.size()) {
      size_t end = spec.find(',', pos);
      if (end == std::string::npos) end = spec.size();
      std::string item = spec.substr(pos, end - pos);
      size_t colon = item.find(':');
      if (colon != std::string::npos) {
        s.xids.emplace_back(std::atoi(item.substr(0, colon).c_str()),
                            std::strtoull(item.substr(colon + 1).c_str(), nullptr, 10));
      }
      pos = end + 1;
    }
  }
  for (int g = 0; g < kMaxGpus; ++g) {
    s.devices[g] = nvmlDevice_st{g, -1};
    for (int m = 0; m < kMigSlots; ++m) s.migs[g][m] = nvmlDevice_st{g, m};
  }
  s.initialized = true;
  return NVML_SUCCESS;
}

int DoGetCount(unsigned int* count) {
  if (!S().initialized) return NVML_ERROR_UNINITIALIZED;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *count = static_cast<unsigned int>(S().gpus);
  return NVML_SUCCESS;
}

int DoGetHandle(unsigned int index, nvmlDevice_t* device) {
  State& s = S();
  if (!s.initialized) return NVML_ERROR_UNINITIALIZED;
  if (device == nullptr || index >= static_cast<unsigned int>(s.gpus)) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (static_cast<int>(index) == s.no_handle_gpu) return NVML_ERROR_GPU_IS_LOST;
  *device = &s.devices[index];
  return NVML_SUCCESS;
}

int DoEventWait(nvmlEventSet_t set, nvmlEventData_t* data, bool v2) {
  State& s = S();
  if (!s.initialized) return NVML_ERROR_UNINITIALIZED;
  if (set == nullptr || data == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  while (!s.xids.empty()) {
    auto [gpu, xid] = s.xids.front();
    s.xids.pop_front();
    if (gpu < 0 || gpu >= s.gpus || !(set->mask[gpu] & nvmlEventTypeXidCriticalError)) continue;
    data->device = &s.devices[gpu];
    data->eventType = nvmlEventTypeXidCriticalError;
    data->eventData = xid;
    if (v2) {
      data->gpuInstanceId = 0xFFFFFFFF;
      data->computeInstanceId = 0xFFFFFFFF;
    }
    return NVML_SUCCESS;
  }
  if (s.wait_error != 0) return s.wait_error;
  return NVML_ERROR_TIMEOUT;
}

}  // namespace

extern "C" {

#define STUB_EXPORT __attribute__((visibility("default")))

#ifdef STUB_NVML_OLD_DRIVER
STUB_EXPORT nvmlReturn_t nvmlInit(void) { return DoInit(); }
STUB_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int* c) { return DoGetCount(c); }
STUB_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int i, nvmlDevice_t* d) {
  return DoGetHandle(i, d);
}
// The original nvmlPciInfo_t: a 16-byte busId followed by ids and four reserved words.
struct PciInfoV1 {
  char busId[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  unsigned int reserved0, reserved1, reserved2, reserved3;
};
STUB_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t d, PciInfoV1* pci) {
  if (int r = CheckDevice(d); r != NVML_SUCCESS) return r;
  std::memset(pci, 0, sizeof(*pci));
  // v1 drivers reported the short form.
  std::snprintf(pci->busId, sizeof(pci->busId), "0000:%s", kBusIds[d->gpu] + 9);
  pci->reserved0 = pci->reserved1 = pci->reserved2 = pci->reserved3 = 0xDEADBEEF;
  return NVML_SUCCESS;
}
STUB_EXPORT nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t* data, unsigned int) {
  return DoEventWait(set, data, false);
}
#else
STUB_EXPORT nvmlReturn_t nvmlInit_v2(void) { return DoInit(); }
STUB_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* c) { return DoGetCount(c); }
STUB_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t* d) {
  return DoGetHandle(i, d);
}
STUB_EXPORT const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    case NVML_ERROR_TIMEOUT:
      return "Timeout";
    default:
      return "Unknown Error";
  }
}
STUB_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t* pci) {
  if (int r = CheckDevice(d); r != NVML_SUCCESS) return r;
  std::memset(pci, 0, sizeof(*pci));
  std::snprintf(pci->busId, sizeof(pci->busId), "%s", kBusIds[d->gpu]);
  std::snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "0000:%s", kBusIds[d->gpu] + 9);
  pci->pciDeviceId = 0x233010DE;
  return NVML_SUCCESS;
}
// TESSERA_STUB_NVML_NO_NUMA_ID=1: no NUMA id of the GPU's own (an x86 GPU, as the driver says
// NOT_SUPPORTED there); the nearest node then comes from nvmlDeviceGetMemoryAffinity.
STUB_EXPORT nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t d, unsigned int* node) {
  if (int r = CheckDevice(d); r != NVML_SUCCESS) return r;
  if (EnvInt("TESSERA_STUB_NVML_NO_NUMA_ID", 0) == 1) return NVML_ERROR_NOT_SUPPORTED;
  *node = d->gpu < 4 ? 0 : 1;
  return NVML_SUCCESS;
}
// GPUs 0-3 near node 0, 4-5 near node 1, 6-7 near both (no single node).
STUB_EXPORT nvmlReturn_t nvmlDeviceGetMemoryAffinity(nvmlDevice_t d, unsigned int size,
                                                     unsigned long* nodes, int scope) {
  if (int r = CheckDevice(d); r != NVML_SUCCESS) return r;
  if (size < 1 || scope != 0) return NVML_ERROR_INVALID_ARGUMENT;
  for (unsigned int i = 0; i < size; ++i) nodes[i] = 0;
  nodes[0] = d->gpu < 4 ? 1UL : d->gpu < 6 ? 2UL : 3UL;
  return NVML_SUCCESS;
}
STUB_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned int link,
                                                  nvmlEnableState_t* active) {
  if (int r = CheckDevice(d); r != NVML_SUCCESS) return r;
  if (link >= kNvLinksPerGpu) return NVML_ERROR_INVALID_ARGUMENT;
  *active = NVML_FEATURE_ENABLED;
  return NVML_SUCCESS;
}
STUB_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t d, unsigned int link,
                                                             nvmlPciInfo_t* pci) {
  if (int r = CheckDevice(d); r != NVML_SUCCESS) return r;
  if (link >= kNvLinksPerGpu) return NVML_ERROR_INVALID_ARGUMENT;
  std::memset(pci, 0, sizeof(*pci));
  std::snprintf(pci->busId, sizeof(pci->busId), "%s", kNvSwitchBusIds[SwitchOfLink(link)]);
  return NVML_SUCCESS;
}
STUB_EXPORT nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b,
                                                             nvmlGpuTopologyLevel_t* level) {
  if (int r = CheckDevice(a); r != NVML_SUCCESS) return r;
  if (int r = CheckDevice(b); r != NVML_SUCCESS) return r;
  if (a->gpu == b->gpu) {
    *level = 0;
  } else if (a->gpu / 2 == b->gpu / 2) {
    *level = 10;  // SINGLE: the pair shares a PCIe switch
  } else if (a->gpu / 4 == b->gpu / 4) {
    *level = 40;  // NODE
  } else {
    *level = 50;  // SYSTEM
  }
  return NVML_SUCCESS;
}
STUB_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int* current,
                                              unsigned int* pending) {
  if (int r = CheckDevice(d); r != NVML_SUCCESS) return r;
  *current = *pending = d->gpu == S().mig_gpu ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
  return NVML_SUCCESS;
}
STUB_EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t d, unsigned int* count) {
  if (int r = CheckDevice(d); r != NVML_SUCCESS) return r;
  *count = kMigSlots;
  return NVML_SUCCESS;
}
STUB_EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t d, unsigned int index,
                                                             nvmlDevice_t* mig) {
  if (int r = CheckDevice(d); r != NVML_SUCCESS) return r;
  if (d->gpu != S().mig_gpu) return NVML_ERROR_INVALID_ARGUMENT;
  if (index >= kMigSlots) return NVML_ERROR_INVALID_ARGUMENT;
  if (index >= kMigInstances) return NVML_ERROR_NOT_FOUND;
  *mig = &S().migs[d->gpu][index];
  return NVML_SUCCESS;
}
STUB_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t d, unsigned int* id) {
  if (int r = CheckDevice(d); r != NVML_SUCCESS) return r;
  if (d->mig < 0) return NVML_ERROR_INVALID_ARGUMENT;
  *id = d->mig == 0 ? 1 : 2;
  return NVML_SUCCESS;
}
STUB_EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t d, unsigned int* id) {
  if (int r = CheckDevice(d); r != NVML_SUCCESS) return r;
  if (d->mig < 0) return NVML_ERROR_INVALID_ARGUMENT;
  *id = 0;
  return NVML_SUCCESS;
}
STUB_EXPORT nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d,
                                                             unsigned long long* mj) {
  if (int r = CheckDevice(d); r != NVML_SUCCESS) return r;
  *mj = 123456789ULL + d->gpu;
  return NVML_SUCCESS;
}
STUB_EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t d, unsigned int* corr,
                                                   unsigned int* unc, unsigned int* pending,
                                                   unsigned int* failure) {
  if (int r = CheckDevice(d); r != NVML_SUCCESS) return r;
  *corr = 0;
  *unc = d->gpu == 5 ? 1 : 0;
  *pending = 0;
  *failure = 0;
  return NVML_SUCCESS;
}
STUB_EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t d,
                                                          unsigned long long* types) {
  if (int r = CheckDevice(d); r != NVML_SUCCESS) return r;
  *types = nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError |
           nvmlEventTypeXidCriticalError;
  return NVML_SUCCESS;
}
// Allocated memory apart from the reservation; a struct version it does not know is refused as
// a real driver does.
STUB_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t* mem) {
  if (int r = CheckDevice(d); r != NVML_SUCCESS) return r;
  if (mem == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (mem->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  mem->total = (d->mig >= 0 ? 40192 : 81559) * kMiB;
  mem->reserved = d->mig >= 0 ? 0 : kReservedMiB * kMiB;
  mem->used = (d->mig >= 0 ? 0 : 1024ULL * d->gpu) * kMiB;
  mem->free = mem->total - mem->reserved - mem->used;
  return NVML_SUCCESS;
}
STUB_EXPORT nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t d, nvmlTemperature_v1_t* t) {
  if (int r = CheckDevice(d); r != NVML_SUCCESS) return r;
  if (t == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (t->version != nvmlTemperature_v1) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  if (t->sensorType != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
  t->temperature = 40 + d->gpu;
  return NVML_SUCCESS;
}
STUB_EXPORT nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t d, nvmlEnableState_t* current,
                                              nvmlEnableState_t* pending) {
  if (int r = CheckDevice(d); r != NVML_SUCCESS) return r;
  *current = NVML_FEATURE_ENABLED;
  // GPU 2 has ECC turned off for the next reset.
  *pending = d->gpu == 2 ? NVML_FEATURE_DISABLED : NVML_FEATURE_ENABLED;
  return NVML_SUCCESS;
}
STUB_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* version) {
  if (!S().initialized) return NVML_ERROR_UNINITIALIZED;
  if (version == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *version = 12040;  // driver 550: CUDA 12.4
  return NVML_SUCCESS;
}
STUB_EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data,
                                             unsigned int) {
  return DoEventWait(set, data, true);
}
#endif  // STUB_NVML_OLD_DRIVER

STUB_EXPORT nvmlReturn_t nvmlShutdown(void) {
  if (!S().initialized) return NVML_ERROR_UNINITIALIZED;
  S().initialized = false;
  return NVML_SUCCESS;
}
STUB_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* buf, unsigned int len) {
#ifdef STUB_NVML_OLD_DRIVER
  return CopyString("470.256.02", buf, len);
#else
  return CopyString("550.90.07", buf, len);
#endif
}
STUB_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char* buf, unsigned int len) {
  if (int r = CheckDevice(d); r != NVML_SUCCESS) return r;
  return CopyString(Uuid(*d), buf, len);
}
STUB_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char* buf, unsigned int len) {
  if (int r = CheckDevice(d); r != NVML_SUCCESS) return r;
  std::string name = "NVIDIA H100 80GB HBM3";
  if (d->mig >= 0) name += " MIG 3g.40gb";
  return CopyString(name, buf, len);
}
STUB_EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t d, unsigned int* minor) {
  if (int r = CheckDevice(d); r != NVML_SUCCESS) return r;
  *minor = static_cast<unsigned int>(d->gpu);
  return NVML_SUCCESS;
}
STUB_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t* mem) {
  if (int r = CheckDevice(d); r != NVML_SUCCESS) return r;
  mem->total = (d->mig >= 0 ? 40192 : 81559) * kMiB;
  // v1: the reservation counts as used.
  mem->used = (d->mig >= 0 ? 0 : 1024ULL * d->gpu + kReservedMiB) * kMiB;
  mem->free = mem->total - mem->used;
  return NVML_SUCCESS;
}
STUB_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t* u) {
  if (int r = CheckDevice(d); r != NVML_SUCCESS) return r;
  u->gpu = 10u * d->gpu;
  u->memory = 5u * d->gpu;
  return NVML_SUCCESS;
}
STUB_EXPORT nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t d, nvmlPcieUtilCounter_t c,
                                                     unsigned int* kbps) {
  if (int r = CheckDevice(d); r != NVML_SUCCESS) return r;
  if (c != NVML_PCIE_UTIL_TX_BYTES && c != NVML_PCIE_UTIL_RX_BYTES) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  *kbps = (c == NVML_PCIE_UTIL_TX_BYTES ? 1000u : 2000u) + d->gpu;  // KB/s
  return NVML_SUCCESS;
}
// NVLink data counters (cumulative KiB) that grow by 1,000 KiB TX / 2,000 KiB RX per GPU index + 1
// with each call, one simulated second apart.
STUB_EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t d, int count,
                                                  nvmlFieldValue_t* values) {
  if (int r = CheckDevice(d); r != NVML_SUCCESS) return r;
  if (count < 0 || (count > 0 && values == nullptr)) return NVML_ERROR_INVALID_ARGUMENT;
  static unsigned long long calls[kMaxGpus] = {};
  const unsigned long long n = ++calls[d->gpu];
  for (int i = 0; i < count; ++i) {
    nvmlFieldValue_t& v = values[i];
    v.timestamp = static_cast<long long>(n) * 1000000;
    v.latencyUsec = 0;
    v.valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
    const unsigned long long step = static_cast<unsigned long long>(d->gpu + 1);
    if (v.fieldId == NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX && v.scopeId == UINT_MAX) {
      v.nvmlReturn = NVML_SUCCESS;
      v.value.ullVal = n * 1000 * step;
    } else if (v.fieldId == NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX && v.scopeId == UINT_MAX) {
      v.nvmlReturn = NVML_SUCCESS;
      v.value.ullVal = n * 2000 * step;
    } else {
      v.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    }
  }
  return NVML_SUCCESS;
}
STUB_EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, nvmlTemperatureSensors_t sensor,
                                                  unsigned int* t) {
  if (int r = CheckDevice(d); r != NVML_SUCCESS) return r;
  if (sensor != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
  *t = 40u + d->gpu;
  return NVML_SUCCESS;
}
STUB_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int* mw) {
  if (int r = CheckDevice(d); r != NVML_SUCCESS) return r;
  *mw = 300000u + 1000u * d->gpu;
  return NVML_SUCCESS;
}
STUB_EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, nvmlClockType_t type,
                                                unsigned int* mhz) {
  if (int r = CheckDevice(d); r != NVML_SUCCESS) return r;
  if (type == NVML_CLOCK_SM) {
    *mhz = 1980;
  } else if (type == NVML_CLOCK_MEM) {
    *mhz = 2619;
  } else {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  return NVML_SUCCESS;
}
STUB_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d,
                                                                   unsigned long long* reasons) {
  if (int r = CheckDevice(d); r != NVML_SUCCESS) return r;
  *reasons = d->gpu == 0 ? 0x1ULL : 0x0ULL;
  return NVML_SUCCESS;
}
STUB_EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, nvmlMemoryErrorType_t type,
                                                     nvmlEccCounterType_t counter,
                                                     unsigned long long* count) {
  if (int r = CheckDevice(d); r != NVML_SUCCESS) return r;
  *count =
      (type == NVML_MEMORY_ERROR_TYPE_CORRECTED ? 3 : 0) + (counter == NVML_AGGREGATE_ECC ? 10 : 0);
  return NVML_SUCCESS;
}
STUB_EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  if (!S().initialized) return NVML_ERROR_UNINITIALIZED;
  *set = new nvmlEventSet_st();
  return NVML_SUCCESS;
}
STUB_EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  delete set;
  return NVML_SUCCESS;
}
STUB_EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t d, unsigned long long types,
                                                  nvmlEventSet_t set) {
  if (int r = CheckDevice(d); r != NVML_SUCCESS) return r;
  set->mask[d->gpu] |= types;
  return NVML_SUCCESS;
}

}  // extern "C"
