#include "sched/framework/cluster_state.h"

#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"

namespace tessera::sched {

int64_t NodeState::free_gpu_milli() const {
  int64_t t = 0;
  for (int g = 0; g < num_gpus; ++g) {
    if (healthy(g)) t += free_milli[g];
  }
  return t;
}

uint8_t NodeState::shape_mask() const {
  uint8_t m = 0;
  for (size_t s = 0; s < shape_members.size(); ++s) {
    if (shape_members[s] > 0) m |= static_cast<uint8_t>(1u << s);
  }
  return m;
}

int GpuShapeOf(absl::Span<const GpuGrant> grants) {
  if (grants.empty()) return -1;
  if (grants.size() == 1 && grants[0].milli < model::kMilliPerGpu) return 0;
  switch (grants.size()) {
    case 1:
      return 1;
    case 2:
      return 2;
    case 4:
      return 3;
    case 8:
      return 4;
    default:
      return 5;
  }
}

namespace {
// A node's spec less its name and allocation, as a string key.
std::string StaticSignature(const model::Node& n, bool* symmetric) {
  std::string s = absl::StrCat(n.gpu_model(), "|", n.gpus.size(), "|", n.cpu_milli, "|",
                               n.memory_mib, "|", n.rack, "|", n.block, "|", n.max_members, "|");
  for (const model::Gpu& g : n.gpus) absl::StrAppend(&s, g.memory_mib, ",", g.mig_capable, ";");
  for (const auto& [name, amount] : n.scalars) absl::StrAppend(&s, name, "=", amount, ";");
  const int ng = n.topology.num_gpus();
  *symmetric = true;
  for (int a = 0; a < ng; ++a) {
    absl::StrAppend(&s, n.topology.domain(a), ":");
    for (int b = 0; b < ng; ++b) {
      absl::StrAppend(&s, static_cast<int>(n.topology.link(a, b)), ".");
      if (a != b && n.topology.link(a, b) != n.topology.link(0, ng > 1 ? 1 : 0)) {
        *symmetric = false;
      }
    }
  }
  for (const auto& [k, v] : n.labels) absl::StrAppend(&s, "|L", k, "=", v);
  for (const model::Taint& t : n.taints) {
    absl::StrAppend(&s, "|T", t.key, "=", t.value, ":", static_cast<int>(t.effect));
  }
  return s;
}
}  // namespace

int ScalarIndex(const model::Node& n, const std::string& name) {
  for (size_t i = 0; i < n.scalars.size(); ++i) {
    if (n.scalars[i].first == name) return static_cast<int>(i);
  }
  return -1;
}

NodeEquivalenceKey ClusterState::KeyOf(NodeId id) const {
  const NodeState& st = states_[id];
  NodeEquivalenceKey k;
  k.static_class = static_class_[id];
  k.cpu_free = st.cpu_free;
  k.memory_free = st.memory_free;
  k.healthy_mask = st.healthy_mask;
  k.shape_mask = st.shape_mask();
  k.full = nodes_[id].max_members > 0 && st.members >= nodes_[id].max_members;
  k.scalar_free = st.scalar_free;
  for (int g = 0; g < st.num_gpus; ++g) k.free_milli[g] = st.healthy(g) ? st.free_milli[g] : -1;
  if (static_symmetric_[k.static_class]) {
    std::sort(k.free_milli.begin(), k.free_milli.begin() + st.num_gpus, std::greater<>());
    k.healthy_mask = static_cast<uint32_t>(__builtin_popcount(st.healthy_mask));
  }
  return k;
}

void ClusterState::AddToClass(NodeId id) {
  NodeEquivalenceKey k = KeyOf(id);
  int32_t c;
  if (auto it = class_by_key_.find(k); it != class_by_key_.end()) {
    c = it->second;
  } else {
    if (!free_class_ids_.empty()) {
      c = free_class_ids_.back();
      free_class_ids_.pop_back();
      class_key_[c] = k;
    } else {
      c = static_cast<int32_t>(class_nodes_.size());
      class_key_.push_back(k);
      class_nodes_.emplace_back();
      class_list_.push_back(0);
      class_pos_.push_back(-1);
    }
    class_by_key_.emplace(k, c);
    const NodeState& st = states_[id];
    const int list = st.whole_free > 0 || st.max_partial > 0 ? 0 : 1;
    ClassList& l = class_lists_[list];
    class_list_[c] = static_cast<int8_t>(list);
    class_pos_[c] = static_cast<int32_t>(l.ids.size());
    l.ids.push_back(c);
    l.info.push_back(ClassInfo{.id = c,
                               .rep = id,
                               .min_id = id,
                               .size = 0,
                               .model = st.model,
                               .num_gpus = st.num_gpus,
                               .whole_free = st.whole_free,
                               .max_partial = st.max_partial,
                               .cpu_free = st.cpu_free});
  }
  ClassInfo& info = class_lists_[class_list_[c]].info[class_pos_[c]];
  ++info.size;
  info.min_id = std::min(info.min_id, id);
  node_class_[id] = c;
  node_class_pos_[id] = static_cast<int32_t>(class_nodes_[c].size());
  class_nodes_[c].push_back(id);
}

void ClusterState::RemoveFromClass(NodeId id) {
  int32_t c = node_class_[id];
  if (c < 0) return;
  std::vector<NodeId>& v = class_nodes_[c];
  int32_t pos = node_class_pos_[id];
  v[pos] = v.back();
  node_class_pos_[v[pos]] = pos;
  v.pop_back();
  node_class_[id] = -1;
  ClassList& l = class_lists_[class_list_[c]];
  ClassInfo& info = l.info[class_pos_[c]];
  --info.size;
  if (!v.empty() && info.rep == id) info.rep = v.front();
  if (!v.empty() && info.min_id == id) info.min_id = *std::min_element(v.begin(), v.end());
  if (v.empty()) {
    class_by_key_.erase(class_key_[c]);
    int32_t lp = class_pos_[c];
    l.ids[lp] = l.ids.back();
    l.info[lp] = l.info.back();
    class_pos_[l.ids[lp]] = lp;
    l.ids.pop_back();
    l.info.pop_back();
    class_pos_[c] = -1;
    free_class_ids_.push_back(c);
  }
}

ModelId ClusterState::InternModel(const std::string& name) {
  ModelId m = FindModel(name);
  if (m != kNoModel) return m;
  m = static_cast<ModelId>(model_names_.size());
  model_names_.push_back(name);
  for (auto& r : rack_hist_) r.resize(model_names_.size());
  for (auto& b : block_hist_) b.resize(model_names_.size());
  cluster_hist_.resize(model_names_.size());
  total_gpus_.resize(model_names_.size());
  allocated_milli_.resize(model_names_.size());
  max_node_gpus_.resize(model_names_.size());
  index_.Resize(num_models(), num_node_slots());
  return m;
}

ModelId ClusterState::FindModel(absl::string_view name) const {
  for (size_t i = 0; i < model_names_.size(); ++i) {
    if (model_names_[i] == name) return static_cast<ModelId>(i);
  }
  return kNoModel;
}

int ClusterState::InternRack(const std::string& rack, const std::string& block) {
  int b;
  if (auto it = block_ids_.find(block); it != block_ids_.end()) {
    b = it->second;
  } else {
    b = static_cast<int>(block_names_.size());
    block_ids_[block] = b;
    block_names_.push_back(block);
    block_nodes_.emplace_back();
    block_hist_.emplace_back(model_names_.size());
  }
  // A rack belongs to one block; the same rack name under another block is a
  // different rack.
  std::string key = absl::StrCat(block, "/", rack);
  if (auto it = rack_ids_.find(key); it != rack_ids_.end()) return it->second;
  int r = static_cast<int>(rack_names_.size());
  rack_ids_[key] = r;
  rack_names_.push_back(rack);
  rack_block_.push_back(b);
  rack_nodes_.emplace_back();
  rack_hist_.emplace_back(model_names_.size());
  return r;
}

int64_t ClusterState::total_gpus() const {
  int64_t t = 0;
  for (int64_t v : total_gpus_) t += v;
  return t;
}

int64_t ClusterState::allocated_milli() const {
  int64_t t = 0;
  for (int64_t v : allocated_milli_) t += v;
  return t;
}

absl::StatusOr<NodeId> ClusterState::AddNode(model::Node node) {
  absl::Status s = model::ValidateNode(node);
  if (!s.ok()) return s;
  if (by_name_.contains(node.name)) {
    return absl::AlreadyExistsError(absl::StrCat("node ", node.name, " already exists"));
  }
  NodeId id = static_cast<NodeId>(nodes_.size());
  NodeState st;
  st.present = true;
  st.schedulable = !node.unschedulable;
  st.model = InternModel(node.gpu_model());
  st.rack = InternRack(node.rack, node.block);
  st.block = rack_block_[st.rack];
  st.num_gpus = static_cast<int8_t>(node.gpus.size());
  st.cpu_free = node.cpu_milli;
  st.memory_free = node.memory_mib;
  for (const auto& [name, amount] : node.scalars) st.scalar_free.push_back(amount);
  free_cpu_milli_ += st.cpu_free;
  for (int g = 0; g < st.num_gpus; ++g) {
    st.free_milli[g] = model::kMilliPerGpu;
    if (node.gpus[g].health == model::GpuHealth::kHealthy) st.healthy_mask |= 1u << g;
    st.gpu_memory_mib = std::max(st.gpu_memory_mib, node.gpus[g].memory_mib);
  }
  total_gpus_[st.model] += st.num_gpus;
  max_node_gpus_[st.model] = std::max<int>(max_node_gpus_[st.model], st.num_gpus);
  bool symmetric = true;
  std::string sig = StaticSignature(node, &symmetric);
  auto [sit, inserted] =
      static_class_ids_.emplace(std::move(sig), static_cast<int32_t>(static_symmetric_.size()));
  if (inserted) static_symmetric_.push_back(symmetric);
  static_class_.push_back(sit->second);
  node_class_.push_back(-1);
  node_class_pos_.push_back(-1);
  rack_nodes_[st.rack].push_back(id);
  block_nodes_[st.block].push_back(id);
  by_name_[node.name] = id;
  nodes_.push_back(std::move(node));
  states_.push_back(st);
  hist_contrib_.push_back(-1);
  index_.Resize(num_models(), num_node_slots());
  ++live_nodes_;
  Reindex(id);
  ++generation_;
  return id;
}

void ClusterState::Unindex(NodeId id) {
  index_.Remove(id);
  RemoveFromClass(id);
  int8_t k = hist_contrib_[id];
  if (k >= 0) {
    const NodeState& st = states_[id];
    rack_hist_[st.rack][st.model].Remove(k);
    block_hist_[st.block][st.model].Remove(k);
    cluster_hist_[st.model].Remove(k);
    hist_contrib_[id] = -1;
  }
}

void ClusterState::Reindex(NodeId id) {
  Unindex(id);
  NodeState& st = states_[id];
  int whole = 0;
  int partial = 0;
  for (int g = 0; g < st.num_gpus; ++g) {
    if (!st.healthy(g)) continue;
    int f = st.free_milli[g];
    if (f == model::kMilliPerGpu) {
      ++whole;
    } else if (f > 0) {
      partial = std::max(partial, f);
    }
  }
  st.whole_free = static_cast<int8_t>(whole);
  st.max_partial = static_cast<int16_t>(partial);
  if (!st.indexed()) return;
  index_.Insert(id, st.model, whole, partial);
  AddToClass(id);
  rack_hist_[st.rack][st.model].Add(whole);
  block_hist_[st.block][st.model].Add(whole);
  cluster_hist_[st.model].Add(whole);
  hist_contrib_[id] = static_cast<int8_t>(whole);
}

std::optional<NodeId> ClusterState::FindNode(absl::string_view name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

void ClusterState::JobsOnNode(NodeId id, int gpu, std::vector<std::string>* out) const {
  for (const auto& [key, p] : bound_) {
    for (const MemberPlacement& m : p.members) {
      if (m.node != id) continue;
      bool hit = gpu < 0 || std::any_of(m.gpus.begin(), m.gpus.end(),
                                        [&](const GpuGrant& g) { return g.gpu == gpu; });
      if (hit) {
        out->push_back(key);
        break;
      }
    }
  }
  std::sort(out->begin(), out->end());
}

absl::Status ClusterState::RemoveNode(absl::string_view name, std::vector<std::string>* released) {
  auto id = FindNode(name);
  if (!id) return absl::NotFoundError(absl::StrCat("node ", name, " not found"));
  std::vector<std::string> jobs;
  JobsOnNode(*id, -1, &jobs);
  for (const std::string& j : jobs) {
    absl::Status s = Release(j);
    if (!s.ok()) return s;
  }
  if (released) released->insert(released->end(), jobs.begin(), jobs.end());
  Unindex(*id);
  NodeState& st = states_[*id];
  total_gpus_[st.model] -= st.num_gpus;
  free_cpu_milli_ -= st.cpu_free;
  auto drop = [&](std::vector<NodeId>& v) { v.erase(std::find(v.begin(), v.end(), *id)); };
  drop(rack_nodes_[st.rack]);
  drop(block_nodes_[st.block]);
  st.present = false;
  st.schedulable = false;
  by_name_.erase(std::string(name));
  --live_nodes_;
  ++generation_;
  return absl::OkStatus();
}

absl::Status ClusterState::SetGpuHealth(NodeId id, int gpu, bool healthy,
                                        std::vector<std::string>* affected) {
  if (id < 0 || id >= num_node_slots() || !states_[id].present) {
    return absl::NotFoundError(absl::StrCat("node id ", id, " not found"));
  }
  NodeState& st = states_[id];
  if (gpu < 0 || gpu >= st.num_gpus) {
    return absl::InvalidArgumentError(
        absl::StrCat("gpu: index ", gpu, " out of range for node ", nodes_[id].name));
  }
  if (st.healthy(gpu) == healthy) return absl::OkStatus();
  if (healthy) {
    st.healthy_mask |= 1u << gpu;
  } else {
    st.healthy_mask &= ~(1u << gpu);
    if (affected) JobsOnNode(id, gpu, affected);
  }
  nodes_[id].gpus[gpu].health = healthy ? model::GpuHealth::kHealthy : model::GpuHealth::kUnhealthy;
  Reindex(id);
  ++generation_;
  return absl::OkStatus();
}

absl::Status ClusterState::SetSchedulable(NodeId id, bool schedulable) {
  if (id < 0 || id >= num_node_slots() || !states_[id].present) {
    return absl::NotFoundError(absl::StrCat("node id ", id, " not found"));
  }
  states_[id].schedulable = schedulable;
  nodes_[id].unschedulable = !schedulable;
  Reindex(id);
  ++generation_;
  return absl::OkStatus();
}

absl::Status ClusterState::Assume(const MemberPlacement& m) {
  if (m.node < 0 || m.node >= num_node_slots() || !states_[m.node].present) {
    return absl::InvalidArgumentError(absl::StrCat("assume: node id ", m.node, " not present"));
  }
  NodeState& st = states_[m.node];
  if (m.cpu_milli > st.cpu_free || m.memory_mib > st.memory_free) {
    return absl::FailedPreconditionError(
        absl::StrCat("assume: CPU or memory over-allocated on ", nodes_[m.node].name));
  }
  // Check every grant first (a GPU may appear once per member).
  if (nodes_[m.node].max_members > 0 && st.members >= nodes_[m.node].max_members) {
    return absl::FailedPreconditionError(absl::StrCat("assume: ", nodes_[m.node].name,
                                                      " already runs its maximum of ",
                                                      nodes_[m.node].max_members, " members"));
  }
  for (const auto& [name, amount] : m.scalars) {
    const int i = ScalarIndex(nodes_[m.node], name);
    if (i < 0 || amount > st.scalar_free[i]) {
      return absl::FailedPreconditionError(absl::StrCat("assume: ", nodes_[m.node].name, " has ",
                                                        i < 0 ? 0 : st.scalar_free[i], " ", name,
                                                        " free, asked ", amount));
    }
  }
  uint32_t seen = 0;
  for (const GpuGrant& g : m.gpus) {
    if (g.gpu < 0 || g.gpu >= st.num_gpus || (seen >> g.gpu) & 1u) {
      return absl::InvalidArgumentError(absl::StrCat("assume: bad GPU index ", int{g.gpu}));
    }
    seen |= 1u << g.gpu;
    if (g.milli <= 0 || g.milli > st.free_milli[g.gpu] || !st.healthy(g.gpu)) {
      return absl::FailedPreconditionError(
          absl::StrCat("assume: GPU ", int{g.gpu}, " on ", nodes_[m.node].name, " has ",
                       st.free_milli[g.gpu], " milli free, asked ", g.milli));
    }
  }
  for (const GpuGrant& g : m.gpus) {
    st.free_milli[g.gpu] = static_cast<int16_t>(st.free_milli[g.gpu] - g.milli);
    allocated_milli_[st.model] += g.milli;
  }
  st.cpu_free -= m.cpu_milli;
  free_cpu_milli_ -= m.cpu_milli;
  st.memory_free -= m.memory_mib;
  for (const auto& [name, amount] : m.scalars) {
    st.scalar_free[ScalarIndex(nodes_[m.node], name)] -= amount;
  }
  ++st.members;
  if (int shape = GpuShapeOf(m.gpus); shape >= 0) ++st.shape_members[shape];
  Reindex(m.node);
  ++generation_;
  return absl::OkStatus();
}

void ClusterState::Forget(const MemberPlacement& m) {
  NodeState& st = states_[m.node];
  for (const GpuGrant& g : m.gpus) {
    st.free_milli[g.gpu] = static_cast<int16_t>(st.free_milli[g.gpu] + g.milli);
    allocated_milli_[st.model] -= g.milli;
  }
  st.cpu_free += m.cpu_milli;
  if (st.present) free_cpu_milli_ += m.cpu_milli;
  st.memory_free += m.memory_mib;
  for (const auto& [name, amount] : m.scalars) {
    if (int i = ScalarIndex(nodes_[m.node], name); i >= 0) st.scalar_free[i] += amount;
  }
  --st.members;
  if (int shape = GpuShapeOf(m.gpus); shape >= 0) --st.shape_members[shape];
  if (st.present) Reindex(m.node);
  ++generation_;
}

absl::Status ClusterState::Bind(Placement p) {
  auto [it, inserted] = bound_.try_emplace(p.job_key);
  if (!inserted) {
    return absl::AlreadyExistsError(absl::StrCat("job ", p.job_key, " is already bound"));
  }
  it->second = std::move(p);
  ++generation_;
  return absl::OkStatus();
}

absl::Status ClusterState::Release(absl::string_view job_key) {
  auto it = bound_.find(job_key);
  if (it == bound_.end()) {
    return absl::NotFoundError(absl::StrCat("job ", job_key, " is not bound"));
  }
  for (const MemberPlacement& m : it->second.members) Forget(m);
  bound_.erase(it);
  ++generation_;
  return absl::OkStatus();
}

const Placement* ClusterState::FindPlacement(absl::string_view job_key) const {
  auto it = bound_.find(job_key);
  return it == bound_.end() ? nullptr : &it->second;
}

absl::Status ClusterState::CheckConsistency() const {
  std::vector<FreeHistogram> cluster(model_names_.size());
  std::vector<int64_t> alloc(model_names_.size());
  int64_t cpu = 0;
  for (NodeId id = 0; id < num_node_slots(); ++id) {
    const NodeState& st = states_[id];
    if (!st.present) continue;
    cpu += st.cpu_free;
    int whole = 0;
    for (int g = 0; g < st.num_gpus; ++g) {
      if (st.free_milli[g] < 0 || st.free_milli[g] > model::kMilliPerGpu) {
        return absl::InternalError(absl::StrCat("node ", nodes_[id].name, " GPU ", g,
                                                " free milli out of range: ", st.free_milli[g]));
      }
      alloc[st.model] += model::kMilliPerGpu - st.free_milli[g];
      if (st.healthy(g) && st.free_milli[g] == model::kMilliPerGpu) ++whole;
    }
    if (st.cpu_free < 0 || st.memory_free < 0) {
      return absl::InternalError(absl::StrCat("node ", nodes_[id].name, " CPU/memory overused"));
    }
    if (whole != st.whole_free) {
      return absl::InternalError(absl::StrCat("node ", nodes_[id].name, " whole_free stale"));
    }
    if (st.indexed()) {
      int32_t c = node_class_[id];
      if (c < 0 || !(class_key_[c] == KeyOf(id))) {
        return absl::InternalError(
            absl::StrCat("node ", nodes_[id].name, " in a stale equivalence class"));
      }
      cluster[st.model].Add(whole);
      const auto& bucket = index_.whole_bucket(st.model, whole);
      if (std::find(bucket.begin(), bucket.end(), id) == bucket.end()) {
        return absl::InternalError(absl::StrCat("node ", nodes_[id].name, " missing from index"));
      }
    }
  }
  if (cpu != free_cpu_milli_) {
    return absl::InternalError(
        absl::StrCat("free CPU stale: ", free_cpu_milli_, " kept, ", cpu, " on the nodes"));
  }
  for (size_t m = 0; m < model_names_.size(); ++m) {
    if (cluster[m].nodes != cluster_hist_[m].nodes) {
      return absl::InternalError(absl::StrCat("cluster histogram stale for ", model_names_[m]));
    }
    if (alloc[m] != allocated_milli_[m]) {
      return absl::InternalError(absl::StrCat("allocated milli stale for ", model_names_[m]));
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera::sched
