#include "sched/plugins/topology.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "sched/plugins/gpu_set.h"

namespace tessera::sched {
namespace {

struct Demand {
  int64_t gpus = 0;                         // whole GPUs of the whole gang
  std::vector<std::pair<int, int>> groups;  // (gpus per member, members)
};

Demand GangDemand(const model::Job& job) {
  Demand d;
  for (const auto& g : job.groups) {
    if (g.resources.gpus == 0 || g.resources.fractional()) continue;
    d.gpus += int64_t{g.count} * g.resources.gpus;
    d.groups.push_back({g.resources.gpus, g.count});
  }
  return d;
}

}  // namespace

PluginStatus Topology::PreFilter(CycleState&, const JobContext& ctx, PreFilterResult* out) {
  const model::Job& job = *ctx.job;
  const model::TopologyLevel level = job.topology.level;
  if (level == model::TopologyLevel::kNone) return PluginStatus::Skip();
  const ClusterState& cs = *ctx.cluster;
  const bool pack = job.placement == model::PlacementPreference::kPack;
  Demand d = GangDemand(job);
  if (d.gpus == 0) return PluginStatus::Skip();

  struct Cand {
    int32_t id;
    int64_t free;
  };
  std::vector<Cand> cands;
  int64_t largest = 0;
  if (level == model::TopologyLevel::kNode) {
    // Nodes with enough whole free GPUs, straight from the capacity index.
    for (ModelId m = 0; m < cs.num_models(); ++m) {
      if (!ctx.AllowsModel(m)) continue;
      largest = std::max<int64_t>(largest, cs.cluster_free(m).LargestNodeFree());
      for (int k = static_cast<int>(d.gpus); k <= model::kMaxGpusPerNode; ++k) {
        for (NodeId id : cs.index().whole_bucket(m, k)) {
          if (cands.size() >= static_cast<size_t>(kMaxDomains)) break;
          cands.push_back({id, k});
        }
      }
    }
  } else {
    const bool rack = level == model::TopologyLevel::kRack;
    int n = rack ? cs.num_racks() : cs.num_blocks();
    for (int dom = 0; dom < n; ++dom) {
      int64_t free = 0;
      bool fits = true;
      for (auto [gpus, count] : d.groups) {
        int64_t members = 0;
        for (ModelId m = 0; m < cs.num_models(); ++m) {
          if (!ctx.AllowsModel(m)) continue;
          const FreeHistogram& h = rack ? cs.rack_free(dom, m) : cs.block_free(dom, m);
          members += h.MembersThatFit(gpus);
        }
        if (members < count) fits = false;
      }
      for (ModelId m = 0; m < cs.num_models(); ++m) {
        if (ctx.AllowsModel(m))
          free += (rack ? cs.rack_free(dom, m) : cs.block_free(dom, m)).free_gpus;
      }
      largest = std::max(largest, free);
      if (fits && free >= d.gpus) cands.push_back({dom, free});
    }
  }
  if (cands.empty()) {
    if (!job.topology.required) return PluginStatus::Skip();
    return PluginStatus::Unschedulable(
        absl::StrCat("needs ", d.gpus, " GPUs in one ", model::TopologyLevelName(level),
                     "; largest free in any ", model::TopologyLevelName(level), ": ", largest));
  }
  std::stable_sort(cands.begin(), cands.end(), [&](const Cand& a, const Cand& b) {
    return pack ? a.free < b.free : a.free > b.free;
  });
  if (cands.size() > static_cast<size_t>(kMaxDomains)) cands.resize(kMaxDomains);
  for (const Cand& c : cands) out->domains.push_back(Domain{level, c.id});
  out->fallback_to_cluster = !job.topology.required;
  return PluginStatus::Success();
}

int64_t Topology::Score(CycleState& cs, const JobContext& ctx, const model::MemberGroup& g,
                        const NodeView& n) {
  const ClusterState& cl = *ctx.cluster;
  int64_t locality = 50;  // neutral for the first member
  if (!cs.placed().empty()) {
    const NodeState& first = cl.state(cs.placed().front().node);
    if (cs.placed().front().node == n.id) {
      locality = 100;
    } else if (first.rack == n.state.rack) {
      locality = 70;
    } else if (first.block == n.state.block) {
      locality = 40;
    } else {
      locality = 0;
    }
  }
  int64_t links = 100;
  if (g.resources.gpus >= 2) {
    GpuSetChoice c;
    if (ChooseWholeGpus(n.node.topology, n.state, g.resources.gpus, &c)) {
      links = 100 - 20 * (static_cast<int>(c.worst) - 1);
    } else {
      links = 0;
    }
  }
  return (locality + links) / 2;
}

}  // namespace tessera::sched
