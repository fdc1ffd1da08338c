#include "kubesched/dra_view.h"

#include <iostream>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kube/kubeconfig.h"
#include "kube/resource.h"
#include "kube/rest_client.h"
#include "kubesched/claims.h"

namespace tessera::kubesched {

using Json = nlohmann::json;

std::string RenderDraView(const std::vector<Json>& slices, const std::vector<Json>& claims,
                          const std::string& node) {
  // Device id (driver/pool/device) -> "ns/claim (pod)".
  std::map<std::string, std::string> owner;
  for (const Json& c : claims) {
    const Json meta = c.value("metadata", Json::object());
    const Json st = c.value("status", Json::object());
    std::string who = absl::StrCat(meta.value("namespace", ""), "/", meta.value("name", ""));
    for (const Json& r : st.value("reservedFor", Json::array())) {
      absl::StrAppend(&who, " (", r.value("name", ""), ")");
    }
    const Json results = st.value("allocation", Json::object())
                             .value("devices", Json::object())
                             .value("results", Json::array());
    for (const Json& r : results) {
      owner[absl::StrCat(r.value("driver", ""), "/", r.value("pool", ""), "/",
                         r.value("device", ""))] = who;
    }
  }
  std::map<std::string, std::vector<Json>> by_node;
  for (const Json& s : slices) {
    const std::string n = s.value("spec", Json::object()).value("nodeName", "");
    if (!n.empty() && (node.empty() || n == node)) by_node[n].push_back(s);
  }
  std::string out = absl::StrFormat("%-24s %-5s %-16s %-26s %9s %6s %s\n", "NODE", "GPU", "DEVICE",
                                    "PRODUCT", "MEMORY", "ISLAND", "ALLOCATED TO");
  for (const auto& [n, list] : by_node) {
    std::vector<SliceDevice> devices = DevicesOfSlices(list);
    std::vector<int> domains;
    std::vector<model::Gpu> gpus = SliceGpus(devices, n, &domains);
    for (const model::Gpu& g : gpus) {
      const SliceDevice* d = nullptr;
      for (const SliceDevice& x : devices) {
        if (GpuIndex(x) == g.index) d = &x;
      }
      const std::string island =
          domains[g.index] >= 0 ? absl::StrCat(domains[g.index]) : std::string("-");
      if (d == nullptr) {
        absl::StrAppend(&out, absl::StrFormat("%-24s %-5d %-16s %-26s %9s %6s %s\n", n, g.index,
                                              "-", "(not in the slice: unhealthy)", "-", "-", "-"));
        continue;
      }
      auto o = owner.find(d->Id());
      absl::StrAppend(
          &out, absl::StrFormat("%-24s %-5d %-16s %-26s %9s %6s %s\n", n, g.index, d->name,
                                g.model.substr(0, 26), absl::StrCat(g.memory_mib / 1024, "Gi"),
                                island, o == owner.end() ? "-" : o->second));
    }
    for (const SliceDevice& d : devices) {
      if (GpuIndex(d)) continue;
      auto o = owner.find(d.Id());
      absl::StrAppend(&out, absl::StrFormat("%-24s %-5s %-16s %-26s %9s %6s %s\n", n, "-", d.name,
                                            d.driver.substr(0, 26), "-", "-",
                                            o == owner.end() ? "-" : o->second));
    }
  }
  if (by_node.empty())
    out += "(no ResourceSlices" + (node.empty() ? "" : " of node " + node) + ")\n";
  return out;
}

void RegisterDraView(CLI::App& app) {
  CLI::App* gpus = app.get_subcommand("gpus");
  struct Flags {
    bool dra = false;
    std::string kubeconfig, context, node;
  };
  auto f = std::make_shared<Flags>();
  gpus->add_flag("--dra", f->dra,
                 "Show the cluster's ResourceSlices' GPUs as tessera scheduler sees them, with "
                 "the claims they are allocated to (needs --kubeconfig or a Pod's account)");
  gpus->add_option("--kubeconfig", f->kubeconfig, "With --dra: the cluster's kubeconfig");
  gpus->add_option("--context", f->context, "With --dra: the kubeconfig's context");
  gpus->add_option("--node", f->node, "With --dra: only this node");
  // Runs before the agent's own callback and ends the command, so the local GPUs are not read.
  gpus->parse_complete_callback([f] {
    if (!f->dra) return;
    absl::StatusOr<kube::KubeConfig> cfg = kube::ConfigFromFlags(f->kubeconfig, f->context);
    absl::StatusOr<std::unique_ptr<kube::RestClient>> client =
        cfg.ok() ? kube::RestClient::Create(*cfg)
                 : absl::StatusOr<std::unique_ptr<kube::RestClient>>(cfg.status());
    if (!client.ok()) {
      std::cerr << "tessera gpus --dra: " << client.status().message() << "\n";
      throw CLI::RuntimeError(1);
    }
    std::vector<Json> lists[2];
    const kube::ResourceType types[2] = {kube::ResourceSlicesResource(),
                                         kube::ResourceClaimsResource()};
    for (int i = 0; i < 2; ++i) {
      absl::StatusOr<Json> l = (*client)->List(types[i], "");
      if (!l.ok()) {
        std::cerr << "tessera gpus --dra: " << l.status().message() << "\n";
        throw CLI::RuntimeError(1);
      }
      for (const Json& o : l->value("items", Json::array())) lists[i].push_back(o);
    }
    std::cout << RenderDraView(lists[0], lists[1], f->node);
    throw CLI::RuntimeError(0);
  });
}

}  // namespace tessera::kubesched
