// The fixture of the tests of `tessera scheduler`'s core on the bed (kube_scheduler_test.cc,
// kube_claims_test.cc): a client, a namespace and nodes of the test's own suite, and the
// scheduler started in process.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <set>
#include <string>

#include "common/clock.h"
#include "kube/resource.h"
#include "kube/rest_client.h"
#include "kube_fixtures.h"
#include "kube_test_util.h"
#include "kubesched/kube_scheduler.h"
#include "metrics/registry.h"

namespace tessera::testing {

using kube::Json;

inline Json PodJson(const std::string& name, const std::string& suite, int gpus,
                    const std::string& scheduler = "tessera") {
  Json c = {{"name", "main"}, {"image", "trainer:1"}};
  if (gpus > 0) c["resources"] = {{"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}}};
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"schedulerName", scheduler},
            {"nodeSelector", {{kSuite, suite}}},
            {"containers", Json::array({c})}}}};
}

class KubeSchedulerTest : public ::testing::Test {
 protected:
  void SetUpClient(KubeBed* bed) {
    client_ = ClientFor(bed->admin_kubeconfig());
    ASSERT_NE(client_, nullptr);
    ns_ = MakeNamespace(*client_, "sched");
    suite_ = ns_;
  }
  void AddNode(const std::string& name, int gpus, const std::string& rack = "r1",
               const std::string& islands = "") {
    absl::StatusOr<Json> r = client_->Create(
        kube::NodesResource(), "", NodeJson(suite_ + "-" + name, suite_, gpus, rack, islands));
    ASSERT_TRUE(r.ok()) << r.status();
    // The apiserver taints a new Node not-ready until a kubelet reports; no kubelet runs here.
    r = client_->MergePatch(kube::NodesResource(), "", suite_ + "-" + name,
                            {{"spec", {{"taints", nullptr}}}});
    ASSERT_TRUE(r.ok()) << r.status();
  }
  std::string NodeName(const std::string& short_name) { return suite_ + "-" + short_name; }
  void AddPod(const Json& pod) {
    absl::StatusOr<Json> r = client_->Create(kube::PodsResource(), ns_, pod);
    ASSERT_TRUE(r.ok()) << r.status();
  }
  void StartScheduler(std::function<void(kubesched::KubeSchedulerOptions&)> tweak = nullptr) {
    kubesched::KubeSchedulerOptions o;
    if (tweak) tweak(o);
    o.sync_timeout = absl::Seconds(30);
    absl::StatusOr<std::unique_ptr<kubesched::KubeScheduler>> s =
        kubesched::KubeScheduler::Create(*client_, clock_, registry_, o);
    ASSERT_TRUE(s.ok()) << s.status();
    sched_ = *std::move(s);
    ASSERT_TRUE(sched_->Start().ok());
  }
  void TearDown() override {
    if (sched_) sched_->Stop();
    if (client_) DeleteSuiteNodes(*client_, suite_);
  }

  RealClock clock_;
  metrics::Registry registry_;
  std::unique_ptr<kube::RestClient> client_;
  std::unique_ptr<kubesched::KubeScheduler> sched_;
  std::string ns_, suite_;
};

inline std::set<int> GpusOf(const Json& pod) {
  std::set<int> out;
  const std::string a = pod["metadata"]["annotations"].value("tessera.dev/gpus", "");
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != ',') out.insert(a[i] - '0');
  }
  return out;
}

}  // namespace tessera::testing
