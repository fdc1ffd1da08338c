// NvmlBackend: GpuBackend over NVIDIA's NVML, loaded with dlopen at run time.
//
// No build-time dependency on NVML: the library is opened on Init() (path from the constructor,
// else env TESSERA_NVML_LIB, else "libnvidia-ml.so.1") and every entry point is looked up on its
// own with dlsym. Versioned entry points fall back to older ones (nvmlInit_v2 -> nvmlInit,
// nvmlDeviceGetCount_v2 -> nvmlDeviceGetCount, nvmlDeviceGetMemoryInfo_v2 -> v1 (whose `used`
// includes the driver's reservation), nvmlDeviceGetTemperatureV -> nvmlDeviceGetTemperature, ...);
// a versioned-struct call the driver refuses (NVML_ERROR_ARGUMENT_VERSION_MISMATCH) falls back too.
// A missing required symbol fails Init() with a message naming it; a missing optional symbol leaves
// the field it feeds unavailable. nvmlReturn_t codes become absl::Status codes carrying
// nvmlErrorString's text when present.
//
// Events: Init() registers every GPU for XID and double-bit ECC events (where supported) in one
// NVML event set; WaitForEvent waits on it.
// Thread safety: all methods are serialized by an internal mutex, except that WaitForEvent does
// not hold it while blocked in NVML; Shutdown waits for such calls to return.
// WaitForEvent returns Unimplemented when the library offers no event API at all.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/gpu_backend.h"
#include "common/clock.h"

namespace tessera::agent {

class NvmlBackend final : public GpuBackend {
 public:
  // `clock` stamps events and must outlive the backend. Empty `library_path`: env
  // TESSERA_NVML_LIB, else "libnvidia-ml.so.1".
  explicit NvmlBackend(Clock& clock, std::string library_path = "");
  ~NvmlBackend() override;

  NvmlBackend(const NvmlBackend&) = delete;
  NvmlBackend& operator=(const NvmlBackend&) = delete;

  absl::Status Init() override;
  absl::Status Shutdown() override;
  std::string BackendName() const override { return "nvml"; }
  std::string DriverVersion() override;
  std::string CudaDriverVersion() override;
  absl::StatusOr<int> DeviceCount() override;
  absl::StatusOr<GpuInfo> GetDeviceInfo(int index) override;
  absl::StatusOr<GpuMetrics> GetMetrics(int index) override;
  absl::StatusOr<TopologyLevel> GetTopologyLevel(int a, int b) override;
  absl::StatusOr<std::optional<GpuEvent>> WaitForEvent(absl::Duration timeout) override;

  // The library path Init() opens.
  const std::string& library_path() const { return library_path_; }
  // Names of optional entry points the loaded library lacks (for diagnostics and tests).
  std::vector<std::string> MissingSymbols() const;
  // Names of the entry points resolved from the loaded library, in lookup order.
  std::vector<std::string> ResolvedSymbols() const;

  struct Api;  // the resolved entry points; defined in the .cc

 private:
  absl::Status InitLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ShutdownLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<void*> DeviceLocked(int index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ToStatus(int ret, absl::string_view what) const;
  // GetMetrics' NVLink rates from NVML's cumulative counters (needs the previous reading).
  void ReadNvLinkRates(const Api& a, void* dev, int index, GpuMetrics* m)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  struct NvLinkReading {
    long long time_us = 0;
    uint64_t tx_kib = 0, rx_kib = 0;
  };

  Clock& clock_;
  const std::string library_path_;
  mutable absl::Mutex mu_;
  void* dl_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::unique_ptr<Api> api_;  // written under mu_ in Init/Shutdown only
  bool initialized_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<void*> devices_ ABSL_GUARDED_BY(mu_);  // nvmlDevice_t by index; null: no handle
  std::vector<absl::Status> device_errors_ ABSL_GUARDED_BY(mu_);  // why a handle is null
  std::vector<std::string> uuids_ ABSL_GUARDED_BY(mu_);
  void* event_set_ ABSL_GUARDED_BY(mu_) = nullptr;  // nvmlEventSet_t
  std::vector<std::string> missing_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> resolved_ ABSL_GUARDED_BY(mu_);
  int waiters_ ABSL_GUARDED_BY(mu_) = 0;  // WaitForEvent calls blocked in NVML
  std::map<int, NvLinkReading> nvlink_prev_ ABSL_GUARDED_BY(mu_);  // by device index
};

// Maps an nvmlReturn_t to a Status: "<what>: <error string> (nvml N)". `error_string` may be null
// (library without nvmlErrorString).
absl::Status NvmlReturnToStatus(int ret, const char* (*error_string)(int), absl::string_view what);

}  // namespace tessera::agent
