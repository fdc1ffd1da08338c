#include "agent/nvml/nvml_backend.h"

#include <dlfcn.h>

#include <algorithm>
#include <bit>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <initializer_list>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/nvml/nvml_api.h"
#include "common/status_macros.h"

namespace tessera::agent {

// Resolved entry points. Null means the library lacks every accepted name.
struct NvmlBackend::Api {
  nvmlInit_fn init = nullptr;
  nvmlShutdown_fn shutdown = nullptr;
  nvmlErrorString_fn error_string = nullptr;
  nvmlSystemGetDriverVersion_fn driver_version = nullptr;
  nvmlSystemGetCudaDriverVersion_fn cuda_driver_version = nullptr;
  nvmlDeviceGetCount_fn device_count = nullptr;
  nvmlDeviceGetHandleByIndex_fn handle_by_index = nullptr;
  nvmlDeviceGetString_fn uuid = nullptr;
  nvmlDeviceGetString_fn name = nullptr;
  nvmlDeviceGetMemoryInfo_fn memory_info = nullptr;
  nvmlDeviceGetMemoryInfo_v2_fn memory_info_v2 = nullptr;
  nvmlDeviceGetEccMode_fn ecc_mode = nullptr;
  nvmlDeviceGetPciInfo_fn pci_info = nullptr;
  bool pci_info_v1 = false;  // old layout: only busIdLegacy is meaningful
  nvmlDeviceGetUInt_fn minor_number = nullptr;
  nvmlDeviceGetUInt_fn numa_node = nullptr;
  nvmlDeviceGetMemoryAffinity_fn memory_affinity = nullptr;
  nvmlDeviceGetNvLinkState_fn nvlink_state = nullptr;
  nvmlDeviceGetNvLinkRemotePciInfo_fn nvlink_remote_pci = nullptr;
  bool nvlink_remote_pci_v1 = false;
  nvmlDeviceGetTopologyCommonAncestor_fn topology = nullptr;
  nvmlDeviceGetMigMode_fn mig_mode = nullptr;
  nvmlDeviceGetUInt_fn max_mig_devices = nullptr;
  nvmlDeviceGetMigDeviceHandleByIndex_fn mig_handle = nullptr;
  nvmlDeviceGetUInt_fn gpu_instance_id = nullptr;
  nvmlDeviceGetUInt_fn compute_instance_id = nullptr;
  nvmlDeviceGetUtilizationRates_fn utilization = nullptr;
  nvmlDeviceGetPcieThroughput_fn pcie_throughput = nullptr;
  nvmlDeviceGetFieldValues_fn field_values = nullptr;
  nvmlDeviceGetTemperature_fn temperature = nullptr;
  nvmlDeviceGetTemperatureV_fn temperature_v = nullptr;
  nvmlDeviceGetUInt_fn power_usage = nullptr;
  nvmlDeviceGetULL_fn total_energy = nullptr;
  nvmlDeviceGetClockInfo_fn clock_info = nullptr;
  nvmlDeviceGetULL_fn throttle_reasons = nullptr;
  nvmlDeviceGetTotalEccErrors_fn ecc_errors = nullptr;
  nvmlDeviceGetRemappedRows_fn remapped_rows = nullptr;
  nvmlEventSetCreate_fn event_set_create = nullptr;
  nvmlEventSetFree_fn event_set_free = nullptr;
  nvmlDeviceGetULL_fn supported_event_types = nullptr;
  nvmlDeviceRegisterEvents_fn register_events = nullptr;
  nvmlEventSetWait_fn event_set_wait = nullptr;
};

namespace {

constexpr char kDefaultLibrary[] = "libnvidia-ml.so.1";

std::string ResolveLibraryPath(std::string path) {
  if (!path.empty()) return path;
  if (const char* env = std::getenv("TESSERA_NVML_LIB"); env != nullptr && *env != '\0') {
    return env;
  }
  return kDefaultLibrary;
}

// Looks up the first of `names` the library exports and appends it to `resolved`. `which`
// receives the name found (or "").
template <typename Fn>
Fn Lookup(void* dl, std::vector<std::string>& resolved, std::initializer_list<const char*> names,
          std::string* which = nullptr) {
  for (const char* n : names) {
    if (void* p = dlsym(dl, n); p != nullptr) {
      if (which) *which = n;
      resolved.emplace_back(n);
      return reinterpret_cast<Fn>(p);
    }
  }
  if (which) which->clear();
  return nullptr;
}

std::string BusIdOf(const nvmlPciInfo_t& pci, bool v1_layout) {
  const char* id = (v1_layout || pci.busId[0] == '\0') ? pci.busIdLegacy : pci.busId;
  size_t len =
      v1_layout ? strnlen(id, sizeof(pci.busIdLegacy))
                : strnlen(id, pci.busId[0] == '\0' ? sizeof(pci.busIdLegacy) : sizeof(pci.busId));
  return std::string(id, len);
}

// "NVIDIA A100-SXM4-40GB MIG 1g.5gb" -> "1g.5gb".
std::string MigProfileFromName(const std::string& name) {
  size_t pos = name.rfind("MIG ");
  if (pos == std::string::npos) return name;
  return name.substr(pos + 4);
}

// Reads /sys/bus/pci/devices/<bus id>/numa_node for drivers without nvmlDeviceGetNumaNodeId.
std::optional<int> NumaNodeFromSysfs(const std::string& bus_id) {
  // NVML reports an 8-digit domain; sysfs uses 4.
  std::string id = absl::AsciiStrToLower(bus_id);
  if (id.size() == 16 && id.compare(0, 4, "0000") == 0) id = id.substr(4);
  std::ifstream in("/sys/bus/pci/devices/" + id + "/numa_node");
  int node = -1;
  if (!(in >> node) || node < 0) return std::nullopt;
  return node;
}

// Memory of a GPU or MIG device: nvmlDeviceGetMemoryInfo_v2 where the driver has it (allocated
// memory apart from the reservation, as nvidia-smi reports it), else v1. Returns the NVML code
// of the call that answered last.
int ReadMemory(const NvmlBackend::Api& a, nvmlDevice_t dev, MemoryInfo* out) {
  int ret = NVML_ERROR_FUNCTION_NOT_FOUND;
  if (a.memory_info_v2) {
    nvmlMemory_v2_t mem = {};
    mem.version = nvmlMemory_v2;
    ret = a.memory_info_v2(dev, &mem);
    if (ret == NVML_SUCCESS) {
      *out = MemoryInfo{mem.total, mem.used, mem.free, mem.reserved};
      return ret;
    }
    // An older driver that knows the call but not this struct version, or a device (some MIG
    // handles) that answers only v1: ask v1. A lost GPU answers nothing.
    if (ret == NVML_ERROR_GPU_IS_LOST) return ret;
  }
  if (a.memory_info) {
    nvmlMemory_t mem = {};
    ret = a.memory_info(dev, &mem);
    if (ret == NVML_SUCCESS) *out = MemoryInfo{mem.total, mem.used, mem.free, std::nullopt};
  }
  return ret;
}

// GPU die temperature: nvmlDeviceGetTemperatureV (NVML 12.8+), else the deprecated
// nvmlDeviceGetTemperature.
std::optional<uint32_t> ReadTemperature(const NvmlBackend::Api& a, nvmlDevice_t dev) {
  if (a.temperature_v) {
    nvmlTemperature_v1_t t = {};
    t.version = nvmlTemperature_v1;
    t.sensorType = NVML_TEMPERATURE_GPU;
    int ret = a.temperature_v(dev, &t);
    if (ret == NVML_SUCCESS && t.temperature >= 0) return static_cast<uint32_t>(t.temperature);
    if (ret == NVML_ERROR_GPU_IS_LOST) return std::nullopt;
  }
  unsigned int u = 0;
  if (a.temperature && a.temperature(dev, NVML_TEMPERATURE_GPU, &u) == NVML_SUCCESS) return u;
  return std::nullopt;
}

}  // namespace

absl::Status NvmlReturnToStatus(int ret, const char* (*error_string)(int), absl::string_view what) {
  if (ret == NVML_SUCCESS) return absl::OkStatus();
  const char* text = error_string ? error_string(ret) : nullptr;
  std::string msg = absl::StrCat(what, ": ", text ? text : "NVML error", " (nvml ", ret, ")");
  switch (ret) {
    case NVML_ERROR_UNINITIALIZED:
    case NVML_ERROR_DRIVER_NOT_LOADED:
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
    case NVML_ERROR_ALREADY_INITIALIZED:
    case NVML_ERROR_INVALID_STATE:
      return absl::FailedPreconditionError(msg);
    case NVML_ERROR_INVALID_ARGUMENT:
      return absl::InvalidArgumentError(msg);
    case NVML_ERROR_NOT_SUPPORTED:
    case NVML_ERROR_VGPU_ECC_NOT_SUPPORTED:
    case NVML_ERROR_FREQ_NOT_SUPPORTED:
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
    case NVML_ERROR_DEPRECATED:
    case NVML_ERROR_RESET_TYPE_NOT_SUPPORTED:
      return absl::UnimplementedError(msg);
    case NVML_ERROR_NO_PERMISSION:
      return absl::PermissionDeniedError(msg);
    case NVML_ERROR_NOT_FOUND:
    case NVML_ERROR_LIBRARY_NOT_FOUND:
    case NVML_ERROR_FUNCTION_NOT_FOUND:
    case NVML_ERROR_NO_DATA:
    case NVML_ERROR_GPU_NOT_FOUND:
      return absl::NotFoundError(msg);
    case NVML_ERROR_TIMEOUT:
      return absl::DeadlineExceededError(msg);
    case NVML_ERROR_GPU_IS_LOST:
    case NVML_ERROR_RESET_REQUIRED:
    case NVML_ERROR_IN_USE:
    case NVML_ERROR_IRQ_ISSUE:
    case NVML_ERROR_NOT_READY:
      return absl::UnavailableError(msg);
    case NVML_ERROR_MEMORY:
    case NVML_ERROR_INSUFFICIENT_POWER:
    case NVML_ERROR_INSUFFICIENT_RESOURCES:
      return absl::ResourceExhaustedError(msg);
    case NVML_ERROR_INSUFFICIENT_SIZE:
    case NVML_ERROR_CORRUPTED_INFOROM:
    case NVML_ERROR_OPERATING_SYSTEM:
      return absl::InternalError(msg);
    default:
      return absl::UnknownError(msg);
  }
}

NvmlBackend::NvmlBackend(Clock& clock, std::string library_path)
    : clock_(clock), library_path_(ResolveLibraryPath(std::move(library_path))) {}

NvmlBackend::~NvmlBackend() { Shutdown().IgnoreError(); }

absl::Status NvmlBackend::ToStatus(int ret, absl::string_view what) const {
  return NvmlReturnToStatus(ret, api_ ? api_->error_string : nullptr, what);
}

std::vector<std::string> NvmlBackend::MissingSymbols() const {
  absl::MutexLock l(&mu_);
  return missing_;
}

absl::Status NvmlBackend::Init() {
  absl::MutexLock l(&mu_);
  if (initialized_) return absl::OkStatus();
  absl::Status st = InitLocked();
  if (!st.ok()) ShutdownLocked();
  return st;
}

absl::Status NvmlBackend::InitLocked() {
  dlerror();
  dl_ = dlopen(library_path_.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (dl_ == nullptr) {
    const char* err = dlerror();
    return absl::FailedPreconditionError(absl::StrCat("cannot load NVML from ", library_path_, ": ",
                                                      err ? err : "dlopen failed",
                                                      " (is the NVIDIA driver installed?)"));
  }
  auto api = std::make_unique<Api>();
  Api& a = *api;
  missing_.clear();
  resolved_.clear();
  auto optional = [this](bool found, const char* name) {
    if (!found) missing_.emplace_back(name);
  };
  a.init = Lookup<nvmlInit_fn>(dl_, resolved_, {"nvmlInit_v2", "nvmlInit"});
  a.shutdown = Lookup<nvmlShutdown_fn>(dl_, resolved_, {"nvmlShutdown"});
  a.device_count = Lookup<nvmlDeviceGetCount_fn>(dl_, resolved_,
                                                 {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"});
  a.handle_by_index = Lookup<nvmlDeviceGetHandleByIndex_fn>(
      dl_, resolved_, {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"});
  a.uuid = Lookup<nvmlDeviceGetString_fn>(dl_, resolved_, {"nvmlDeviceGetUUID"});
  a.name = Lookup<nvmlDeviceGetString_fn>(dl_, resolved_, {"nvmlDeviceGetName"});
  std::vector<std::string> required_missing;
  if (!a.init) required_missing.push_back("nvmlInit_v2/nvmlInit");
  if (!a.shutdown) required_missing.push_back("nvmlShutdown");
  if (!a.device_count) required_missing.push_back("nvmlDeviceGetCount_v2/nvmlDeviceGetCount");
  if (!a.handle_by_index) {
    required_missing.push_back("nvmlDeviceGetHandleByIndex_v2/nvmlDeviceGetHandleByIndex");
  }
  if (!a.uuid) required_missing.push_back("nvmlDeviceGetUUID");
  if (!a.name) required_missing.push_back("nvmlDeviceGetName");
  if (!required_missing.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        library_path_, " lacks required NVML symbols: ", absl::StrJoin(required_missing, ", ")));
  }

  std::string which;
  a.error_string = Lookup<nvmlErrorString_fn>(dl_, resolved_, {"nvmlErrorString"});
  optional(a.error_string, "nvmlErrorString");
  a.driver_version =
      Lookup<nvmlSystemGetDriverVersion_fn>(dl_, resolved_, {"nvmlSystemGetDriverVersion"});
  optional(a.driver_version, "nvmlSystemGetDriverVersion");
  a.cuda_driver_version = Lookup<nvmlSystemGetCudaDriverVersion_fn>(
      dl_, resolved_, {"nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"});
  optional(a.cuda_driver_version, "nvmlSystemGetCudaDriverVersion");
  a.memory_info = Lookup<nvmlDeviceGetMemoryInfo_fn>(dl_, resolved_, {"nvmlDeviceGetMemoryInfo"});
  optional(a.memory_info, "nvmlDeviceGetMemoryInfo");
  a.memory_info_v2 =
      Lookup<nvmlDeviceGetMemoryInfo_v2_fn>(dl_, resolved_, {"nvmlDeviceGetMemoryInfo_v2"});
  optional(a.memory_info_v2, "nvmlDeviceGetMemoryInfo_v2");
  a.ecc_mode = Lookup<nvmlDeviceGetEccMode_fn>(dl_, resolved_, {"nvmlDeviceGetEccMode"});
  optional(a.ecc_mode, "nvmlDeviceGetEccMode");
  a.pci_info = Lookup<nvmlDeviceGetPciInfo_fn>(
      dl_, resolved_,
      {"nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2", "nvmlDeviceGetPciInfo"}, &which);
  a.pci_info_v1 = which == "nvmlDeviceGetPciInfo";
  optional(a.pci_info, "nvmlDeviceGetPciInfo");
  a.minor_number = Lookup<nvmlDeviceGetUInt_fn>(dl_, resolved_, {"nvmlDeviceGetMinorNumber"});
  optional(a.minor_number, "nvmlDeviceGetMinorNumber");
  a.numa_node = Lookup<nvmlDeviceGetUInt_fn>(dl_, resolved_, {"nvmlDeviceGetNumaNodeId"});
  optional(a.numa_node, "nvmlDeviceGetNumaNodeId");
  a.memory_affinity =
      Lookup<nvmlDeviceGetMemoryAffinity_fn>(dl_, resolved_, {"nvmlDeviceGetMemoryAffinity"});
  optional(a.memory_affinity, "nvmlDeviceGetMemoryAffinity");
  a.nvlink_state =
      Lookup<nvmlDeviceGetNvLinkState_fn>(dl_, resolved_, {"nvmlDeviceGetNvLinkState"});
  optional(a.nvlink_state, "nvmlDeviceGetNvLinkState");
  a.nvlink_remote_pci = Lookup<nvmlDeviceGetNvLinkRemotePciInfo_fn>(
      dl_, resolved_, {"nvmlDeviceGetNvLinkRemotePciInfo_v2", "nvmlDeviceGetNvLinkRemotePciInfo"},
      &which);
  a.nvlink_remote_pci_v1 = which == "nvmlDeviceGetNvLinkRemotePciInfo";
  optional(a.nvlink_remote_pci, "nvmlDeviceGetNvLinkRemotePciInfo");
  a.topology = Lookup<nvmlDeviceGetTopologyCommonAncestor_fn>(
      dl_, resolved_, {"nvmlDeviceGetTopologyCommonAncestor"});
  optional(a.topology, "nvmlDeviceGetTopologyCommonAncestor");
  a.mig_mode = Lookup<nvmlDeviceGetMigMode_fn>(dl_, resolved_, {"nvmlDeviceGetMigMode"});
  optional(a.mig_mode, "nvmlDeviceGetMigMode");
  a.max_mig_devices =
      Lookup<nvmlDeviceGetUInt_fn>(dl_, resolved_, {"nvmlDeviceGetMaxMigDeviceCount"});
  optional(a.max_mig_devices, "nvmlDeviceGetMaxMigDeviceCount");
  a.mig_handle = Lookup<nvmlDeviceGetMigDeviceHandleByIndex_fn>(
      dl_, resolved_, {"nvmlDeviceGetMigDeviceHandleByIndex"});
  optional(a.mig_handle, "nvmlDeviceGetMigDeviceHandleByIndex");
  a.gpu_instance_id = Lookup<nvmlDeviceGetUInt_fn>(dl_, resolved_, {"nvmlDeviceGetGpuInstanceId"});
  optional(a.gpu_instance_id, "nvmlDeviceGetGpuInstanceId");
  a.compute_instance_id =
      Lookup<nvmlDeviceGetUInt_fn>(dl_, resolved_, {"nvmlDeviceGetComputeInstanceId"});
  optional(a.compute_instance_id, "nvmlDeviceGetComputeInstanceId");
  a.utilization =
      Lookup<nvmlDeviceGetUtilizationRates_fn>(dl_, resolved_, {"nvmlDeviceGetUtilizationRates"});
  optional(a.utilization, "nvmlDeviceGetUtilizationRates");
  a.temperature = Lookup<nvmlDeviceGetTemperature_fn>(dl_, resolved_, {"nvmlDeviceGetTemperature"});
  optional(a.temperature, "nvmlDeviceGetTemperature");
  a.temperature_v =
      Lookup<nvmlDeviceGetTemperatureV_fn>(dl_, resolved_, {"nvmlDeviceGetTemperatureV"});
  optional(a.temperature_v, "nvmlDeviceGetTemperatureV");
  a.pcie_throughput =
      Lookup<nvmlDeviceGetPcieThroughput_fn>(dl_, resolved_, {"nvmlDeviceGetPcieThroughput"});
  optional(a.pcie_throughput, "nvmlDeviceGetPcieThroughput");
  a.field_values =
      Lookup<nvmlDeviceGetFieldValues_fn>(dl_, resolved_, {"nvmlDeviceGetFieldValues"});
  optional(a.field_values, "nvmlDeviceGetFieldValues");
  a.power_usage = Lookup<nvmlDeviceGetUInt_fn>(dl_, resolved_, {"nvmlDeviceGetPowerUsage"});
  optional(a.power_usage, "nvmlDeviceGetPowerUsage");
  a.total_energy =
      Lookup<nvmlDeviceGetULL_fn>(dl_, resolved_, {"nvmlDeviceGetTotalEnergyConsumption"});
  optional(a.total_energy, "nvmlDeviceGetTotalEnergyConsumption");
  a.clock_info = Lookup<nvmlDeviceGetClockInfo_fn>(dl_, resolved_, {"nvmlDeviceGetClockInfo"});
  optional(a.clock_info, "nvmlDeviceGetClockInfo");
  a.throttle_reasons = Lookup<nvmlDeviceGetULL_fn>(
      dl_, resolved_,
      {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"});
  optional(a.throttle_reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
  a.ecc_errors =
      Lookup<nvmlDeviceGetTotalEccErrors_fn>(dl_, resolved_, {"nvmlDeviceGetTotalEccErrors"});
  optional(a.ecc_errors, "nvmlDeviceGetTotalEccErrors");
  a.remapped_rows =
      Lookup<nvmlDeviceGetRemappedRows_fn>(dl_, resolved_, {"nvmlDeviceGetRemappedRows"});
  optional(a.remapped_rows, "nvmlDeviceGetRemappedRows");
  a.event_set_create = Lookup<nvmlEventSetCreate_fn>(dl_, resolved_, {"nvmlEventSetCreate"});
  optional(a.event_set_create, "nvmlEventSetCreate");
  a.event_set_free = Lookup<nvmlEventSetFree_fn>(dl_, resolved_, {"nvmlEventSetFree"});
  optional(a.event_set_free, "nvmlEventSetFree");
  a.supported_event_types =
      Lookup<nvmlDeviceGetULL_fn>(dl_, resolved_, {"nvmlDeviceGetSupportedEventTypes"});
  optional(a.supported_event_types, "nvmlDeviceGetSupportedEventTypes");
  a.register_events =
      Lookup<nvmlDeviceRegisterEvents_fn>(dl_, resolved_, {"nvmlDeviceRegisterEvents"});
  optional(a.register_events, "nvmlDeviceRegisterEvents");
  a.event_set_wait =
      Lookup<nvmlEventSetWait_fn>(dl_, resolved_, {"nvmlEventSetWait_v2", "nvmlEventSetWait"});
  optional(a.event_set_wait, "nvmlEventSetWait");
  api_ = std::move(api);

  RETURN_IF_ERROR(ToStatus(api_->init(), "nvmlInit"));
  initialized_ = true;

  unsigned int count = 0;
  RETURN_IF_ERROR(ToStatus(api_->device_count(&count), "nvmlDeviceGetCount"));
  for (unsigned int i = 0; i < count; ++i) {
    // A GPU that does not answer (fallen off the bus: "Unable to determine the device handle")
    // keeps its index with an empty UUID and its queries fail with the error; the rest of the
    // node stays usable.
    nvmlDevice_t dev = nullptr;
    absl::Status handle = ToStatus(api_->handle_by_index(i, &dev),
                                   absl::StrCat("nvmlDeviceGetHandleByIndex(", i, ")"));
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (handle.ok()) api_->uuid(dev, uuid, sizeof(uuid));
    devices_.push_back(handle.ok() ? dev : nullptr);
    device_errors_.push_back(handle);
    uuids_.emplace_back(uuid, strnlen(uuid, sizeof(uuid)));
  }

  // Event set: XID and double-bit ECC on every GPU that supports them.
  if (a.event_set_create && a.event_set_free && a.register_events && a.event_set_wait) {
    nvmlEventSet_t set = nullptr;
    if (a.event_set_create(&set) == NVML_SUCCESS) {
      event_set_ = set;
      for (void* d : devices_) {
        if (d == nullptr) continue;
        nvmlDevice_t dev = static_cast<nvmlDevice_t>(d);
        unsigned long long want = nvmlEventTypeXidCriticalError | nvmlEventTypeDoubleBitEccError;
        unsigned long long supported = want;
        if (a.supported_event_types && a.supported_event_types(dev, &supported) != NVML_SUCCESS) {
          supported = nvmlEventTypeXidCriticalError;
        }
        want &= supported;
        if (want == 0) continue;
        // A GPU that cannot register (NOT_SUPPORTED, already lost) is simply not watched; its
        // failures then surface through queries.
        a.register_events(dev, want, set);
      }
    }
  }
  return absl::OkStatus();
}

absl::Status NvmlBackend::Shutdown() {
  absl::MutexLock l(&mu_);
  mu_.Await(absl::Condition(
      +[](int* waiters) { return *waiters == 0; }, &waiters_));
  ShutdownLocked();
  return absl::OkStatus();
}

void NvmlBackend::ShutdownLocked() {
  if (api_ && event_set_ && api_->event_set_free) {
    api_->event_set_free(static_cast<nvmlEventSet_t>(event_set_));
  }
  event_set_ = nullptr;
  if (api_ && initialized_ && api_->shutdown) api_->shutdown();
  initialized_ = false;
  devices_.clear();
  device_errors_.clear();
  uuids_.clear();
  api_.reset();
  if (dl_ != nullptr) dlclose(dl_);
  dl_ = nullptr;
}

std::string NvmlBackend::DriverVersion() {
  absl::MutexLock l(&mu_);
  if (!initialized_ || !api_->driver_version) return "";
  char buf[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
  if (api_->driver_version(buf, sizeof(buf)) != NVML_SUCCESS) return "";
  return std::string(buf, strnlen(buf, sizeof(buf)));
}

std::string NvmlBackend::CudaDriverVersion() {
  absl::MutexLock l(&mu_);
  if (!initialized_ || !api_->cuda_driver_version) return "";
  int v = 0;
  if (api_->cuda_driver_version(&v) != NVML_SUCCESS || v <= 0) return "";
  // NVML_CUDA_DRIVER_VERSION_MAJOR/MINOR: 13000 -> "13.0", 12080 -> "12.8".
  return absl::StrCat(v / 1000, ".", (v % 1000) / 10);
}

std::vector<std::string> NvmlBackend::ResolvedSymbols() const {
  absl::MutexLock l(&mu_);
  return resolved_;
}

absl::StatusOr<int> NvmlBackend::DeviceCount() {
  absl::MutexLock l(&mu_);
  if (!initialized_) return absl::FailedPreconditionError("NVML backend not initialized");
  return static_cast<int>(devices_.size());
}

absl::StatusOr<void*> NvmlBackend::DeviceLocked(int index) {
  if (!initialized_) return absl::FailedPreconditionError("NVML backend not initialized");
  if (index < 0 || index >= static_cast<int>(devices_.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("gpu index ", index, " out of range [0, ", devices_.size(), ")"));
  }
  if (devices_[index] == nullptr) return device_errors_[index];
  return devices_[index];
}

absl::StatusOr<GpuInfo> NvmlBackend::GetDeviceInfo(int index) {
  absl::MutexLock l(&mu_);
  ASSIGN_OR_RETURN(void* d, DeviceLocked(index));
  nvmlDevice_t dev = static_cast<nvmlDevice_t>(d);
  const Api& a = *api_;
  GpuInfo info;
  info.index = index;
  info.uuid = uuids_[index];
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
  RETURN_IF_ERROR(ToStatus(a.name(dev, name, sizeof(name)), "nvmlDeviceGetName"));
  info.name.assign(name, strnlen(name, sizeof(name)));
  if (a.pci_info) {
    nvmlPciInfo_t pci = {};
    if (a.pci_info(dev, &pci) == NVML_SUCCESS) info.pci_bus_id = BusIdOf(pci, a.pci_info_v1);
  }
  unsigned int u = 0;
  if (a.minor_number && a.minor_number(dev, &u) == NVML_SUCCESS) info.minor = static_cast<int>(u);
  if (a.numa_node && a.numa_node(dev, &u) == NVML_SUCCESS) {
    info.numa_node = static_cast<int>(u);
  } else if (!info.pci_bus_id.empty()) {
    info.numa_node = NumaNodeFromSysfs(info.pci_bus_id);
  }
  if (!info.numa_node && a.memory_affinity) {
    // A VM often gives its PCI devices no NUMA node (sysfs -1) and x86 GPUs have no NUMA id of
    // their own, while the driver still knows the nearest node (found on an H200 VM, where
    // nvidia-smi topo -m said NUMA Affinity 0). Only one nearest node names one.
    unsigned long nodes[4] = {};
    if (a.memory_affinity(dev, 4, nodes, /*NVML_AFFINITY_SCOPE_NODE=*/0) == NVML_SUCCESS) {
      int set = 0;
      for (unsigned long w : nodes) set += std::popcount(w);
      for (int w = 0; w < 4 && set == 1; ++w) {
        constexpr int kBits = sizeof(unsigned long) * CHAR_BIT;
        if (nodes[w] != 0) info.numa_node = w * kBits + std::countr_zero(nodes[w]);
      }
    }
  }
  {
    MemoryInfo mem;
    int ret = ReadMemory(a, dev, &mem);
    if (ret == NVML_ERROR_GPU_IS_LOST) return ToStatus(ret, "nvmlDeviceGetMemoryInfo");
    if (ret == NVML_SUCCESS) info.memory = mem;
  }
  if (a.nvlink_state) {
    for (unsigned int link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
      nvmlEnableState_t active = NVML_FEATURE_DISABLED;
      // NOT_SUPPORTED / INVALID_ARGUMENT past the GPU's last link: skip it.
      if (a.nvlink_state(dev, link, &active) != NVML_SUCCESS) continue;
      NvLinkInfo li;
      li.link = static_cast<int>(link);
      li.active = active == NVML_FEATURE_ENABLED;
      if (li.active && a.nvlink_remote_pci) {
        nvmlPciInfo_t pci = {};
        if (a.nvlink_remote_pci(dev, link, &pci) == NVML_SUCCESS) {
          li.remote_pci_bus_id = BusIdOf(pci, a.nvlink_remote_pci_v1);
        }
      }
      info.nvlinks.push_back(std::move(li));
    }
  }
  if (a.mig_mode) {
    unsigned int current = 0, pending = 0;
    if (a.mig_mode(dev, &current, &pending) == NVML_SUCCESS) {
      info.mig_mode = MigMode{current == NVML_DEVICE_MIG_ENABLE, pending == NVML_DEVICE_MIG_ENABLE};
    }
  }
  if (a.ecc_mode) {
    nvmlEnableState_t current = NVML_FEATURE_DISABLED, pending = NVML_FEATURE_DISABLED;
    if (a.ecc_mode(dev, &current, &pending) == NVML_SUCCESS) {
      info.ecc_mode = EccMode{current == NVML_FEATURE_ENABLED, pending == NVML_FEATURE_ENABLED};
    }
  }
  if (info.mig_mode && info.mig_mode->current && a.max_mig_devices && a.mig_handle) {
    unsigned int max = 0;
    if (a.max_mig_devices(dev, &max) == NVML_SUCCESS) {
      for (unsigned int i = 0; i < max; ++i) {
        nvmlDevice_t mig = nullptr;
        if (a.mig_handle(dev, i, &mig) != NVML_SUCCESS) continue;  // empty slot: NOT_FOUND
        MigInstance m;
        char buf[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
        if (a.uuid(mig, buf, sizeof(buf)) == NVML_SUCCESS)
          m.uuid.assign(buf, strnlen(buf, sizeof(buf)));
        char mname[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
        if (a.name(mig, mname, sizeof(mname)) == NVML_SUCCESS) {
          m.profile = MigProfileFromName(std::string(mname, strnlen(mname, sizeof(mname))));
        }
        MemoryInfo mem;
        if (ReadMemory(a, mig, &mem) == NVML_SUCCESS) m.memory_bytes = mem.total_bytes;
        if (a.gpu_instance_id && a.gpu_instance_id(mig, &u) == NVML_SUCCESS) m.gpu_instance_id = u;
        if (a.compute_instance_id && a.compute_instance_id(mig, &u) == NVML_SUCCESS) {
          m.compute_instance_id = u;
        }
        info.mig_instances.push_back(std::move(m));
      }
    }
  }
  return info;
}

// NVLink data sent and received (all links) as rates: NVML's counters are cumulative KiB, so a
// rate is the change since this device's previous reading over NVML's own timestamps; the first
// reading (and one after a counter reset) gives none.
void NvmlBackend::ReadNvLinkRates(const Api& a, void* d, int index, GpuMetrics* m) {
  if (!a.field_values) return;
  nvmlFieldValue_t v[2] = {};
  v[0].fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX;
  v[1].fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX;
  v[0].scopeId = v[1].scopeId = UINT_MAX;
  if (a.field_values(static_cast<nvmlDevice_t>(d), 2, v) != NVML_SUCCESS) return;
  auto kib = [](const nvmlFieldValue_t& f) -> std::optional<uint64_t> {
    if (f.nvmlReturn != NVML_SUCCESS) return std::nullopt;
    switch (f.valueType) {
      case NVML_VALUE_TYPE_UNSIGNED_INT:
        return f.value.uiVal;
      case NVML_VALUE_TYPE_UNSIGNED_LONG:
        return f.value.ulVal;
      case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
        return f.value.ullVal;
      default:
        return std::nullopt;
    }
  };
  const std::optional<uint64_t> tx = kib(v[0]), rx = kib(v[1]);
  if (!tx || !rx) return;
  NvLinkReading now{v[0].timestamp, *tx, *rx};
  auto it = nvlink_prev_.find(index);
  if (it != nvlink_prev_.end()) {
    const NvLinkReading& prev = it->second;
    const double seconds = static_cast<double>(now.time_us - prev.time_us) / 1e6;
    if (seconds > 0 && now.tx_kib >= prev.tx_kib && now.rx_kib >= prev.rx_kib) {
      m->nvlink_tx_bytes_per_s =
          static_cast<uint64_t>(static_cast<double>(now.tx_kib - prev.tx_kib) * 1024 / seconds);
      m->nvlink_rx_bytes_per_s =
          static_cast<uint64_t>(static_cast<double>(now.rx_kib - prev.rx_kib) * 1024 / seconds);
    }
  }
  nvlink_prev_[index] = now;
}

absl::StatusOr<GpuMetrics> NvmlBackend::GetMetrics(int index) {
  absl::MutexLock l(&mu_);
  ASSIGN_OR_RETURN(void* d, DeviceLocked(index));
  nvmlDevice_t dev = static_cast<nvmlDevice_t>(d);
  const Api& a = *api_;
  GpuMetrics m;
  // A lost GPU fails every query; report that rather than a metrics set of blanks.
  {
    MemoryInfo mem;
    int ret = ReadMemory(a, dev, &mem);
    if (ret == NVML_ERROR_GPU_IS_LOST) return ToStatus(ret, "nvmlDeviceGetMemoryInfo");
    if (ret == NVML_SUCCESS) {
      m.fb_used_bytes = mem.used_bytes;
      m.fb_free_bytes = mem.free_bytes;
    }
  }
  unsigned int u = 0;
  unsigned long long ull = 0;
  if (a.utilization) {
    nvmlUtilization_t util = {};
    if (a.utilization(dev, &util) == NVML_SUCCESS) {
      m.gpu_util_percent = util.gpu;
      m.mem_copy_util_percent = util.memory;
    }
  }
  // KB/s over NVML's 20 ms window; dcgm-exporter's DCGM_FI_PROF_PCIE_*_BYTES are bytes/s.
  if (a.pcie_throughput && a.pcie_throughput(dev, NVML_PCIE_UTIL_TX_BYTES, &u) == NVML_SUCCESS) {
    m.pcie_tx_bytes_per_s = uint64_t{u} * 1024;
  }
  if (a.pcie_throughput && a.pcie_throughput(dev, NVML_PCIE_UTIL_RX_BYTES, &u) == NVML_SUCCESS) {
    m.pcie_rx_bytes_per_s = uint64_t{u} * 1024;
  }
  ReadNvLinkRates(a, dev, index, &m);
  m.temperature_c = ReadTemperature(a, dev);
  if (a.power_usage && a.power_usage(dev, &u) == NVML_SUCCESS) m.power_watts = u / 1000.0;
  if (a.total_energy && a.total_energy(dev, &ull) == NVML_SUCCESS) m.total_energy_mj = ull;
  if (a.clock_info && a.clock_info(dev, NVML_CLOCK_SM, &u) == NVML_SUCCESS) m.sm_clock_mhz = u;
  if (a.clock_info && a.clock_info(dev, NVML_CLOCK_MEM, &u) == NVML_SUCCESS) m.mem_clock_mhz = u;
  if (a.throttle_reasons && a.throttle_reasons(dev, &ull) == NVML_SUCCESS) {
    m.throttle_reasons = ull;
  }
  if (a.ecc_errors) {
    auto ecc = [&](int type, int counter) -> std::optional<uint64_t> {
      unsigned long long v = 0;
      if (a.ecc_errors(dev, type, counter, &v) != NVML_SUCCESS) return std::nullopt;
      return v;
    };
    m.ecc_sbe_volatile = ecc(NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC);
    m.ecc_dbe_volatile = ecc(NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC);
    m.ecc_sbe_aggregate = ecc(NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_AGGREGATE_ECC);
    m.ecc_dbe_aggregate = ecc(NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_AGGREGATE_ECC);
  }
  if (a.remapped_rows) {
    unsigned int corr = 0, unc = 0, pending = 0, failure = 0;
    if (a.remapped_rows(dev, &corr, &unc, &pending, &failure) == NVML_SUCCESS) {
      m.remapped_rows_correctable = corr;
      m.remapped_rows_uncorrectable = unc;
      m.row_remap_pending = pending != 0;
      m.row_remap_failure = failure != 0;
    }
  }
  return m;
}

absl::StatusOr<TopologyLevel> NvmlBackend::GetTopologyLevel(int a, int b) {
  absl::MutexLock l(&mu_);
  ASSIGN_OR_RETURN(void* da, DeviceLocked(a));
  ASSIGN_OR_RETURN(void* db, DeviceLocked(b));
  if (!api_->topology) {
    return absl::UnimplementedError("nvmlDeviceGetTopologyCommonAncestor not in this driver");
  }
  nvmlGpuTopologyLevel_t level = 0;
  RETURN_IF_ERROR(
      ToStatus(api_->topology(static_cast<nvmlDevice_t>(da), static_cast<nvmlDevice_t>(db), &level),
               "nvmlDeviceGetTopologyCommonAncestor"));
  TopologyLevel out;
  if (!TopologyLevelFromNvml(level, &out)) {
    return absl::UnknownError(absl::StrCat("unknown NVML topology level ", level));
  }
  return out;
}

absl::StatusOr<std::optional<GpuEvent>> NvmlBackend::WaitForEvent(absl::Duration timeout) {
  nvmlEventSet_t set = nullptr;
  nvmlEventSetWait_fn wait = nullptr;
  {
    absl::MutexLock l(&mu_);
    if (!initialized_) return absl::FailedPreconditionError("NVML backend not initialized");
    if (event_set_ == nullptr) {
      return absl::UnimplementedError("this NVML library offers no usable event API");
    }
    set = static_cast<nvmlEventSet_t>(event_set_);
    wait = api_->event_set_wait;
    ++waiters_;
  }
  int64_t ms = std::clamp<int64_t>(absl::ToInt64Milliseconds(timeout), 0, 0x7fffffff);
  nvmlEventData_t data = {};
  int ret = wait(set, &data, static_cast<unsigned int>(ms));

  absl::MutexLock l(&mu_);
  --waiters_;
  if (ret == NVML_ERROR_TIMEOUT) return std::optional<GpuEvent>();
  GpuEvent ev;
  ev.time = clock_.Now();
  if (ret == NVML_SUCCESS) {
    for (size_t i = 0; i < devices_.size(); ++i) {
      if (devices_[i] == static_cast<void*>(data.device)) ev.gpu_uuid = uuids_[i];
    }
    if (data.eventType & nvmlEventTypeXidCriticalError) {
      ev.kind = GpuEventKind::kXid;
      ev.xid = data.eventData;
    } else if (data.eventType & nvmlEventTypeDoubleBitEccError) {
      ev.kind = GpuEventKind::kEccDoubleBit;
    } else {
      // Not registered for anything else; treat as nothing happened.
      return std::optional<GpuEvent>();
    }
    return std::optional<GpuEvent>(std::move(ev));
  }
  ev.kind = ret == NVML_ERROR_GPU_IS_LOST ? GpuEventKind::kGpuLost : GpuEventKind::kEventWaitFailed;
  ev.detail = std::string(ToStatus(ret, "nvmlEventSetWait").message());
  return std::optional<GpuEvent>(std::move(ev));
}

}  // namespace tessera::agent
