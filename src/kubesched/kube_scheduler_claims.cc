// KubeScheduler and ResourceClaims (claims.h): the node's GPUs from its ResourceSlices, a Pod's
// claims as GPUs of its member, their allocation written before the binding, and released when
// the Pod ends.
#include <algorithm>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kube/api_error.h"
#include "kube/resource.h"
#include "kubesched/kube_scheduler_impl.h"

namespace tessera::kubesched {

using Json = nlohmann::json;

namespace {

constexpr char kSliceNodeIndex[] = "nodeName";

std::string SliceNode(const Json& slice) {
  return slice.value("spec", Json::object()).value("nodeName", "");
}

// Whether `claim`'s status.reservedFor holds the Pod of `uid`.
bool ReservedFor(const Json& claim, const std::string& uid) {
  for (const Json& r : claim.value("status", Json::object()).value("reservedFor", Json::array())) {
    if (r.value("uid", "") == uid) return true;
  }
  return false;
}

}  // namespace

void KubeScheduler::Impl::MakeDraInformers() {
  slices_inf_ = MakeInformer(kube::ResourceSlicesResource(), [](Inbox& in, const Json& o) {
    const std::string node = SliceNode(o);
    if (!node.empty()) in.nodes.insert(node);
    in.claims = true;  // where waiting claims could go
  });
  // NodeDevices reads a node's slices by this index, not by scanning them all for each node.
  (void)slices_inf_->AddIndexer(kSliceNodeIndex, [](const Json& o) {
    const std::string node = SliceNode(o);
    return node.empty() ? std::vector<std::string>{} : std::vector<std::string>{node};
  });
  // An allocation (the scheduler's own status writes above all) changes no waiting Pod's
  // placement; a new claim, or one deallocated or deleted unallocated, may.
  claims_inf_ = MakeInformer(kube::ResourceClaimsResource(), [](Inbox& in, const Json& o) {
    if (!o.value("status", Json::object()).contains("allocation")) in.claims = true;
  });
  classes_inf_ =
      MakeInformer(kube::DeviceClassesResource(), [](Inbox& in, const Json&) { in.claims = true; });
}

std::vector<SliceDevice> KubeScheduler::Impl::NodeDevices(const std::string& node) const {
  if (!slices_inf_) return {};
  std::vector<kube::ObjectPtr> objs;
  (void)slices_inf_->store().ByIndex(kSliceNodeIndex, node, &objs);
  std::vector<Json> slices;
  slices.reserve(objs.size());
  for (const kube::ObjectPtr& o : objs) slices.push_back(*o);
  return DevicesOfSlices(slices);
}

std::vector<KubeScheduler::Impl::PodClaimRef> KubeScheduler::Impl::PodClaimRefs(
    const kube::Pod& pod) const {
  // The claims a template made are named in the Pod's status (kube-controller-manager's
  // resourceclaim controller writes them).
  kube::ObjectPtr raw =
      pods_inf_->store().Get(absl::StrCat(pod.metadata.ns, "/", pod.metadata.name));
  const Json statuses =
      raw ? raw->value("status", Json::object()).value("resourceClaimStatuses", Json::array())
          : Json::array();
  std::vector<PodClaimRef> out;
  for (const kube::PodResourceClaim& pc : pod.spec.resource_claims) {
    PodClaimRef ref;
    ref.name = pc.resource_claim_name.value_or("");
    for (const Json& st : statuses) {
      if (ref.name.empty() && st.value("name", "") == pc.name) {
        ref.name = st.value("resourceClaimName", "");
      }
    }
    if (!ref.name.empty()) {
      ref.obj = claims_inf_->store().Get(absl::StrCat(pod.metadata.ns, "/", ref.name));
    }
    out.push_back(std::move(ref));
  }
  return out;
}

void KubeScheduler::Impl::ApplySliceGpus(model::Node* node) const {
  if (!node->gpus.empty() || !slices_inf_) return;
  std::vector<int> domains;
  std::vector<model::Gpu> gpus = SliceGpus(NodeDevices(node->name), node->name, &domains);
  if (gpus.empty()) return;
  if (absl::Status s = SetGpus(std::move(gpus), domains, node); !s.ok()) {
    opts_.log.Warn("the node's ResourceSlices give no usable GPUs",
                   {{"node", node->name}, {"error", s.ToString()}});
  }
}

absl::Status KubeScheduler::Impl::PlaceClaims(const kube::Pod& pod, std::set<std::string>* nodes) {
  const std::string pod_key = absl::StrCat(pod.metadata.ns, "/", pod.metadata.name);
  pod_claims_.erase(pod_key);
  if (pod.spec.resource_claims.empty()) return absl::OkStatus();
  if (!has_dra_) {
    return absl::InvalidArgumentError(
        "spec.resourceClaims: this cluster does not serve resource.k8s.io/v1");
  }
  std::map<std::string, Json> classes;
  for (const kube::ObjectPtr& c : classes_inf_->store().List()) {
    classes[c->value("metadata", Json::object()).value("name", "")] = *c;
  }
  const std::vector<PodClaimRef> refs = PodClaimRefs(pod);
  std::vector<PlacedClaim> claims;
  for (size_t i = 0; i < refs.size(); ++i) {
    const std::string& name = refs[i].name;
    if (name.empty()) {
      return absl::UnavailableError(
          absl::StrCat("waiting for the ResourceClaim of spec.resourceClaims[", i, "] (",
                       pod.spec.resource_claims[i].name, ") to be created"));
    }
    const kube::ObjectPtr& obj = refs[i].obj;
    if (!obj) {
      return absl::UnavailableError(
          absl::StrCat("waiting for ResourceClaim ", pod.metadata.ns, "/", name));
    }
    const Json st = obj->value("status", Json::object());
    if (st.contains("allocation")) {
      if (!ReservedFor(*obj, pod.metadata.uid) || pod.spec.node_name.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "ResourceClaim ", name,
            " is allocated already; tessera scheduler places Pods with unallocated claims only"));
      }
      // A bound Pod's own claim (a restarted scheduler rebuilding): its GPUs as allocated.
      PlacedClaim pc;
      pc.name = name;
      pc.uid = obj->value("metadata", Json::object()).value("uid", "");
      pc.allocated = true;
      pc.held = AllocatedDeviceIds(*obj);
      pc.gpus = static_cast<int64_t>(
          GpuIndicesOf(NodeDevices(pod.spec.node_name), {pc.held.begin(), pc.held.end()}).size());
      pc.kind = pc.gpus > 0 ? ClaimKind::kGpus : ClaimKind::kDevices;
      claims.push_back(std::move(pc));
      continue;
    }
    absl::StatusOr<PlacedClaim> c = ClaimOf(*obj, classes);
    if (!c.ok()) return c.status();
    claims.push_back(*std::move(c));
  }
  nodes->clear();
  if (!pod.spec.node_name.empty()) {  // bound: its claims are allocated there
    nodes->insert(pod.spec.node_name);
    pod_claims_[pod_key] = std::move(claims);
    return absl::OkStatus();
  }
  // Each node's devices (one pass over the slices), and the cluster's to classify the claims.
  std::map<std::string, std::vector<Json>> by_node;
  for (const kube::ObjectPtr& o : slices_inf_->store().List()) {
    const std::string node = SliceNode(*o);
    if (!node.empty()) by_node[node].push_back(*o);
  }
  std::vector<SliceDevice> cluster;
  std::map<std::string, std::pair<size_t, size_t>> devices;  // node -> its range of `cluster`
  for (const auto& [node, slices] : by_node) {
    std::vector<SliceDevice> d = DevicesOfSlices(slices);
    devices[node] = {cluster.size(), cluster.size() + d.size()};
    std::move(d.begin(), d.end(), std::back_inserter(cluster));
  }
  // Each claim's alternatives (firstAvailable; one without) that something published could
  // satisfy, with what they take.
  std::vector<std::vector<std::pair<size_t, ClaimKind>>> usable(claims.size());
  for (size_t c = 0; c < claims.size(); ++c) {
    absl::Status first_error;
    for (size_t a = 0; a < claims[c].alternatives.size(); ++a) {
      absl::StatusOr<ClaimKind> kind = KindOf(cluster, claims[c].alternatives[a], claims[c].name);
      if (kind.ok()) {
        usable[c].push_back({a, *kind});
      } else if (first_error.ok()) {
        first_error = kind.status();
      }
    }
    if (usable[c].empty()) return first_error;
  }
  // Where they could be allocated at all: whole GPUs as if free (the core knows which are in
  // use), other devices less those allocated. On each node each claim takes its most preferred
  // alternative that fits; nodes are grouped by those choices and by the whole GPUs they would
  // take (All requests take a node's every match).
  const std::set<std::string> allocated = AllocatedDevices();
  std::string why;
  std::map<std::pair<std::vector<size_t>, int64_t>, std::vector<std::string>> groups;
  std::map<std::string, std::vector<int64_t>> shares;  // node -> each claim's GPUs
  for (const auto& [node, range] : devices) {
    std::vector<SliceDevice> whole, others;
    for (size_t i = range.first; i < range.second; ++i) {
      (WholeGpu(cluster[i]) ? whole : others).push_back(cluster[i]);
    }
    std::set<std::string> gpus_taken, taken = allocated;
    std::vector<size_t> choice;
    int64_t total = 0;
    std::vector<int64_t>& share = shares[node];
    for (size_t c = 0; c < claims.size(); ++c) {
      for (size_t u = 0; u < usable[c].size() && choice.size() == c; ++u) {
        const auto [a, kind] = usable[c][u];
        const bool gpus = kind == ClaimKind::kGpus;
        std::set<std::string>& t = gpus ? gpus_taken : taken;
        AllocationOutcome o = AllocateClaim(claims[c].alternatives[a], gpus ? whole : others, t);
        if (!o.fits) {
          if (why.empty()) {
            why = absl::StrCat("ResourceClaim ", claims[c].name, " on ", node, ": ", o.why);
          }
          continue;
        }
        for (const DeviceAllocation& d : o.devices) t.insert(DeviceId(d));
        choice.push_back(u);
        share.push_back(gpus ? static_cast<int64_t>(o.devices.size()) : 0);
        total += share.back();
      }
      if (choice.size() == c) break;  // this claim fits nowhere on the node
    }
    if (choice.size() == claims.size()) groups[{choice, total}].push_back(node);
  }
  if (groups.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no node's devices can hold the Pod's ResourceClaims",
                     why.empty() ? std::string(" (no ResourceSlices)") : ": " + why));
  }
  // One choice and one GPU count for the member: the most preferred alternatives any node
  // holds; among nodes that agree on them, the GPU count most agree on (fewer on a tie).
  // Without firstAvailable or All requests every node that fits agrees.
  auto best = groups.begin();
  for (auto it = groups.begin(); it != groups.end(); ++it) {
    if (it->first.first == best->first.first && it->second.size() > best->second.size()) best = it;
  }
  nodes->insert(best->second.begin(), best->second.end());
  const std::vector<int64_t>& share = shares[best->second.front()];
  for (size_t c = 0; c < claims.size(); ++c) {
    const auto [a, kind] = usable[c][best->first.first[c]];
    claims[c].Choose(a, kind);
    claims[c].gpus = share[c];
  }
  pod_claims_[pod_key] = std::move(claims);
  return absl::OkStatus();
}

std::set<std::string> KubeScheduler::Impl::AllocatedDevices() const {
  std::set<std::string> out;
  for (const kube::ObjectPtr& o : claims_inf_->store().List()) {
    for (std::string& id : AllocatedDeviceIds(*o)) out.insert(std::move(id));
  }
  // Allocations written (or being written) that the informer may not show yet.
  for (const auto& [pod, claims] : pod_claims_) {
    for (const PlacedClaim& c : claims) out.insert(c.held.begin(), c.held.end());
  }
  return out;
}

std::map<std::string, std::vector<std::pair<PlacedClaim, Json>>>
KubeScheduler::Impl::ClaimAllocations(const JobRec& jr, const sched::Placement& p,
                                      std::string* why) {
  std::map<std::string, std::vector<std::pair<PlacedClaim, Json>>> out;
  std::set<std::string> allocated;  // other devices: free ones only, across the members
  bool any_devices = false;
  for (const std::string& pk : jr.pods) {
    if (auto it = pod_claims_.find(pk); it != pod_claims_.end()) {
      for (const PlacedClaim& c : it->second) any_devices |= c.kind == ClaimKind::kDevices;
    }
  }
  if (any_devices) allocated = AllocatedDevices();
  for (const sched::MemberPlacement& m : p.members) {
    const std::string& pk = jr.pods[m.group];
    auto it = pod_claims_.find(pk);
    if (it == pod_claims_.end() || it->second.empty()) continue;
    const std::string node = cluster_.node(m.node).name;
    // The devices of the GPUs the core chose, in its order.
    std::vector<SliceDevice> devs = NodeDevices(node);
    std::vector<SliceDevice> chosen;
    for (const sched::GpuGrant& g : m.gpus) {
      for (const SliceDevice& d : devs) {
        if (GpuIndex(d) == g.gpu) chosen.push_back(d);
      }
    }
    std::optional<std::vector<std::vector<DeviceAllocation>>> shares =
        ClaimShares(it->second, chosen, devs, &allocated, why);
    if (!shares) {
      out.clear();
      return out;
    }
    std::optional<kube::Pod> pod = GetPod(pk);
    if (!pod) continue;
    for (size_t c = 0; c < it->second.size(); ++c) {
      PlacedClaim pc = it->second[c];
      pc.held.clear();
      for (const DeviceAllocation& a : (*shares)[c]) pc.held.push_back(DeviceId(a));
      Json status =
          AllocationStatus((*shares)[c], node, pod->metadata.name, pod->metadata.uid, pc.config);
      out[pk].push_back({std::move(pc), std::move(status)});
    }
  }
  return out;
}

std::vector<int> KubeScheduler::Impl::ClaimedGpus(const kube::Pod& pod) const {
  if (!has_dra_ || pod.spec.resource_claims.empty() || pod.spec.node_name.empty()) return {};
  std::set<std::string> ids;
  for (const PodClaimRef& ref : PodClaimRefs(pod)) {
    if (!ref.obj || !ReservedFor(*ref.obj, pod.metadata.uid)) continue;
    for (std::string& id : AllocatedDeviceIds(*ref.obj)) ids.insert(std::move(id));
  }
  return GpuIndicesOf(NodeDevices(pod.spec.node_name), ids);
}

void KubeScheduler::Impl::ReleaseClaims(const std::string& pod_key) {
  auto it = pod_claims_.find(pod_key);
  if (it == pod_claims_.end()) return;
  std::vector<PlacedClaim> claims = std::move(it->second);
  pod_claims_.erase(it);
  const std::string ns = pod_key.substr(0, pod_key.find('/'));
  for (const PlacedClaim& c : claims) {
    if (!c.allocated) continue;
    // Deallocated once its Pod is gone: reservedFor and allocation cleared (if it is still the
    // claim we allocated).
    writer_->Post([this, ns, c] {
      absl::StatusOr<Json> cur = client_.Get(kube::ResourceClaimsResource(), ns, c.name);
      if (!cur.ok() || cur->value("metadata", Json::object()).value("uid", "") != c.uid) return;
      Json obj = *cur;
      obj["status"].erase("reservedFor");
      obj["status"].erase("allocation");
      absl::StatusOr<Json> w =
          client_.Update(kube::ResourceClaimsResource(), ns, c.name, obj, "status");
      if (!w.ok() && !kube::IsApiNotFound(w.status())) {
        opts_.log.Warn("claim not deallocated",
                       {{"claim", ns + "/" + c.name}, {"error", w.status().ToString()}});
      }
    });
  }
}

}  // namespace tessera::kubesched
