#include "kubesched/device_allocator.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kube/quantity.h"

namespace tessera::kubesched {

using Json = nlohmann::json;
using kube::CelValue;

namespace {

// A comparable text for grouping by an attribute's value.
std::string ValueKey(const CelValue& v) {
  switch (v.type) {
    case CelValue::Type::kBool:
      return v.b ? "b:1" : "b:0";
    case CelValue::Type::kInt:
      return absl::StrCat("i:", v.i);
    case CelValue::Type::kString:
      return "s:" + v.s;
    case CelValue::Type::kVersion:
      return "v:" + v.s;
    default:
      return "?";
  }
}

// Which devices are taken, with the GPU/MIG exclusion and the shared counters consumed.
struct Taken {
  std::set<size_t> devices;
  std::set<std::string> whole;        // uuids of whole GPUs taken
  std::set<std::string> mig_parents;  // parents of MIG instances taken
  std::map<std::string, int64_t> consumed;

  bool Available(const SliceDevice& d, size_t i) const {
    if (devices.contains(i)) return false;
    for (const auto& [counter, amount] : d.consumes) {
      int64_t capacity = 0;
      if (d.counters) {
        if (auto held = d.counters->find(counter); held != d.counters->end())
          capacity = held->second;
      }
      auto used = consumed.find(counter);
      if ((used == consumed.end() ? 0 : used->second) + amount > capacity) return false;
    }
    if (!d.parent_uuid.empty()) return !whole.contains(d.parent_uuid);
    if (!d.uuid.empty()) return !whole.contains(d.uuid) && !mig_parents.contains(d.uuid);
    return true;
  }
  void Take(const SliceDevice& d, size_t i) {
    devices.insert(i);
    for (const auto& [counter, amount] : d.consumes) consumed[counter] += amount;
    if (!d.parent_uuid.empty()) {
      mig_parents.insert(d.parent_uuid);
    } else if (!d.uuid.empty()) {
      whole.insert(d.uuid);
    }
  }
};

// A counter's amount ({"value": "<quantity>"}) in milli-units; 0 when unreadable.
int64_t CounterMilli(const Json& c) {
  absl::StatusOr<kube::Quantity> q = kube::ParseQuantity(c.value("value", ""));
  return q.ok() ? q->milli : 0;
}

// `count` of `avail` (indices into devices), one NVLink domain if one holds them (the smallest
// such), else the largest domains first; by name within a domain.
std::vector<size_t> Choose(const std::vector<SliceDevice>& devices,
                           const std::vector<size_t>& avail, int64_t count) {
  std::map<std::string, std::vector<size_t>> by_domain;
  for (size_t i : avail) {
    const SliceDevice& d = devices[i];
    by_domain[d.nvlink_domain ? absl::StrCat(*d.nvlink_domain) : "device:" + d.Id()].push_back(i);
  }
  std::vector<std::vector<size_t>> domains;
  for (auto& [k, v] : by_domain) {
    std::sort(v.begin(), v.end(),
              [&](size_t a, size_t b) { return devices[a].name < devices[b].name; });
    domains.push_back(std::move(v));
  }
  const size_t want = static_cast<size_t>(count);
  const std::vector<size_t>* best = nullptr;
  for (const std::vector<size_t>& d : domains) {
    if (d.size() >= want && (best == nullptr || d.size() < best->size())) best = &d;
  }
  if (best != nullptr) return std::vector<size_t>(best->begin(), best->begin() + count);
  std::stable_sort(domains.begin(), domains.end(),
                   [](const auto& a, const auto& b) { return a.size() > b.size(); });
  std::vector<size_t> out;
  for (const std::vector<size_t>& d : domains) {
    for (size_t i : d) {
      if (out.size() == want) return out;
      out.push_back(i);
    }
  }
  return out;
}

}  // namespace

const CelValue* DeviceAttribute(const CelValue& device, const std::string& qualified) {
  const size_t slash = qualified.rfind('/');
  if (slash == std::string::npos || device.type != CelValue::Type::kMap) return nullptr;
  auto attrs = device.map->find("attributes");
  if (attrs == device.map->end()) return nullptr;
  auto domain = attrs->second.map->find(qualified.substr(0, slash));
  if (domain == attrs->second.map->end()) return nullptr;
  auto it = domain->second.map->find(qualified.substr(slash + 1));
  return it == domain->second.map->end() ? nullptr : &it->second;
}

std::vector<SliceDevice> DevicesOfSlices(const std::vector<Json>& slices) {
  // The pools' counter sets first: a pool may declare them in another slice than its devices.
  auto counters = std::make_shared<std::map<std::string, int64_t>>();
  for (const Json& s : slices) {
    const Json spec = s.value("spec", Json::object());
    const std::string pool = absl::StrCat(spec.value("driver", ""), "/",
                                          spec.value("pool", Json::object()).value("name", ""));
    for (const Json& set : spec.value("sharedCounters", Json::array())) {
      const Json held = set.value("counters", Json::object());
      for (const auto& [name, c] : held.items()) {
        (*counters)[absl::StrCat(pool, "/", set.value("name", ""), "/", name)] = CounterMilli(c);
      }
    }
  }
  std::vector<SliceDevice> out;
  for (const Json& s : slices) {
    const Json spec = s.value("spec", Json::object());
    const std::string driver = spec.value("driver", "");
    const std::string pool = spec.value("pool", Json::object()).value("name", "");
    for (const Json& dev : spec.value("devices", Json::array())) {
      if (!dev.is_object() || !dev.contains("name")) continue;
      SliceDevice d;
      d.driver = driver;
      d.pool = pool;
      d.name = dev.value("name", "");
      d.cel = kube::DeviceValue(driver, dev);
      if (const CelValue* v = DeviceAttribute(d.cel, driver + "/uuid");
          v != nullptr && v->type == CelValue::Type::kString) {
        d.uuid = v->s;
      }
      if (const CelValue* v = DeviceAttribute(d.cel, driver + "/parentUUID");
          v != nullptr && v->type == CelValue::Type::kString) {
        d.parent_uuid = v->s;
      }
      if (const CelValue* v = DeviceAttribute(d.cel, driver + "/nvlinkDomain");
          v != nullptr && v->type == CelValue::Type::kInt) {
        d.nvlink_domain = v->i;
      }
      for (const Json& use : dev.value("consumesCounters", Json::array())) {
        const Json uses = use.value("counters", Json::object());
        for (const auto& [name, c] : uses.items()) {
          d.consumes.push_back(
              {absl::StrCat(driver, "/", pool, "/", use.value("counterSet", ""), "/", name),
               CounterMilli(c)});
        }
      }
      if (!d.consumes.empty()) d.counters = counters;
      out.push_back(std::move(d));
    }
  }
  return out;
}

AllocationOutcome AllocateClaim(const ClaimSpec& claim, const std::vector<SliceDevice>& devices,
                                const std::set<std::string>& allocated) {
  AllocationOutcome out;
  Taken base;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (allocated.contains(devices[i].Id())) base.Take(devices[i], i);
  }
  std::string first_error;
  // The devices each request's selectors match (available or not).
  std::vector<std::vector<size_t>> matching(claim.requests.size());
  for (size_t r = 0; r < claim.requests.size(); ++r) {
    for (size_t i = 0; i < devices.size(); ++i) {
      bool ok = true;
      for (const kube::DeviceSelector& s : claim.requests[r].selectors) {
        absl::StatusOr<bool> m = s.Matches(devices[i].cel);
        if (!m.ok() && first_error.empty()) first_error = std::string(m.status().message());
        if (!m.ok() || !*m) {
          ok = false;
          break;
        }
      }
      if (ok) matching[r].push_back(i);
    }
  }
  // The constraints that apply to each request.
  std::vector<std::vector<size_t>> applies(claim.requests.size());
  for (size_t c = 0; c < claim.constraints.size(); ++c) {
    const auto& names = claim.constraints[c].requests;
    for (size_t r = 0; r < claim.requests.size(); ++r) {
      if (names.empty() ||
          std::find(names.begin(), names.end(), claim.requests[r].name) != names.end()) {
        applies[r].push_back(c);
      }
    }
  }
  // The values each constraint's attribute takes on the devices it applies to.
  std::vector<std::set<std::string>> values(claim.constraints.size());
  for (size_t r = 0; r < claim.requests.size(); ++r) {
    for (size_t c : applies[r]) {
      for (size_t i : matching[r]) {
        if (const CelValue* v = DeviceAttribute(devices[i].cel, claim.constraints[c].attribute)) {
          values[c].insert(ValueKey(*v));
        }
      }
    }
  }
  // Every assignment of one value per constraint (few: islands per node), best fit first.
  std::vector<std::vector<std::string>> assignments = {{}};
  for (const std::set<std::string>& vs : values) {
    std::vector<std::vector<std::string>> next;
    for (const auto& a : assignments) {
      for (const std::string& v : vs) {
        next.push_back(a);
        next.back().push_back(v);
        if (next.size() > 1024) break;
      }
    }
    assignments = std::move(next);
  }
  auto fits_assignment = [&](size_t r, size_t i, const std::vector<std::string>& a) {
    for (size_t c : applies[r]) {
      const CelValue* v = DeviceAttribute(devices[i].cel, claim.constraints[c].attribute);
      if (v == nullptr || ValueKey(*v) != a[c]) return false;
    }
    return true;
  };
  auto group_size = [&](const std::vector<std::string>& a) {
    size_t n = 0;
    for (size_t r = 0; r < claim.requests.size(); ++r) {
      for (size_t i : matching[r]) n += base.Available(devices[i], i) && fits_assignment(r, i, a);
    }
    return n;
  };
  std::vector<std::pair<size_t, size_t>> order;  // (size, assignment)
  for (size_t k = 0; k < assignments.size(); ++k) order.push_back({group_size(assignments[k]), k});
  std::stable_sort(order.begin(), order.end());
  std::string why;
  for (const auto& [size, k] : order) {
    const std::vector<std::string>& a = assignments[k];
    Taken taken = base;
    std::vector<DeviceAllocation> chosen;
    bool ok = true;
    for (size_t r = 0; r < claim.requests.size() && ok; ++r) {
      const DeviceRequestSpec& req = claim.requests[r];
      std::vector<size_t> avail;
      size_t eligible = 0;
      for (size_t i : matching[r]) {
        if (!fits_assignment(r, i, a)) continue;
        ++eligible;
        if (taken.Available(devices[i], i)) avail.push_back(i);
      }
      std::vector<size_t> picked;
      if (req.all) {
        ok = eligible > 0 && avail.size() == eligible;
        picked = avail;
        if (!ok && why.empty()) {
          why = eligible == 0
                    ? absl::StrCat("request ", req.name, ": no device matches")
                    : absl::StrCat("request ", req.name, " (All): ", eligible - avail.size(),
                                   " of ", eligible, " matching devices are in use");
        }
      } else if (static_cast<int64_t>(avail.size()) < req.count) {
        ok = false;
        if (why.empty()) {
          why = absl::StrCat("request ", req.name, ": ", avail.size(), " free of ", req.count,
                             " devices (", matching[r].size(), " match its selectors",
                             claim.constraints.empty() ? "" : " and constraints", ")");
        }
      } else {
        picked = Choose(devices, avail, req.count);
      }
      for (size_t i : picked) {
        taken.Take(devices[i], i);
        chosen.push_back({req.name, devices[i].driver, devices[i].pool, devices[i].name});
      }
    }
    if (ok) {
      out.fits = true;
      out.devices = std::move(chosen);
      return out;
    }
  }
  if (assignments.empty()) {
    why = "no device that matches carries the attribute a constraint names";
  } else if (!claim.constraints.empty() && assignments.size() > 1) {
    std::vector<std::string> attrs;
    for (const auto& c : claim.constraints) attrs.push_back(c.attribute);
    why = absl::StrCat("no one value of ", absl::StrJoin(attrs, ", "),
                       " holds every constrained request (", why, ")");
  }
  if (why.empty()) why = "no device matches";
  if (!first_error.empty()) absl::StrAppend(&why, "; ", first_error);
  out.why = std::move(why);
  return out;
}

}  // namespace tessera::kubesched
