// `tessera scheduler`'s core (kubesched::KubeScheduler) on a real kube-apiserver: single Pods bin-
// packed onto NVLink islands next to Pods another scheduler bound, gangs of both PodGroup APIs
// all-or-nothing, rack topology, queues, what a waiting Pod is told, and a restart that rebuilds.
// Each test has its own namespace and nodes (labelled with the test's suite value, which its
// Pods select), so tests sharing the bed do not see each other's capacity.
#include "kubesched/kube_scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <thread>

#include "kube/api_error.h"
#include "kube/codec.h"
#include "kube/informer.h"
#include "kube/resource.h"
#include "kube_test_util.h"

namespace tessera::testing {
namespace {

using kube::Json;

constexpr char kSuite[] = "tessera.test/suite";

Json NodeJson(const std::string& name, const std::string& suite, int gpus,
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

Json PodJson(const std::string& name, const std::string& suite, int gpus,
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
  void StartScheduler() {
    kubesched::KubeSchedulerOptions o;
    o.sync_timeout = absl::Seconds(30);
    absl::StatusOr<std::unique_ptr<kubesched::KubeScheduler>> s =
        kubesched::KubeScheduler::Create(*client_, clock_, registry_, o);
    ASSERT_TRUE(s.ok()) << s.status();
    sched_ = *std::move(s);
    ASSERT_TRUE(sched_->Start().ok());
  }
  void TearDown() override {
    if (sched_) sched_->Stop();
    if (client_) {
      absl::StatusOr<Json> nodes =
          client_->List(kube::NodesResource(), "", {kSuite + std::string("=") + suite_});
      if (nodes.ok()) {
        const Json items = (*nodes)["items"];
        for (const Json& n : items) {
          (void)client_->Delete(kube::NodesResource(), "", n["metadata"]["name"]);
        }
      }
    }
  }

  RealClock clock_;
  metrics::Registry registry_;
  std::unique_ptr<kube::RestClient> client_;
  std::unique_ptr<kubesched::KubeScheduler> sched_;
  std::string ns_, suite_;
};

std::set<int> GpusOf(const Json& pod) {
  std::set<int> out;
  const std::string a = pod["metadata"]["annotations"].value("tessera.dev/gpus", "");
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != ',') out.insert(a[i] - '0');
  }
  return out;
}

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

}  // namespace
}  // namespace tessera::testing
