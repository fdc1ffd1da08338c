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

// Pods of one namespace, watched: waits wake on the watch's events.
class PodWatch {
 public:
  PodWatch(kube::RestClient& c, const std::string& ns) {
    kube::ReflectorOptions o;
    o.type = kube::PodsResource();
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

}  // namespace tessera::testing
