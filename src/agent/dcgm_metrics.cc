#include "agent/dcgm_metrics.h"

#include <cmath>
#include <functional>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tessera::agent {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

struct Family {
  const char* name;
  const char* type;
  const char* help;
  std::function<std::optional<double>(const GpuSnapshot&, const DcgmRenderOptions&)> value;
};

template <typename T>
std::optional<double> D(const std::optional<T>& v) {
  if (!v) return std::nullopt;
  return static_cast<double>(*v);
}

const std::vector<Family>& Families() {
  static const std::vector<Family> kFamilies = {
      {"DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).",
       [](const GpuSnapshot& g, const auto&) { return D(g.metrics.sm_clock_mhz); }},
      {"DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).",
       [](const GpuSnapshot& g, const auto&) { return D(g.metrics.mem_clock_mhz); }},
      {"DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).",
       [](const GpuSnapshot& g, const auto&) { return D(g.metrics.temperature_c); }},
      {"DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).",
       [](const GpuSnapshot& g, const auto&) { return D(g.metrics.power_watts); }},
      {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
       "Total energy consumption since boot (in mJ).",
       [](const GpuSnapshot& g, const auto&) { return D(g.metrics.total_energy_mj); }},
      {"DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).",
       [](const GpuSnapshot& g, const auto&) { return D(g.metrics.gpu_util_percent); }},
      {"DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).",
       [](const GpuSnapshot& g, const auto&) { return D(g.metrics.mem_copy_util_percent); }},
      {"DCGM_FI_PROF_PCIE_TX_BYTES", "gauge",
       "The rate of data transmitted over the PCIe bus - including both protocol headers and "
       "data payloads - in bytes per second.",
       [](const GpuSnapshot& g, const auto&) { return D(g.metrics.pcie_tx_bytes_per_s); }},
      {"DCGM_FI_PROF_PCIE_RX_BYTES", "gauge",
       "The rate of data received over the PCIe bus - including both protocol headers and data "
       "payloads - in bytes per second.",
       [](const GpuSnapshot& g, const auto&) { return D(g.metrics.pcie_rx_bytes_per_s); }},
      {"DCGM_FI_PROF_NVLINK_TX_BYTES", "gauge",
       "The rate of data transmitted over NVLink, not including protocol headers, in bytes per "
       "second.",
       [](const GpuSnapshot& g, const auto&) { return D(g.metrics.nvlink_tx_bytes_per_s); }},
      {"DCGM_FI_PROF_NVLINK_RX_BYTES", "gauge",
       "The rate of data received over NVLink, not including protocol headers, in bytes per "
       "second.",
       [](const GpuSnapshot& g, const auto&) { return D(g.metrics.nvlink_rx_bytes_per_s); }},
      {"DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).",
       [](const GpuSnapshot& g, const auto&) -> std::optional<double> {
         if (!g.metrics.fb_free_bytes) return std::nullopt;
         return std::floor(*g.metrics.fb_free_bytes / kMiB);
       }},
      {"DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).",
       [](const GpuSnapshot& g, const auto&) -> std::optional<double> {
         if (!g.metrics.fb_used_bytes) return std::nullopt;
         return std::floor(*g.metrics.fb_used_bytes / kMiB);
       }},
      {"DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.",
       [](const GpuSnapshot& g, const DcgmRenderOptions& o) -> std::optional<double> {
         auto it = o.last_xid.find(g.info.uuid);
         return it == o.last_xid.end() ? 0.0 : static_cast<double>(it->second);
       }},
      {"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "gauge", "Current clock throttle reasons.",
       [](const GpuSnapshot& g, const auto&) { return D(g.metrics.throttle_reasons); }},
      {"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter",
       "Total number of single-bit volatile ECC errors.",
       [](const GpuSnapshot& g, const auto&) { return D(g.metrics.ecc_sbe_volatile); }},
      {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter",
       "Total number of double-bit volatile ECC errors.",
       [](const GpuSnapshot& g, const auto&) { return D(g.metrics.ecc_dbe_volatile); }},
      {"DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "counter",
       "Total number of single-bit persistent ECC errors.",
       [](const GpuSnapshot& g, const auto&) { return D(g.metrics.ecc_sbe_aggregate); }},
      {"DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "counter",
       "Total number of double-bit persistent ECC errors.",
       [](const GpuSnapshot& g, const auto&) { return D(g.metrics.ecc_dbe_aggregate); }},
      {"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter",
       "Number of remapped rows for correctable errors.",
       [](const GpuSnapshot& g, const auto&) { return D(g.metrics.remapped_rows_correctable); }},
      {"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter",
       "Number of remapped rows for uncorrectable errors.",
       [](const GpuSnapshot& g, const auto&) { return D(g.metrics.remapped_rows_uncorrectable); }},
      {"DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed.",
       [](const GpuSnapshot& g, const auto&) -> std::optional<double> {
         if (!g.metrics.row_remap_failure) return std::nullopt;
         return *g.metrics.row_remap_failure ? 1.0 : 0.0;
       }},
  };
  return kFamilies;
}

std::string FormatValue(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9007199254740992.0) {
    return absl::StrFormat("%.0f", v);
  }
  std::string s = absl::StrFormat("%.6f", v);
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

// HELP text escapes backslash and newline only.
std::string EscapeHelp(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string Labels(const GpuSnapshot& g, const DcgmRenderOptions& o) {
  std::string out = absl::StrCat(
      "gpu=\"", g.info.index, "\",UUID=\"", EscapeLabelValue(g.info.uuid), "\",pci_bus_id=\"",
      EscapeLabelValue(g.info.pci_bus_id), "\",device=\"nvidia",
      g.info.minor.value_or(g.info.index), "\",modelName=\"", EscapeLabelValue(g.info.name),
      "\",Hostname=\"", EscapeLabelValue(o.hostname), "\"");
  if (auto it = o.workloads.find(g.info.uuid); it != o.workloads.end()) {
    absl::StrAppend(&out, ",tessera_namespace=\"", EscapeLabelValue(it->second.namespace_name),
                    "\",tessera_job=\"", EscapeLabelValue(it->second.job), "\"");
  }
  return out;
}

}  // namespace

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string RenderDcgmMetrics(const std::vector<GpuSnapshot>& gpus,
                              const DcgmRenderOptions& options) {
  std::vector<std::string> labels;
  labels.reserve(gpus.size());
  for (const GpuSnapshot& g : gpus) labels.push_back(g.error.empty() ? Labels(g, options) : "");
  std::string out;
  for (const Family& f : Families()) {
    std::string samples;
    for (size_t i = 0; i < gpus.size(); ++i) {
      if (!gpus[i].error.empty()) continue;
      std::optional<double> v = f.value(gpus[i], options);
      if (!v) continue;
      absl::StrAppend(&samples, f.name, "{", labels[i], "} ", FormatValue(*v), "\n");
    }
    if (samples.empty()) continue;
    absl::StrAppend(&out, "# HELP ", f.name, " ", EscapeHelp(f.help), "\n# TYPE ", f.name, " ",
                    f.type, "\n", samples);
  }
  return out;
}

}  // namespace tessera::agent
