// `tessera scheduler` placing Pods with ResourceClaims (resource.k8s.io/v1) on the bed: nodes
// whose GPUs come only from ResourceSlices of gpu.tessera.dev (as `tessera dra-driver` publishes
// them), claims with CEL selectors and a matchAttribute on the NVLink domain, the allocation
// written to the claim before the Pod is bound, a gang of Pods with claims all or nothing, the
// claim deallocated when its Pod goes, and a claim the scheduler cannot evaluate named to the
// Pod. kubesched/claims.h has the design.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>

#include "../server_process.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/testing/child_process.h"
#include "deviceplugin/testing/fake_nodes.h"
#include "dra/devices.h"
#include "kube/api_error.h"
#include "kube_scheduler_fixture.h"

namespace tessera::testing {
namespace {

constexpr char kDriver[] = "gpu.tessera.dev";

class KubeClaimsTest : public KubeSchedulerTest {
 protected:
  // A node with no nvidia.com/gpu and a slice of `domains.size()` H100s, GPU i in NVLink domain
  // domains[i].
  void AddDraNode(const std::string& name, const std::vector<int>& domains,
                  const std::string& product = "NVIDIA H100 80GB HBM3") {
    Json devices = Json::array();
    for (size_t i = 0; i < domains.size(); ++i) {
      devices.push_back(GpuDevice(name, static_cast<int>(i), domains[i], product));
    }
    AddDraNodeDevices(name, devices);
  }
  Json GpuDevice(const std::string& node, int i, int domain,
                 const std::string& product = "NVIDIA H100 80GB HBM3") {
    return {{"name", "gpu-" + std::to_string(i)},
            {"attributes",
             {{"type", {{"string", "gpu"}}},
              {"uuid", {{"string", NodeName(node) + "-GPU-" + std::to_string(i)}}},
              {"index", {{"int", i}}},
              {"productName", {{"string", product}}},
              {"nvlinkDomain", {{"int", domain}}}}},
            {"capacity", {{"memory", {{"value", "80Gi"}}}}}};
  }
  // MIG instance `k` of GPU `parent` (in MIG mode: the driver publishes its instances only).
  Json MigDevice(const std::string& node, int parent, int k, const std::string& profile) {
    const std::string gpu = NodeName(node) + "-GPU-" + std::to_string(parent);
    return {{"name", "gpu-" + std::to_string(parent) + "-mig-" + std::to_string(k)},
            {"attributes",
             {{"type", {{"string", "mig"}}},
              {"uuid", {{"string", "MIG-" + gpu + "-" + std::to_string(k)}}},
              {"index", {{"int", parent}}},
              {"profile", {{"string", profile}}},
              {"parentUUID", {{"string", gpu}}},
              {"productName", {{"string", "NVIDIA H100 80GB HBM3"}}}}},
            {"capacity", {{"memory", {{"value", "10Gi"}}}}}};
  }
  void AddDraNodeDevices(const std::string& name, const Json& devices) {
    AddNode(name, 0);
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
  // `count` devices of class `cls` (count 0: allocationMode All).
  void AddClaim(const std::string& name, const std::string& cls, int count, bool one_island,
                const Json& config = Json()) {
    Json exactly = {{"deviceClassName", cls}, {"allocationMode", "All"}};
    if (count > 0) exactly = {{"deviceClassName", cls}, {"count", count}};
    Json claim = {
        {"apiVersion", "resource.k8s.io/v1"},
        {"kind", "ResourceClaim"},
        {"metadata", {{"name", name}}},
        {"spec",
         {{"devices",
           {{"requests", Json::array({{{"name", "gpus"}, {"exactly", std::move(exactly)}}})}}}}}};
    if (one_island) {
      claim["spec"]["devices"]["constraints"] =
          Json::array({{{"requests", Json::array({"gpus"})},
                        {"matchAttribute", "gpu.tessera.dev/nvlinkDomain"}}});
    }
    if (!config.is_null()) claim["spec"]["devices"]["config"] = config;
    absl::StatusOr<Json> r = client_->Create(kube::ResourceClaimsResource(), ns_, claim);
    ASSERT_TRUE(r.ok()) << r.status();
  }
  Json ClaimPod(const std::string& name, const std::string& claim,
                const std::string& scheduler = "tessera") {
    Json pod = PodJson(name, suite_, 0, scheduler);
    pod["spec"]["resourceClaims"] = Json::array({{{"name", "gpus"}, {"resourceClaimName", claim}}});
    pod["spec"]["containers"][0]["resources"] = {{"claims", Json::array({{{"name", "gpus"}}})}};
    return pod;
  }
  // Tessera (in process) or, with `kube`, the bed's kube-scheduler as the scheduler of what
  // follows (Tessera's stopped first); the schedulerName its Pods carry.
  std::string UseScheduler(KubeBed* bed, bool kube) {
    if (!kube) {
      StartScheduler();
      return "tessera";
    }
    if (sched_) {
      sched_->Stop();
      sched_.reset();
    }
    const std::string e = bed->StartKubeScheduler(
        {"--kubeconfig=" + bed->admin_kubeconfig(), "--leader-elect=false", "--secure-port=0"});
    EXPECT_EQ(e, "") << e;
    return "default-scheduler";
  }
  Json Claim(const std::string& name) {
    absl::StatusOr<Json> c = client_->Get(kube::ResourceClaimsResource(), ns_, name);
    return c.ok() ? *c : Json::object();
  }
  // Waits on the namespace's ResourceClaims for `done` (a claim's state: a Pod watch would not
  // wake for it).
  bool ClaimsUntil(const std::function<bool()>& done) {
    PodWatch claims(*client_, ns_, kube::ResourceClaimsResource());
    return claims.Until(done);
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

// An API installed after the scheduler started (here the PodGroup CRD of scheduler-plugins, as a
// Helm chart may install it after the scheduler) is watched from then on: a gang held because
// the API was not served is placed once its PodGroup exists. First in this binary, before any
// test installs the CRDs on the shared bed.
TEST_F(KubeClaimsTest, AGangApiInstalledAfterTheSchedulerStartsIsWatched) {
  KUBE_BED_OR_SKIP(bed);
  SetUpClient(bed);
  absl::StatusOr<kube::HttpResult> served =
      client_->Raw("GET", "/apis/scheduling.x-k8s.io/v1alpha1");
  if (served.ok() && served->status == 200) {
    GTEST_SKIP() << "the PodGroup CRD is installed on this bed already (another test ran first)";
  }
  AddNode("g", 8);
  PodWatch w(*client_, ns_);
  StartScheduler(
      [](kubesched::KubeSchedulerOptions& o) { o.api_rediscovery = absl::Milliseconds(200); });
  for (const char* n : {"g0", "g1"}) {
    Json pod = PodJson(n, suite_, 2);
    pod["metadata"]["labels"] = {{"scheduling.x-k8s.io/pod-group", "g"}};
    AddPod(pod);
  }
  ASSERT_TRUE(w.Until([&] { return !w.Unschedulable("g0").empty(); }));
  EXPECT_NE(w.Unschedulable("g0").find("not served"), std::string::npos) << w.Unschedulable("g0");
  InstallCrds(*client_);
  Json group = {{"apiVersion", "scheduling.x-k8s.io/v1alpha1"},
                {"kind", "PodGroup"},
                {"metadata", {{"name", "g"}}},
                {"spec", {{"minMember", 2}}}};
  ASSERT_TRUE(client_->Create(kube::CoschedulingPodGroupsResource(), ns_, group).ok());
  ASSERT_TRUE(w.Until([&] { return w.Bound() == 2; })) << w.Unschedulable("g0");
}

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
  ASSERT_TRUE(ClaimsUntil([&] { return !Claim("two")["status"].contains("allocation"); }))
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
  EXPECT_NE(w.Unschedulable("p-big").find("no node's devices can hold"), std::string::npos)
      << w.Unschedulable("p-big");
  EXPECT_NE(w.Unschedulable("p-big").find("ResourceClaim big"), std::string::npos)
      << w.Unschedulable("p-big");
}

// MIG instances are devices the core does not model: a claim for them goes where they are free
// and takes free ones at binding, never one another claim holds; their GPU is never handed out
// whole meanwhile (in MIG mode the driver publishes only its instances). An All claim takes every
// matching GPU of the node it goes to.
TEST_F(KubeClaimsTest, MigInstancesAreAllocatedOnceAndAllTakesEveryMatchingGpu) {
  KUBE_BED_OR_SKIP(bed);
  SetUpClient(bed);
  const std::string gpu = suite_ + "-gpu", mig = suite_ + "-mig-1g", a100 = suite_ + "-a100";
  AddClass(gpu, kGpuClass);
  AddClass(mig, R"(device.driver == "gpu.tessera.dev" &&
device.attributes["gpu.tessera.dev"].type == "mig" &&
device.attributes["gpu.tessera.dev"].profile == "1g.10gb")");
  AddClass(a100, R"(device.attributes["gpu.tessera.dev"].type == "gpu" &&
device.attributes["gpu.tessera.dev"].productName.startsWith("NVIDIA A100"))");
  // GPUs 0-3 whole (two islands), GPU 4 in MIG mode: two 1g.10gb instances and a 3g.40gb.
  Json devices = Json::array();
  for (int i = 0; i < 4; ++i) devices.push_back(GpuDevice("m", i, i / 2));
  devices.push_back(MigDevice("m", 4, 0, "1g.10gb"));
  devices.push_back(MigDevice("m", 4, 1, "1g.10gb"));
  devices.push_back(MigDevice("m", 4, 2, "3g.40gb"));
  AddDraNodeDevices("m", devices);
  AddDraNode("a", {0, 0}, "NVIDIA A100-SXM4-80GB");
  PodWatch w(*client_, ns_);
  StartScheduler();
  for (const char* n : {"s0", "s1"}) {
    AddClaim(n, mig, 1, false);
    AddPod(ClaimPod(std::string("p-") + n, n));
  }
  ASSERT_TRUE(w.Until([&] { return w.Bound() == 2; })) << w.Unschedulable("p-s1");
  std::set<std::string> slices = Devices("s0");
  for (const std::string& d : Devices("s1")) EXPECT_TRUE(slices.insert(d).second) << d;
  EXPECT_EQ(slices, std::set<std::string>({"gpu-4-mig-0", "gpu-4-mig-1"}));
  EXPECT_EQ(w.Nodes()["p-s0"], NodeName("m"));
  // A third 1g instance: there is none free; the Pod waits, saying so.
  AddClaim("s2", mig, 1, false);
  AddPod(ClaimPod("p-s2", "s2"));
  ASSERT_TRUE(w.Until([&] { return !w.Unschedulable("p-s2").empty(); }));
  EXPECT_NE(w.Unschedulable("p-s2").find("ResourceClaim s2"), std::string::npos)
      << w.Unschedulable("p-s2");
  // Whole GPUs meanwhile: the four whole ones, never GPU 4 under its instances.
  AddClaim("whole", gpu, 4, false);
  AddPod(ClaimPod("p-whole", "whole"));  // node a has only two
  ASSERT_TRUE(w.Until([&] { return w.Bound() == 3; })) << w.Unschedulable("p-whole");
  EXPECT_EQ(Devices("whole"), std::set<std::string>({"gpu-0", "gpu-1", "gpu-2", "gpu-3"}));
  // All the A100s: the node that has them, both GPUs.
  AddClaim("all", a100, 0, false);
  AddPod(ClaimPod("p-all", "all"));
  ASSERT_TRUE(w.Until([&] { return w.Bound() == 4; })) << w.Unschedulable("p-all");
  EXPECT_EQ(Devices("all"), std::set<std::string>({"gpu-0", "gpu-1"}));
  EXPECT_EQ(w.Nodes()["p-all"], NodeName("a"));
  // s0's Pod goes: its instance is deallocated and s2 takes it.
  kube::DeleteOptions now;
  now.grace_period_seconds = 0;
  ASSERT_TRUE(client_->Delete(kube::PodsResource(), ns_, "p-s0", now).ok());
  ASSERT_TRUE(ClaimsUntil([&] { return !Devices("s2").empty(); })) << w.Unschedulable("p-s2");
  EXPECT_EQ(Devices("s2"), std::set<std::string>({"gpu-4-mig-0"}));
  ASSERT_TRUE(sched_->Settle(absl::Seconds(30)));
  EXPECT_EQ(sched_->stats().bind_errors, 0);
}

// firstAvailable (a prioritized list): H200s preferred, else A100s; the cluster has A100s, so the
// claim gets two of them, the results naming the subrequest chosen ("gpus/a100"), as the API
// server checks.
TEST_F(KubeClaimsTest, FirstAvailableTakesTheFirstAlternativeThatFits) {
  KUBE_BED_OR_SKIP(bed);
  SetUpClient(bed);
  const std::string h200 = suite_ + "-h200", a100 = suite_ + "-a100";
  AddClass(h200, R"(device.attributes["gpu.tessera.dev"].productName.startsWith("NVIDIA H200"))");
  AddClass(a100, R"(device.attributes["gpu.tessera.dev"].productName.startsWith("NVIDIA A100"))");
  AddDraNode("f", {0, 0, 1, 1}, "NVIDIA A100-SXM4-80GB");
  PodWatch w(*client_, ns_);
  StartScheduler();
  Json claim = {
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceClaim"},
      {"metadata", {{"name", "fa"}}},
      {"spec",
       {{"devices",
         {{"requests",
           Json::array(
               {{{"name", "gpus"},
                 {"firstAvailable",
                  Json::array({{{"name", "h200"}, {"deviceClassName", h200}, {"count", 2}},
                               {{"name", "a100"}, {"deviceClassName", a100}, {"count", 2}}})}}})},
          {"constraints", Json::array({{{"requests", Json::array({"gpus"})},
                                        {"matchAttribute", "gpu.tessera.dev/nvlinkDomain"}}})}}}}}};
  absl::StatusOr<Json> created = client_->Create(kube::ResourceClaimsResource(), ns_, claim);
  ASSERT_TRUE(created.ok()) << created.status();
  AddPod(ClaimPod("p-fa", "fa"));
  ASSERT_TRUE(w.Until([&] { return w.Bound() == 1; })) << w.Unschedulable("p-fa");
  const Json results = Claim("fa")["status"]["allocation"]["devices"]["results"];
  ASSERT_EQ(results.size(), 2u) << Claim("fa").dump();
  for (const Json& r : results) EXPECT_EQ(r.value("request", ""), "gpus/a100") << r.dump();
  const std::set<std::string> devices = Devices("fa");
  EXPECT_TRUE(devices == std::set<std::string>({"gpu-0", "gpu-1"}) ||
              devices == std::set<std::string>({"gpu-2", "gpu-3"}))
      << Claim("fa").dump();  // one NVLink domain
}

// The bed's kube-scheduler, a peer on the same objects: the same node (a 4-GPU NVLink island
// first, then two 2-GPU islands), the same claims (2 GPUs unconstrained, then 4 in one domain),
// each Pod bound by one scheduler at a time. Tessera's best fit keeps the 4-GPU island whole for
// the second claim; what kube-scheduler chose is reported, not asserted (it is free to choose).
TEST_F(KubeClaimsTest, KubeSchedulerAsAPeerOnTheSameObjects) {
  KUBE_BED_OR_SKIP(bed);
  SetUpClient(bed);
  const std::string cls = suite_ + "-gpu";
  AddClass(cls, kGpuClass);
  AddDraNode("p", {0, 0, 0, 0, 1, 1, 2, 2});
  PodWatch w(*client_, ns_);
  std::map<std::string, std::string> report;
  for (const std::string who : {"tessera", "kube-scheduler"}) {
    const bool kube = who == "kube-scheduler";
    const std::string scheduler = UseScheduler(bed, kube);
    ASSERT_FALSE(HasFailure());
    const std::string two = who + "-two", four = who + "-four";
    AddClaim(two, cls, 2, false);
    AddPod(ClaimPod("p-" + two, two, scheduler));
    ASSERT_TRUE(w.Until([&] { return !w.Nodes()["p-" + two].empty(); }))
        << who << ": " << w.Get("p-" + two).dump();
    AddClaim(four, cls, 4, true);
    AddPod(ClaimPod("p-" + four, four, scheduler));
    // Bound (Tessera), or, for the peer, bound or told why not.
    ASSERT_TRUE(w.Until([&] {
      return !w.Nodes()["p-" + four].empty() || (kube && !w.Unschedulable("p-" + four).empty());
    })) << who
        << ": " << w.Unschedulable("p-" + four);
    const bool bound = !w.Nodes()["p-" + four].empty();
    auto names = [&](const std::string& c) {
      std::string out;
      for (const std::string& d : Devices(c)) out += (out.empty() ? "" : ",") + d;
      return out;
    };
    report[who] = absl::StrCat("2 GPUs -> {", names(two), "}; 4 in one domain -> ",
                               bound ? "{" + names(four) + "}" : "not placed (waits)");
    if (!kube) {
      EXPECT_EQ(Devices(four), std::set<std::string>({"gpu-0", "gpu-1", "gpu-2", "gpu-3"}));
    }
    // Free the node for the peer: the Pods go, their claims are deallocated.
    kube::DeleteOptions now;
    now.grace_period_seconds = 0;
    for (const std::string& c : {two, four}) {
      ASSERT_TRUE(client_->Delete(kube::PodsResource(), ns_, "p-" + c, now).ok());
      ASSERT_TRUE(w.Until([&] { return w.Get("p-" + c).is_null(); }));
      (void)client_->Delete(kube::ResourceClaimsResource(), ns_, c);
    }
  }
  bed->StopKubeScheduler();
  std::cout << "same node (islands 4+2+2), same claims:\n";
  for (const auto& [who, what] : report) std::cout << "  " << who << ": " << what << "\n";
}

// A GPU in MIG mode as `tessera dra-driver` publishes it where the API server keeps shared
// counters: whole (migEnabled) and as its instances, one counter set of its memory in a second
// slice of the pool (dra/devices.h). Neither tessera scheduler nor kube-scheduler (the peer, on
// the same objects in turn) allocates the GPU and one of its instances both.
TEST_F(KubeClaimsTest, AMigGpuAndItsInstancesAreNeverBothAllocated) {
  KUBE_BED_OR_SKIP(bed);
  SetUpClient(bed);
  absl::StatusOr<agent::NodeSnapshot> snap =
      deviceplugin::testing::DiscoverYaml(deviceplugin::testing::kMigMixed2);
  ASSERT_TRUE(snap.ok()) << snap.status();
  AddNode("x", 0);
  const std::string node = NodeName("x");
  for (const Json& slice : dra::ResourceSlicesJson(
           kDriver, node, dra::BuildDraDevices(*snap), [](const std::string&) { return true; }, 1,
           true)) {
    absl::StatusOr<Json> r = client_->Create(kube::ResourceSlicesResource(), "", slice);
    ASSERT_TRUE(r.ok()) << r.status();
    slices_.push_back(slice["metadata"]["name"]);
  }
  // The API server kept the counter sets (DRAPartitionableDevices: beta, on by default).
  absl::StatusOr<Json> counters =
      client_->Get(kube::ResourceSlicesResource(), "", dra::CounterSliceName(kDriver, node));
  ASSERT_TRUE(counters.ok()) << counters.status();
  ASSERT_TRUE((*counters)["spec"].contains("sharedCounters")) << counters->dump();
  const std::string whole = suite_ + "-mig-gpu", slice1g = suite_ + "-mig-1g";
  AddClass(whole, R"(device.attributes["gpu.tessera.dev"].type == "gpu" &&
device.attributes["gpu.tessera.dev"].uuid == "GPU-mig-0")");
  AddClass(slice1g, R"(device.attributes["gpu.tessera.dev"].type == "mig" &&
device.attributes["gpu.tessera.dev"].profile == "1g.10gb")");
  PodWatch w(*client_, ns_);
  kube::DeleteOptions now;
  now.grace_period_seconds = 0;
  for (const std::string who : {"tessera", "kube-scheduler"}) {
    const bool kube = who == "kube-scheduler";
    const std::string scheduler = UseScheduler(bed, kube);
    ASSERT_FALSE(HasFailure());
    const std::string gpu = who + "-gpu", mig = who + "-1g";
    AddClaim(gpu, whole, 1, false);
    AddPod(ClaimPod("p-" + gpu, gpu, scheduler));
    ASSERT_TRUE(w.Until([&] { return !w.Nodes()["p-" + gpu].empty(); }))
        << who << ": " << w.Get("p-" + gpu).dump();
    EXPECT_EQ(Devices(gpu), std::set<std::string>({"gpu-0"})) << who;
    // An instance of that GPU: its memory is all taken; the Pod waits.
    AddClaim(mig, slice1g, 1, false);
    AddPod(ClaimPod("p-" + mig, mig, scheduler));
    ASSERT_TRUE(w.Until([&] { return !w.Unschedulable("p-" + mig).empty(); }))
        << who << ": " << w.Get("p-" + mig).dump();
    EXPECT_TRUE(Devices(mig).empty()) << who << ": " << Claim(mig).dump();
    std::cout << who << ": the whole MIG GPU allocated, a 1g instance waits: "
              << w.Unschedulable("p-" + mig) << "\n";
    if (kube) break;  // its claims are deallocated by kube-controller-manager, not run here
    // The GPU's Pod goes: the instance is allocated.
    ASSERT_TRUE(client_->Delete(kube::PodsResource(), ns_, "p-" + gpu, now).ok());
    ASSERT_TRUE(ClaimsUntil([&] { return !Devices(mig).empty(); })) << w.Unschedulable("p-" + mig);
    EXPECT_EQ(Devices(mig).size(), 1u);
    // Free the node for the peer.
    ASSERT_TRUE(client_->Delete(kube::PodsResource(), ns_, "p-" + mig, now).ok());
    ASSERT_TRUE(ClaimsUntil([&] { return Devices(mig).empty() && Devices(gpu).empty(); }));
    sched_->Stop();
    sched_.reset();
  }
  bed->StopKubeScheduler();
}

// End to end with a real kubelet (k8s.io/kubernetes/cmd/kubelet, built by scripts/kube-bed.sh as
// the bed's other parts) on Debian's containerd: `tessera dra-driver` registers through kubelet's
// plugins_registry; tessera scheduler allocates a Pod's claim (with its configuration) and binds
// the Pod; kubelet calls the driver's NodePrepareResources (the CDI spec appears, with the
// claim's env); deleting the Pod makes kubelet call NodeUnprepareResources (the spec goes). No
// container runs: kubelet prepares claims before it creates the Pod's sandbox, whose image cannot
// be pulled here (no registry). Skipped, saying why, unless root with containerd and the kubelet.
TEST_F(KubeClaimsTest, ARealKubeletPreparesWhatTheSchedulerAllocated) {
  KUBE_BED_OR_SKIP(bed);
  if (geteuid() != 0) GTEST_SKIP() << "kubelet needs root";
  if (TesseraBin().empty()) GTEST_SKIP() << "TESSERA_BIN is not set (run through ctest)";
  std::string why;
  const std::string bin_dir = FindBedBin(TESSERA_SOURCE_DIR, "kubelet", &why);
  if (!why.empty()) GTEST_SKIP() << why;
  const std::string kubelet = bin_dir.empty() ? "kubelet" : bin_dir + "/kubelet";
  const std::string containerd = "/usr/bin/containerd";
  if (!std::filesystem::exists(containerd)) {
    GTEST_SKIP() << "no " << containerd << " (scripts/setup.sh installs Debian's containerd)";
  }
  SetUpClient(bed);
  char tmpl[] = "/tmp/tessera-kubelet-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string root = dir + "/kubelet", sock = dir + "/containerd.sock";
  std::filesystem::create_directories(dir + "/cni");
  std::filesystem::create_directories(root);
  std::ofstream(dir + "/containerd.toml")
      << "version = 2\nroot = \"" << dir << "/containerd\"\nstate = \"" << dir
      << "/containerd-state\"\n[grpc]\n  address = \"" << sock << "\"\n"
      << "[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = "
         "\"registry.k8s.io/pause:3.10\"\n"
      << "  [plugins.\"io.containerd.grpc.v1.cri\".containerd]\n    snapshotter = \"native\"\n"
      << "  [plugins.\"io.containerd.grpc.v1.cri\".cni]\n    bin_dir = \"/usr/lib/cni\"\n"
      << "    conf_dir = \"" << dir << "/cni\"\n";
  // A network configuration for the runtime to report its network ready (never run: no sandbox).
  std::ofstream(dir + "/cni/10-bridge.conflist")
      << R"({"cniVersion": "1.0.0", "name": "tessera-test", "plugins": [{"type": "bridge",
"bridge": "tessera0", "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.7.0/24"}]]}},
{"type": "loopback"}]})";
  const std::string node = NodeName("kubelet");
  const int port = FreeLoopbackPort();
  std::ofstream(dir + "/kubelet.yaml")
      << "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
      << "address: 127.0.0.1\nport: " << port << "\nreadOnlyPort: 0\nhealthzPort: 0\n"
      << "authentication: {anonymous: {enabled: false}, webhook: {enabled: false}}\n"
      << "authorization: {mode: AlwaysAllow}\ncgroupDriver: cgroupfs\nfailCgroupV1: false\n"
      << "failSwapOn: false\ncgroupsPerQOS: false\nenforceNodeAllocatable: []\n"
      << "containerRuntimeEndpoint: unix://" << sock << "\nresolvConf: \"\"\n"
      << "evictionHard: {memory.available: \"0%\", nodefs.available: \"0%\", "
         "imagefs.available: \"0%\"}\n"
      << "localStorageCapacityIsolation: false\nserializeImagePulls: false\n";
  std::ofstream(dir + "/gpus.yaml") << deviceplugin::testing::kPciePairs4;
  // kubelet sets kernel tunables it wants (protectKernelDefaults off): this machine gets its own
  // back when the test ends.
  struct Tunables {
    std::map<std::string, std::string> saved;
    Tunables() {
      for (const char* k :
           {"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
            "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"}) {
        std::ifstream in(std::string("/proc/sys/") + k);
        std::string v;
        if (std::getline(in, v)) saved[k] = v;
      }
    }
    ~Tunables() {
      for (const auto& [k, v] : saved) std::ofstream("/proc/sys/" + k) << v << "\n";
    }
  } tunables;
  struct Child {
    pid_t pid = -1;
    ~Child() { KillProcess(pid); }
  } runtime, driver, agent;
  runtime.pid =
      SpawnProcess({containerd, "--config", dir + "/containerd.toml"}, dir + "/containerd.log");
  // What this machine must allow for kubelet at all (a container runtime, a Node that turns
  // Ready) is checked first: where it cannot, the test says so and is skipped; everything after
  // is Tessera's and fails.
  if (!PollUntil([&] { return std::filesystem::exists(sock); }, absl::Seconds(30))) {
    GTEST_SKIP() << "containerd does not start on this machine: "
                 << TailFile(dir + "/containerd.log");
  }
  driver.pid =
      SpawnProcess({TesseraBin(), "dra-driver", "--backend", "fake", "--fake-config",
                    dir + "/gpus.yaml", "--node-name", node, "--kubeconfig",
                    bed->admin_kubeconfig(), "--plugin-dir", root + "/plugins/gpu.tessera.dev",
                    "--registry-dir", root + "/plugins_registry", "--cdi-dir", dir + "/cdi"},
                   dir + "/driver.log");
  agent.pid = SpawnProcess(
      {kubelet, "--config=" + dir + "/kubelet.yaml", "--kubeconfig=" + bed->admin_kubeconfig(),
       "--root-dir=" + root, "--cert-dir=" + dir + "/pki", "--hostname-override=" + node,
       "--node-labels=" + std::string(kSuite) + "=" + suite_},
      dir + "/kubelet.log");
  auto logs = [&] {
    return absl::StrCat("\n--- kubelet:\n", TailFile(dir + "/kubelet.log"), "\n--- driver:\n",
                        TailFile(dir + "/driver.log"), "\n--- containerd:\n",
                        TailFile(dir + "/containerd.log"));
  };
  // The Node registers and turns Ready; kubelet takes the driver's registration.
  auto ready = [&] {
    absl::StatusOr<Json> n = client_->Get(kube::NodesResource(), "", node);
    if (!n.ok()) return false;
    for (const Json& c : (*n)["status"].value("conditions", Json::array())) {
      if (c.value("type", "") == "Ready") return c.value("status", "") == "True";
    }
    return false;
  };
  if (!PollUntil(ready, absl::Seconds(90))) {
    GTEST_SKIP() << "kubelet does not bring its Node up on this machine:" << logs();
  }
  ASSERT_TRUE(PollUntil(
      [&] {
        return TailFile(dir + "/driver.log").find("registered with kubelet") != std::string::npos;
      },
      absl::Seconds(60)))
      << logs();
  // The driver's slice gives the node its GPUs; a claim for two of them, with configuration.
  const std::string cls = suite_ + "-gpu";
  AddClass(cls, kGpuClass);
  AddClaim("e2e", cls, 2, true,
           Json::array(
               {{{"opaque",
                  {{"driver", kDriver}, {"parameters", {{"env", {{"TESSERA_E2E", "yes"}}}}}}}}}));
  const std::string uid = Claim("e2e")["metadata"].value("uid", "");
  PodWatch w(*client_, ns_);
  StartScheduler();
  // kubelet registers its Node with the not-ready taint, which kube-controller-manager's node
  // lifecycle controller lifts once it is Ready; that controller does not run here.
  Json pod = ClaimPod("p-e2e", "e2e");
  pod["spec"]["tolerations"] = Json::array({{{"key", "node.kubernetes.io/not-ready"},
                                             {"operator", "Exists"},
                                             {"effect", "NoSchedule"}}});
  AddPod(pod);
  ASSERT_TRUE(w.Until([&] { return w.Nodes()["p-e2e"] == node; }, absl::Seconds(60)))
      << w.Get("p-e2e").dump() << "\n"
      << client_->List(kube::ResourceSlicesResource(), "", {})->dump() << logs();
  // kubelet prepares the claim: its devices' CDI specs, with the configured env.
  std::set<std::string> devices = Devices("e2e");
  ASSERT_EQ(devices.size(), 2u);
  auto spec_of = [&](const std::string& device) {
    return absl::StrCat(dir, "/cdi/gpu.tessera.dev-claim-", uid, "-", device, ".json");
  };
  ASSERT_TRUE(PollUntil(
      [&] {
        return std::all_of(devices.begin(), devices.end(), [&](const std::string& d) {
          return std::filesystem::exists(spec_of(d));
        });
      },
      absl::Seconds(60)))
      << logs();
  std::ifstream in(spec_of(*devices.begin()));
  const Json spec = Json::parse(in, nullptr, false);
  ASSERT_FALSE(spec.is_discarded());
  EXPECT_EQ(spec["devices"][0]["containerEdits"]["env"].back(), "TESSERA_E2E=yes") << spec.dump();
  // The Pod goes: kubelet unprepares, the specs go.
  kube::DeleteOptions now;
  now.grace_period_seconds = 0;
  ASSERT_TRUE(client_->Delete(kube::PodsResource(), ns_, "p-e2e", now).ok());
  ASSERT_TRUE(PollUntil(
      [&] {
        return std::none_of(devices.begin(), devices.end(), [&](const std::string& d) {
          return std::filesystem::exists(spec_of(d));
        });
      },
      absl::Seconds(60)))
      << logs();
  std::cout << "a real kubelet prepared and unprepared claim e2e (" << absl::StrJoin(devices, ",")
            << ") on " << node << "\n";
  KillProcess(agent.pid);
  KillProcess(runtime.pid);
  // kubelet mounts under its root dir (the Pod's volumes): unmounted before the files go.
  std::vector<std::string> mounts;
  std::ifstream table("/proc/self/mounts");
  for (std::string line; std::getline(table, line);) {
    const std::vector<std::string> f = absl::StrSplit(line, ' ');
    if (f.size() > 1 && absl::StartsWith(f[1], dir)) mounts.push_back(f[1]);
  }
  for (auto it = mounts.rbegin(); it != mounts.rend(); ++it) umount2(it->c_str(), MNT_DETACH);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  EXPECT_FALSE(ec) << dir << ": " << ec.message();
}

}  // namespace
}  // namespace tessera::testing
