#include "federation/member_capacity.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "model/gpu_model_name.h"

namespace tessera::federation {
absl::StatusOr<MemberCapacity> CapacityFromFleet(const Json& fleet) {
  if (!fleet.is_object() || !fleet.contains("nodes") || !fleet["nodes"].is_array() ||
      !fleet.contains("jobs") || !fleet["jobs"].is_array()) {
    return absl::InvalidArgumentError("fleet summary: expected \"nodes\" and \"jobs\" arrays");
  }
  MemberCapacity c;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < fleet["nodes"].size(); ++i) {
    const Json& r = fleet["nodes"][i];
    // [name, rack, block, phase, model, unschedulable, domains, health, endpoint, util]
    if (!r.is_array() || r.size() < 8 || !r[0].is_string() || !r[3].is_string() ||
        !r[4].is_string() || !r[7].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat("fleet summary: nodes[", i, "] is malformed"));
    }
    if (r[3].get<std::string>() != "Ready" || (r[5].is_number() && r[5].get<int>() != 0)) continue;
    MemberCapacity::Node n;
    n.name = r[0].get<std::string>();
    n.model = r[4].get<std::string>();
    // Unhealthy GPUs ('U') take nothing: marked as fully used.
    for (char h : r[7].get<std::string>()) n.free_milli.push_back(h == 'H' ? 1000 : -1);
    index[n.name] = c.nodes.size();
    c.nodes.push_back(std::move(n));
  }
  for (size_t i = 0; i < fleet["jobs"].size(); ++i) {
    const Json& r = fleet["jobs"][i];
    // [kind, ns, name, phase, queue, gpus, priority, [[node, [gpu...], milli], ...], message]
    if (!r.is_array() || r.size() < 8 || !r[7].is_array()) {
      return absl::InvalidArgumentError(absl::StrCat("fleet summary: jobs[", i, "] is malformed"));
    }
    const std::string phase = r[3].is_string() ? r[3].get<std::string>() : "";
    if (phase == "Succeeded" || phase == "Failed") continue;
    for (const Json& m : r[7]) {
      if (!m.is_array() || m.size() < 3 || !m[0].is_string() || !m[1].is_array()) continue;
      auto it = index.find(m[0].get<std::string>());
      if (it == index.end()) continue;
      const int64_t milli = m[2].is_number() ? m[2].get<int64_t>() : 1000;
      std::vector<int64_t>& free = c.nodes[it->second].free_milli;
      for (const Json& g : m[1]) {
        if (!g.is_number_integer()) continue;
        const int64_t gi = g.get<int64_t>();
        if (gi >= 0 && gi < static_cast<int64_t>(free.size()) && free[gi] >= 0) {
          free[gi] = std::max<int64_t>(0, free[gi] - milli);
        }
      }
    }
  }
  for (const MemberCapacity::Node& n : c.nodes) {
    for (int64_t f : n.free_milli) {
      if (f < 0) continue;
      ++c.gpus;
      if (f == 1000) ++c.free_gpus;
    }
  }
  return c;
}

int64_t JobDemand::gpus() const {
  int64_t n = 0;
  for (const MemberDemand& m : members) n += m.gpus > 0 ? m.gpus : (m.milli > 0 ? 1 : 0);
  return n;
}

JobDemand DemandOf(const model::Job& job, bool service) {
  JobDemand d;
  d.models = job.gpu_models;
  int32_t left = service ? job.effective_min_member() : job.total_members();
  for (const model::MemberGroup& g : job.groups) {
    MemberDemand m;
    if (g.resources.fractional()) {
      m.milli = g.resources.gpu_milli;
    } else {
      m.gpus = g.resources.gpus;
      if (m.gpus == 0) m.milli = 0;  // CPU only: needs no GPU
    }
    for (int32_t i = 0; i < g.count && left > 0; ++i, --left) d.members.push_back(m);
  }
  return d;
}

bool Take(MemberCapacity* c, const JobDemand& d) {
  MemberCapacity trial = *c;
  std::vector<MemberDemand> members = d.members;
  std::sort(members.begin(), members.end(), [](const MemberDemand& a, const MemberDemand& b) {
    return a.gpus != b.gpus ? a.gpus > b.gpus : a.milli > b.milli;
  });
  for (const MemberDemand& m : members) {
    bool placed = m.gpus == 0 && m.milli <= 0;  // needs no GPU
    for (MemberCapacity::Node& n : trial.nodes) {
      if (placed) break;
      if (!model::AnyGpuModelMatches(d.models, n.model)) continue;  // "H100" is an alias too
      if (m.gpus > 0) {
        std::vector<size_t> whole;
        for (size_t g = 0; g < n.free_milli.size(); ++g) {
          if (n.free_milli[g] == 1000) whole.push_back(g);
        }
        if (static_cast<int64_t>(whole.size()) < m.gpus) continue;
        for (int64_t k = 0; k < m.gpus; ++k) n.free_milli[whole[k]] = 0;
        placed = true;
      } else {
        for (int64_t& f : n.free_milli) {
          if (f >= m.milli) {
            f -= m.milli;
            placed = true;
            break;
          }
        }
      }
    }
    if (!placed) return false;
  }
  trial.free_gpus = 0;
  for (const MemberCapacity::Node& n : trial.nodes) {
    trial.free_gpus += std::count(n.free_milli.begin(), n.free_milli.end(), int64_t{1000});
  }
  *c = std::move(trial);
  return true;
}

bool Fits(const MemberCapacity& c, const JobDemand& d) {
  MemberCapacity copy = c;
  return Take(&copy, d);
}

}  // namespace tessera::federation
