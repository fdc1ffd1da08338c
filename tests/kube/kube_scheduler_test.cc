// `tessera scheduler`'s core (kubesched::KubeScheduler) on a real kube-apiserver: single Pods bin-
// packed onto NVLink islands next to Pods another scheduler bound, gangs of both PodGroup APIs
// all-or-nothing, rack topology, queues, what a waiting Pod is told, and a restart that rebuilds.
// Each test has its own namespace and nodes (labelled with the test's suite value, which its
// Pods select), so tests sharing the bed do not see each other's capacity.
#include "kubesched/kube_scheduler.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "../server_process.h"
#include "cli/yaml_json.h"
#include "kube/api_error.h"
#include "kube/codec.h"
#include "kube/informer.h"
#include "kube/resource.h"
#include "kube_fixtures.h"
#include "kube_scheduler_fixture.h"
#include "kube_test_util.h"

namespace tessera::testing {
namespace {

using kube::Json;

TEST_F(KubeSchedulerTest, BindsSinglePodsOnIslandsBesideForeignPodsAndTellsWhoWaits) {
  KUBE_BED_OR_SKIP(bed);
  SetUpClient(bed);
  AddNode("a", 4, "r1", "0,0,1,1");
  AddNode("b", 4, "r1", "0,0,1,1");
  // Another scheduler's Pod holds 2 GPUs of node a (bound through the binding API, as it would).
  AddPod(PodJson("other", suite_, 2, "default-scheduler"));
  ASSERT_TRUE(client_->Bind({ns_, "other", "", NodeName("a")}).ok());
  PodWatch w(*client_, ns_);
  StartScheduler();
  AddPod(PodJson("two-1", suite_, 2));
  ASSERT_TRUE(w.Until([&] { return w.Bound() == 2; }))
      << w.Unschedulable("two-1") << " / other on " << w.Nodes()["other"];
  AddPod(PodJson("four", suite_, 4));
  ASSERT_TRUE(w.Until([&] { return w.Bound() == 3; }));
  AddPod(PodJson("two-2", suite_, 2));
  // 8 GPUs, 2 + 2 + 4 taken: two-2 waits and is told why, in kube-scheduler's words.
  ASSERT_TRUE(w.Until([&] { return !w.Unschedulable("two-2").empty(); })) << w.Get("two-2").dump();
  std::map<std::string, std::string> nodes = w.Nodes();
  EXPECT_EQ(nodes["two-1"], NodeName("a"));  // bin-packed next to the foreign Pod
  EXPECT_EQ(nodes["four"], NodeName("b"));
  EXPECT_EQ(nodes["two-2"], "");
  EXPECT_NE(w.Unschedulable("two-2").find("nodes are available"), std::string::npos)
      << w.Unschedulable("two-2");
  // A 2-GPU Pod gets one NVLink island, recorded on the Pod with its job.
  std::set<int> gpus = GpusOf(w.Get("two-1"));
  EXPECT_TRUE(gpus == std::set<int>({0, 1}) || gpus == std::set<int>({2, 3})) << gpus.size();
  EXPECT_EQ(w.Get("two-1")["metadata"]["annotations"].value("tessera.dev/job", ""), ns_ + "/two-1");
  // The foreign Pod leaves: two-2 takes its place.
  // (Forced: without a kubelet a bound Pod's graceful deletion never completes.)
  kube::DeleteOptions now;
  now.grace_period_seconds = 0;
  ASSERT_TRUE(client_->Delete(kube::PodsResource(), ns_, "other", now).ok());
  ASSERT_TRUE(w.Until([&] { return w.Nodes()["two-2"] == NodeName("a"); }));
  ASSERT_TRUE(sched_->Settle(absl::Seconds(30)));
  kubesched::KubeSchedulerStats st = sched_->stats();
  EXPECT_EQ(st.bound, 3);
  EXPECT_EQ(st.bind_errors, 0);
  EXPECT_EQ(st.unaccounted_pods, 0);
}

// MIG slices as the device plugin's mixed strategy offers them (nvidia.com/mig-<profile>): counted
// per node like any extended resource; a Pod asking more than any node has left is told why.
TEST_F(KubeSchedulerTest, MigSlicesAreScheduledAsExtendedResources) {
  KUBE_BED_OR_SKIP(bed);
  SetUpClient(bed);
  for (const char* n : {"a", "b"}) {
    Json node = NodeJson(suite_ + "-" + n, suite_, 0);
    for (const char* f : {"capacity", "allocatable"}) {
      node["status"][f]["nvidia.com/mig-1g.10gb"] = "7";
      node["status"][f]["nvidia.com/mig-3g.40gb"] = std::string(n) == "a" ? "2" : "0";
    }
    ASSERT_TRUE(client_->Create(kube::NodesResource(), "", node).ok());
    ASSERT_TRUE(client_
                    ->MergePatch(kube::NodesResource(), "", suite_ + "-" + n,
                                 {{"spec", {{"taints", nullptr}}}})
                    .ok());
  }
  PodWatch w(*client_, ns_);
  StartScheduler();
  auto mig_pod = [&](const std::string& name, const std::string& profile, int n) {
    Json p = PodJson(name, suite_, 0);
    p["spec"]["containers"][0]["resources"] = {
        {"limits", {{"nvidia.com/mig-" + profile, std::to_string(n)}}}};
    AddPod(p);
  };
  mig_pod("big-0", "3g.40gb", 1);
  mig_pod("big-1", "3g.40gb", 1);
  ASSERT_TRUE(w.Until([&] { return w.Bound() == 2; })) << w.Unschedulable("big-1");
  EXPECT_EQ(w.Nodes()["big-0"], NodeName("a"));
  EXPECT_EQ(w.Nodes()["big-1"], NodeName("a"));
  mig_pod("big-2", "3g.40gb", 1);
  ASSERT_TRUE(w.Until([&] { return !w.Unschedulable("big-2").empty(); }));
  EXPECT_NE(w.Unschedulable("big-2").find("nvidia.com/mig-3g.40gb"), std::string::npos)
      << w.Unschedulable("big-2");
  // (Waiting at the head of the line, big-2 would hold node a for itself: EASY backfill.)
  kube::DeleteOptions now;
  now.grace_period_seconds = 0;
  ASSERT_TRUE(client_->Delete(kube::PodsResource(), ns_, "big-2", now).ok());
  // 14 small slices: four Pods of 3 fit (two per node), a fifth does not.
  for (int i = 0; i < 5; ++i) mig_pod("small-" + std::to_string(i), "1g.10gb", 3);
  ASSERT_TRUE(w.Until([&] { return w.Bound() == 6; }))
      << w.Bound() << " bound; small-0: " << w.Unschedulable("small-0")
      << "; small-4: " << w.Unschedulable("small-4");
  ASSERT_TRUE(w.Until([&] {
    int waiting = 0;
    for (int i = 0; i < 5; ++i) waiting += !w.Unschedulable("small-" + std::to_string(i)).empty();
    return waiting == 1;
  }));
  ASSERT_TRUE(sched_->Settle(absl::Seconds(30)));
  EXPECT_EQ(sched_->stats().unaccounted_pods, 0);
}

TEST_F(KubeSchedulerTest, APodLargerThanAnyNodeIsToldOnceNotRetried) {
  KUBE_BED_OR_SKIP(bed);
  SetUpClient(bed);
  AddNode("a", 4);
  PodWatch w(*client_, ns_);
  StartScheduler();
  AddPod(PodJson("huge", suite_, 8));
  ASSERT_TRUE(w.Until([&] { return !w.Unschedulable("huge").empty(); }));
  // Another Pod binds (so cycles ran after the first message) and the big one still has one
  // FailedScheduling Event: a reason is told once, not once per cycle.
  AddPod(PodJson("small", suite_, 1));
  ASSERT_TRUE(w.Until([&] { return w.Bound() == 1; }));
  ASSERT_TRUE(sched_->Settle(absl::Seconds(30)));
  absl::StatusOr<Json> ev = client_->List(kube::EventsResource(), ns_);
  ASSERT_TRUE(ev.ok());
  int failed = 0, scheduled = 0;
  const Json items = (*ev)["items"];
  for (const Json& e : items) {
    if (e["regarding"]["name"] == "huge" && e["reason"] == "FailedScheduling") ++failed;
    if (e["regarding"]["name"] == "small" && e["reason"] == "Scheduled") ++scheduled;
  }
  EXPECT_EQ(failed, 1) << ev->dump();
  EXPECT_EQ(scheduled, 1);
}

Json CoschedulingGroup(const std::string& name, int min_member) {
  return {{"apiVersion", "scheduling.x-k8s.io/v1alpha1"},
          {"kind", "PodGroup"},
          {"metadata", {{"name", name}}},
          {"spec", {{"minMember", min_member}}}};
}

Json GangPod(const std::string& name, const std::string& suite, int gpus,
             const std::string& group) {
  Json p = PodJson(name, suite, gpus);
  p["metadata"]["labels"] = {{"scheduling.x-k8s.io/pod-group", group}};
  return p;
}

TEST_F(KubeSchedulerTest, CoschedulingGangsAreAllOrNothing) {
  KUBE_BED_OR_SKIP(bed);
  SetUpClient(bed);
  InstallCrds(*client_);
  for (const char* n : {"a", "b", "c"}) AddNode(n, 4);
  ASSERT_TRUE(
      client_->Create(kube::CoschedulingPodGroupsResource(), ns_, CoschedulingGroup("g", 3)).ok());
  PodWatch w(*client_, ns_);
  StartScheduler();
  AddPod(GangPod("g-0", suite_, 4, "g"));
  AddPod(GangPod("g-1", suite_, 4, "g"));
  // Two of three: the gang waits for its Pods, and says so.
  ASSERT_TRUE(w.Until([&] { return !w.Unschedulable("g-1").empty(); }));
  EXPECT_NE(w.Unschedulable("g-1").find("2 of its minMember 3 Pods exist"), std::string::npos)
      << w.Unschedulable("g-1");
  AddPod(GangPod("g-2", suite_, 4, "g"));
  ASSERT_TRUE(w.Until([&] { return w.Bound() == 3; }));
  std::set<std::string> nodes;
  for (const auto& [p, n] : w.Nodes()) nodes.insert(n);
  EXPECT_EQ(nodes.size(), 3u);
  ASSERT_TRUE(sched_->Settle(absl::Seconds(30)));
  absl::StatusOr<Json> group = client_->Get(kube::CoschedulingPodGroupsResource(), ns_, "g");
  ASSERT_TRUE(group.ok());
  EXPECT_EQ((*group)["status"].value("phase", ""), "Scheduled") << group->dump();

  // Two gangs of two full nodes each contend for three free nodes: one runs whole, the other
  // binds nothing.
  for (const char* n : {"d", "e", "f"}) AddNode(n, 4);
  for (const char* g : {"h", "k"}) {
    ASSERT_TRUE(
        client_->Create(kube::CoschedulingPodGroupsResource(), ns_, CoschedulingGroup(g, 2)).ok());
  }
  for (const char* g : {"h", "k"}) {
    for (int i = 0; i < 2; ++i) AddPod(GangPod(absl::StrCat(g, "-", i), suite_, 4, g));
  }
  ASSERT_TRUE(w.Until([&] { return w.Bound() == 5; }));
  ASSERT_TRUE(sched_->Settle(absl::Seconds(30)));
  std::map<std::string, std::string> bound = w.Nodes();
  const bool h = !bound["h-0"].empty(), k = !bound["k-0"].empty();
  EXPECT_NE(h, k);
  EXPECT_EQ(!bound["h-1"].empty(), h);  // never a partial gang
  EXPECT_EQ(!bound["k-1"].empty(), k);
  const std::string waiting = h ? "k-1" : "h-1";
  // Told once it has waited a moment (kTellAfter).
  EXPECT_TRUE(w.Until(
      [&] { return w.Unschedulable(waiting).find("nodes are available") != std::string::npos; }));
}

TEST_F(KubeSchedulerTest, Kep4671GangKeepsToOneRackAndWaitsForOne) {
  KUBE_BED_OR_SKIP(bed);
  SetUpClient(bed);
  AddNode("a1", 8, "r1");
  AddNode("a2", 8, "r1");
  for (const char* n : {"b1", "b2", "b3"}) AddNode(n, 8, "r2");
  // Another scheduler's Pod on b1: no rack has three free nodes.
  AddPod(PodJson("other", suite_, 4, "default-scheduler"));
  ASSERT_TRUE(client_->Bind({ns_, "other", "", NodeName("b1")}).ok());
  Json pg = {{"apiVersion", "scheduling.k8s.io/v1alpha3"},
             {"kind", "PodGroup"},
             {"metadata", {{"name", "train"}, {"annotations", {{"tessera.dev/topology", "rack"}}}}},
             {"spec", {{"schedulingPolicy", {{"gang", {{"minCount", 3}}}}}}}};
  ASSERT_TRUE(client_->Create(kube::PodGroupsResource(), ns_, pg).ok());
  PodWatch w(*client_, ns_);
  StartScheduler();
  for (int i = 0; i < 3; ++i) {
    Json p = PodJson(absl::StrCat("train-", i), suite_, 8);
    p["spec"]["schedulingGroup"] = {{"podGroupName", "train"}};
    AddPod(p);
  }
  ASSERT_TRUE(w.Until([&] { return !w.Unschedulable("train-0").empty(); }));
  ASSERT_TRUE(sched_->Settle(absl::Seconds(30)));
  EXPECT_EQ(w.Bound(), 1);  // only the foreign Pod
  // The PodGroup says why its gang waits.
  absl::StatusOr<Json> group = client_->Get(kube::PodGroupsResource(), ns_, "train");
  ASSERT_TRUE(group.ok());
  const Json conds = (*group)["status"].value("conditions", Json::array());
  ASSERT_EQ(conds.size(), 1u) << group->dump();
  EXPECT_EQ(conds[0].value("type", ""), "PodGroupScheduled");
  EXPECT_EQ(conds[0].value("status", ""), "False");
  EXPECT_NE(conds[0].value("message", "").find("nodes are available"), std::string::npos)
      << conds[0].dump();
  kube::DeleteOptions now;
  now.grace_period_seconds = 0;
  ASSERT_TRUE(client_->Delete(kube::PodsResource(), ns_, "other", now).ok());
  ASSERT_TRUE(w.Until([&] { return w.Bound() == 3; }));
  std::map<std::string, std::string> nodes = w.Nodes();
  std::set<std::string> used = {nodes["train-0"], nodes["train-1"], nodes["train-2"]};
  EXPECT_EQ(used, std::set<std::string>({NodeName("b1"), NodeName("b2"), NodeName("b3")}));
}

TEST_F(KubeSchedulerTest, APreferredRackIsKeptWhereOneHasRoomAndLeftWhereNoneHas) {
  KUBE_BED_OR_SKIP(bed);
  SetUpClient(bed);
  AddNode("a1", 8, "r1");
  AddNode("a2", 8, "r1");
  for (const char* n : {"b1", "b2", "b3"}) AddNode(n, 8, "r2");
  AddNode("c1", 8, "r3");
  auto gang = [&](const std::string& name) {
    Json pg = {{"apiVersion", "scheduling.k8s.io/v1alpha3"},
               {"kind", "PodGroup"},
               {"metadata",
                {{"name", name},
                 {"annotations",
                  {{"tessera.dev/topology", "rack"},
                   {"tessera.dev/topology-policy", "preferred"}}}}},
               {"spec", {{"schedulingPolicy", {{"gang", {{"minCount", 3}}}}}}}};
    ASSERT_TRUE(client_->Create(kube::PodGroupsResource(), ns_, pg).ok());
    for (int i = 0; i < 3; ++i) {
      Json p = PodJson(absl::StrCat(name, "-", i), suite_, 8);
      p["spec"]["schedulingGroup"] = {{"podGroupName", name}};
      AddPod(p);
    }
  };
  PodWatch w(*client_, ns_);
  StartScheduler();
  // r2 is the one rack with three free nodes: the first gang takes it whole.
  gang("first");
  ASSERT_TRUE(w.Until([&] { return w.Bound() == 3; }));
  std::map<std::string, std::string> nodes = w.Nodes();
  EXPECT_EQ(std::set<std::string>({nodes["first-0"], nodes["first-1"], nodes["first-2"]}),
            std::set<std::string>({NodeName("b1"), NodeName("b2"), NodeName("b3")}));
  // No rack has three free nodes now. A preference does not hold the gang: it spans r1 and r3
  // (a required rack would wait, as the test above shows).
  gang("second");
  ASSERT_TRUE(w.Until([&] { return w.Bound() == 6; }));
  nodes = w.Nodes();
  EXPECT_EQ(std::set<std::string>({nodes["second-0"], nodes["second-1"], nodes["second-2"]}),
            std::set<std::string>({NodeName("a1"), NodeName("a2"), NodeName("c1")}));
}

TEST_F(KubeSchedulerTest, QueuesHoldWhatTheirQuotaDoesNotAdmitAndUnknownQueuesHoldAll) {
  KUBE_BED_OR_SKIP(bed);
  SetUpClient(bed);
  InstallCrds(*client_);
  AddNode("a", 8);
  const std::string queue = "q-" + ns_;
  Json q = {{"apiVersion", "tessera.dev/v1"},
            {"kind", "Queue"},
            {"metadata", {{"name", queue}}},
            {"spec", {{"gpuQuota", {{"NVIDIA-H100-80GB-HBM3", 4}}}}}};
  absl::StatusOr<Json> created = client_->Create(kube::QueuesResource(), "", q);
  ASSERT_TRUE(created.ok()) << created.status();
  PodWatch w(*client_, ns_);
  StartScheduler();
  for (const char* name : {"q-1", "q-2"}) {
    Json p = PodJson(name, suite_, 4);
    p["metadata"]["labels"] = {{"tessera.dev/queue", queue}};
    AddPod(p);
  }
  Json lost = PodJson("lost", suite_, 1);
  lost["metadata"]["labels"] = {{"tessera.dev/queue", "no-such-queue"}};
  AddPod(lost);
  ASSERT_TRUE(w.Until([&] {
    return w.Bound() == 1 && !w.Unschedulable("lost").empty() &&
           (!w.Unschedulable("q-1").empty() || !w.Unschedulable("q-2").empty());
  })) << w.Unschedulable("lost");
  EXPECT_NE(w.Unschedulable("lost").find("no-such-queue"), std::string::npos)
      << w.Unschedulable("lost");
  const std::string waiting = w.Nodes()["q-1"].empty() ? "q-1" : "q-2";
  EXPECT_NE(w.Unschedulable(waiting).find(queue), std::string::npos) << w.Unschedulable(waiting);
  (void)client_->Delete(kube::QueuesResource(), "", queue);
}

TEST_F(KubeSchedulerTest, ARestartedSchedulerRebuildsWhatItBound) {
  KUBE_BED_OR_SKIP(bed);
  SetUpClient(bed);
  AddNode("a", 4, "r1", "0,0,1,1");
  PodWatch w(*client_, ns_);
  StartScheduler();
  AddPod(PodJson("first", suite_, 2));
  ASSERT_TRUE(w.Until([&] { return w.Bound() == 1; }));
  ASSERT_TRUE(sched_->Settle(absl::Seconds(30)));
  sched_->Stop();
  sched_.reset();
  StartScheduler();  // a new one: what is bound comes from the Pods' annotations
  AddPod(PodJson("second", suite_, 2));
  ASSERT_TRUE(w.Until([&] { return w.Bound() == 2; }));
  // (Had "three" come first, the head of the line would hold the node for it: no backfill.)
  AddPod(PodJson("three", suite_, 3));
  ASSERT_TRUE(w.Until([&] { return w.Bound() == 2 && !w.Unschedulable("three").empty(); }))
      << "bound " << w.Bound() << ", three: " << w.Unschedulable("three")
      << ", second: " << w.Unschedulable("second") << " on " << w.Nodes()["second"];
  std::set<int> a = GpusOf(w.Get("first")), b = GpusOf(w.Get("second"));
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  for (int g : a) EXPECT_FALSE(b.contains(g)) << "GPU " << g << " given twice";
  EXPECT_EQ(w.Nodes()["three"], "");
}

TEST_F(KubeSchedulerTest, PreemptsLowerPriorityThroughTheEvictionApiAndHonoursBudgets) {
  KUBE_BED_OR_SKIP(bed);
  SetUpClient(bed);
  const kube::ResourceType classes{"scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass",
                                   false};
  for (auto [name, value] : {std::pair{"low", 100}, std::pair{"high", 1000}}) {
    const std::string n = std::string(name) + "-" + ns_;
    ASSERT_TRUE(client_
                    ->Create(classes, "",
                             {{"apiVersion", "scheduling.k8s.io/v1"},
                              {"kind", "PriorityClass"},
                              {"metadata", {{"name", n}}},
                              {"value", value}})
                    .ok());
  }
  auto with_class = [&](Json p, const char* cls) {
    p["spec"]["priorityClassName"] = std::string(cls) + "-" + ns_;
    return p;
  };
  AddNode("a", 4);
  PodWatch w(*client_, ns_);
  StartScheduler([](kubesched::KubeSchedulerOptions& o) {
    o.queues.preemption.min_runtime = absl::ZeroDuration();
    o.queues.preemption.grace_period = absl::ZeroDuration();
  });
  AddPod(with_class(PodJson("low-0", suite_, 2), "low"));
  AddPod(with_class(PodJson("low-1", suite_, 2), "low"));
  ASSERT_TRUE(w.Until([&] { return w.Bound() == 2; }));
  // A checkpoint reported on a victim's Pod reaches the queue manager (it prefers such victims).
  ASSERT_TRUE(client_
                  ->MergePatch(
                      kube::PodsResource(), ns_, "low-0",
                      {{"metadata",
                        {{"annotations",
                          {{"tessera.dev/last-checkpoint", kube::FormatMicroTime(absl::Now())}}}}}})
                  .ok());
  AddPod(with_class(PodJson("high", suite_, 4), "high"));
  ASSERT_TRUE(w.Until([&] {
    std::map<std::string, std::string> n = w.Nodes();
    return n["high"] == NodeName("a") && !n.contains("low-0") && !n.contains("low-1");
  })) << w.Unschedulable("high");
  ASSERT_TRUE(sched_->Settle(absl::Seconds(30)));
  EXPECT_EQ(sched_->stats().evictions, 2);

  // Victims a PodDisruptionBudget guards are not evicted, and the preemptor does not run on
  // their capacity.
  AddNode("b", 4);
  for (const char* name : {"guarded-0", "guarded-1"}) {
    Json p = with_class(PodJson(name, suite_, 2), "low");
    p["metadata"]["labels"] = {{"app", "guarded"}};
    AddPod(p);
  }
  ASSERT_TRUE(w.Until([&] { return w.Bound() == 3; }));
  // Running and Ready, as their kubelet would report (the Eviction API lets Pending Pods go
  // whatever the budget says).
  for (const char* name : {"guarded-0", "guarded-1"}) {
    absl::StatusOr<Json> pod = client_->Get(kube::PodsResource(), ns_, name);
    ASSERT_TRUE(pod.ok());
    (*pod)["status"]["phase"] = "Running";
    (*pod)["status"]["conditions"] = {{{"type", "Ready"}, {"status", "True"}},
                                      {{"type", "PodScheduled"}, {"status", "True"}}};
    absl::StatusOr<Json> r = client_->Update(kube::PodsResource(), ns_, name, *pod, "status");
    ASSERT_TRUE(r.ok()) << r.status();
  }
  ASSERT_TRUE(
      client_
          ->Create(kube::PodDisruptionBudgetsResource(), ns_,
                   {{"apiVersion", "policy/v1"},
                    {"kind", "PodDisruptionBudget"},
                    {"metadata", {{"name", "guard"}}},
                    {"spec",
                     {{"minAvailable", 2}, {"selector", {{"matchLabels", {{"app", "guarded"}}}}}}}})
          .ok());
  AddPod(with_class(PodJson("high-2", suite_, 4), "high"));
  ASSERT_TRUE(w.Until([&] { return !w.Unschedulable("high-2").empty(); }));
  // The refusals come back and nothing moved.
  ASSERT_TRUE(sched_->Settle(absl::Seconds(30)));
  EXPECT_EQ(sched_->stats().evictions_refused, 2) << "evictions " << sched_->stats().evictions;
  std::map<std::string, std::string> n = w.Nodes();
  EXPECT_EQ(n["guarded-0"], NodeName("b"));
  EXPECT_EQ(n["guarded-1"], NodeName("b"));
  EXPECT_EQ(n["high-2"], "");
  EXPECT_EQ(sched_->stats().unaccounted_pods, 0);
  // The preemptor says why it waits, and will try again after a backoff.
  EXPECT_TRUE(w.Until([&] {
    return w.Unschedulable("high-2").find("preemption blocked") != std::string::npos;
  })) << w.Unschedulable("high-2");
}

TEST_F(KubeSchedulerTest, AMalformedPodGroupHoldsItsPodsNamingTheField) {
  KUBE_BED_OR_SKIP(bed);
  SetUpClient(bed);
  InstallCrds(*client_);
  AddNode("a", 4);
  // The CRD leaves minMember unbounded (as upstream's); the scheduler's decoder refuses 0.
  ASSERT_TRUE(
      client_->Create(kube::CoschedulingPodGroupsResource(), ns_, CoschedulingGroup("bad", 0))
          .ok());
  PodWatch w(*client_, ns_);
  StartScheduler();
  AddPod(GangPod("bad-0", suite_, 1, "bad"));
  ASSERT_TRUE(w.Until([&] { return !w.Unschedulable("bad-0").empty(); }));
  EXPECT_NE(w.Unschedulable("bad-0").find("spec.minMember"), std::string::npos)
      << w.Unschedulable("bad-0");
  ASSERT_TRUE(sched_->Settle(absl::Seconds(30)));
  EXPECT_EQ(w.Bound(), 0);
}

TEST_F(KubeSchedulerTest, AGangWhosePodsDisagreeOnConstraintsIsHeldNamingThem) {
  KUBE_BED_OR_SKIP(bed);
  SetUpClient(bed);
  InstallCrds(*client_);
  AddNode("a", 8);
  ASSERT_TRUE(
      client_->Create(kube::CoschedulingPodGroupsResource(), ns_, CoschedulingGroup("mixed", 2))
          .ok());
  PodWatch w(*client_, ns_);
  StartScheduler();
  AddPod(GangPod("mixed-0", suite_, 1, "mixed"));
  Json odd = GangPod("mixed-1", suite_, 1, "mixed");
  odd["spec"]["tolerations"] = {{{"key", "gpu"}, {"operator", "Exists"}}};
  AddPod(odd);
  ASSERT_TRUE(w.Until([&] {
    return w.Unschedulable("mixed-0").find("must be the same on every Pod of a gang") !=
           std::string::npos;
  })) << w.Unschedulable("mixed-0");
  EXPECT_EQ(w.Bound(), 0);
}

TEST_F(KubeSchedulerTest, AGangPastItsScheduleTimeoutStepsOutAndSaysSo) {
  KUBE_BED_OR_SKIP(bed);
  SetUpClient(bed);
  InstallCrds(*client_);
  AddNode("a", 8);
  Json g = CoschedulingGroup("slow", 2);
  g["spec"]["scheduleTimeoutSeconds"] = 1;
  ASSERT_TRUE(client_->Create(kube::CoschedulingPodGroupsResource(), ns_, g).ok());
  PodWatch w(*client_, ns_);
  StartScheduler();
  AddPod(GangPod("slow-0", suite_, 8, "slow"));
  AddPod(GangPod("slow-1", suite_, 8, "slow"));  // two full nodes' worth on one node
  ASSERT_TRUE(w.Until([&] {
    return w.Unschedulable("slow-0").find("scheduleTimeoutSeconds") != std::string::npos;
  })) << w.Unschedulable("slow-0");
  EXPECT_EQ(w.Bound(), 0);
}

TEST_F(KubeSchedulerTest, AQueueBorrowsIdleCapacityWhenItsQueueMayBorrow) {
  KUBE_BED_OR_SKIP(bed);
  SetUpClient(bed);
  InstallCrds(*client_);
  AddNode("a", 8);
  const std::string queue = "b-" + ns_;
  Json q = {{"apiVersion", "tessera.dev/v1"},
            {"kind", "Queue"},
            {"metadata", {{"name", queue}}},
            {"spec", {{"gpuQuota", {{"NVIDIA-H100-80GB-HBM3", 4}}}, {"borrowing", true}}}};
  ASSERT_TRUE(client_->Create(kube::QueuesResource(), "", q).ok());
  PodWatch w(*client_, ns_);
  StartScheduler();
  for (const char* name : {"b-1", "b-2"}) {
    Json p = PodJson(name, suite_, 4);
    p["metadata"]["labels"] = {{"tessera.dev/queue", queue}};
    AddPod(p);
  }
  // 8 GPUs for a queue guaranteed 4: the second half is borrowed from the idle fleet.
  EXPECT_TRUE(w.Until([&] { return w.Bound() == 2; })) << w.Unschedulable("b-2");
  (void)client_->Delete(kube::QueuesResource(), "", queue);
}

// Last (it restarts the shared apiserver): the scheduler's watches end, its informers resume or
// relist, and Pods created after the restart are scheduled.
TEST_F(KubeSchedulerTest, KeepsSchedulingAcrossAnApiserverRestart) {
  KUBE_BED_OR_SKIP(bed);
  SetUpClient(bed);
  AddNode("a", 8);
  StartScheduler();
  AddPod(PodJson("before", suite_, 1));
  {
    PodWatch w(*client_, ns_);
    ASSERT_TRUE(w.Until([&] { return w.Bound() == 1; }));
  }
  ASSERT_EQ(bed->RestartApiserver(), "");
  AddPod(PodJson("after", suite_, 1));
  PodWatch w(*client_, ns_);
  ASSERT_TRUE(w.Until([&] { return w.Bound() == 2; }, absl::Seconds(60)));
  std::set<int> a = GpusOf(w.Get("before")), b = GpusOf(w.Get("after"));
  ASSERT_EQ(b.size(), 1u);
  EXPECT_FALSE(a.contains(*b.begin()));
}

// `tessera scheduler` processes: two replicas on one Lease; the leader is killed while Pods keep
// coming; the standby takes over within the lease duration; every Pod is bound exactly once, no
// GPU is given twice, and the metrics say what was done.
TEST_F(KubeSchedulerTest, StandbyTakesOverWhenTheLeaderIsKilledMidStream) {
  KUBE_BED_OR_SKIP(bed);
  if (TesseraBin().empty()) GTEST_SKIP() << "TESSERA_BIN is not set (run through ctest)";
  SetUpClient(bed);
  for (const char* n : {"a", "b", "c", "d"}) AddNode(n, 8);
  PodWatch w(*client_, ns_);
  const std::string dir = MakeTempDir("kube_failover");
  auto start = [&](const std::string& tag) {
    FirstLine f = SpawnForFirstLine(
        {TesseraBin(), "scheduler", "--kubeconfig", bed->admin_kubeconfig(), "--lease-namespace",
         ns_, "--leader-elect-lease-duration", "4", "--leader-elect-renew-deadline", "3",
         "--leader-elect-retry-period", "1", "--metrics-addr", "127.0.0.1:0"},
        dir + "/" + tag + ".log", 30000);
    EXPECT_NE(f.out.find("metrics http://127.0.0.1:"), std::string::npos) << f.out;
    return f;
  };
  FirstLine a = start("a");
  ASSERT_GT(a.pid, 0);
  for (int i = 0; i < 12; ++i) AddPod(PodJson(absl::StrCat("p-", i), suite_, 1));
  ASSERT_TRUE(w.Until([&] { return w.Bound() == 12; })) << Slurp(dir + "/a.log");
  FirstLine b = start("b");
  ASSERT_GT(b.pid, 0);
  // Pods keep coming while the leader dies.
  std::thread more([&] {
    for (int i = 12; i < 32; ++i) AddPod(PodJson(absl::StrCat("p-", i), suite_, 1));
  });
  ASSERT_TRUE(w.Until([&] { return w.Bound() >= 14; }));
  kill(a.pid, SIGKILL);
  waitpid(a.pid, nullptr, 0);
  more.join();
  ASSERT_TRUE(w.Until([&] { return w.Bound() == 32; }, absl::Seconds(60)))
      << w.Bound() << " bound\n"
      << Slurp(dir + "/b.log");
  std::map<std::string, std::set<int>> gpus_on;
  for (const auto& [pod, node] : w.Nodes()) {
    for (int g : GpusOf(w.Get(pod))) {
      EXPECT_TRUE(gpus_on[node].insert(g).second) << "GPU " << g << " of " << node << " twice";
    }
  }
  // The new leader's metrics.
  const size_t at = b.out.find("http://");
  const std::string url = b.out.substr(at, b.out.find_first_of(" \n", at) - at);
  httplib::Client http(url);
  httplib::Result res = http.Get("/metrics");
  ASSERT_TRUE(res) << url;
  EXPECT_EQ(res->status, 200);
  CliResult m{0, res->body};
  EXPECT_NE(m.out.find("scheduler_schedule_attempts_total{result=\"scheduled\""), std::string::npos)
      << m.out;
  EXPECT_NE(m.out.find("scheduler_pod_scheduling_sli_duration_seconds_bucket"), std::string::npos);
  EXPECT_NE(m.out.find("tessera_kube_bindings_total{result=\"ok\"}"), std::string::npos);
  kill(b.pid, SIGTERM);
  int st = 0;
  waitpid(b.pid, &st, 0);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
}

TEST(KubeSchedulerCommandTest, AKubeconfigWithAWrongCaIsAClearError) {
  KUBE_BED_OR_SKIP(bed);
  if (TesseraBin().empty()) GTEST_SKIP() << "TESSERA_BIN is not set (run through ctest)";
  const std::string dir = MakeTempDir("kube_wrong_ca");
  // A CA of its own, not the one that signed the apiserver's certificate.
  ASSERT_EQ(
      RunShell("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout " +
               dir + "/k.pem -out " + dir + "/ca.crt -days 1 -subj /CN=other-ca")
          .rc,
      0);
  std::string kc = Slurp(bed->admin_kubeconfig());
  const std::string ca = bed->ca_file();
  for (size_t at = kc.find(ca); at != std::string::npos; at = kc.find(ca)) {
    kc.replace(at, ca.size(), dir + "/ca.crt");
  }
  { std::ofstream(dir + "/wrong.kubeconfig") << kc; }
  CliResult r = RunShell(TesseraBin() + " scheduler --leader-elect=false --metrics-addr '' " +
                         "--kubeconfig " + dir + "/wrong.kubeconfig");
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("certificate"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("wrong.kubeconfig"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace tessera::testing
