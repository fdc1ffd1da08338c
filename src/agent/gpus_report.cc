#include "agent/gpus_report.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace tessera::agent {
namespace {

constexpr uint64_t kMiB = 1024ULL * 1024ULL;

template <typename T>
std::string Or(const std::optional<T>& v, const std::string& suffix = "") {
  if (!v) return "-";
  return absl::StrCat(*v, suffix);
}

std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& r : rows) {
    if (width.size() < r.size()) width.resize(r.size(), 0);
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      absl::StrAppend(&line, r[i]);
      if (i + 1 < r.size()) line.append(width[i] - r[i].size() + 2, ' ');
    }
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

std::string MigText(const GpuInfo& g) {
  if (!g.mig_mode) return "-";
  std::string s = g.mig_mode->current ? "enabled" : "disabled";
  if (g.mig_mode->pending != g.mig_mode->current) {
    absl::StrAppend(&s, " (", g.mig_mode->pending ? "enable" : "disable", " pending)");
  }
  return s;
}

template <typename T>
nlohmann::json J(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

}  // namespace

std::string RenderSnapshotTable(const NodeSnapshot& snap) {
  std::string out = absl::StrCat(
      "Backend: ", snap.backend,
      "   Driver: ", snap.driver_version.empty() ? "-" : snap.driver_version,
      "   GPUs: ", snap.gpus.size(),
      snap.cuda_driver_version.empty() ? "" : "   CUDA: ", snap.cuda_driver_version, "\n\n");
  std::vector<std::vector<std::string>> rows = {{"IDX", "UUID", "MODEL", "MEMORY", "PCI BUS ID",
                                                 "NUMA", "NVLINK", "MIG", "UTIL", "MEM", "TEMP",
                                                 "POWER", "SM MHZ", "ECC DBE", "THROTTLE"}};
  std::vector<std::string> errors;
  for (const GpuSnapshot& s : snap.gpus) {
    const GpuInfo& g = s.info;
    if (!s.error.empty()) {
      rows.push_back({absl::StrCat(g.index), g.uuid.empty() ? "-" : g.uuid, "ERROR"});
      errors.push_back(absl::StrCat("GPU ", g.index, ": ", s.error));
      continue;
    }
    const GpuMetrics& m = s.metrics;
    int active = static_cast<int>(std::count_if(g.nvlinks.begin(), g.nvlinks.end(),
                                                [](const NvLinkInfo& l) { return l.active; }));
    std::string mem = g.memory ? absl::StrCat(g.memory->total_bytes / kMiB, " MiB") : "-";
    std::string used = m.fb_used_bytes ? absl::StrCat(*m.fb_used_bytes / kMiB, " MiB") : "-";
    std::string power = m.power_watts ? absl::StrFormat("%.1f W", *m.power_watts) : "-";
    std::string throttle = "-";
    if (m.throttle_reasons) {
      std::vector<std::string> names = ThrottleReasonNames(*m.throttle_reasons);
      throttle = names.empty() ? "none" : absl::StrJoin(names, ",");
    }
    rows.push_back({absl::StrCat(g.index), g.uuid, g.name, mem,
                    g.pci_bus_id.empty() ? "-" : g.pci_bus_id, Or(g.numa_node),
                    g.nvlinks.empty() ? "-" : absl::StrCat(active, "/", g.nvlinks.size()),
                    MigText(g), Or(m.gpu_util_percent, "%"), used, Or(m.temperature_c, "C"), power,
                    Or(m.sm_clock_mhz), Or(m.ecc_dbe_volatile), throttle});
  }
  absl::StrAppend(&out, Table(rows));
  for (const std::string& e : errors) absl::StrAppend(&out, e, "\n");

  bool any_mig = false;
  for (const GpuSnapshot& s : snap.gpus) {
    for (const MigInstance& m : s.info.mig_instances) {
      if (!any_mig) absl::StrAppend(&out, "\nMIG instances:\n");
      any_mig = true;
      absl::StrAppend(&out, "  GPU ", s.info.index, "  ", m.profile, "  ", m.uuid,
                      m.memory_bytes ? absl::StrCat("  ", *m.memory_bytes / kMiB, " MiB") : "",
                      "\n");
    }
  }

  const TopologyMatrix& t = snap.topology;
  if (t.size > 1) {
    absl::StrAppend(&out,
                    "\nTopology (X = self, NV = NVLink/NVSwitch, PXB = PCIe switch, PHB = host "
                    "bridge / same NUMA node, SYS = across NUMA nodes, ? = unknown):\n");
    std::vector<std::vector<std::string>> topo;
    std::vector<std::string> header = {""};
    for (int b = 0; b < t.size; ++b) header.push_back(absl::StrCat("GPU", b));
    header.push_back("NUMA");
    topo.push_back(header);
    for (int a = 0; a < t.size; ++a) {
      std::vector<std::string> row = {absl::StrCat("GPU", a)};
      for (int b = 0; b < t.size; ++b) row.emplace_back(LinkClassShortName(t.Link(a, b)));
      row.push_back(Or(snap.gpus[a].info.numa_node));
      topo.push_back(std::move(row));
    }
    absl::StrAppend(&out, Table(topo));
  }
  return out;
}

nlohmann::json SnapshotToJson(const NodeSnapshot& snap) {
  nlohmann::json j;
  j["backend"] = snap.backend;
  j["driver_version"] = snap.driver_version;
  j["cuda_driver_version"] = snap.cuda_driver_version;
  j["gpus"] = nlohmann::json::array();
  for (const GpuSnapshot& s : snap.gpus) {
    const GpuInfo& g = s.info;
    nlohmann::json gj;
    gj["index"] = g.index;
    gj["uuid"] = g.uuid;
    if (!s.error.empty()) {
      gj["error"] = s.error;
      j["gpus"].push_back(std::move(gj));
      continue;
    }
    gj["name"] = g.name;
    gj["pci_bus_id"] = g.pci_bus_id;
    gj["minor"] = J(g.minor);
    gj["numa_node"] = J(g.numa_node);
    if (g.memory) {
      gj["memory"] = {{"total_bytes", g.memory->total_bytes},
                      {"used_bytes", g.memory->used_bytes},
                      {"free_bytes", g.memory->free_bytes},
                      {"reserved_bytes", J(g.memory->reserved_bytes)}};
    } else {
      gj["memory"] = nullptr;
    }
    gj["nvlinks"] = nlohmann::json::array();
    for (const NvLinkInfo& l : g.nvlinks) {
      gj["nvlinks"].push_back(
          {{"link", l.link}, {"active", l.active}, {"remote_pci_bus_id", l.remote_pci_bus_id}});
    }
    if (g.mig_mode) {
      nlohmann::json mig = {{"enabled", g.mig_mode->current}, {"pending", g.mig_mode->pending}};
      mig["instances"] = nlohmann::json::array();
      for (const MigInstance& m : g.mig_instances) {
        mig["instances"].push_back({{"uuid", m.uuid},
                                    {"profile", m.profile},
                                    {"memory_bytes", J(m.memory_bytes)},
                                    {"gpu_instance_id", J(m.gpu_instance_id)},
                                    {"compute_instance_id", J(m.compute_instance_id)}});
      }
      gj["mig"] = std::move(mig);
    } else {
      gj["mig"] = nullptr;
    }
    gj["ecc_mode"] = g.ecc_mode ? nlohmann::json{{"enabled", g.ecc_mode->current},
                                                 {"pending", g.ecc_mode->pending}}
                                : nlohmann::json(nullptr);
    const GpuMetrics& m = s.metrics;
    nlohmann::json throttle = nullptr;
    if (m.throttle_reasons) throttle = ThrottleReasonNames(*m.throttle_reasons);
    gj["metrics"] = {{"gpu_util_percent", J(m.gpu_util_percent)},
                     {"mem_copy_util_percent", J(m.mem_copy_util_percent)},
                     {"fb_used_bytes", J(m.fb_used_bytes)},
                     {"fb_free_bytes", J(m.fb_free_bytes)},
                     {"temperature_c", J(m.temperature_c)},
                     {"power_watts", J(m.power_watts)},
                     {"total_energy_mj", J(m.total_energy_mj)},
                     {"sm_clock_mhz", J(m.sm_clock_mhz)},
                     {"mem_clock_mhz", J(m.mem_clock_mhz)},
                     {"throttle_reasons", J(m.throttle_reasons)},
                     {"throttle_reason_names", throttle},
                     {"ecc_sbe_volatile", J(m.ecc_sbe_volatile)},
                     {"ecc_dbe_volatile", J(m.ecc_dbe_volatile)},
                     {"ecc_sbe_aggregate", J(m.ecc_sbe_aggregate)},
                     {"ecc_dbe_aggregate", J(m.ecc_dbe_aggregate)},
                     {"remapped_rows_correctable", J(m.remapped_rows_correctable)},
                     {"remapped_rows_uncorrectable", J(m.remapped_rows_uncorrectable)},
                     {"row_remap_pending", J(m.row_remap_pending)},
                     {"row_remap_failure", J(m.row_remap_failure)}};
    j["gpus"].push_back(std::move(gj));
  }
  const TopologyMatrix& t = snap.topology;
  nlohmann::json links = nlohmann::json::array();
  nlohmann::json levels = nlohmann::json::array();
  for (int a = 0; a < t.size; ++a) {
    nlohmann::json lrow = nlohmann::json::array();
    nlohmann::json vrow = nlohmann::json::array();
    for (int b = 0; b < t.size; ++b) {
      lrow.push_back(std::string(LinkClassName(t.Link(a, b))));
      std::optional<TopologyLevel> lv = t.Level(a, b);
      vrow.push_back(lv ? nlohmann::json(std::string(TopologyLevelName(*lv)))
                        : nlohmann::json(nullptr));
    }
    links.push_back(std::move(lrow));
    levels.push_back(std::move(vrow));
  }
  j["topology"] = {{"links", std::move(links)}, {"pcie_levels", std::move(levels)}};
  return j;
}

}  // namespace tessera::agent
