// Fixtures shared by the kube integration tests: GPU Nodes labelled with a test's suite value
// (so tests sharing the bed do not see each other's capacity), Pods watched through an informer
// (waits wake on the watch's events), and the CRDs of deploy/kubernetes/crds installed once.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cli/yaml_json.h"
#include "kube/api_error.h"
#include "kube/informer.h"
#include "kube/resource.h"
#include "kube/rest_client.h"
#include "kube_test_util.h"

namespace tessera::testing {

using kube::Json;

inline constexpr char kSuite[] = "tessera.test/suite";

inline Json NodeJson(const std::string& name, const std::string& suite, int gpus,
                     const std::string& rack = "r1", const std::string& islands = "") {
  Json n = {{"apiVersion", "v1"},
            {"kind", "Node"},
            {"metadata",
             {{"name", name},
              {"labels",
               {{kSuite, suite},
                {"tessera.dev/rack", rack},
                {"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}}}}},
            {"status",
             {{"capacity",
               {{"nvidia.com/gpu", std::to_string(gpus)},
                {"cpu", "64"},
                {"memory", "512Gi"},
                {"pods", "110"}}},
              {"allocatable",
               {{"nvidia.com/gpu", std::to_string(gpus)},
                {"cpu", "64"},
                {"memory", "512Gi"},
                {"pods", "110"}}},
              {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
  if (!islands.empty()) n["metadata"]["annotations"] = {{"tessera.dev/nvlink-domains", islands}};
  return n;
}

// Deletes the Nodes labelled with `suite` (a test's own), as its TearDown does.
inline void DeleteSuiteNodes(kube::RestClient& c, const std::string& suite) {
  absl::StatusOr<Json> nodes =
      c.List(kube::NodesResource(), "", {kSuite + std::string("=") + suite});
  if (!nodes.ok()) return;
  const Json items = (*nodes)["items"];
  for (const Json& n : items) (void)c.Delete(kube::NodesResource(), "", n["metadata"]["name"]);
}

// Pods of one namespace (or objects of another namespaced `type`), watched: waits wake on the
// watch's events.
class PodWatch {
 public:
  PodWatch(kube::RestClient& c, const std::string& ns,
           const kube::ResourceType& type = kube::PodsResource()) {
    kube::ReflectorOptions o;
    o.type = type;
    o.ns = ns;
    inf_ = std::make_unique<kube::Informer>(c, o);
    auto bump = [this] {
      absl::MutexLock l(&mu_);
      ++changes_;
    };
    inf_->AddEventHandlers({[bump](const kube::ObjectPtr&, bool) { bump(); },
                            [bump](const kube::ObjectPtr&, const kube::ObjectPtr&) { bump(); },
                            [bump](const kube::ObjectPtr&) { bump(); }});
    inf_->Start();
    EXPECT_TRUE(inf_->WaitForSync(absl::Seconds(30)));
  }
  ~PodWatch() { inf_->Stop(); }

  // Pod name -> its node ("" while unbound).
  std::map<std::string, std::string> Nodes() const {
    std::map<std::string, std::string> out;
    for (const kube::ObjectPtr& o : inf_->store().List()) {
      out[(*o)["metadata"]["name"].get<std::string>()] =
          o->contains("spec") ? (*o)["spec"].value("nodeName", "") : "";
    }
    return out;
  }
  int Bound() const {
    int n = 0;
    for (const auto& [p, node] : Nodes()) n += !node.empty();
    return n;
  }
  Json Get(const std::string& name) const {
    for (const kube::ObjectPtr& o : inf_->store().List()) {
      if ((*o)["metadata"]["name"] == name) return *o;
    }
    return Json();
  }
  // The PodScheduled=False message, "" when none.
  std::string Unschedulable(const std::string& name) const {
    Json p = Get(name);
    if (p.is_null() || !p.contains("status")) return "";
    for (const Json& c : p["status"].value("conditions", Json::array())) {
      if (c.value("type", "") == "PodScheduled" && c.value("status", "") == "False") {
        return c.value("message", "");
      }
    }
    return "";
  }
  bool Until(const std::function<bool()>& pred, absl::Duration timeout = absl::Seconds(30)) {
    return AwaitTrue(
        mu_, [&] { return pred(); }, timeout);
  }

 private:
  std::unique_ptr<kube::Informer> inf_;
  absl::Mutex mu_;
  int64_t changes_ ABSL_GUARDED_BY(mu_) = 0;
};

// Installs the CRDs of deploy/kubernetes/crds (once per bed) and waits until they are served.
inline void InstallCrds(kube::RestClient& c) {
  static bool done = false;
  if (done) return;
  const kube::ResourceType& crds = kube::CustomResourceDefinitionsResource();
  std::vector<std::pair<std::string, std::string>> served;  // "/apis/GROUP/VERSION", "\"plural\""
  for (const auto& e : std::filesystem::directory_iterator(std::string(TESSERA_SOURCE_DIR) +
                                                           "/deploy/kubernetes/crds")) {
    std::ifstream f(e.path());
    std::stringstream text;
    text << f.rdbuf();
    absl::StatusOr<std::vector<Json>> objs = cli::ParseManifests(text.str());
    ASSERT_TRUE(objs.ok()) << objs.status();
    for (const Json& o : *objs) {
      absl::StatusOr<Json> r = c.Create(crds, "", o);
      ASSERT_TRUE(r.ok() || kube::IsApiAlreadyExists(r.status())) << r.status();
      for (const Json& v : o["spec"]["versions"]) {
        served.emplace_back(
            "/apis/" + o["spec"]["group"].get<std::string>() + "/" + v["name"].get<std::string>(),
            "\"" + o["spec"]["names"]["plural"].get<std::string>() + "\"");
      }
    }
  }
  // Established: discovery lists them (a bounded wait on the apiserver's own progress).
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  for (const auto& [gv, plural] : served) {
    while (true) {
      absl::StatusOr<kube::HttpResult> r = c.Raw("GET", gv);
      if (r.ok() && r->status == 200 && r->body.find(plural) != std::string::npos) break;
      ASSERT_LT(absl::Now(), deadline) << gv << " does not serve " << plural;
      absl::SleepFor(absl::Milliseconds(100));
    }
  }
  done = true;
}

// The API type of a kind the deploy/kubernetes manifests use (null for another).
inline const kube::ResourceType* ManifestType(const std::string& kind) {
  static const std::map<std::string, kube::ResourceType> kTypes = {
      {"Namespace", kube::NamespacesResource()},
      {"ServiceAccount", {"", "v1", "serviceaccounts", "ServiceAccount", true}},
      {"ConfigMap", kube::ConfigMapsResource()},
      {"ClusterRole", {"rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", false}},
      {"ClusterRoleBinding",
       {"rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", false}},
      {"DaemonSet", {"apps", "v1", "daemonsets", "DaemonSet", true}},
      {"DeviceClass", kube::DeviceClassesResource()},
  };
  auto it = kTypes.find(kind);
  return it == kTypes.end() ? nullptr : &it->second;
}

// Creates the objects of `files` (relative to deploy/kubernetes) strictly
// (fieldValidation=Strict, as kubectl does: an unknown field fails rather than being pruned);
// "" or what failed, every failure named. With `exists_ok`, an object that exists already (one
// another test created, namespace.yaml) is fine.
inline std::string CreateManifestsStrictly(kube::RestClient& c,
                                           const std::vector<std::string>& files, bool exists_ok) {
  std::vector<std::string> errors;
  for (const std::string& file : files) {
    std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/deploy/kubernetes/" + file);
    std::stringstream text;
    text << in.rdbuf();
    absl::StatusOr<std::vector<Json>> objs = cli::ParseManifests(text.str());
    if (!objs.ok()) {
      errors.push_back(absl::StrCat(file, ": ", objs.status().message()));
      continue;
    }
    for (const Json& o : *objs) {
      const std::string kind = o.value("kind", "");
      const kube::ResourceType* t = ManifestType(kind);
      if (t == nullptr) {
        errors.push_back(absl::StrCat(file, ": unexpected kind ", kind));
        continue;
      }
      const std::string ns = t->namespaced ? o["metadata"].value("namespace", "default") : "";
      absl::StatusOr<kube::HttpResult> r =
          c.Raw("POST", kube::ResourcePath(*t, ns) + "?fieldValidation=Strict", o.dump());
      if (!r.ok() || (r->status != 201 && !(exists_ok && r->status == 409))) {
        errors.push_back(
            absl::StrCat(file, ": ", kind, ": ", r.ok() ? r->body : r.status().ToString()));
      }
    }
  }
  return absl::StrJoin(errors, "\n");
}

}  // namespace tessera::testing
