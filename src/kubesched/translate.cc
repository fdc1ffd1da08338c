#include "kubesched/translate.h"

#include <algorithm>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "model/node_affinity.h"
#include "model/node_topology.h"

namespace tessera::kubesched {
namespace {

absl::Status Invalid(const std::vector<std::string>& errs) {
  return absl::InvalidArgumentError(absl::StrJoin(errs, "; "));
}

// Islands from the annotation: one id per GPU (-1: none), as many as the node has GPUs.
absl::StatusOr<std::vector<int>> ParseDomains(const std::string& text, int gpus) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int v = 0;
    if (!absl::SimpleAtoi(part, &v) || v < -1) {
      return absl::InvalidArgumentError(
          absl::StrCat("metadata.annotations[", kNvlinkDomainsAnnotation, "]: \"", text,
                       "\" is not a comma-separated list of island ids (-1 for none)"));
    }
    out.push_back(v);
  }
  if (static_cast<int>(out.size()) != gpus) {
    return absl::InvalidArgumentError(absl::StrCat("metadata.annotations[",
                                                   kNvlinkDomainsAnnotation, "]: ", out.size(),
                                                   " ids for ", gpus, " GPUs"));
  }
  return out;
}

int64_t Milli(const kube::ResourceList& l, const std::string& name) {
  auto it = l.find(name);
  return it == l.end() ? 0 : it->second.milli;
}

// A container's amount of `name`: its request, else its limit.
int64_t ContainerMilli(const kube::Container& c, const std::string& name) {
  if (auto it = c.resources.requests.find(name); it != c.resources.requests.end()) {
    return it->second.milli;
  }
  return Milli(c.resources.limits, name);
}

bool Modelled(const std::string& name) {
  return name == "cpu" || name == "memory" || name == kGpuResource || name == "ephemeral-storage" ||
         absl::StartsWith(name, "hugepages-");
}

// An extended resource (a MIG profile "nvidia.com/mig-1g.10gb", "rdma/ib"): a domain-prefixed
// name the scheduler counts as a whole number per node, as kube-scheduler does.
bool Extended(const std::string& name) {
  return !Modelled(name) && name.find('/') != std::string::npos &&
         !absl::StartsWith(name, "kubernetes.io/") && !absl::StartsWith(name, "requests.");
}

int64_t MibOfMilliBytes(int64_t milli) {
  const int64_t bytes = (milli + 999) / 1000;
  return (bytes + (int64_t{1} << 20) - 1) >> 20;
}

model::TopologyLevel LevelOfKey(const std::string& key, const TopologyLabels& labels) {
  if (key == labels.rack) return model::TopologyLevel::kRack;
  if (key == labels.block) return model::TopologyLevel::kBlock;
  if (key == "kubernetes.io/hostname") return model::TopologyLevel::kNode;
  return model::TopologyLevel::kNone;
}

// The tessera.dev/topology annotations over `spec.topology`.
absl::Status ApplyTopologyAnnotations(const kube::ObjectMeta& m, GangSpec* spec) {
  std::vector<std::string> errs;
  if (auto it = m.annotations.find(kTopologyAnnotation); it != m.annotations.end()) {
    model::TopologyLevel l;
    if (!model::ParseTopologyLevel(it->second, &l)) {
      errs.push_back(absl::StrCat("metadata.annotations[", kTopologyAnnotation, "]: \"", it->second,
                                  "\" is not one of node, rack, block"));
    } else {
      spec->topology.level = l;
      spec->topology.required = true;
    }
  }
  if (auto it = m.annotations.find(kTopologyPolicyAnnotation); it != m.annotations.end()) {
    if (it->second == "required" || it->second == "preferred") {
      spec->topology.required = it->second == "required";
    } else {
      errs.push_back(absl::StrCat("metadata.annotations[", kTopologyPolicyAnnotation, "]: \"",
                                  it->second, "\" is not required or preferred"));
    }
  }
  if (spec->topology.level == model::TopologyLevel::kNone) spec->topology.required = false;
  return errs.empty() ? absl::OkStatus() : Invalid(errs);
}

}  // namespace

absl::StatusOr<model::Node> NodeFromKube(const kube::Node& n, const TopologyLabels& labels) {
  model::Node out;
  out.name = n.metadata.name;
  out.labels = n.metadata.labels;
  // Capacity counts every GPU the device plugin advertises, allocatable only the healthy ones
  // (kubelet does not say which are not). The node keeps all of them, so the islands annotation
  // (one id per advertised GPU) still lines up, and as many as are missing from allocatable are
  // marked unhealthy: the highest indices, for want of better knowledge.
  const int64_t allocatable = Milli(n.allocatable, kGpuResource) / 1000;
  const int64_t gpus = std::max(allocatable, Milli(n.capacity, kGpuResource) / 1000);
  if (gpus > model::kMaxGpusPerNode) {
    return absl::InvalidArgumentError(absl::StrCat("status.capacity[", kGpuResource, "]: ", gpus,
                                                   " GPUs; the scheduler places at most ",
                                                   model::kMaxGpusPerNode, " per node"));
  }
  std::string product = "gpu";
  if (auto it = n.metadata.labels.find(kGpuProductLabel); it != n.metadata.labels.end()) {
    product = it->second;
  }
  int64_t mem = 0;
  if (auto it = n.metadata.labels.find(kGpuMemoryLabel); it != n.metadata.labels.end()) {
    (void)absl::SimpleAtoi(it->second, &mem);
  }
  std::vector<model::Gpu> list;
  for (int i = 0; i < gpus; ++i) {
    model::Gpu g;
    g.index = i;
    g.uuid = absl::StrCat(out.name, "/gpu", i);
    g.model = product;
    g.memory_mib = mem;
    if (i >= allocatable) g.health = model::GpuHealth::kUnhealthy;
    list.push_back(std::move(g));
  }
  std::vector<int> domains(gpus, -1);
  if (auto it = n.metadata.annotations.find(kNvlinkDomainsAnnotation);
      it != n.metadata.annotations.end() && gpus > 0) {
    absl::StatusOr<std::vector<int>> d = ParseDomains(it->second, static_cast<int>(gpus));
    if (!d.ok()) return d.status();
    domains = *std::move(d);
  }
  if (absl::Status s = SetGpus(std::move(list), domains, &out); !s.ok()) return s;
  out.cpu_milli = Milli(n.allocatable, "cpu");
  out.memory_mib = MibOfMilliBytes(Milli(n.allocatable, "memory"));
  out.max_members = static_cast<int32_t>(Milli(n.allocatable, "pods") / 1000);
  for (const auto& [name, q] : n.allocatable) {  // a std::map: sorted by name
    if (Extended(name) && q.milli >= 0) out.scalars.emplace_back(name, q.milli / 1000);
  }
  for (const kube::Taint& t : n.taints) {
    std::optional<model::TaintEffect> e = model::ParseTaintEffect(t.effect);
    if (!e) continue;  // the API admits only the three effects
    out.taints.push_back({t.key, t.value, *e});
  }
  if (auto it = n.metadata.labels.find(labels.rack); it != n.metadata.labels.end()) {
    out.rack = it->second;
  }
  if (auto it = n.metadata.labels.find(labels.block); it != n.metadata.labels.end()) {
    out.block = it->second;
  }
  out.unschedulable = n.unschedulable || !NodeReady(n);
  return out;
}

absl::Status SetGpus(std::vector<model::Gpu> gpus, const std::vector<int>& domains,
                     model::Node* node) {
  const int n = static_cast<int>(gpus.size());
  // Links: NVLink inside an island, the host bridge between islands (nothing finer is known).
  std::vector<model::LinkClass> links(static_cast<size_t>(n) * n,
                                      model::LinkClass::kPcieHostBridge);
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (a == b) {
        links[a * n + b] = model::LinkClass::kSelf;
      } else if (domains[a] >= 0 && domains[a] == domains[b]) {
        links[a * n + b] = model::LinkClass::kNvLink;
      }
    }
  }
  absl::StatusOr<model::NodeTopology> topo =
      model::NodeTopology::FromMatrix(n, std::move(links), domains);
  if (!topo.ok()) return topo.status();
  node->gpus = std::move(gpus);
  node->topology = *std::move(topo);
  return absl::OkStatus();
}

bool NodeReady(const kube::Node& n) {
  for (const kube::NodeCondition& c : n.conditions) {
    if (c.type == "Ready") return c.status == "True";
  }
  return true;
}

absl::StatusOr<model::ResourceRequest> PodRequest(const kube::Pod& p) {
  std::vector<std::string> errs;
  auto total = [&](const std::string& name) {
    int64_t sum = 0, init = 0;
    for (const kube::Container& c : p.spec.containers) sum += ContainerMilli(c, name);
    for (const kube::Container& c : p.spec.init_containers) {
      init = std::max(init, ContainerMilli(c, name));
    }
    return std::max(sum, init) + Milli(p.spec.overhead, name);
  };
  auto check = [&](const std::vector<kube::Container>& cs, const std::string& field) {
    for (size_t i = 0; i < cs.size(); ++i) {
      for (const kube::ResourceList* l : {&cs[i].resources.requests, &cs[i].resources.limits}) {
        for (const auto& [name, q] : *l) {
          if (Modelled(name) || Extended(name)) continue;
          std::string msg = absl::StrCat(field, "[", i, "].resources: ", name,
                                         " is not a resource the tessera scheduler places");
          if (std::find(errs.begin(), errs.end(), msg) == errs.end()) errs.push_back(msg);
        }
      }
    }
  };
  check(p.spec.containers, "spec.containers");
  check(p.spec.init_containers, "spec.initContainers");
  model::ResourceRequest r;
  const int64_t gpu_milli = total(kGpuResource);
  if (gpu_milli % 1000 != 0) {
    errs.push_back(absl::StrCat(kGpuResource, ": must be whole GPUs"));
  } else if (gpu_milli / 1000 > model::kMaxGpusPerNode) {
    errs.push_back(absl::StrCat(kGpuResource, ": ", gpu_milli / 1000,
                                " GPUs in one Pod; a node has at most ", model::kMaxGpusPerNode));
  }
  // Extended resources, each name once (std::set: sorted, as model::ScalarResources wants).
  std::set<std::string> extended;
  for (const auto* cs : {&p.spec.containers, &p.spec.init_containers}) {
    for (const kube::Container& c : *cs) {
      for (const kube::ResourceList* l : {&c.resources.requests, &c.resources.limits}) {
        for (const auto& [name, q] : *l) {
          if (Extended(name)) extended.insert(name);
        }
      }
    }
  }
  for (const std::string& name : extended) {
    const int64_t milli = total(name);
    if (milli % 1000 != 0) {
      errs.push_back(absl::StrCat(name, ": an extended resource is counted in whole units"));
    } else if (milli > 0) {
      r.scalars.emplace_back(name, milli / 1000);
    }
  }
  if (!errs.empty()) return Invalid(errs);
  r.gpus = static_cast<int32_t>(gpu_milli / 1000);
  r.cpu_milli = total("cpu");
  r.memory_mib = MibOfMilliBytes(total("memory"));
  return r;
}

absl::Status ApplyPodConstraints(const kube::Pod& p, model::Job* job) {
  std::vector<std::string> errs;
  job->node_selector = p.spec.node_selector;
  job->node_affinity.clear();
  if (p.spec.node_affinity && p.spec.node_affinity->required_terms) {
    const auto& terms = *p.spec.node_affinity->required_terms;
    for (size_t i = 0; i < terms.size(); ++i) {
      model::NodeSelectorTerm t;
      auto add = [&](const std::vector<kube::NodeSelectorRequirement>& reqs, bool field,
                     const char* what) {
        for (size_t j = 0; j < reqs.size(); ++j) {
          model::NodeSelectorRequirement r;
          r.key = reqs[j].key;
          r.values = reqs[j].values;
          r.field = field;
          if (!model::ParseNodeSelectorOp(reqs[j].op, &r.op)) {
            errs.push_back(absl::StrCat(
                "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
                "nodeSelectorTerms[",
                i, "].", what, "[", j, "].operator: unknown operator \"", reqs[j].op, "\""));
            continue;
          }
          t.requirements.push_back(std::move(r));
        }
      };
      add(terms[i].match_expressions, false, "matchExpressions");
      add(terms[i].match_fields, true, "matchFields");
      job->node_affinity.push_back(std::move(t));
    }
  }
  job->tolerations.clear();
  for (size_t i = 0; i < p.spec.tolerations.size(); ++i) {
    const kube::Toleration& k = p.spec.tolerations[i];
    model::Toleration t;
    t.key = k.key;
    t.value = k.value;
    t.op = k.op == "Exists" ? model::Toleration::Op::kExists : model::Toleration::Op::kEqual;
    if (!k.effect.empty()) {
      t.effect = model::ParseTaintEffect(k.effect);
      if (!t.effect) {
        errs.push_back(
            absl::StrCat("spec.tolerations[", i, "].effect: unknown effect \"", k.effect, "\""));
        continue;
      }
    }
    job->tolerations.push_back(std::move(t));
  }
  if (!errs.empty()) return Invalid(errs);
  return model::ValidateNodeAffinity(
      job->node_affinity,
      "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
      "nodeSelectorTerms");
}

std::vector<int> AnnotatedGpus(const kube::Pod& p) {
  std::vector<int> out;
  auto it = p.metadata.annotations.find(kGpusAnnotation);
  if (it == p.metadata.annotations.end()) return out;
  for (absl::string_view s : absl::StrSplit(it->second, ',', absl::SkipEmpty())) {
    int g = 0;
    if (absl::SimpleAtoi(s, &g)) out.push_back(g);
  }
  return out;
}

bool PodTerminal(const kube::Pod& p) {
  return p.status.phase == "Succeeded" || p.status.phase == "Failed";
}

std::optional<GangRef> GangOf(const kube::Pod& p) {
  if (auto it = p.metadata.labels.find(kube::kCoschedulingPodGroupLabel);
      it != p.metadata.labels.end() && !it->second.empty()) {
    return GangRef{"x", p.metadata.ns, it->second};
  }
  if (p.spec.pod_group_name && !p.spec.pod_group_name->empty()) {
    return GangRef{"k", p.metadata.ns, *p.spec.pod_group_name};
  }
  return std::nullopt;
}

absl::StatusOr<GangSpec> GangSpecOf(const kube::CoschedulingPodGroup& g,
                                    const TopologyLabels& labels) {
  (void)labels;
  GangSpec s;
  s.min_member = std::max(1, g.min_member);
  if (g.schedule_timeout_seconds && *g.schedule_timeout_seconds > 0) {
    s.timeout = absl::Seconds(*g.schedule_timeout_seconds);
  }
  if (absl::Status st = ApplyTopologyAnnotations(g.metadata, &s); !st.ok()) return st;
  return s;
}

absl::StatusOr<GangSpec> GangSpecOf(const kube::PodGroup& g, const TopologyLabels& labels) {
  GangSpec s;
  s.min_member = std::max(1, g.policy.gang_min_count.value_or(1));
  for (const std::string& key : g.topology_keys) {
    model::TopologyLevel l = LevelOfKey(key, labels);
    if (l == model::TopologyLevel::kNone) {
      return absl::InvalidArgumentError(absl::StrCat(
          "spec.schedulingConstraints.topology.key: \"", key, "\" is not a topology level the ",
          "scheduler knows (", labels.rack, ", ", labels.block, ", kubernetes.io/hostname)"));
    }
    // Every key must hold, so the smallest domain rules.
    if (s.topology.level == model::TopologyLevel::kNone || l < s.topology.level) {
      s.topology.level = l;
    }
    s.topology.required = true;
  }
  s.priority = g.priority;
  if (absl::Status st = ApplyTopologyAnnotations(g.metadata, &s); !st.ok()) return st;
  return s;
}

}  // namespace tessera::kubesched
