#include "controller/node_codec.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "api/limits.h"
#include "model/synthetic_cluster.h"

namespace tessera::controller {
namespace {

absl::Status Bad(absl::string_view field, absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", msg));
}

std::string Str(const Json& o, const char* key, const std::string& def = "") {
  auto it = o.find(key);
  if (it == o.end() || !it->is_string()) return def;
  return it->get<std::string>();
}

bool IntField(const Json& o, const char* key, int64_t* out) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return false;
  if (!it->is_number_integer()) return false;
  *out = it->get<int64_t>();
  return true;
}

}  // namespace

absl::StatusOr<model::Node> NodeFromObject(const Json& obj) {
  if (!obj.is_object() || !obj.contains("metadata") || !obj.contains("spec") ||
      !obj["spec"].is_object()) {
    return absl::InvalidArgumentError("Node: needs metadata and spec");
  }
  const Json& meta = obj["metadata"];
  const Json& spec = obj["spec"];
  model::Node n;
  n.name = Str(meta, "name");
  if (n.name.empty()) return Bad("metadata.name", "must not be empty");
  if (auto it = meta.find("labels"); it != meta.end() && it->is_object()) {
    for (auto& [k, v] : it->items()) {
      if (v.is_string()) n.labels[k] = v.get<std::string>();
    }
  }
  const bool has_list = spec.contains("gpus");
  int64_t count = 0;
  const bool has_count = IntField(spec, "gpuCount", &count);
  if (has_list) {
    const Json& gpus = spec["gpus"];
    if (!gpus.is_array()) return Bad("spec.gpus", "must be an array");
    if (has_count && count != static_cast<int64_t>(gpus.size())) {
      return Bad("spec.gpuCount", absl::StrCat("is ", count, " but spec.gpus lists ", gpus.size()));
    }
    for (size_t i = 0; i < gpus.size(); ++i) {
      const Json& g = gpus[i];
      std::string path = absl::StrCat("spec.gpus[", i, "]");
      model::Gpu gpu;
      int64_t v = 0;
      if (!IntField(g, "index", &v)) return Bad(absl::StrCat(path, ".index"), "required integer");
      gpu.index = static_cast<int32_t>(v);
      gpu.uuid = Str(g, "uuid");
      gpu.model = Str(g, "model", Str(spec, "gpuType"));
      if (IntField(g, "memoryMiB", &v)) gpu.memory_mib = v;
      n.gpus.push_back(std::move(gpu));
    }
  } else if (count > 0) {
    std::string type = Str(spec, "gpuType");
    if (type.empty()) return Bad("spec.gpuType", "required with spec.gpuCount > 0");
    if (count > model::kMaxGpusPerNode) {
      return Bad("spec.gpuCount", absl::StrCat("at most ", model::kMaxGpusPerNode));
    }
    int64_t mem = 0;
    IntField(spec, "gpuMemoryMiB", &mem);
    for (int i = 0; i < count; ++i) {
      n.gpus.push_back({.index = i,
                        .uuid = absl::StrCat("GPU-", n.name, "-", i),
                        .model = type,
                        .memory_mib = mem});
    }
  }
  if (n.gpus.size() > static_cast<size_t>(model::kMaxGpusPerNode)) {
    return Bad("spec.gpus", absl::StrCat("at most ", model::kMaxGpusPerNode, " GPUs per node"));
  }
  const int num = static_cast<int>(n.gpus.size());
  if (auto links = spec.find("links"); links != spec.end()) {
    if (spec.contains("layout")) return Bad("spec.layout", "give either layout or links");
    if (!links->is_array() || static_cast<int>(links->size()) != num) {
      return Bad("spec.links", absl::StrCat("must be a ", num, " x ", num, " matrix"));
    }
    std::vector<model::LinkClass> lc;
    for (int a = 0; a < num; ++a) {
      const Json& row = (*links)[a];
      if (!row.is_array() || static_cast<int>(row.size()) != num) {
        return Bad(absl::StrCat("spec.links[", a, "]"),
                   absl::StrCat("must have ", num, " entries"));
      }
      for (int b = 0; b < num; ++b) {
        model::LinkClass c;
        if (!row[b].is_string() || !model::ParseLinkClass(row[b].get<std::string>(), &c)) {
          return Bad(absl::StrCat("spec.links[", a, "][", b, "]"),
                     "must be X, NVSWITCH, NVLINK, PIX, PHB or SYS");
        }
        lc.push_back(c);
      }
    }
    // Without nvlinkDomains the links say which GPUs share an island.
    std::vector<int> domains = model::NvLinkIslands(num, lc);
    if (auto d = spec.find("nvlinkDomains"); d != spec.end()) {
      if (!d->is_array() || static_cast<int>(d->size()) != num) {
        return Bad("spec.nvlinkDomains", absl::StrCat("must have ", num, " entries"));
      }
      for (int i = 0; i < num; ++i) domains[i] = (*d)[i].get<int>();
    }
    absl::StatusOr<model::NodeTopology> t =
        model::NodeTopology::FromMatrix(num, std::move(lc), std::move(domains));
    if (!t.ok()) return Bad("spec.links", t.status().message());
    n.topology = *std::move(t);
  } else {
    model::GpuLayout layout = model::GpuLayout::kNvSwitch;
    std::string l = Str(spec, "layout", "nvswitch");
    if (!model::ParseGpuLayout(l, &layout)) {
      return Bad("spec.layout", "must be nvswitch, nvlink-pairs, nvlink-quads or pcie");
    }
    n.topology = model::MakeTopology(layout, num);
  }
  n.rack = Str(spec, "rack", "default");
  n.block = Str(spec, "block", "default");
  n.cpu_milli = kUnlimitedCpuMilli;
  n.memory_mib = kUnlimitedMemoryMiB;
  IntField(spec, "cpuMilli", &n.cpu_milli);
  IntField(spec, "memoryMiB", &n.memory_mib);
  int64_t max_members = api::kDefaultMaxMembersPerNode;
  IntField(spec, "maxMembers", &max_members);
  n.max_members =
      static_cast<int32_t>(std::clamp<int64_t>(max_members, 1, api::kMaxMembersPerNode));
  if (auto it = spec.find("taints"); it != spec.end() && it->is_array()) {
    for (size_t i = 0; i < it->size(); ++i) {
      const Json& t = (*it)[i];
      model::Taint taint;
      taint.key = Str(t, "key");
      taint.value = Str(t, "value");
      std::optional<model::TaintEffect> e = model::ParseTaintEffect(Str(t, "effect"));
      if (taint.key.empty()) return Bad(absl::StrCat("spec.taints[", i, "].key"), "required");
      if (!e) return Bad(absl::StrCat("spec.taints[", i, "].effect"), "unknown effect");
      taint.effect = *e;
      n.taints.push_back(std::move(taint));
    }
  }
  auto unsched = spec.find("unschedulable");
  n.unschedulable = unsched != spec.end() && unsched->is_boolean() && unsched->get<bool>();
  uint32_t bad = UnhealthyMask(obj);
  for (int i = 0; i < num; ++i) {
    if ((bad >> i) & 1u) n.gpus[i].health = model::GpuHealth::kUnhealthy;
  }
  if (absl::Status s = model::ValidateNode(n); !s.ok()) {
    // ValidateNode says "node NAME: gpus[1].model: ..."; point at the spec.
    return absl::InvalidArgumentError(absl::StrCat("spec: ", s.message()));
  }
  return n;
}

uint32_t UnhealthyMask(const Json& obj) {
  uint32_t mask = 0;
  auto st = obj.find("status");
  if (st == obj.end() || !st->is_object()) return mask;
  auto gpus = st->find("gpus");
  if (gpus == st->end() || !gpus->is_array()) return mask;
  for (const Json& g : *gpus) {
    if (!g.is_object()) continue;
    int64_t idx = -1;
    if (!IntField(g, "index", &idx) || idx < 0 || idx >= 32) continue;
    if (Str(g, "health") == "Unhealthy") mask |= 1u << idx;
  }
  return mask;
}

}  // namespace tessera::controller
