#include "kubesched/claims.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tessera::kubesched {

using Json = nlohmann::json;
using kube::CelValue;

namespace {

// The kDraDriver attribute `name` of a device, when it has that type.
const CelValue* DriverAttr(const SliceDevice& d, const std::string& name, CelValue::Type type) {
  if (d.driver != kDraDriver) return nullptr;
  const CelValue* v = DeviceAttribute(d.cel, absl::StrCat(kDraDriver, "/", name));
  return v != nullptr && v->type == type ? v : nullptr;
}

// A claim object's status.allocation.devices.results (empty when unallocated).
Json AllocationResults(const Json& claim) {
  return claim.value("status", Json::object())
      .value("allocation", Json::object())
      .value("devices", Json::object())
      .value("results", Json::array());
}

}  // namespace

bool WholeGpu(const SliceDevice& d) {
  const CelValue* t = DriverAttr(d, "type", CelValue::Type::kString);
  const CelValue* mig = DriverAttr(d, "migEnabled", CelValue::Type::kBool);
  return t != nullptr && t->s == "gpu" && DriverAttr(d, "index", CelValue::Type::kInt) != nullptr &&
         (mig == nullptr || !mig->b);
}

std::optional<int> GpuIndex(const SliceDevice& d) {
  if (!WholeGpu(d)) return std::nullopt;
  return static_cast<int>(DriverAttr(d, "index", CelValue::Type::kInt)->i);
}

std::vector<model::Gpu> SliceGpus(const std::vector<SliceDevice>& devices,
                                  const std::string& node_name, std::vector<int>* nvlink_domains) {
  std::map<int64_t, const SliceDevice*> by_index;
  for (const SliceDevice& d : devices) {
    if (!WholeGpu(d)) continue;
    const int64_t index = DriverAttr(d, "index", CelValue::Type::kInt)->i;
    if (index >= 0 && index < model::kMaxGpusPerNode) by_index[index] = &d;
  }
  std::vector<model::Gpu> gpus;
  nvlink_domains->clear();
  if (by_index.empty()) return gpus;
  const int64_t n = by_index.rbegin()->first + 1;
  for (int64_t i = 0; i < n; ++i) {
    model::Gpu g;
    g.index = static_cast<int32_t>(i);
    g.uuid = absl::StrCat(node_name, "/gpu", i);
    int domain = -1;
    auto it = by_index.find(i);
    if (it == by_index.end()) {
      // Left the slice (unhealthy), or in MIG mode (its instances are other devices). A node's
      // GPUs are one model: the gap takes the others' model and memory.
      g.health = model::GpuHealth::kUnhealthy;
      g.model = "gpu";
    } else {
      const SliceDevice& d = *it->second;
      const CelValue* product = DriverAttr(d, "productName", CelValue::Type::kString);
      g.model = product != nullptr ? product->s : "gpu";
      if (d.nvlink_domain) domain = static_cast<int>(*d.nvlink_domain);
      const CelValue& caps = d.cel.map->at("capacity");
      if (auto dom = caps.map->find(kDraDriver); dom != caps.map->end()) {
        if (auto mem = dom->second.map->find("memory"); mem != dom->second.map->end()) {
          g.memory_mib = mem->second.i / 1000 / (1 << 20);  // milli-bytes
        }
      }
    }
    nvlink_domains->push_back(domain);
    gpus.push_back(std::move(g));
  }
  const model::Gpu* present = nullptr;
  for (const model::Gpu& g : gpus) {
    if (g.health == model::GpuHealth::kHealthy) {
      present = &g;
      break;
    }
  }
  if (present != nullptr) {
    const model::Gpu like = *present;
    for (model::Gpu& g : gpus) {
      if (g.health == model::GpuHealth::kHealthy) continue;
      g.model = like.model;
      g.memory_mib = like.memory_mib;
    }
  }
  return gpus;
}

namespace {

// One device request (an `exactly` request or a firstAvailable subrequest, `r` holding its
// fields) named `name`, with its class's selectors and config (appended to `config`).
absl::StatusOr<DeviceRequestSpec> RequestOf(const Json& r, const std::string& name,
                                            const std::string& who, const std::string& field,
                                            const std::map<std::string, Json>& classes,
                                            Json* config) {
  DeviceRequestSpec req;
  req.name = name;
  const std::string cls = r.value("deviceClassName", "");
  auto c = classes.find(cls);
  if (c == classes.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, field, ".deviceClassName: no DeviceClass \"", cls, "\""));
  }
  auto add = [&](const Json& selectors, const std::string& where) -> absl::Status {
    for (size_t k = 0; k < selectors.size(); ++k) {
      const Json& s = selectors[k];
      if (!s.is_object() || !s.contains("cel")) continue;
      absl::StatusOr<kube::DeviceSelector> sel =
          kube::DeviceSelector::Parse(s["cel"].value("expression", ""));
      if (!sel.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(who, where, ".selectors[", k, "]: ", sel.status().message()));
      }
      req.selectors.push_back(*std::move(sel));
    }
    return absl::OkStatus();
  };
  const Json class_spec = c->second.value("spec", Json::object());
  if (absl::Status s =
          add(class_spec.value("selectors", Json::array()), "DeviceClass " + cls + " spec");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = add(r.value("selectors", Json::array()), field); !s.ok()) return s;
  for (const Json& cfg : class_spec.value("config", Json::array())) {
    if (!cfg.is_object() || !cfg.contains("opaque")) continue;
    config->push_back(
        {{"source", "FromClass"}, {"requests", Json::array({name})}, {"opaque", cfg["opaque"]}});
  }
  const std::string mode = r.value("allocationMode", "ExactCount");
  if (mode == "All") {
    req.all = true;
  } else if (mode == "ExactCount") {
    req.count = r.value("count", int64_t{1});
    if (req.count < 1) return absl::InvalidArgumentError(who + field + ".count: must be >= 1");
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(who, field, ".allocationMode: ", mode, " is not ExactCount or All"));
  }
  return req;
}

// Whole GPUs an ExactCount spec asks (All: known where it goes).
int64_t CountedGpus(const ClaimSpec& spec) {
  int64_t n = 0;
  for (const DeviceRequestSpec& r : spec.requests) n += r.all ? 0 : r.count;
  return n;
}

}  // namespace

absl::StatusOr<PlacedClaim> ClaimOf(const Json& claim, const std::map<std::string, Json>& classes) {
  PlacedClaim out;
  const Json meta = claim.value("metadata", Json::object());
  out.name = meta.value("name", "");
  out.uid = meta.value("uid", "");
  const std::string who = absl::StrCat("ResourceClaim ", out.name, ": ");
  const Json devices = claim.value("spec", Json::object()).value("devices", Json::object());
  const Json requests = devices.value("requests", Json::array());
  if (!requests.is_array() || requests.empty()) {
    return absl::InvalidArgumentError(who + "spec.devices.requests: none");
  }
  // Each request's choices: one for `exactly`, its subrequests in order for firstAvailable.
  std::vector<std::string> names;
  std::vector<std::vector<DeviceRequestSpec>> choices;
  for (size_t i = 0; i < requests.size(); ++i) {
    const Json& r = requests[i];
    const std::string field = absl::StrCat("spec.devices.requests[", i, "]");
    const std::string name = r.is_object() ? r.value("name", "") : "";
    names.push_back(name);
    choices.emplace_back();
    if (r.is_object() && r.contains("exactly")) {
      absl::StatusOr<DeviceRequestSpec> req =
          RequestOf(r["exactly"], name, who, field + ".exactly", classes, &out.config);
      if (!req.ok()) return req.status();
      choices.back().push_back(*std::move(req));
      continue;
    }
    const Json subs = r.is_object() ? r.value("firstAvailable", Json::array()) : Json::array();
    if (!subs.is_array() || subs.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(who, field, ": needs `exactly` or a non-empty `firstAvailable`"));
    }
    for (size_t k = 0; k < subs.size(); ++k) {
      const std::string sub = subs[k].is_object() ? subs[k].value("name", "") : "";
      absl::StatusOr<DeviceRequestSpec> req =
          RequestOf(subs[k], absl::StrCat(name, "/", sub), who,
                    absl::StrCat(field, ".firstAvailable[", k, "]"), classes, &out.config);
      if (!req.ok()) return req.status();
      choices.back().push_back(*std::move(req));
    }
  }
  std::vector<ClaimSpec::MatchAttribute> constraints;
  for (const Json& c : devices.value("constraints", Json::array())) {
    if (!c.is_object() || !c.contains("matchAttribute")) continue;
    ClaimSpec::MatchAttribute m;
    m.attribute = c["matchAttribute"].get<std::string>();
    if (m.attribute.find('/') == std::string::npos)
      m.attribute = std::string(kDraDriver) + "/" + m.attribute;
    for (const Json& n : c.value("requests", Json::array()))
      m.requests.push_back(n.get<std::string>());
    constraints.push_back(std::move(m));
  }
  // The alternatives, most preferred first: every combination of the requests' choices in order
  // (the first request's choice varying slowest), at most kMaxAlternatives. A constraint naming a
  // request applies to the subrequest chosen; one naming a subrequest, only when it is chosen.
  constexpr size_t kMaxAlternatives = 64;
  std::vector<std::vector<size_t>> picks = {{}};
  for (const auto& c : choices) {
    std::vector<std::vector<size_t>> next;
    for (const auto& p : picks) {
      for (size_t k = 0; k < c.size() && next.size() < kMaxAlternatives; ++k) {
        next.push_back(p);
        next.back().push_back(k);
      }
    }
    picks = std::move(next);
  }
  for (const std::vector<size_t>& p : picks) {
    ClaimSpec spec;
    for (size_t i = 0; i < p.size(); ++i) spec.requests.push_back(choices[i][p[i]]);
    for (const ClaimSpec::MatchAttribute& m : constraints) {
      ClaimSpec::MatchAttribute v{m.attribute, {}};
      bool named = m.requests.empty();
      for (const std::string& n : m.requests) {
        for (size_t i = 0; i < p.size(); ++i) {
          const std::string& chosen = choices[i][p[i]].name;
          if (n == names[i] || n == chosen) {
            v.requests.push_back(chosen);
            named = true;
          }
        }
      }
      if (named) spec.constraints.push_back(std::move(v));
    }
    out.alternatives.push_back(std::move(spec));
  }
  out.spec = out.alternatives.front();
  out.gpus = CountedGpus(out.spec);
  for (const Json& cfg : devices.value("config", Json::array())) {
    if (!cfg.is_object() || !cfg.contains("opaque")) continue;
    Json entry = {{"source", "FromClaim"}, {"opaque", cfg["opaque"]}};
    if (cfg.contains("requests")) entry["requests"] = cfg["requests"];
    out.config.push_back(std::move(entry));
  }
  return out;
}

absl::StatusOr<ClaimKind> KindOf(const std::vector<SliceDevice>& cluster, const ClaimSpec& spec,
                                 const std::string& claim_name) {
  std::vector<std::string> gpus, others;
  for (const DeviceRequestSpec& r : spec.requests) {
    bool whole = false, other = false;
    for (const SliceDevice& d : cluster) {
      if (whole && other) break;
      bool& found = WholeGpu(d) ? whole : other;
      if (found) continue;  // that kind is known to match already
      found = std::all_of(r.selectors.begin(), r.selectors.end(), [&](const auto& s) {
        absl::StatusOr<bool> m = s.Matches(d.cel);
        return m.ok() && *m;
      });
    }
    if (!whole && !other) {
      return absl::UnavailableError(absl::StrCat("ResourceClaim ", claim_name, ": request ", r.name,
                                                 " matches no published device yet"));
    }
    (whole ? gpus : others).push_back(r.name);
  }
  if (!gpus.empty() && !others.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ResourceClaim ", claim_name, " asks for whole GPUs (request ", absl::StrJoin(gpus, ", "),
        ") and other devices (request ", absl::StrJoin(others, ", "),
        ") at once: tessera scheduler places one or the other per claim"));
  }
  return gpus.empty() ? ClaimKind::kDevices : ClaimKind::kGpus;
}

void PlacedClaim::Choose(size_t alternative, ClaimKind k) {
  spec = alternatives[alternative];
  kind = k;
  gpus = kind == ClaimKind::kGpus ? CountedGpus(spec) : 0;
}

std::string DeviceId(const DeviceAllocation& a) {
  return absl::StrCat(a.driver, "/", a.pool, "/", a.device);
}

std::vector<std::string> AllocatedDeviceIds(const Json& claim) {
  std::vector<std::string> out;
  const Json results = AllocationResults(claim);
  for (const Json& r : results) {
    out.push_back(
        absl::StrCat(r.value("driver", ""), "/", r.value("pool", ""), "/", r.value("device", "")));
  }
  return out;
}

std::optional<std::vector<std::vector<DeviceAllocation>>> ClaimShares(
    const std::vector<PlacedClaim>& claims, const std::vector<SliceDevice>& chosen,
    const std::vector<SliceDevice>& node, std::set<std::string>* allocated, std::string* why) {
  std::vector<SliceDevice> others;
  for (const SliceDevice& d : node) {
    if (!WholeGpu(d)) others.push_back(d);
  }
  std::vector<std::vector<DeviceAllocation>> out;
  std::set<std::string> taken;  // of `chosen`
  for (const PlacedClaim& c : claims) {
    const bool gpus = c.kind == ClaimKind::kGpus;
    AllocationOutcome o = AllocateClaim(c.spec, gpus ? chosen : others, gpus ? taken : *allocated);
    if (!o.fits) {
      *why = absl::StrCat("ResourceClaim ", c.name,
                          gpus ? ": the GPUs chosen do not satisfy it: "
                               : ": the node's free devices do not satisfy it: ",
                          o.why);
      return std::nullopt;
    }
    for (const DeviceAllocation& a : o.devices) (gpus ? taken : *allocated).insert(DeviceId(a));
    out.push_back(std::move(o.devices));
  }
  return out;
}

std::vector<int> GpuIndicesOf(const std::vector<SliceDevice>& node,
                              const std::set<std::string>& ids) {
  std::vector<int> out;
  for (const SliceDevice& d : node) {
    std::optional<int> index = GpuIndex(d);
    if (index && ids.contains(d.Id())) out.push_back(*index);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Json AllocationStatus(const std::vector<DeviceAllocation>& devices, const std::string& node,
                      const std::string& pod_name, const std::string& pod_uid, const Json& config) {
  Json results = Json::array();
  for (const DeviceAllocation& d : devices) {
    results.push_back(
        {{"request", d.request}, {"driver", d.driver}, {"pool", d.pool}, {"device", d.device}});
  }
  Json allocated = {{"results", std::move(results)}};
  if (config.is_array() && !config.empty()) allocated["config"] = config;
  return {
      {"allocation",
       {{"devices", std::move(allocated)},
        {"nodeSelector",
         {{"nodeSelectorTerms",
           Json::array({{{"matchFields", Json::array({{{"key", "metadata.name"},
                                                       {"operator", "In"},
                                                       {"values", Json::array({node})}}})}}})}}}}},
      {"reservedFor", Json::array({{{"resource", "pods"}, {"name", pod_name}, {"uid", pod_uid}}})}};
}

}  // namespace tessera::kubesched
