// KubeScheduler and ResourceClaims (claims.h): the node's GPUs from its ResourceSlices, a Pod's
// claims as GPUs of its member, their allocation written before the binding, and released when
// the Pod ends.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kube/api_error.h"
#include "kube/resource.h"
#include "kubesched/kube_scheduler_impl.h"

namespace tessera::kubesched {

using Json = nlohmann::json;

void KubeScheduler::Impl::StartDraInformers() {
  auto make = [&](const kube::ResourceType& t, std::function<void(Inbox&, const Json&)> f) {
    kube::ReflectorOptions ro;
    ro.type = t;
    ro.log = opts_.log;
    auto inf = std::make_unique<kube::Informer>(client_, ro);
    auto note = [this, f](const kube::ObjectPtr& o) { Note([&](Inbox& in) { f(in, *o); }); };
    inf->AddEventHandlers({[note](const kube::ObjectPtr& o, bool) { note(o); },
                           [note](const kube::ObjectPtr&, const kube::ObjectPtr& o) { note(o); },
                           [note](const kube::ObjectPtr& o) { note(o); }});
    return inf;
  };
  slices_inf_ = make(kube::ResourceSlicesResource(), [](Inbox& in, const Json& o) {
    const std::string node = o.value("spec", Json::object()).value("nodeName", "");
    if (!node.empty()) in.nodes.insert(node);
    in.claims = true;  // where waiting claims could go
  });
  claims_inf_ =
      make(kube::ResourceClaimsResource(), [](Inbox& in, const Json&) { in.claims = true; });
  classes_inf_ =
      make(kube::DeviceClassesResource(), [](Inbox& in, const Json&) { in.claims = true; });
}

std::vector<SliceDevice> KubeScheduler::Impl::NodeDevices(const std::string& node) const {
  if (!slices_inf_) return {};
  std::vector<Json> slices;
  for (const kube::ObjectPtr& o : slices_inf_->store().List()) {
    if (o->value("spec", Json::object()).value("nodeName", "") == node) slices.push_back(*o);
  }
  return DevicesOfSlices(slices);
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
  // The claims a template made are named in the Pod's status (kube-controller-manager's
  // resourceclaim controller writes them).
  kube::ObjectPtr raw = pods_inf_->store().Get(pod_key);
  const Json statuses =
      raw ? raw->value("status", Json::object()).value("resourceClaimStatuses", Json::array())
          : Json::array();
  std::map<std::string, Json> classes;
  for (const kube::ObjectPtr& c : classes_inf_->store().List()) {
    classes[c->value("metadata", Json::object()).value("name", "")] = *c;
  }
  std::vector<PlacedClaim> claims;
  for (size_t i = 0; i < pod.spec.resource_claims.size(); ++i) {
    const kube::PodResourceClaim& pc = pod.spec.resource_claims[i];
    std::string name = pc.resource_claim_name.value_or("");
    if (name.empty()) {
      for (const Json& s : statuses) {
        if (s.value("name", "") == pc.name) name = s.value("resourceClaimName", "");
      }
    }
    if (name.empty()) {
      return absl::UnavailableError(
          absl::StrCat("waiting for the ResourceClaim of spec.resourceClaims[", i, "] (", pc.name,
                       ") to be created"));
    }
    kube::ObjectPtr obj = claims_inf_->store().Get(absl::StrCat(pod.metadata.ns, "/", name));
    if (!obj) {
      return absl::UnavailableError(
          absl::StrCat("waiting for ResourceClaim ", pod.metadata.ns, "/", name));
    }
    const Json st = obj->value("status", Json::object());
    if (st.contains("allocation")) {
      bool ours = false;
      for (const Json& r : st.value("reservedFor", Json::array())) {
        ours = ours || r.value("uid", "") == pod.metadata.uid;
      }
      if (!ours || pod.spec.node_name.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "ResourceClaim ", name,
            " is allocated already; tessera scheduler places Pods with unallocated claims only"));
      }
      // A bound Pod's own claim (a restarted scheduler rebuilding): its GPUs as allocated.
      PlacedClaim pc;
      pc.name = name;
      pc.uid = obj->value("metadata", Json::object()).value("uid", "");
      pc.allocated = true;
      pc.gpus = static_cast<int64_t>(ClaimedGpuNames(*obj).size());
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
  // Where the claims could be allocated at all: the nodes whose whole GPUs hold them together.
  std::string why;
  std::map<std::string, std::vector<Json>> by_node;  // one pass over the slices
  for (const kube::ObjectPtr& o : slices_inf_->store().List()) {
    const Json spec = o->value("spec", Json::object());
    if (spec.value("driver", "") == kDraDriver && !spec.value("nodeName", "").empty()) {
      by_node[spec.value("nodeName", "")].push_back(*o);
    }
  }
  for (const auto& [node, slices] : by_node) {
    std::vector<SliceDevice> devs = DevicesOfSlices(slices);
    std::set<std::string> taken;
    bool fits = true;
    for (const PlacedClaim& c : claims) {
      AllocationOutcome a = AllocateClaim(c.spec, devs, taken);
      if (!a.fits) {
        fits = false;
        if (why.empty()) why = absl::StrCat("ResourceClaim ", c.name, " on ", node, ": ", a.why);
        break;
      }
      for (const DeviceAllocation& d : a.devices) {
        taken.insert(absl::StrCat(d.driver, "/", d.pool, "/", d.device));
      }
    }
    if (fits) nodes->insert(node);
  }
  if (nodes->empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no node's GPUs can hold the Pod's ResourceClaims",
        why.empty() ? std::string(" (no ResourceSlices of ") + kDraDriver + ")" : ": " + why));
  }
  pod_claims_[pod_key] = std::move(claims);
  return absl::OkStatus();
}

std::map<std::string, std::vector<std::pair<PlacedClaim, Json>>>
KubeScheduler::Impl::ClaimAllocations(const JobRec& jr, const sched::Placement& p,
                                      std::string* why) {
  std::map<std::string, std::vector<std::pair<PlacedClaim, Json>>> out;
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
        ClaimShares(it->second, chosen, why);
    if (!shares) {
      out.clear();
      return out;
    }
    std::optional<kube::Pod> pod = GetPod(pk);
    if (!pod) continue;
    for (size_t c = 0; c < it->second.size(); ++c) {
      out[pk].push_back({it->second[c], AllocationStatus((*shares)[c], node, pod->metadata.name,
                                                         pod->metadata.uid)});
    }
  }
  return out;
}

std::vector<int> KubeScheduler::Impl::ClaimedGpus(const kube::Pod& pod) const {
  std::vector<int> out;
  if (!has_dra_ || pod.spec.resource_claims.empty() || pod.spec.node_name.empty()) return out;
  kube::ObjectPtr raw =
      pods_inf_->store().Get(absl::StrCat(pod.metadata.ns, "/", pod.metadata.name));
  const Json statuses =
      raw ? raw->value("status", Json::object()).value("resourceClaimStatuses", Json::array())
          : Json::array();
  std::set<std::string> names;
  for (const kube::PodResourceClaim& pc : pod.spec.resource_claims) {
    std::string name = pc.resource_claim_name.value_or("");
    for (const Json& s : statuses) {
      if (name.empty() && s.value("name", "") == pc.name) name = s.value("resourceClaimName", "");
    }
    kube::ObjectPtr c = claims_inf_->store().Get(absl::StrCat(pod.metadata.ns, "/", name));
    if (!c) continue;
    bool ours = false;
    for (const Json& r : c->value("status", Json::object()).value("reservedFor", Json::array())) {
      ours = ours || r.value("uid", "") == pod.metadata.uid;
    }
    if (!ours) continue;
    for (const std::string& d : ClaimedGpuNames(*c)) names.insert(d);
  }
  for (const SliceDevice& d : NodeDevices(pod.spec.node_name)) {
    std::optional<int> index = GpuIndex(d);
    if (index && names.contains(d.name)) out.push_back(*index);
  }
  std::sort(out.begin(), out.end());
  return out;
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
