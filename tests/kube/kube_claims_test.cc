// `tessera scheduler` placing Pods with ResourceClaims (resource.k8s.io/v1) on the bed: nodes
// whose GPUs come only from ResourceSlices of gpu.tessera.dev (as `tessera dra-driver` publishes
// them), claims with CEL selectors and a matchAttribute on the NVLink domain, the allocation
// written to the claim before the Pod is bound, a gang of Pods with claims all or nothing, the
// claim deallocated when its Pod goes, and a claim the scheduler cannot evaluate named to the
// Pod. kubesched/claims.h has the design.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "../server_process.h"
#include "kube/api_error.h"
#include "kube_scheduler_fixture.h"

namespace tessera::testing {
namespace {

constexpr char kDriver[] = "gpu.tessera.dev";

class KubeClaimsTest : public KubeSchedulerTest {
 protected:
  // A node with no nvidia.com/gpu and a slice of `domains.size()` H100s, GPU i in NVLink domain
  // domains[i].
  void AddDraNode(const std::string& name, const std::vector<int>& domains) {
    AddNode(name, 0);
    Json devices = Json::array();
    for (size_t i = 0; i < domains.size(); ++i) {
      devices.push_back({{"name", "gpu-" + std::to_string(i)},
                         {"attributes",
                          {{"type", {{"string", "gpu"}}},
                           {"uuid", {{"string", NodeName(name) + "-GPU-" + std::to_string(i)}}},
                           {"index", {{"int", i}}},
                           {"productName", {{"string", "NVIDIA H100 80GB HBM3"}}},
                           {"nvlinkDomain", {{"int", domains[i]}}}}},
                         {"capacity", {{"memory", {{"value", "80Gi"}}}}}});
    }
    Json slice = {
        {"apiVersion", "resource.k8s.io/v1"},
        {"kind", "ResourceSlice"},
        {"metadata", {{"name", NodeName(name) + "-gpu-tessera-dev"}}},
        {"spec",
         {{"driver", kDriver},
          {"nodeName", NodeName(name)},
          {"pool", {{"name", NodeName(name)}, {"generation", 1}, {"resourceSliceCount", 1}}},
          {"devices", devices}}}};
    absl::StatusOr<Json> r = client_->Create(kube::ResourceSlicesResource(), "", slice);
    ASSERT_TRUE(r.ok()) << r.status();
    slices_.push_back(NodeName(name) + "-gpu-tessera-dev");
  }
  void AddClass(const std::string& name, const std::string& expression) {
    Json c = {{"apiVersion", "resource.k8s.io/v1"},
              {"kind", "DeviceClass"},
              {"metadata", {{"name", name}}},
              {"spec", {{"selectors", Json::array({{{"cel", {{"expression", expression}}}}})}}}};
    absl::StatusOr<Json> r = client_->Create(kube::DeviceClassesResource(), "", c);
    ASSERT_TRUE(r.ok()) << r.status();
    classes_.push_back(name);
  }
  void AddClaim(const std::string& name, const std::string& cls, int count, bool one_island) {
    Json claim = {{"apiVersion", "resource.k8s.io/v1"},
                  {"kind", "ResourceClaim"},
                  {"metadata", {{"name", name}}},
                  {"spec",
                   {{"devices",
                     {{"requests", Json::array({{{"name", "gpus"},
                                                 {"exactly",
                                                  {{"deviceClassName", cls},
                                                   {"allocationMode", "ExactCount"},
                                                   {"count", count}}}}})}}}}}};
    if (one_island) {
      claim["spec"]["devices"]["constraints"] =
          Json::array({{{"requests", Json::array({"gpus"})},
                        {"matchAttribute", "gpu.tessera.dev/nvlinkDomain"}}});
    }
    absl::StatusOr<Json> r = client_->Create(kube::ResourceClaimsResource(), ns_, claim);
    ASSERT_TRUE(r.ok()) << r.status();
  }
  Json ClaimPod(const std::string& name, const std::string& claim) {
    Json pod = PodJson(name, suite_, 0);
    pod["spec"]["resourceClaims"] = Json::array({{{"name", "gpus"}, {"resourceClaimName", claim}}});
    pod["spec"]["containers"][0]["resources"] = {{"claims", Json::array({{{"name", "gpus"}}})}};
    return pod;
  }
  Json Claim(const std::string& name) {
    absl::StatusOr<Json> c = client_->Get(kube::ResourceClaimsResource(), ns_, name);
    return c.ok() ? *c : Json::object();
  }
  std::set<std::string> Devices(const std::string& claim) {
    std::set<std::string> out;
    const Json c = Claim(claim);
    const Json results = c.value("status", Json::object())
                             .value("allocation", Json::object())
                             .value("devices", Json::object())
                             .value("results", Json::array());
    for (const Json& r : results) out.insert(r.value("device", ""));
    return out;
  }
  void TearDown() override {
    if (sched_) {
      sched_->Stop();  // before its nodes lose their GPUs
      sched_.reset();
    }
    for (const std::string& s : slices_)
      (void)client_->Delete(kube::ResourceSlicesResource(), "", s);
    for (const std::string& c : classes_)
      (void)client_->Delete(kube::DeviceClassesResource(), "", c);
    KubeSchedulerTest::TearDown();
  }
  std::vector<std::string> slices_, classes_;
};

const char kGpuClass[] =
    R"(device.driver == "gpu.tessera.dev" && device.attributes["gpu.tessera.dev"].type == "gpu")";

TEST_F(KubeClaimsTest, ClaimsTakeIslandsOfTheSlicesGpusAndAreWrittenBeforeTheBinding) {
  KUBE_BED_OR_SKIP(bed);
  SetUpClient(bed);
  const std::string cls = suite_ + "-gpu";
  AddClass(cls, kGpuClass);
  AddDraNode("a", {0, 0, 1, 1, 1, 1, 2, 2});  // islands of 2, 4 and 2 GPUs
  PodWatch w(*client_, ns_);
  StartScheduler();
  // Two GPUs without a constraint: a 2-GPU island (best fit), not half of the 4-GPU one.
  AddClaim("two", cls, 2, false);
  AddPod(ClaimPod("p-two", "two"));
  ASSERT_TRUE(w.Until([&] { return w.Bound() == 1; })) << w.Unschedulable("p-two");
  std::set<std::string> two = Devices("two");
  EXPECT_TRUE(two == std::set<std::string>({"gpu-0", "gpu-1"}) ||
              two == std::set<std::string>({"gpu-6", "gpu-7"}))
      << Claim("two").dump();
  // Four in one NVLink domain: the 4-GPU island.
  AddClaim("four", cls, 4, true);
  AddPod(ClaimPod("p-four", "four"));
  ASSERT_TRUE(w.Until([&] { return w.Bound() == 2; })) << w.Unschedulable("p-four");
  EXPECT_EQ(Devices("four"), std::set<std::string>({"gpu-2", "gpu-3", "gpu-4", "gpu-5"}));
  const Json four = Claim("four");
  EXPECT_EQ(four["status"]["reservedFor"][0].value("name", ""), "p-four");
  EXPECT_EQ(four["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]
                ["values"][0],
            NodeName("a"));
  EXPECT_EQ(w.Nodes()["p-four"], NodeName("a"));
  // `tessera gpus --dra` shows the slice's GPUs with their islands and claims.
  if (!TesseraBin().empty()) {
    CliResult view = RunTessera("gpus --dra --kubeconfig " + bed->admin_kubeconfig() + " --node " +
                                NodeName("a"));
    EXPECT_EQ(view.rc, 0) << view.out;
    EXPECT_NE(view.out.find("gpu-3"), std::string::npos) << view.out;
    EXPECT_NE(view.out.find(ns_ + "/four (p-four)"), std::string::npos) << view.out;
    EXPECT_NE(view.out.find("80Gi"), std::string::npos) << view.out;
  }
  // Two more GPUs in one domain fit (the other 2-GPU island); four more do not, and the Pod says
  // why.
  AddClaim("four-more", cls, 4, true);
  AddPod(ClaimPod("p-four-more", "four-more"));
  ASSERT_TRUE(w.Until([&] { return !w.Unschedulable("p-four-more").empty(); }));
  EXPECT_TRUE(Devices("four-more").empty());
  // A restarted scheduler counts the claims' GPUs as taken (from their allocations): four-more
  // still waits, and nothing bound is left unaccounted.
  sched_->Stop();
  sched_.reset();
  StartScheduler();
  ASSERT_TRUE(sched_->Settle(absl::Seconds(30)));
  EXPECT_EQ(sched_->stats().unaccounted_pods, 0);
  EXPECT_EQ(w.Nodes()["p-four-more"], "");
  // The 2-GPU Pod goes: its claim is deallocated (by the restarted scheduler).
  kube::DeleteOptions now;
  now.grace_period_seconds = 0;
  ASSERT_TRUE(client_->Delete(kube::PodsResource(), ns_, "p-two", now).ok());
  ASSERT_TRUE(w.Until([&] { return !Claim("two")["status"].contains("allocation"); }))
      << Claim("two").dump();
  ASSERT_TRUE(sched_->Settle(absl::Seconds(30)));
  EXPECT_EQ(sched_->stats().bind_errors, 0);
}

TEST_F(KubeClaimsTest, AGangOfPodsWithClaimsIsAllOrNothing) {
  KUBE_BED_OR_SKIP(bed);
  SetUpClient(bed);
  const std::string cls = suite_ + "-gpu";
  AddClass(cls, kGpuClass);
  AddDraNode("b", {0, 0, 0, 0, 1, 1});  // 6 GPUs: three members of 2, not four
  InstallCrds(*client_);
  Json group = {{"apiVersion", "scheduling.x-k8s.io/v1alpha1"},
                {"kind", "PodGroup"},
                {"metadata", {{"name", "g"}}},
                {"spec", {{"minMember", 4}}}};
  ASSERT_TRUE(client_->Create(kube::CoschedulingPodGroupsResource(), ns_, group).ok());
  PodWatch w(*client_, ns_);
  StartScheduler();
  for (int i = 0; i < 4; ++i) {
    const std::string n = "m" + std::to_string(i);
    AddClaim(n, cls, 2, true);
    Json pod = ClaimPod(n, n);
    pod["metadata"]["labels"] = {{"scheduling.x-k8s.io/pod-group", "g"}};
    AddPod(pod);
  }
  ASSERT_TRUE(w.Until([&] { return !w.Unschedulable("m0").empty(); })) << w.Get("m0").dump();
  EXPECT_EQ(w.Bound(), 0) << "no member bound while the gang does not fit";
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(Devices("m" + std::to_string(i)).empty());
  // Two more GPUs on another node: the gang fits, all of it.
  AddDraNode("c", {0, 0});
  ASSERT_TRUE(w.Until([&] { return w.Bound() == 4; })) << w.Unschedulable("m0");
  std::set<std::string> all;
  for (int i = 0; i < 4; ++i) {
    const std::string n = "m" + std::to_string(i);
    std::set<std::string> d = Devices(n);
    ASSERT_EQ(d.size(), 2u) << Claim(n).dump();
    for (const std::string& x : d) EXPECT_TRUE(all.insert(w.Nodes()[n] + "/" + x).second) << x;
  }
}

TEST_F(KubeClaimsTest, AClaimTheSchedulerCannotEvaluateIsNamedToThePod) {
  KUBE_BED_OR_SKIP(bed);
  SetUpClient(bed);
  const std::string cls = suite_ + "-regex";
  AddClass(cls, R"(device.attributes["gpu.tessera.dev"].productName.matches("^NVIDIA"))");
  AddDraNode("d", {0, 0});
  PodWatch w(*client_, ns_);
  StartScheduler();
  AddClaim("re", cls, 1, false);
  AddPod(ClaimPod("p-re", "re"));
  ASSERT_TRUE(w.Until([&] { return !w.Unschedulable("p-re").empty(); }));
  EXPECT_NE(w.Unschedulable("p-re").find("method matches() is not supported"), std::string::npos)
      << w.Unschedulable("p-re");
  // More GPUs than any node has: told so, naming the claim, not retried in a storm.
  AddClass(suite_ + "-gpu", kGpuClass);
  AddClaim("big", suite_ + "-gpu", 9, false);
  AddPod(ClaimPod("p-big", "big"));
  ASSERT_TRUE(w.Until([&] { return !w.Unschedulable("p-big").empty(); }));
  EXPECT_NE(w.Unschedulable("p-big").find("no node's GPUs can hold"), std::string::npos)
      << w.Unschedulable("p-big");
  EXPECT_NE(w.Unschedulable("p-big").find("ResourceClaim big"), std::string::npos)
      << w.Unschedulable("p-big");
}

}  // namespace
}  // namespace tessera::testing
