#include "agent/fake/fake_config.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "yaml-cpp/yaml.h"

namespace tessera::agent {
namespace {

constexpr uint64_t kMiB = 1024ULL * 1024ULL;

absl::Status Bad(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

template <typename T>
absl::StatusOr<T> As(const YAML::Node& n, const std::string& path, const char* expected) {
  if (!n.IsScalar()) return Bad(path, absl::StrCat("expected ", expected));
  try {
    return n.as<T>();
  } catch (const YAML::Exception&) {
    return Bad(path, absl::StrCat("expected ", expected, ", got '", n.Scalar(), "'"));
  }
}

absl::StatusOr<uint64_t> AsUint(const YAML::Node& n, const std::string& path) {
  if (n.IsScalar() && !n.Scalar().empty() && n.Scalar()[0] == '-') {
    return Bad(path, absl::StrCat("expected a non-negative integer, got '", n.Scalar(), "'"));
  }
  return As<uint64_t>(n, path, "a non-negative integer");
}

absl::Status CheckKeys(const YAML::Node& n, const std::string& path,
                       std::initializer_list<const char*> allowed) {
  if (!n.IsMap()) return Bad(path, "expected a mapping");
  for (const auto& kv : n) {
    std::string key = kv.first.as<std::string>();
    if (std::find_if(allowed.begin(), allowed.end(), [&](const char* a) { return key == a; }) ==
        allowed.end()) {
      return Bad(absl::StrCat(path, ".", key), "unknown field");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<absl::Duration> AsDuration(const YAML::Node& n, const std::string& path) {
  if (!n.IsScalar()) return Bad(path, "expected a duration such as 30s");
  absl::Duration d;
  if (absl::ParseDuration(n.Scalar(), &d)) return d;
  double seconds = 0;
  std::istringstream in(n.Scalar());
  if (in >> seconds && in.eof()) return absl::Seconds(seconds);
  return Bad(path, absl::StrCat("expected a duration such as 30s, got '", n.Scalar(), "'"));
}

// Assigns the metric keys present in `n` (a mapping) to `m`; memory_used_mib goes to `used_mib`.
absl::Status ApplyMetrics(const YAML::Node& n, const std::string& path, GpuMetrics& m,
                          std::optional<uint64_t>& used_mib) {
  RETURN_IF_ERROR(CheckKeys(n, path,
                            {"gpu_util",
                             "mem_copy_util",
                             "memory_used_mib",
                             "temperature_c",
                             "power_w",
                             "energy_mj",
                             "sm_clock_mhz",
                             "mem_clock_mhz",
                             "throttle_reasons",
                             "ecc_sbe_volatile",
                             "ecc_dbe_volatile",
                             "ecc_sbe_aggregate",
                             "ecc_dbe_aggregate",
                             "remapped_rows_correctable",
                             "remapped_rows_uncorrectable",
                             "row_remap_pending",
                             "row_remap_failure",
                             "pcie_tx_bytes",
                             "pcie_rx_bytes",
                             "nvlink_tx_bytes",
                             "nvlink_rx_bytes"}));
  for (const auto& kv : n) {
    const std::string key = kv.first.as<std::string>();
    const std::string p = absl::StrCat(path, ".", key);
    const YAML::Node& v = kv.second;
    if (key == "power_w") {
      ASSIGN_OR_RETURN(m.power_watts, As<double>(v, p, "a number"));
      continue;
    }
    if (key == "row_remap_pending" || key == "row_remap_failure") {
      ASSIGN_OR_RETURN(bool b, As<bool>(v, p, "true or false"));
      (key == "row_remap_pending" ? m.row_remap_pending : m.row_remap_failure) = b;
      continue;
    }
    ASSIGN_OR_RETURN(uint64_t u, AsUint(v, p));
    auto u32 = static_cast<uint32_t>(u);
    if (key == "gpu_util") m.gpu_util_percent = u32;
    if (key == "mem_copy_util") m.mem_copy_util_percent = u32;
    if (key == "memory_used_mib") used_mib = u;
    if (key == "temperature_c") m.temperature_c = u32;
    if (key == "energy_mj") m.total_energy_mj = u;
    if (key == "sm_clock_mhz") m.sm_clock_mhz = u32;
    if (key == "mem_clock_mhz") m.mem_clock_mhz = u32;
    if (key == "throttle_reasons") m.throttle_reasons = u;
    if (key == "ecc_sbe_volatile") m.ecc_sbe_volatile = u;
    if (key == "ecc_dbe_volatile") m.ecc_dbe_volatile = u;
    if (key == "ecc_sbe_aggregate") m.ecc_sbe_aggregate = u;
    if (key == "ecc_dbe_aggregate") m.ecc_dbe_aggregate = u;
    if (key == "remapped_rows_correctable") m.remapped_rows_correctable = u32;
    if (key == "pcie_tx_bytes") m.pcie_tx_bytes_per_s = u;
    if (key == "pcie_rx_bytes") m.pcie_rx_bytes_per_s = u;
    if (key == "nvlink_tx_bytes") m.nvlink_tx_bytes_per_s = u;
    if (key == "nvlink_rx_bytes") m.nvlink_rx_bytes_per_s = u;
    if (key == "remapped_rows_uncorrectable") m.remapped_rows_uncorrectable = u32;
  }
  return absl::OkStatus();
}

struct GpuDraft {
  FakeGpu gpu;
  uint64_t memory_mib = 0;
  std::optional<uint64_t> used_mib;
  int nvlinks = 0;
};

absl::Status ApplyGpuFields(const YAML::Node& n, const std::string& path, GpuDraft& d) {
  RETURN_IF_ERROR(CheckKeys(n, path,
                            {"model", "memory_mib", "uuid", "pci_bus_id", "numa_node", "minor",
                             "nvlinks", "mig", "metrics"}));
  if (n["model"]) {
    ASSIGN_OR_RETURN(d.gpu.info.name, As<std::string>(n["model"], path + ".model", "a string"));
  }
  if (n["memory_mib"]) {
    ASSIGN_OR_RETURN(d.memory_mib, AsUint(n["memory_mib"], path + ".memory_mib"));
  }
  if (n["uuid"]) {
    ASSIGN_OR_RETURN(d.gpu.info.uuid, As<std::string>(n["uuid"], path + ".uuid", "a string"));
  }
  if (n["pci_bus_id"]) {
    ASSIGN_OR_RETURN(d.gpu.info.pci_bus_id,
                     As<std::string>(n["pci_bus_id"], path + ".pci_bus_id", "a string"));
  }
  if (n["numa_node"]) {
    ASSIGN_OR_RETURN(uint64_t v, AsUint(n["numa_node"], path + ".numa_node"));
    d.gpu.info.numa_node = static_cast<int>(v);
  }
  if (n["minor"]) {
    ASSIGN_OR_RETURN(uint64_t v, AsUint(n["minor"], path + ".minor"));
    d.gpu.info.minor = static_cast<int>(v);
  }
  if (n["nvlinks"]) {
    ASSIGN_OR_RETURN(uint64_t v, AsUint(n["nvlinks"], path + ".nvlinks"));
    if (v > 18) return Bad(path + ".nvlinks", "at most 18 NVLinks per GPU");
    d.nvlinks = static_cast<int>(v);
  }
  if (n["metrics"])
    RETURN_IF_ERROR(ApplyMetrics(n["metrics"], path + ".metrics", d.gpu.metrics, d.used_mib));
  if (const YAML::Node& mig = n["mig"]; mig) {
    const std::string mp = path + ".mig";
    RETURN_IF_ERROR(CheckKeys(mig, mp, {"enabled", "instances"}));
    MigMode mode;
    mode.current = mode.pending = static_cast<bool>(mig["instances"]);
    if (mig["enabled"]) {
      ASSIGN_OR_RETURN(mode.current, As<bool>(mig["enabled"], mp + ".enabled", "true or false"));
      mode.pending = mode.current;
    }
    d.gpu.info.mig_mode = mode;
    d.gpu.info.mig_instances.clear();
    if (const YAML::Node& list = mig["instances"]; list) {
      if (!list.IsSequence()) return Bad(mp + ".instances", "expected a list");
      for (size_t i = 0; i < list.size(); ++i) {
        const std::string ip = absl::StrCat(mp, ".instances[", i, "]");
        RETURN_IF_ERROR(CheckKeys(list[i], ip, {"profile", "uuid", "memory_mib"}));
        MigInstance m;
        if (!list[i]["profile"]) return Bad(ip + ".profile", "required");
        ASSIGN_OR_RETURN(m.profile,
                         As<std::string>(list[i]["profile"], ip + ".profile", "a string"));
        if (list[i]["uuid"]) {
          ASSIGN_OR_RETURN(m.uuid, As<std::string>(list[i]["uuid"], ip + ".uuid", "a string"));
        }
        if (list[i]["memory_mib"]) {
          ASSIGN_OR_RETURN(uint64_t mib, AsUint(list[i]["memory_mib"], ip + ".memory_mib"));
          m.memory_bytes = mib * kMiB;
        }
        m.gpu_instance_id = static_cast<int>(i) + 1;
        m.compute_instance_id = 0;
        d.gpu.info.mig_instances.push_back(std::move(m));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::pair<int, int>> PairOf(const YAML::Node& n, const std::string& path,
                                           int count) {
  if (!n || !n.IsSequence() || n.size() != 2) return Bad(path, "expected two GPU indexes [a, b]");
  ASSIGN_OR_RETURN(uint64_t a, AsUint(n[0], path + "[0]"));
  ASSIGN_OR_RETURN(uint64_t b, AsUint(n[1], path + "[1]"));
  if (a >= static_cast<uint64_t>(count) || b >= static_cast<uint64_t>(count) || a == b) {
    return Bad(path, absl::StrCat("GPU indexes must be distinct and below ", count));
  }
  return std::make_pair(static_cast<int>(a), static_cast<int>(b));
}

absl::StatusOr<TopologyLevel> LevelOf(const YAML::Node& n, const std::string& path) {
  ASSIGN_OR_RETURN(std::string s, As<std::string>(n, path, "a topology level"));
  s = absl::AsciiStrToUpper(s);
  for (TopologyLevel l :
       {TopologyLevel::kInternal, TopologyLevel::kSingle, TopologyLevel::kMultiple,
        TopologyLevel::kHostBridge, TopologyLevel::kNode, TopologyLevel::kSystem}) {
    if (s == TopologyLevelName(l)) return l;
  }
  return Bad(path, absl::StrCat("unknown topology level '", s,
                                "' (INTERNAL, SINGLE, MULTIPLE, HOSTBRIDGE, NODE, SYSTEM)"));
}

absl::StatusOr<FakeEvent> ParseEvent(const YAML::Node& n, const std::string& path, int count) {
  RETURN_IF_ERROR(
      CheckKeys(n, path, {"at", "gpu", "type", "xid", "count", "value", "set", "detail"}));
  FakeEvent e;
  if (!n["at"]) return Bad(path + ".at", "required");
  ASSIGN_OR_RETURN(e.at, AsDuration(n["at"], path + ".at"));
  if (e.at < absl::ZeroDuration()) return Bad(path + ".at", "must not be negative");
  if (!n["type"]) return Bad(path + ".type", "required");
  ASSIGN_OR_RETURN(std::string type, As<std::string>(n["type"], path + ".type", "an event type"));
  static const std::pair<const char*, FakeEventType> kTypes[] = {
      {"xid", FakeEventType::kXid},         {"ecc_dbe", FakeEventType::kEccDbe},
      {"ecc_sbe", FakeEventType::kEccSbe},  {"temperature", FakeEventType::kTemperature},
      {"metrics", FakeEventType::kMetrics}, {"lost", FakeEventType::kLost},
      {"reset", FakeEventType::kReset},     {"wait_error", FakeEventType::kWaitError}};
  auto it = std::find_if(std::begin(kTypes), std::end(kTypes),
                         [&](const auto& t) { return type == t.first; });
  if (it == std::end(kTypes)) {
    return Bad(path + ".type",
               absl::StrCat("unknown event type '", type,
                            "' (xid, ecc_dbe, ecc_sbe, temperature, metrics, lost, reset, "
                            "wait_error)"));
  }
  e.type = it->second;
  if (n["gpu"]) {
    ASSIGN_OR_RETURN(uint64_t g, AsUint(n["gpu"], path + ".gpu"));
    if (g >= static_cast<uint64_t>(count)) {
      return Bad(path + ".gpu", absl::StrCat("no GPU ", g, " (the node has ", count, ")"));
    }
    e.gpu = static_cast<int>(g);
  } else if (e.type != FakeEventType::kWaitError) {
    return Bad(path + ".gpu", "required for this event type");
  }
  if (n["detail"]) {
    ASSIGN_OR_RETURN(e.detail, As<std::string>(n["detail"], path + ".detail", "a string"));
  }
  if (n["count"]) {
    ASSIGN_OR_RETURN(e.count, AsUint(n["count"], path + ".count"));
  }
  switch (e.type) {
    case FakeEventType::kXid: {
      if (!n["xid"]) return Bad(path + ".xid", "required for an xid event");
      ASSIGN_OR_RETURN(e.xid, AsUint(n["xid"], path + ".xid"));
      break;
    }
    case FakeEventType::kTemperature: {
      if (!n["value"]) return Bad(path + ".value", "required for a temperature event");
      ASSIGN_OR_RETURN(uint64_t v, AsUint(n["value"], path + ".value"));
      e.value = static_cast<uint32_t>(v);
      break;
    }
    case FakeEventType::kMetrics:
      if (!n["set"]) return Bad(path + ".set", "required for a metrics event");
      RETURN_IF_ERROR(ApplyMetrics(n["set"], path + ".set", e.set, e.set_used_mib));
      break;
    default:
      break;
  }
  return e;
}

absl::StatusOr<FakeConfig> Parse(const YAML::Node& root) {
  RETURN_IF_ERROR(CheckKeys(root, "config",
                            {"driver_version", "defaults", "nvswitch", "gpus", "nvlink_pairs",
                             "topology", "events", "description"}));
  FakeConfig cfg;
  cfg.driver_version = "fake";
  if (root["driver_version"]) {
    ASSIGN_OR_RETURN(cfg.driver_version,
                     As<std::string>(root["driver_version"], "driver_version", "a string"));
  }
  bool nvswitch = false;
  if (root["nvswitch"]) {
    ASSIGN_OR_RETURN(nvswitch, As<bool>(root["nvswitch"], "nvswitch", "true or false"));
  }
  const YAML::Node& gpus = root["gpus"];
  if (!gpus || !gpus.IsSequence() || gpus.size() == 0)
    return Bad("gpus", "expected a non-empty list");
  const int count = static_cast<int>(gpus.size());
  std::vector<GpuDraft> drafts;
  absl::flat_hash_set<std::string> uuids;
  for (int i = 0; i < count; ++i) {
    GpuDraft d;
    d.gpu.info.name = "NVIDIA H100 80GB HBM3";
    d.memory_mib = 81559;
    if (root["defaults"]) RETURN_IF_ERROR(ApplyGpuFields(root["defaults"], "defaults", d));
    const std::string path = absl::StrCat("gpus[", i, "]");
    RETURN_IF_ERROR(ApplyGpuFields(gpus[i], path, d));
    GpuInfo& info = d.gpu.info;
    info.index = i;
    if (info.uuid.empty()) info.uuid = absl::StrFormat("GPU-fa4e0000-0000-4000-8000-%012d", i);
    if (!uuids.insert(info.uuid).second) return Bad(path + ".uuid", "duplicate UUID " + info.uuid);
    if (info.pci_bus_id.empty())
      info.pci_bus_id = absl::StrFormat("00000000:%02X:00.0", 0x18 + 0x10 * i);
    if (!info.minor) info.minor = i;
    uint64_t used = d.used_mib.value_or(0);
    if (used > d.memory_mib) return Bad(path + ".metrics.memory_used_mib", "exceeds memory_mib");
    info.memory = MemoryInfo{d.memory_mib * kMiB, used * kMiB, (d.memory_mib - used) * kMiB};
    d.gpu.metrics.fb_used_bytes = info.memory->used_bytes;
    d.gpu.metrics.fb_free_bytes = info.memory->free_bytes;
    for (size_t m = 0; m < info.mig_instances.size(); ++m) {
      if (info.mig_instances[m].uuid.empty()) {
        info.mig_instances[m].uuid = absl::StrFormat("MIG-fa4e0000-%04d-4000-8000-%012d", i, m);
      }
    }
    if (nvswitch) {
      for (int l = 0; l < d.nvlinks; ++l) {
        // Four NVSwitches on buses 0x05..0x08, links spread over them.
        info.nvlinks.push_back(
            NvLinkInfo{l, true, absl::StrFormat("00000000:%02X:00.0", 0x05 + l % 4)});
      }
    }
    drafts.push_back(std::move(d));
  }
  if (const YAML::Node& pairs = root["nvlink_pairs"]; pairs) {
    if (!pairs.IsSequence()) return Bad("nvlink_pairs", "expected a list");
    for (size_t i = 0; i < pairs.size(); ++i) {
      const std::string path = absl::StrCat("nvlink_pairs[", i, "]");
      RETURN_IF_ERROR(CheckKeys(pairs[i], path, {"gpus", "links"}));
      ASSIGN_OR_RETURN(auto ab, PairOf(pairs[i]["gpus"], path + ".gpus", count));
      uint64_t links = 4;
      if (pairs[i]["links"]) {
        ASSIGN_OR_RETURN(links, AsUint(pairs[i]["links"], path + ".links"));
      }
      for (auto [from, to] : {ab, std::make_pair(ab.second, ab.first)}) {
        GpuInfo& info = drafts[from].gpu.info;
        for (uint64_t l = 0; l < links; ++l) {
          int idx = static_cast<int>(info.nvlinks.size());
          if (idx >= 18) return Bad(path + ".links", "more than 18 NVLinks on one GPU");
          info.nvlinks.push_back(NvLinkInfo{idx, true, drafts[to].gpu.info.pci_bus_id});
        }
      }
    }
  }
  cfg.levels.assign(count, std::vector<TopologyLevel>(count, TopologyLevel::kInternal));
  for (int a = 0; a < count; ++a) {
    for (int b = 0; b < count; ++b) {
      if (a == b) continue;
      const auto& na = drafts[a].gpu.info.numa_node;
      const auto& nb = drafts[b].gpu.info.numa_node;
      cfg.levels[a][b] = na == nb ? TopologyLevel::kNode : TopologyLevel::kSystem;
    }
  }
  if (const YAML::Node& topo = root["topology"]; topo) {
    if (!topo.IsSequence()) return Bad("topology", "expected a list");
    for (size_t i = 0; i < topo.size(); ++i) {
      const std::string path = absl::StrCat("topology[", i, "]");
      RETURN_IF_ERROR(CheckKeys(topo[i], path, {"gpus", "level"}));
      ASSIGN_OR_RETURN(auto ab, PairOf(topo[i]["gpus"], path + ".gpus", count));
      if (!topo[i]["level"]) return Bad(path + ".level", "required");
      ASSIGN_OR_RETURN(TopologyLevel level, LevelOf(topo[i]["level"], path + ".level"));
      cfg.levels[ab.first][ab.second] = cfg.levels[ab.second][ab.first] = level;
    }
  }
  for (GpuDraft& d : drafts) cfg.gpus.push_back(std::move(d.gpu));
  if (const YAML::Node& events = root["events"]; events) {
    if (!events.IsSequence()) return Bad("events", "expected a list");
    for (size_t i = 0; i < events.size(); ++i) {
      ASSIGN_OR_RETURN(FakeEvent e, ParseEvent(events[i], absl::StrCat("events[", i, "]"), count));
      cfg.events.push_back(std::move(e));
    }
    std::stable_sort(cfg.events.begin(), cfg.events.end(),
                     [](const FakeEvent& a, const FakeEvent& b) { return a.at < b.at; });
  }
  return cfg;
}

}  // namespace

absl::StatusOr<FakeConfig> ParseFakeConfig(const std::string& yaml_text) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("fake GPU config is not valid YAML: ", e.what()));
  }
  try {
    return Parse(root);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("fake GPU config: ", e.what()));
  }
}

absl::StatusOr<FakeConfig> LoadFakeConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read fake GPU config ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  absl::StatusOr<FakeConfig> cfg = ParseFakeConfig(ss.str());
  if (!cfg.ok()) {
    return absl::Status(cfg.status().code(), absl::StrCat(path, ": ", cfg.status().message()));
  }
  return cfg;
}

}  // namespace tessera::agent
