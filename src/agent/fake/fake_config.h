// FakeConfig: the YAML description a FakeBackend plays back: GPUs (models, memory, NUMA, NVLink,
// PCIe topology, MIG) and a script of events at times relative to the backend's Init().
//
// Format (see deploy/fake-gpus/*.yaml for complete examples):
//   driver_version: "550.90.07"
//   defaults: {model: ..., memory_mib: 81559, nvlinks: 18, metrics: {temperature_c: 35, ...}}
//   nvswitch: true               # every GPU's NVLinks go to NVSwitches (all-to-all fabric)
//   gpus:                        # each entry overrides `defaults`
//     - {uuid: GPU-..., pci_bus_id: "00000000:18:00.0", numa_node: 0,
//        mig: {instances: [{profile: 1g.10gb, uuid: MIG-..., memory_mib: 9984}]}}
//   nvlink_pairs: [{gpus: [0, 1], links: 4}]   # direct NVLink bridges
//   topology: [{gpus: [0, 1], level: SINGLE}]  # PCIe common ancestor; unlisted pairs: NODE when
//                                              # on the same NUMA node, else SYSTEM
//   events:
//     - {at: 30s, gpu: 3, type: xid, xid: 79}
//     - {at: 40s, gpu: 1, type: ecc_dbe, count: 1}     # also ecc_sbe
//     - {at: 50s, gpu: 2, type: temperature, value: 97}
//     - {at: 55s, gpu: 2, type: metrics, set: {gpu_util: 90, power_w: 650}}
//     - {at: 60s, gpu: 5, type: lost}
//     - {at: 90s, gpu: 5, type: reset}
//     - {at: 120s, type: wait_error, detail: "driver crashed"}
// Metric keys: gpu_util, mem_copy_util, memory_used_mib, temperature_c, power_w, energy_mj,
// sm_clock_mhz, mem_clock_mhz, throttle_reasons, ecc_sbe_volatile, ecc_dbe_volatile,
// ecc_sbe_aggregate, ecc_dbe_aggregate, remapped_rows_correctable, remapped_rows_uncorrectable,
// row_remap_pending, row_remap_failure, pcie_tx_bytes, pcie_rx_bytes, nvlink_tx_bytes,
// nvlink_rx_bytes (per second).
// Errors name the offending field ("gpus[2].memory_mib: ...").
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/gpu_info.h"
#include "agent/topology.h"

namespace tessera::agent {

enum class FakeEventType {
  kXid,
  kEccDbe,
  kEccSbe,
  kTemperature,
  kMetrics,
  kLost,
  kReset,
  kWaitError
};

struct FakeEvent {
  absl::Duration at;
  int gpu = -1;  // -1: not about one GPU (wait_error)
  FakeEventType type = FakeEventType::kXid;
  uint64_t xid = 0;
  uint64_t count = 1;
  uint32_t value = 0;
  GpuMetrics set;                        // kMetrics: the fields present are assigned
  std::optional<uint64_t> set_used_mib;  // kMetrics: memory_used_mib
  std::string detail;
};

struct FakeGpu {
  GpuInfo info;
  GpuMetrics metrics;  // initial readings; fb_* derived from memory
};

struct FakeConfig {
  std::string driver_version;
  std::vector<FakeGpu> gpus;
  std::vector<std::vector<TopologyLevel>> levels;  // N x N
  std::vector<FakeEvent> events;                   // sorted by `at` (stable)
};

absl::StatusOr<FakeConfig> ParseFakeConfig(const std::string& yaml_text);
absl::StatusOr<FakeConfig> LoadFakeConfig(const std::string& path);

}  // namespace tessera::agent
