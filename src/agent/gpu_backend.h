// GpuBackend: the agent's only window onto GPU hardware.
//
// Implementations: NvmlBackend (the driver's NVML, loaded at run time) and FakeBackend (a YAML
// description plus a scripted timeline, for tests, the simulator and laptops). Code above the
// backend never talks to NVML directly, so everything is testable without a GPU.
//
// Contract:
//  - Init() must succeed before any other call; calls before Init() or after Shutdown() return
//    FailedPrecondition. Init() after Shutdown() starts over. Shutdown() is idempotent.
//  - Devices are addressed by index 0..DeviceCount()-1 in the driver's enumeration order.
//  - Fields the driver cannot report are empty optionals in the returned structs, not errors;
//    an error means the whole query failed (bad index, GPU lost, not initialized).
//  - WaitForEvent blocks up to `timeout` and returns std::nullopt when nothing happened. A lost
//    GPU or a failing wait is returned as an event of kind kGpuLost / kEventWaitFailed (so the
//    health tracker sees it), not as an error status.
// Thread safety: all methods may be called concurrently; implementations serialize internally.
// WaitForEvent is meant for one watcher thread; concurrent waiters each receive distinct events.
// Ownership: the caller owns the backend; returned data are copies.
#pragma once

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/gpu_info.h"
#include "agent/topology.h"

namespace tessera::agent {

class GpuBackend {
 public:
  virtual ~GpuBackend() = default;

  virtual absl::Status Init() = 0;
  virtual absl::Status Shutdown() = 0;

  // "nvml" or "fake".
  virtual std::string BackendName() const = 0;
  // Driver version when known, else empty.
  virtual std::string DriverVersion() = 0;
  // The CUDA version the driver supports ("13.0", as nvidia-smi prints it) when known, else empty.
  virtual std::string CudaDriverVersion() = 0;

  virtual absl::StatusOr<int> DeviceCount() = 0;
  virtual absl::StatusOr<GpuInfo> GetDeviceInfo(int index) = 0;
  virtual absl::StatusOr<GpuMetrics> GetMetrics(int index) = 0;
  // PCIe common ancestor of two distinct GPUs.
  virtual absl::StatusOr<TopologyLevel> GetTopologyLevel(int a, int b) = 0;

  virtual absl::StatusOr<std::optional<GpuEvent>> WaitForEvent(absl::Duration timeout) = 0;
};

}  // namespace tessera::agent
