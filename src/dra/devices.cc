#include "dra/devices.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "deviceplugin/inventory.h"
#include "deviceplugin/node_annotator.h"

namespace tessera::dra {
namespace {

using kube::Json;

Json Str(const std::string& v) { return {{"string", v}}; }
Json Int(int64_t v) { return {{"int", v}}; }
Json Version(const std::string& v) { return {{"version", v}}; }

// The NVLink island of every GPU with a UUID, by GPU index: the device plugin's derivation
// (NvLinkDomainsOf) over the inventory in which every GPU is a whole device.
std::map<int, int> IslandsByGpu(const agent::NodeSnapshot& node) {
  const std::vector<deviceplugin::Resource> all =
      deviceplugin::BuildInventory(node, deviceplugin::MigStrategy::kNone);
  std::map<int, int> out;
  for (const deviceplugin::Resource& r : all) {
    if (r.name != deviceplugin::kGpuResource) continue;
    const std::vector<std::string> ids =
        absl::StrSplit(deviceplugin::NvLinkDomainsOf(node, all).value, ',', absl::SkipEmpty());
    for (size_t i = 0; i < r.devices.size() && i < ids.size(); ++i) {
      int island = 0;
      if (absl::SimpleAtoi(ids[i], &island)) out[r.devices[i].gpu_index] = island;
    }
  }
  return out;
}

}  // namespace

std::optional<GpuArchitecture> ArchitectureOf(absl::string_view product_name) {
  // Families by a word of the product name, most specific first ("A100" before "A10").
  struct Family {
    const char* word;
    const char* arch;
    const char* cc;
  };
  static constexpr Family kFamilies[] = {
      {"GB200", "Blackwell", "10.0.0"},  {"B200", "Blackwell", "10.0.0"},
      {"B100", "Blackwell", "10.0.0"},   {"GH200", "Hopper", "9.0.0"},
      {"H200", "Hopper", "9.0.0"},       {"H100", "Hopper", "9.0.0"},
      {"H800", "Hopper", "9.0.0"},       {"H20", "Hopper", "9.0.0"},
      {"L40S", "Ada Lovelace", "8.9.0"}, {"L40", "Ada Lovelace", "8.9.0"},
      {"L4", "Ada Lovelace", "8.9.0"},   {"A100", "Ampere", "8.0.0"},
      {"A800", "Ampere", "8.0.0"},       {"A30", "Ampere", "8.0.0"},
      {"A40", "Ampere", "8.6.0"},        {"A10", "Ampere", "8.6.0"},
      {"A16", "Ampere", "8.6.0"},        {"A2", "Ampere", "8.6.0"},
      {"T4", "Turing", "7.5.0"},         {"V100", "Volta", "7.0.0"},
  };
  const std::vector<std::string> words =
      absl::StrSplit(absl::AsciiStrToUpper(product_name), absl::ByAnyChar(" -"), absl::SkipEmpty());
  for (const Family& f : kFamilies) {
    if (std::find(words.begin(), words.end(), f.word) != words.end()) {
      return GpuArchitecture{f.arch, f.cc};
    }
  }
  return std::nullopt;
}

std::optional<std::string> SemverOf(absl::string_view driver_version) {
  std::vector<std::string> parts = absl::StrSplit(driver_version, '.');
  if (parts.empty() || parts.size() > 3) return std::nullopt;
  std::vector<std::string> out;
  for (const std::string& p : parts) {
    uint64_t n = 0;
    if (p.empty() || !std::all_of(p.begin(), p.end(), [](char c) { return std::isdigit(c); }) ||
        !absl::SimpleAtoi(p, &n)) {
      return std::nullopt;
    }
    out.push_back(absl::StrCat(n));
  }
  while (out.size() < 3) out.push_back("0");
  return absl::StrJoin(out, ".");
}

std::vector<DraDevice> BuildDraDevices(const agent::NodeSnapshot& node) {
  const std::map<int, int> islands = IslandsByGpu(node);
  const std::optional<std::string> driver = SemverOf(node.driver_version);
  std::vector<DraDevice> out;
  std::map<int, int> migs_of_gpu;
  for (const deviceplugin::Resource& r :
       deviceplugin::BuildInventory(node, deviceplugin::MigStrategy::kMixed)) {
    for (const deviceplugin::PluginDevice& d : r.devices) {
      DraDevice dev;
      dev.uuid = d.id;
      dev.gpu_uuid = d.gpu_uuid;
      dev.gpu_index = d.gpu_index;
      dev.minor = d.minor;
      dev.mig_profile = d.mig_profile;
      const agent::GpuInfo* gpu =
          d.gpu_index >= 0 && d.gpu_index < static_cast<int>(node.gpus.size())
              ? &node.gpus[d.gpu_index].info
              : nullptr;
      Json a = Json::object();
      a["uuid"] = Str(d.id);
      a["index"] = Int(d.gpu_index);
      if (d.mig_profile.empty()) {
        dev.name = absl::StrCat("gpu-", d.gpu_index);
        a["type"] = Str("gpu");
        a["migEnabled"] = {{"bool", false}};
        if (gpu != nullptr && gpu->memory) {
          dev.memory_bytes = static_cast<int64_t>(gpu->memory->total_bytes);
        }
      } else {
        dev.name = absl::StrCat("gpu-", d.gpu_index, "-mig-", migs_of_gpu[d.gpu_index]++);
        a["type"] = Str("mig");
        a["profile"] = Str(d.mig_profile);
        a["parentUUID"] = Str(d.gpu_uuid);
        if (gpu != nullptr) {
          for (const agent::MigInstance& m : gpu->mig_instances) {
            if (m.uuid == d.id && m.memory_bytes) {
              dev.memory_bytes = static_cast<int64_t>(*m.memory_bytes);
            }
          }
        }
      }
      if (gpu != nullptr) {
        if (!gpu->name.empty()) a["productName"] = Str(gpu->name);
        if (std::optional<GpuArchitecture> arch = ArchitectureOf(gpu->name)) {
          a["architecture"] = Str(arch->name);
          a["computeCapability"] = Version(arch->compute_capability);
        }
        if (!gpu->pci_bus_id.empty()) a["pciBusID"] = Str(gpu->pci_bus_id);
      }
      if (d.numa_node) a["numaNode"] = Int(*d.numa_node);
      if (auto it = islands.find(d.gpu_index); it != islands.end()) {
        a["nvlinkDomain"] = Int(it->second);
      }
      if (driver) a["driverVersion"] = Version(*driver);
      dev.attributes = std::move(a);
      out.push_back(std::move(dev));
    }
  }
  // GPUs in MIG mode, whole, partitionable: when the GPU's and every instance's memory is known.
  std::map<int, std::vector<DraDevice*>> instances;
  for (DraDevice& d : out) {
    if (!d.mig_profile.empty()) instances[d.gpu_index].push_back(&d);
  }
  std::vector<DraDevice> parents;
  for (auto& [index, migs] : instances) {
    const agent::GpuInfo* gpu =
        index >= 0 && index < static_cast<int>(node.gpus.size()) ? &node.gpus[index].info : nullptr;
    if (gpu == nullptr || !gpu->memory || gpu->uuid.empty()) continue;
    if (!std::all_of(migs.begin(), migs.end(), [](const DraDevice* m) { return m->memory_bytes; }))
      continue;
    const DraDevice& first = *migs.front();
    DraDevice p;
    p.name = absl::StrCat("gpu-", index);
    p.uuid = gpu->uuid;
    p.gpu_uuid = gpu->uuid;
    p.gpu_index = index;
    p.minor = first.minor;
    p.memory_bytes = static_cast<int64_t>(gpu->memory->total_bytes);
    p.attributes = first.attributes;
    p.attributes["uuid"] = Str(gpu->uuid);
    p.attributes["type"] = Str("gpu");
    p.attributes["migEnabled"] = {{"bool", true}};
    p.attributes.erase("profile");
    p.attributes.erase("parentUUID");
    p.counter_set = p.name;
    p.consumes = *p.memory_bytes;
    p.mig_parent = true;
    for (DraDevice* m : migs) {
      m->counter_set = p.name;
      m->consumes = *m->memory_bytes;
    }
    parents.push_back(std::move(p));
  }
  out.insert(out.end(), parents.begin(), parents.end());
  // The inventory is by resource name; devices go by GPU index (k above stays by resource), a
  // whole GPU before its instances.
  std::stable_sort(out.begin(), out.end(), [](const DraDevice& a, const DraDevice& b) {
    if (a.gpu_index != b.gpu_index) return a.gpu_index < b.gpu_index;
    return a.mig_profile.empty() && !b.mig_profile.empty();
  });
  return out;
}

std::string SliceName(const std::string& driver, const std::string& node_name) {
  std::string d = driver;
  std::replace(d.begin(), d.end(), '.', '-');
  return absl::StrCat(node_name, "-", d);
}

std::string CounterSliceName(const std::string& driver, const std::string& node_name) {
  return SliceName(driver, node_name) + "-counters";
}

std::vector<kube::Json> ResourceSlicesJson(const std::string& driver, const std::string& node_name,
                                           const std::vector<DraDevice>& devices,
                                           const std::function<bool(const std::string&)>& healthy,
                                           int64_t generation, bool partitionable) {
  Json list = Json::array();
  Json sets = Json::array();
  for (const DraDevice& d : devices) {
    if (!healthy(d.gpu_uuid) || (d.mig_parent && !partitionable)) continue;
    Json dev = {{"name", d.name}, {"attributes", d.attributes}};
    if (d.memory_bytes) {
      dev["capacity"] = {{"memory", {{"value", absl::StrCat(*d.memory_bytes)}}}};
    }
    if (partitionable && !d.counter_set.empty()) {
      dev["consumesCounters"] =
          Json::array({{{"counterSet", d.counter_set},
                        {"counters", {{"memory", {{"value", absl::StrCat(d.consumes)}}}}}}});
      if (d.mig_parent) {
        sets.push_back({{"name", d.counter_set},
                        {"counters", {{"memory", {{"value", absl::StrCat(d.consumes)}}}}}});
      }
    }
    list.push_back(std::move(dev));
  }
  auto slice = [&](const std::string& name, const char* field, Json items, int count) {
    return Json{
        {"apiVersion", "resource.k8s.io/v1"},
        {"kind", "ResourceSlice"},
        {"metadata", {{"name", name}}},
        {"spec",
         {{"driver", driver},
          {"nodeName", node_name},
          {"pool",
           {{"name", node_name}, {"generation", generation}, {"resourceSliceCount", count}}},
          {field, std::move(items)}}}};
  };
  const int count = sets.empty() ? 1 : 2;
  std::vector<kube::Json> out;
  out.push_back(slice(SliceName(driver, node_name), "devices", std::move(list), count));
  if (count == 2) {
    out.push_back(slice(CounterSliceName(driver, node_name), "sharedCounters", std::move(sets), 2));
  }
  return out;
}

}  // namespace tessera::dra
