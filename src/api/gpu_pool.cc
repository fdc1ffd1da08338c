#include "api/gpu_pool.h"

#include <algorithm>

#include "api/json_fields.h"

namespace tessera::api {
namespace {

using Json = nlohmann::json;

bool BoolField(const Json& obj, const char* key) { return BoolOr(obj, key, false); }

bool BeingDeleted(const Json& obj) {
  const Json& ts = Field(Field(obj, "metadata"), "deletionTimestamp");
  return !ts.is_null();
}

// The live pools' specs.
std::vector<const Json*> LiveSpecs(const std::vector<const Json*>& pools) {
  std::vector<const Json*> out;
  for (const Json* p : pools) {
    if (p == nullptr || !p->is_object() || BeingDeleted(*p)) continue;
    const Json& spec = Field(*p, "spec");
    if (spec.is_object()) out.push_back(&spec);
  }
  return out;
}

std::set<std::string> SelectedBy(const std::vector<const Json*>& pools,
                                 const std::vector<PoolNode>& nodes, bool (*which)(const Json&)) {
  std::set<std::string> out;
  for (const Json* spec : LiveSpecs(pools)) {
    if (!which(*spec)) continue;
    for (const PoolNode& n : nodes) {
      if (PoolSelects(*spec, n)) out.insert(n.name);
    }
  }
  return out;
}

}  // namespace

bool PoolSelects(const Json& pool_spec, const PoolNode& n) {
  if (!pool_spec.is_object()) return false;
  const Json& type = Field(pool_spec, "gpuType");
  if (type.is_string()) {
    const std::string& t = type.get_ref<const std::string&>();
    if (!t.empty() && t != "*" && t != n.gpu_type) return false;
  }
  const Json& sel = Field(pool_spec, "nodeSelector");
  if (sel.is_object()) {
    for (const auto& [k, v] : sel.items()) {
      auto it = n.labels.find(k);
      if (it == n.labels.end() || !v.is_string() || it->second != v.get<std::string>()) {
        return false;
      }
    }
  }
  return true;
}

Json PoolStatus(const Json& pool, const std::vector<PoolNode>& nodes) {
  const Json& spec = Field(pool, "spec");
  const bool live = !BeingDeleted(pool);
  int count = 0, gpus = 0, allocatable = 0, allocated = 0, unhealthy = 0, cordoned = 0;
  std::vector<std::string> names;
  for (const PoolNode& n : nodes) {
    if (!live || !PoolSelects(spec, n)) continue;
    ++count;
    gpus += n.gpus;
    const int bad = std::clamp(n.unhealthy, 0, std::max(n.gpus, 0));
    unhealthy += bad;
    allocated += std::max(n.allocated, 0);
    if (n.cordoned) {
      ++cordoned;
    } else {
      allocatable += std::max(n.gpus - bad, 0);
    }
    names.push_back(n.name);
  }
  std::sort(names.begin(), names.end());
  if (names.size() > static_cast<size_t>(kPoolStatusMaxNodeNames)) {
    names.resize(kPoolStatusMaxNodeNames);
  }
  const char* phase = PoolCordons(spec) ? "Draining" : count == 0 ? "Pending" : "Ready";
  return {{"phase", phase},         {"nodes", count},
          {"gpus", gpus},           {"allocatable", allocatable},
          {"allocated", allocated}, {"unhealthy", unhealthy},
          {"nodeNames", names},     {"cordoned", cordoned}};
}

bool PoolCordons(const Json& pool_spec) {
  return BoolField(pool_spec, "cordon") || BoolField(pool_spec, "drain");
}

bool PoolDrains(const Json& pool_spec) { return BoolField(pool_spec, "drain"); }

std::set<std::string> NodesCordonedByPools(const std::vector<const Json*>& pools,
                                           const std::vector<PoolNode>& nodes) {
  return SelectedBy(pools, nodes, &PoolCordons);
}

std::set<std::string> NodesDrainedByPools(const std::vector<const Json*>& pools,
                                          const std::vector<PoolNode>& nodes) {
  return SelectedBy(pools, nodes, &PoolDrains);
}

std::optional<std::vector<std::string>> QueuePoolNodes(std::string_view queue,
                                                       const std::vector<const Json*>& pools,
                                                       const std::vector<PoolNode>& nodes) {
  bool named = false;
  std::set<std::string> out;
  for (const Json* spec : LiveSpecs(pools)) {
    const Json& queues = Field(*spec, "queues");
    if (!queues.is_array()) continue;
    const bool names_it = std::any_of(queues.begin(), queues.end(), [&](const Json& q) {
      return q.is_string() && q.get_ref<const std::string&>() == queue;
    });
    if (!names_it) continue;
    named = true;
    for (const PoolNode& n : nodes) {
      if (PoolSelects(*spec, n)) out.insert(n.name);
    }
  }
  if (!named) return std::nullopt;
  return std::vector<std::string>(out.begin(), out.end());
}

}  // namespace tessera::api
