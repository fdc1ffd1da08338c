// The GPUPool controller on Kubernetes: the pool's status over the Nodes it selects
// (api::PoolStatus: GPUs from nvidia.com/gpu capacity, unhealthy ones beyond allocatable, GPU type
// from the nvidia.com/gpu.product label, allocated = nvidia.com/gpu of the bound Pods that have
// not ended), cordon and drain of the whole pool, and the Nodes a confined queue may use.
//
// Cordon (spec.cordon or spec.drain): each selected Node gets spec.unschedulable and the
// annotation tessera.dev/pool-cordon naming the pool; when no pool cordons it any more, only a
// Node carrying that annotation is uncordoned (one cordoned by hand stays so), as the standalone
// controller does. Drain (spec.drain): the Pods on those Nodes are evicted through the Eviction
// API (PodDisruptionBudgets apply; a refused eviction is retried), DaemonSet Pods excepted.
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "api/gpu_pool.h"
#include "common/status_macros.h"
#include "kube/api_error.h"
#include "kube/quantity.h"
#include "kube/resource.h"
#include "operator/operator_internal.h"

namespace tessera::op::internal {
namespace {

constexpr char kPoolCordonAnnotation[] = "tessera.dev/pool-cordon";
constexpr char kGpu[] = "nvidia.com/gpu";

int GpuCount(const Json& list) {
  const Json& q = Field(list, kGpu);
  if (!q.is_string()) return q.is_number_integer() ? q.get<int>() : 0;
  absl::StatusOr<kube::Quantity> v = kube::ParseQuantity(q.get<std::string>());
  return v.ok() ? static_cast<int>(v->Value()) : 0;
}

// GPUs a Pod holds: its containers' nvidia.com/gpu (limits, as the device plugin counts them).
int PodGpus(const Json& pod) {
  int n = 0;
  for (const Json& c : Field(Sub(pod, "spec"), "containers")) {
    const Json& r = Sub(c, "resources");
    n += std::max(GpuCount(Sub(r, "limits")), GpuCount(Sub(r, "requests")));
  }
  return n;
}

bool OwnedByDaemonSet(const Json& pod) {
  for (const Json& o : Field(Meta(pod), "ownerReferences")) {
    if (StrOr(o, "kind") == "DaemonSet") return true;
  }
  return false;
}

std::vector<const Json*> Pools(Env& env, std::vector<kube::ObjectPtr>* hold) {
  *hold = env.caches.pools->store().List();
  std::vector<const Json*> out;
  for (const auto& p : *hold) out.push_back(p.get());
  return out;
}

}  // namespace

std::vector<api::PoolNode> PoolNodes(Env& env, bool with_allocation) {
  std::map<std::string, int> allocated;
  if (with_allocation) {
    for (const kube::ObjectPtr& p : env.caches.bound_pods->store().List()) {
      const std::string node = StrOr(Sub(*p, "spec"), "nodeName");
      const std::string phase = StrOr(Sub(*p, "status"), "phase");
      if (node.empty() || phase == "Succeeded" || phase == "Failed") continue;
      allocated[node] += PodGpus(*p);
    }
  }
  std::vector<api::PoolNode> out;
  for (const kube::ObjectPtr& n : env.caches.nodes->store().List()) {
    api::PoolNode pn;
    pn.name = StrOr(Meta(*n), "name");
    for (auto it = Sub(Meta(*n), "labels").begin(); it != Sub(Meta(*n), "labels").end(); ++it) {
      if (it->is_string()) pn.labels[it.key()] = it->get<std::string>();
    }
    pn.gpu_type =
        pn.labels.count("nvidia.com/gpu.product") ? pn.labels["nvidia.com/gpu.product"] : "";
    const Json& st = Sub(*n, "status");
    pn.gpus = GpuCount(Sub(st, "capacity"));
    pn.unhealthy = std::max(0, pn.gpus - GpuCount(Sub(st, "allocatable")));
    pn.allocated = allocated[pn.name];
    const Json& u = Field(Sub(*n, "spec"), "unschedulable");
    pn.cordoned = u.is_boolean() && u.get<bool>();
    out.push_back(std::move(pn));
  }
  return out;
}

std::optional<std::vector<std::string>> QueueNodes(Env& env, const std::string& queue) {
  if (!env.caches.pools) return std::nullopt;
  std::vector<kube::ObjectPtr> hold;
  std::vector<const Json*> pools = Pools(env, &hold);
  bool named = false;
  for (const Json* p : pools) {
    for (const Json& q : Field(Sub(*p, "spec"), "queues")) named |= q == queue;
  }
  if (!named) return std::nullopt;
  return api::QueuePoolNodes(queue, pools, PoolNodes(env, /*with_allocation=*/false));
}

void ConfineToNodes(Json& pod, const std::vector<std::string>& nodes) {
  const Json field = {{"key", "metadata.name"},
                      {"operator", "In"},
                      {"values", nodes.empty() ? Json::array({""}) : Json(nodes)}};
  Json& terms = pod["spec"]["affinity"]["nodeAffinity"]
                   ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
  if (!terms.is_array() || terms.empty()) terms = Json::array({Json::object()});
  for (Json& t : terms) t["matchFields"].push_back(field);  // ANDed into every term
}

absl::Status ReconcilePools(Env& env) {
  std::vector<kube::ObjectPtr> hold;
  const std::vector<const Json*> pools = Pools(env, &hold);
  const std::vector<api::PoolNode> nodes = PoolNodes(env, /*with_allocation=*/true);
  absl::Status first;
  // Status of each pool.
  for (const Json* pool : pools) {
    if (Deleting(*pool)) continue;
    const Json counts = api::PoolStatus(*pool, nodes);
    Json st = Sub(*pool, "status");
    const Json before = st;
    for (auto it = counts.begin(); it != counts.end(); ++it) st[it.key()] = it.value();
    if (st != before) {
      if (absl::Status s = WriteStatus(env, kube::GpuPoolsResource(), *pool, st); !s.ok()) {
        first.Update(s);
      }
    }
  }
  // Cordons: what some pool cordons, and what a pool cordoned earlier but none does now.
  const std::set<std::string> cordon = api::NodesCordonedByPools(pools, nodes);
  for (const kube::ObjectPtr& n : env.caches.nodes->store().List()) {
    const std::string name = StrOr(Meta(*n), "name");
    const std::string by = Annotation(*n, kPoolCordonAnnotation);
    const Json& u = Field(Sub(*n, "spec"), "unschedulable");
    const bool cordoned = u.is_boolean() && u.get<bool>();
    Json patch;
    if (cordon.count(name) && !cordoned) {
      patch = {{"spec", {{"unschedulable", true}}},
               {"metadata", {{"annotations", {{kPoolCordonAnnotation, "true"}}}}}};
    } else if (!cordon.count(name) && !by.empty()) {
      patch = {{"metadata", {{"annotations", {{kPoolCordonAnnotation, nullptr}}}}}};
      if (cordoned) patch["spec"] = {{"unschedulable", false}};
    }
    if (patch.is_null()) continue;
    absl::StatusOr<Json> w = env.client.MergePatch(kube::NodesResource(), "", name, patch);
    if (!w.ok() && !kube::IsApiNotFound(w.status())) first.Update(w.status());
  }
  // Drains: evict what runs on the drained nodes.
  const std::set<std::string> drain = api::NodesDrainedByPools(pools, nodes);
  if (drain.empty()) return first;
  for (const kube::ObjectPtr& p : env.caches.bound_pods->store().List()) {
    const std::string node = StrOr(Sub(*p, "spec"), "nodeName");
    const std::string phase = StrOr(Sub(*p, "status"), "phase");
    if (!drain.count(node) || phase == "Succeeded" || phase == "Failed" || Deleting(*p) ||
        OwnedByDaemonSet(*p)) {
      continue;
    }
    kube::Eviction e;
    e.ns = StrOr(Meta(*p), "namespace");
    e.pod_name = StrOr(Meta(*p), "name");
    e.pod_uid = StrOr(Meta(*p), "uid");
    absl::Status s = env.client.Evict(e);
    if (!s.ok() && !kube::IsApiNotFound(s)) first.Update(s);  // a PDB's refusal: tried again
  }
  return first;
}

}  // namespace tessera::op::internal
