// Plain data a GpuBackend reports about one node's GPUs.
//
// These structs are the agent's own vocabulary and deliberately independent of the scheduler's
// model: the node agent translates them when it reports to the control plane. A field that the
// driver cannot report (an old driver lacking the call, a GPU that does not support it) is an
// empty std::optional, never a made-up value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/time.h"

namespace tessera::agent {

// `used_bytes` is allocated memory only, as nvidia-smi and DCGM report it; the driver's own
// reservation is `reserved_bytes` (empty from drivers that cannot separate it, whose `used`
// then includes it).
struct MemoryInfo {
  uint64_t total_bytes = 0;
  uint64_t used_bytes = 0;
  uint64_t free_bytes = 0;
  std::optional<uint64_t> reserved_bytes;
};

// One NVLink of a GPU. `remote_pci_bus_id` is the device on the far end: another GPU (a direct
// NVLink bridge) or an NVSwitch.
struct NvLinkInfo {
  int link = 0;
  bool active = false;
  std::string remote_pci_bus_id;  // empty when unavailable
};

// A MIG device (a GPU instance plus compute instance) carved out of a physical GPU.
struct MigInstance {
  std::string uuid;                      // "MIG-..."
  std::string profile;                   // "1g.10gb"
  std::optional<uint64_t> memory_bytes;  // total framebuffer of the instance
  std::optional<int> gpu_instance_id;
  std::optional<int> compute_instance_id;
};

struct MigMode {
  bool current = false;
  bool pending = false;
};

// ECC on the framebuffer: current, and after the next reset.
struct EccMode {
  bool current = false;
  bool pending = false;
};

// Static identity and configuration of one physical GPU.
struct GpuInfo {
  int index = 0;             // the driver's enumeration order (nvidia-smi's index)
  std::string uuid;          // "GPU-..."
  std::string name;          // model, e.g. "NVIDIA H100 80GB HBM3"
  std::string pci_bus_id;    // "00000000:18:00.0"
  std::optional<int> minor;  // /dev/nvidia<minor>
  std::optional<int> numa_node;
  std::optional<MemoryInfo> memory;
  std::vector<NvLinkInfo> nvlinks;  // empty when the GPU has none or the driver cannot say
  std::optional<MigMode> mig_mode;  // unavailable on GPUs without MIG support
  std::optional<EccMode> ecc_mode;  // unavailable on GPUs without ECC
  std::vector<MigInstance> mig_instances;
};

// Clock throttle reason bits, as NVML's nvmlClocksThrottleReason* constants.
inline constexpr uint64_t kThrottleGpuIdle = 0x1;
inline constexpr uint64_t kThrottleApplicationsClocksSetting = 0x2;
inline constexpr uint64_t kThrottleSwPowerCap = 0x4;
inline constexpr uint64_t kThrottleHwSlowdown = 0x8;
inline constexpr uint64_t kThrottleSyncBoost = 0x10;
inline constexpr uint64_t kThrottleSwThermalSlowdown = 0x20;
inline constexpr uint64_t kThrottleHwThermalSlowdown = 0x40;
inline constexpr uint64_t kThrottleHwPowerBrakeSlowdown = 0x80;
inline constexpr uint64_t kThrottleDisplayClockSetting = 0x100;

// Names of the set bits, e.g. {"SwPowerCap", "HwThermalSlowdown"}.
std::vector<std::string> ThrottleReasonNames(uint64_t reasons);

// Dynamic readings of one GPU at one moment.
struct GpuMetrics {
  std::optional<uint32_t> gpu_util_percent;
  std::optional<uint32_t> mem_copy_util_percent;
  std::optional<uint64_t> fb_used_bytes;
  std::optional<uint64_t> fb_free_bytes;
  std::optional<uint32_t> temperature_c;
  std::optional<double> power_watts;
  std::optional<uint64_t> total_energy_mj;  // since driver load
  std::optional<uint32_t> sm_clock_mhz;
  std::optional<uint32_t> mem_clock_mhz;
  std::optional<uint64_t> throttle_reasons;  // kThrottle* bits
  std::optional<uint64_t> ecc_sbe_volatile;
  std::optional<uint64_t> ecc_dbe_volatile;
  std::optional<uint64_t> ecc_sbe_aggregate;
  std::optional<uint64_t> ecc_dbe_aggregate;
  std::optional<uint32_t> remapped_rows_correctable;
  std::optional<uint32_t> remapped_rows_uncorrectable;
  std::optional<bool> row_remap_pending;
  std::optional<bool> row_remap_failure;
  // PCIe throughput, bytes per second (NVML samples a 20 ms window).
  std::optional<uint64_t> pcie_tx_bytes_per_s;
  std::optional<uint64_t> pcie_rx_bytes_per_s;
  // NVLink data (payload) throughput over all links, bytes per second since the previous reading.
  std::optional<uint64_t> nvlink_tx_bytes_per_s;
  std::optional<uint64_t> nvlink_rx_bytes_per_s;
};

// Something that happened to a GPU, as delivered by GpuBackend::WaitForEvent.
enum class GpuEventKind {
  kXid,              // an XID error; `xid` holds its number
  kEccDoubleBit,     // an uncorrectable (double-bit) ECC error
  kGpuLost,          // the GPU stopped answering (NVML_ERROR_GPU_IS_LOST); uuid may be empty
  kEventWaitFailed,  // the event wait itself failed; the node's GPUs cannot be watched
  kGpuReset,         // the GPU was reset and answers again
};

std::string_view GpuEventKindName(GpuEventKind kind);

struct GpuEvent {
  GpuEventKind kind = GpuEventKind::kXid;
  std::string gpu_uuid;  // empty: the event concerns no single known GPU
  uint64_t xid = 0;      // kXid only
  absl::Time time;
  std::string detail;  // free text, e.g. the driver's error string
};

}  // namespace tessera::agent
