// `tessera operator`'s controllers (op::Operator) with `tessera scheduler`'s core on a real
// kube-apiserver: a TrainingJob becomes a gang that the scheduler binds, runs (its Pods' phases
// set by the test, as no kubelet runs), fails, restarts from the newest checkpoint a member
// reported, and succeeds; a job naming a missing queue waits for it; the garbage collector of
// the real kube-controller-manager deletes a job's children with it; a replica taking over in the
// middle of creating a gang creates exactly the Pods that are missing.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <map>
#include <set>
#include <string>

#include "../server_process.h"
#include "absl/strings/escaping.h"
#include "kube/api_error.h"
#include "kube/informer.h"
#include "kube/resource.h"
#include "kube_fixtures.h"
#include "kube_test_util.h"
#include "kubesched/kube_scheduler.h"
#include "operator/inference_plan.h"
#include "operator/operator.h"

namespace tessera::testing {
namespace {

using kube::Json;

Json TrainingJob(const std::string& name, const std::string& suite, int members, int gpus,
                 Json extra = Json::object()) {
  Json spec = {{"image", "ghcr.io/acme/train:1"},
               {"command", {"torchrun", "train.py"}},
               {"nodeSelector", {{kSuite, suite}}},
               {"checkpoint", {{"path", "/ckpt/" + name}}},
               {"groups", {{{"name", "worker"}, {"count", members}, {"gpusPerReplica", gpus}}}}};
  spec.update(extra);
  return {{"apiVersion", "tessera.dev/v1"},
          {"kind", "TrainingJob"},
          {"metadata", {{"name", name}}},
          {"spec", spec}};
}

class KubeOperatorTest : public ::testing::Test {
 protected:
  void SetUpBed(KubeBed* bed) {
    bed_ = bed;
    client_ = ClientFor(bed->admin_kubeconfig());
    ASSERT_NE(client_, nullptr);
    InstallCrds(*client_);
    ns_ = MakeNamespace(*client_, "op");
    suite_ = ns_;
    pods_ = std::make_unique<PodWatch>(*client_, ns_);
    // The kubelet's part in a deletion: without one, a bound Pod's graceful deletion never ends.
    kube::ReflectorOptions o;
    o.type = kube::PodsResource();
    o.ns = ns_;
    kubelet_ = std::make_unique<kube::Informer>(*client_, o);
    auto finish = [this](const kube::ObjectPtr& p) {
      if ((*p)["metadata"].contains("deletionTimestamp")) {
        kube::DeleteOptions now;
        now.grace_period_seconds = 0;
        (void)client_->Delete(kube::PodsResource(), ns_, (*p)["metadata"]["name"], now);
        return;
      }
      // Serving replicas start on their own once bound (training Pods' phases are the test's).
      if ((*p)["metadata"].value("labels", Json::object()).contains(op::kServiceLabel) &&
          !(*p)["spec"].value("nodeName", "").empty() &&
          (*p).value("status", Json::object()).value("phase", "") != "Running") {
        Json ready = *p;
        ready["status"] = {{"phase", "Running"},
                           {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}};
        (void)client_->Update(kube::PodsResource(), ns_, (*p)["metadata"]["name"], ready, "status");
      }
    };
    kubelet_->AddEventHandlers(
        {[finish](const kube::ObjectPtr& p, bool) { finish(p); },
         [finish](const kube::ObjectPtr&, const kube::ObjectPtr& p) { finish(p); }, nullptr});
    kubelet_->Start();
    ASSERT_TRUE(kubelet_->WaitForSync(absl::Seconds(30)));
  }
  void AddNode(const std::string& name, int gpus) {
    absl::StatusOr<Json> r =
        client_->Create(kube::NodesResource(), "", NodeJson(suite_ + "-" + name, suite_, gpus));
    ASSERT_TRUE(r.ok()) << r.status();
    r = client_->MergePatch(kube::NodesResource(), "", suite_ + "-" + name,
                            {{"spec", {{"taints", nullptr}}}});
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
  std::unique_ptr<op::Operator> NewOperator(op::OperatorOptions o = {}) {
    o.sync_timeout = absl::Seconds(30);
    absl::StatusOr<std::unique_ptr<op::Operator>> r =
        op::Operator::Create(*client_, clock_, op_registry_, o);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *std::move(r) : nullptr;
  }
  void StartOperator(op::OperatorOptions o = {}) {
    op_ = NewOperator(std::move(o));
    ASSERT_NE(op_, nullptr);
    absl::Status s = op_->Start();
    ASSERT_TRUE(s.ok()) << s;
  }
  void TearDown() override {
    if (op_) op_->Stop();
    if (sched_) sched_->Stop();
    if (kubelet_) kubelet_->Stop();
    pods_.reset();
    if (client_) DeleteSuiteNodes(*client_, suite_);
  }

  void CreateJob(const Json& job) {
    absl::StatusOr<Json> r = client_->Create(kube::TrainingJobsResource(), ns_, job);
    ASSERT_TRUE(r.ok()) << r.status();
  }
  Json GetJob(const std::string& name) {
    absl::StatusOr<Json> j = client_->Get(kube::TrainingJobsResource(), ns_, name);
    return j.ok() ? *j : Json::object();
  }
  Json GetSvc(const std::string& name) {
    absl::StatusOr<Json> j = client_->Get(kube::InferenceServicesResource(), ns_, name);
    return j.ok() ? *j : Json::object();
  }
  Json GetModel(const std::string& name) {
    absl::StatusOr<Json> j = client_->Get(kube::ModelVersionsResource(), ns_, name);
    return j.ok() ? *j : Json::object();
  }
  // Polls the job (its status is written by the operator, which the test does not watch).
  bool JobUntil(const std::string& name, const std::function<bool(const Json& status)>& pred,
                Json* last = nullptr) {
    Json st;
    const bool ok = PollUntil(
        [&] {
          st = GetJob(name).value("status", Json::object());
          return pred(st);
        },
        absl::Seconds(60));
    if (last) *last = st;
    return ok;
  }
  // What a kubelet would report: the Pod's phase, and for an ended one its container's exit.
  void SetPhase(const std::string& pod, const std::string& phase, int exit_code = 0) {
    // As a kubelet does: read the Pod, write its status, read again when someone else (the
    // operator's annotations, the scheduler's binding) changed it meanwhile.
    absl::Status last;
    for (int attempt = 0; attempt < 20; ++attempt) {
      absl::StatusOr<Json> got = client_->Get(kube::PodsResource(), ns_, pod);
      ASSERT_TRUE(got.ok()) << got.status();
      Json p = *got;
      Json st = {{"phase", phase}};
      Json cs = {{"name", "trainer"},
                 {"image", p["spec"]["containers"][0]["image"]},
                 {"imageID", ""},
                 {"ready", phase == "Running"},
                 {"restartCount", 0}};
      if (phase == "Running") {
        cs["state"] = {{"running", {{"startedAt", "2026-12-03T00:00:00Z"}}}};
      } else if (phase == "Succeeded" || phase == "Failed") {
        cs["state"] = {{"terminated",
                        {{"exitCode", exit_code},
                         {"reason", exit_code == 0 ? "Completed" : "Error"},
                         {"startedAt", "2026-12-03T00:00:00Z"},
                         {"finishedAt", "2026-12-03T00:01:00Z"}}}};
      }
      st["containerStatuses"] = Json::array({cs});
      p["status"] = st;
      absl::StatusOr<Json> r = client_->Update(kube::PodsResource(), ns_, pod, p, "status");
      if (r.ok()) return;
      last = r.status();
      if (!kube::IsApiConflict(last)) break;
    }
    FAIL() << last;
  }
  std::map<std::string, std::string> EnvOf(const std::string& pod) {
    std::map<std::string, std::string> env;
    Json p = pods_->Get(pod);
    if (p.is_null()) return env;
    for (const Json& e : p["spec"]["containers"][0]["env"]) {
      if (e.contains("value")) env[e["name"]] = e["value"];
    }
    return env;
  }

  KubeBed* bed_ = nullptr;
  RealClock clock_;
  metrics::Registry registry_, op_registry_;
  std::unique_ptr<kube::RestClient> client_;
  std::unique_ptr<kubesched::KubeScheduler> sched_;
  std::unique_ptr<op::Operator> op_;
  std::unique_ptr<PodWatch> pods_;
  std::unique_ptr<kube::Informer> kubelet_;
  std::string ns_, suite_;
};

TEST_F(KubeOperatorTest, AGangRunsFailsRestartsFromTheNewestCheckpointAndSucceeds) {
  KUBE_BED_OR_SKIP(bed);
  SetUpBed(bed);
  AddNode("a", 8);
  AddNode("b", 8);
  StartScheduler();
  StartOperator();
  CreateJob(TrainingJob("llm", suite_, 2, 8, {{"maxRestarts", 1}}));
  // The scheduler binds the whole gang, one member per node.
  ASSERT_TRUE(pods_->Until([&] { return pods_->Bound() == 2; }, absl::Seconds(60)))
      << GetJob("llm").dump();
  std::map<std::string, std::string> nodes = pods_->Nodes();
  ASSERT_EQ(nodes.count("llm-g0-worker-0"), 1u);
  EXPECT_NE(nodes["llm-g0-worker-0"], nodes["llm-g0-worker-1"]);
  std::map<std::string, std::string> env = EnvOf("llm-g0-worker-1");
  EXPECT_EQ(env["MASTER_ADDR"], "worker-0.llm");
  EXPECT_EQ(env["WORLD_SIZE"], "2");
  EXPECT_EQ(env["RANK"], "1");
  EXPECT_EQ(env["PET_NPROC_PER_NODE"], "8");
  Json st;
  ASSERT_TRUE(JobUntil(
      "llm", [](const Json& s) { return s.value("phase", "") == "Scheduled"; }, &st))
      << st.dump();
  // Its rendezvous Service and PodGroup exist, owned by the job.
  absl::StatusOr<Json> svc = client_->Get(kube::ServicesResource(), ns_, "llm");
  ASSERT_TRUE(svc.ok()) << svc.status();
  EXPECT_EQ((*svc)["spec"]["clusterIP"], "None");
  EXPECT_EQ((*svc)["metadata"]["ownerReferences"][0]["kind"], "TrainingJob");
  ASSERT_TRUE(client_->Get(kube::CoschedulingPodGroupsResource(), ns_, "llm-g0").ok());

  SetPhase("llm-g0-worker-0", "Running");
  SetPhase("llm-g0-worker-1", "Running");
  ASSERT_TRUE(JobUntil(
      "llm", [](const Json& s) { return s.value("phase", "") == "Running"; }, &st))
      << st.dump();
  EXPECT_TRUE(st.contains("startTime"));

  // Rank 0 reports a checkpoint on its Pod: the operator records it as a Ready Checkpoint.
  ASSERT_TRUE(client_
                  ->MergePatch(kube::PodsResource(), ns_, "llm-g0-worker-0",
                               {{"metadata",
                                 {{"annotations",
                                   {{"tessera.dev/checkpoint-step", "1200"},
                                    {"tessera.dev/checkpoint-path", "/ckpt/llm/1200"}}}}}})
                  .ok());
  ASSERT_TRUE(PollUntil(
      [&] {
        absl::StatusOr<Json> c = client_->Get(kube::CheckpointsResource(), ns_, "llm-step-1200");
        return c.ok() && c->value("status", Json::object()).value("phase", "") == "Ready";
      },
      absl::Seconds(30)));
  // ... and its time reaches the gang's Pods for the scheduler's preemption.
  ASSERT_TRUE(pods_->Until([&] {
    const Json p = pods_->Get("llm-g0-worker-1");
    return p.is_object() && p["metadata"]
                                .value("annotations", Json::object())
                                .contains("tessera.dev/last-checkpoint");
  }));

  // A member fails: the whole gang restarts as generation 1 from step 1200.
  SetPhase("llm-g0-worker-1", "Failed", 3);
  ASSERT_TRUE(JobUntil(
      "llm", [](const Json& s) { return s.value("generation", 0) == 1; }, &st))
      << st.dump();
  EXPECT_EQ(st.value("restarts", 0), 1);
  EXPECT_EQ(st.value("resumeFrom", Json::object()).value("step", 0), 1200) << st.dump();
  ASSERT_TRUE(pods_->Until(
      [&] {
        std::map<std::string, std::string> n = pods_->Nodes();
        return n.size() == 2 && !n["llm-g1-worker-0"].empty() && !n["llm-g1-worker-1"].empty();
      },
      absl::Seconds(60)))
      << GetJob("llm").dump();
  env = EnvOf("llm-g1-worker-0");
  EXPECT_EQ(env["TESSERA_RESUME_STEP"], "1200");
  EXPECT_EQ(env["TESSERA_RESUME_FROM"], "/ckpt/llm/1200");
  EXPECT_FALSE(client_->Get(kube::CoschedulingPodGroupsResource(), ns_, "llm-g0").ok());

  for (const char* p : {"llm-g1-worker-0", "llm-g1-worker-1"}) SetPhase(p, "Running");
  ASSERT_TRUE(JobUntil(
      "llm", [](const Json& s) { return s.value("phase", "") == "Running"; }, &st));
  for (const char* p : {"llm-g1-worker-0", "llm-g1-worker-1"}) SetPhase(p, "Succeeded");
  ASSERT_TRUE(JobUntil(
      "llm", [](const Json& s) { return s.value("phase", "") == "Succeeded"; }, &st))
      << st.dump();
  EXPECT_TRUE(st.contains("completionTime"));
  // The restart was told as an Event on the job, naming the member and its exit code.
  absl::StatusOr<Json> ev = client_->List(kube::EventsResource(), ns_);
  ASSERT_TRUE(ev.ok());
  bool told = false;
  const Json items = (*ev)["items"];
  for (const Json& e : items) {
    if (e.value("regarding", Json::object()).value("name", "") == "llm" &&
        e.value("reason", "") == "Restarting") {
      told = e.value("note", "").find("exited with code 3") != std::string::npos;
    }
  }
  EXPECT_TRUE(told) << ev->dump();
}

TEST_F(KubeOperatorTest, CheckpointRetentionKeepsTheNewestReadyOnes) {
  KUBE_BED_OR_SKIP(bed);
  SetUpBed(bed);
  StartOperator();
  CreateJob(TrainingJob("keep", suite_, 1, 0, {{"checkpoint", {{"path", "/ckpt"}, {"keep", 2}}}}));
  ASSERT_TRUE(pods_->Until([&] { return pods_->Nodes().size() == 1; }, absl::Seconds(60)));
  auto names = [&] {
    std::set<std::string> out;
    absl::StatusOr<Json> l = client_->List(kube::CheckpointsResource(), ns_);
    if (!l.ok()) return out;
    const Json items = (*l)["items"];
    for (const Json& c : items) {
      if (c.value("status", Json::object()).value("phase", "") == "Ready") {
        out.insert(c["metadata"]["name"].get<std::string>());
      }
    }
    return out;
  };
  for (int step : {100, 200, 300}) {
    ASSERT_TRUE(
        client_
            ->MergePatch(kube::PodsResource(), ns_, "keep-g0-worker-0",
                         {{"metadata",
                           {{"annotations",
                             {{"tessera.dev/checkpoint-step", std::to_string(step)},
                              {"tessera.dev/checkpoint-path", "/ckpt/" + std::to_string(step)}}}}}})
            .ok());
    ASSERT_TRUE(PollUntil([&] { return names().count("keep-step-" + std::to_string(step)) == 1; },
                          absl::Seconds(30)));
  }
  EXPECT_TRUE(PollUntil(
      [&] {
        return names() == std::set<std::string>{"keep-step-200", "keep-step-300"};
      },
      absl::Seconds(30)))
      << names().size();
}

TEST_F(KubeOperatorTest, AJobNamingAMissingQueueWaitsForIt) {
  KUBE_BED_OR_SKIP(bed);
  SetUpBed(bed);
  AddNode("a", 8);
  StartScheduler();
  StartOperator();
  const std::string queue = "q-" + ns_;
  CreateJob(TrainingJob("waits", suite_, 1, 4, {{"queue", queue}}));
  Json st;
  ASSERT_TRUE(JobUntil(
      "waits", [](const Json& s) { return s.value("reason", "") == "QueueNotFound"; }, &st))
      << st.dump();
  EXPECT_NE(st.value("message", "").find(queue), std::string::npos) << st.dump();
  EXPECT_EQ(pods_->Nodes().size(), 0u);
  ASSERT_TRUE(client_
                  ->Create(kube::QueuesResource(), "",
                           {{"apiVersion", "tessera.dev/v1"},
                            {"kind", "Queue"},
                            {"metadata", {{"name", queue}}},
                            {"spec", {{"gpuQuota", {{"NVIDIA-H100-80GB-HBM3", 8}}}}}})
                  .ok());
  ASSERT_TRUE(pods_->Until([&] { return pods_->Bound() == 1; }, absl::Seconds(60)))
      << GetJob("waits").dump();
  (void)client_->Delete(kube::QueuesResource(), "", queue);
}

TEST_F(KubeOperatorTest, TheGarbageCollectorDeletesAJobsChildrenWithIt) {
  KUBE_BED_OR_SKIP(bed);
  SetUpBed(bed);
  ASSERT_EQ(bed->StartControllerManager("garbagecollector"), "");
  AddNode("a", 8);
  StartOperator();
  CreateJob(TrainingJob("gc", suite_, 2, 1));
  ASSERT_TRUE(pods_->Until([&] { return pods_->Nodes().size() == 2; }, absl::Seconds(60)));
  ASSERT_TRUE(client_->Delete(kube::TrainingJobsResource(), ns_, "gc").ok());
  ASSERT_TRUE(pods_->Until([&] { return pods_->Nodes().empty(); }, absl::Seconds(60)));
  EXPECT_TRUE(PollUntil(
      [&] {
        return kube::IsApiNotFound(client_->Get(kube::ServicesResource(), ns_, "gc").status()) &&
               kube::IsApiNotFound(
                   client_->Get(kube::CoschedulingPodGroupsResource(), ns_, "gc-g0").status());
      },
      absl::Seconds(60)));
}

Json ModelVersion(const std::string& name, const std::string& checkpoint = "") {
  Json spec = {{"model", "llama"}, {"version", name}, {"artifactPath", "/models/" + name}};
  if (!checkpoint.empty()) spec["checkpoint"] = checkpoint;
  return {{"apiVersion", "tessera.dev/v1"},
          {"kind", "ModelVersion"},
          {"metadata", {{"name", name}}},
          {"spec", spec}};
}

Json InferenceService(const std::string& name, const std::string& suite, const std::string& mv) {
  return {{"apiVersion", "tessera.dev/v1"},
          {"kind", "InferenceService"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"modelVersion", mv},
            {"image", "ghcr.io/acme/serve:1"},
            {"nodeSelector", {{kSuite, suite}}},
            {"replicas", {{"min", 1}, {"max", 3}}},
            {"gpusPerReplica", 1},
            {"slo", {{"p99LatencyMs", 100}}}}}};
}

bool PodIsReady(const Json& p) {
  if (p["metadata"].contains("deletionTimestamp")) return false;
  for (const Json& c : p.value("status", Json::object()).value("conditions", Json::array())) {
    if (c.value("type", "") == "Ready") return c.value("status", "") == "True";
  }
  return false;
}

TEST_F(KubeOperatorTest, AServiceScalesOnReportedP99AndRollsWithoutDroppingBelowMin) {
  KUBE_BED_OR_SKIP(bed);
  SetUpBed(bed);
  AddNode("a", 8);
  AddNode("b", 8);
  for (const char* mv : {"v1", "v2"}) {
    ASSERT_TRUE(client_->Create(kube::ModelVersionsResource(), ns_, ModelVersion(mv)).ok());
  }
  StartScheduler();
  StartOperator();
  ASSERT_TRUE(
      client_
          ->Create(kube::InferenceServicesResource(), ns_, InferenceService("chat", suite_, "v1"))
          .ok());
  auto ready_of = [&](const std::string& mv) {
    int n = 0;
    for (const auto& [name, node] : pods_->Nodes()) {
      const Json p = pods_->Get(name);
      if (p.is_object() && PodIsReady(p) &&
          p["metadata"]["labels"].value(op::kModelVersionLabel, "") == mv) {
        ++n;
      }
    }
    return n;
  };
  ASSERT_TRUE(pods_->Until([&] { return ready_of("v1") == 1; }, absl::Seconds(60)))
      << GetJob("chat").dump();
  // Each Ready replica reports a p99 2.5x its target: the service grows (2x at most per round)
  // until replicas.max.
  auto report = [&] {
    for (const auto& [name, node] : pods_->Nodes()) {
      const Json p = pods_->Get(name);
      if (!p.is_object() || !PodIsReady(p)) continue;
      const Json m = {
          {"p99LatencyMs", 250},
          {"rps", 40},
          {"time", absl::FormatTime(absl::RFC3339_full, absl::Now(), absl::UTCTimeZone())}};
      (void)client_->MergePatch(
          kube::PodsResource(), ns_, name,
          {{"metadata", {{"annotations", {{op::kReplicaMetricsAnnotation, m.dump()}}}}}});
    }
  };
  ASSERT_TRUE(PollUntil(
      [&] {
        if (ready_of("v1") == 3) return true;
        report();
        return false;
      },
      absl::Seconds(90)))
      << ready_of("v1") << " Ready; " << GetSvc("chat").dump();
  Json st = GetSvc("chat").value("status", Json::object());
  EXPECT_EQ(st.value("desiredReplicas", 0), 3) << st.dump();
  // Spread: the replicas use both nodes (the emptiest first), not the first node thrice.
  std::set<std::string> used;
  for (const auto& [pod, node] : pods_->Nodes()) used.insert(node);
  EXPECT_EQ(used.size(), 2u);
  bool scaled = false;
  absl::StatusOr<Json> ev = client_->List(kube::EventsResource(), ns_);
  ASSERT_TRUE(ev.ok());
  const Json items = (*ev)["items"];
  for (const Json& e : items) scaled |= e.value("reason", "") == "ScaledUp";
  EXPECT_TRUE(scaled);

  // Roll to v2; watch the Ready count at every change of any replica.
  int min_ready = 1 << 20;
  absl::Mutex mu;
  kube::ReflectorOptions o;
  o.type = kube::PodsResource();
  o.ns = ns_;
  kube::Informer watch(*client_, o);
  auto count = [&](const kube::ObjectPtr&) {
    int n = 0;
    for (const kube::ObjectPtr& p : watch.store().List()) n += PodIsReady(*p);
    absl::MutexLock l(&mu);
    min_ready = std::min(min_ready, n);
  };
  watch.AddEventHandlers({[&](const kube::ObjectPtr& p, bool initial) {
                            if (!initial) count(p);
                          },
                          [&](const kube::ObjectPtr&, const kube::ObjectPtr& p) { count(p); },
                          [&](const kube::ObjectPtr& p) { count(p); }});
  watch.Start();
  ASSERT_TRUE(watch.WaitForSync(absl::Seconds(30)));
  ASSERT_TRUE(client_
                  ->MergePatch(kube::InferenceServicesResource(), ns_, "chat",
                               {{"spec", {{"modelVersion", "v2"}}}})
                  .ok());
  ASSERT_TRUE(PollUntil(
      [&] {
        return GetSvc("chat").value("status", Json::object()).value("modelVersion", "") == "v2";
      },
      absl::Seconds(90)))
      << GetSvc("chat").dump();
  ASSERT_TRUE(pods_->Until([&] { return ready_of("v2") == 3 && pods_->Nodes().size() == 3; }));
  watch.Stop();
  {
    absl::MutexLock l(&mu);
    std::cerr << "fewest Ready replicas during the rollout: " << min_ready << "\n";
    EXPECT_GE(min_ready, 1);  // replicas.min
    EXPECT_GE(min_ready, 3);  // and in fact never below desired
  }
}

// The lineage in status; deleting it while served: refused by the operator's admission webhook
// with the standalone server's message, and with the webhook gone, kept by the finalizer until
// the service lets it go.
TEST_F(KubeOperatorTest, AModelVersionShowsItsLineageAndIsNotDeletedWhileServed) {
  KUBE_BED_OR_SKIP(bed);
  SetUpBed(bed);
  op::OperatorOptions oo;
  // The bed's serving certificate (127.0.0.1, signed by its CA) serves the webhook too.
  oo.webhook = {"127.0.0.1:0", bed->dir() + "/serving.crt", bed->dir() + "/serving.key"};
  StartOperator(oo);
  ASSERT_GT(op_->webhook_port(), 0);
  const std::string hook = "tessera-" + ns_;
  const Json vwc = {
      {"apiVersion", "admissionregistration.k8s.io/v1"},
      {"kind", "ValidatingWebhookConfiguration"},
      {"metadata", {{"name", hook}}},
      {"webhooks",
       {{{"name", "modelversions.tessera.dev"},
         {"admissionReviewVersions", {"v1"}},
         {"sideEffects", "None"},
         {"failurePolicy", "Fail"},
         {"namespaceSelector", {{"matchLabels", {{"kubernetes.io/metadata.name", ns_}}}}},
         {"rules",
          {{{"apiGroups", {"tessera.dev"}},
            {"apiVersions", {"v1"}},
            {"operations", {"DELETE"}},
            {"resources", {"modelversions"}}}}},
         {"clientConfig",
          {{"url", absl::StrCat("https://127.0.0.1:", op_->webhook_port(), "/validate")},
           {"caBundle", absl::Base64Escape(Slurp(bed->ca_file()))}}}}}}};
  const kube::ResourceType vwcs{"admissionregistration.k8s.io", "v1",
                                "validatingwebhookconfigurations", "ValidatingWebhookConfiguration",
                                false};
  ASSERT_TRUE(client_->Create(vwcs, "", vwc).ok());
  absl::StatusOr<Json> cp =
      client_->Create(kube::CheckpointsResource(), ns_,
                      {{"apiVersion", "tessera.dev/v1"},
                       {"kind", "Checkpoint"},
                       {"metadata", {{"name", "llm-step-9000"}}},
                       {"spec", {{"jobName", "llm"}, {"step", 9000}, {"path", "/ckpt/llm/9000"}}}});
  ASSERT_TRUE(cp.ok()) << cp.status();
  (*cp)["status"] = {{"phase", "Ready"}};
  ASSERT_TRUE(
      client_->Update(kube::CheckpointsResource(), ns_, "llm-step-9000", *cp, "status").ok());
  ASSERT_TRUE(
      client_->Create(kube::ModelVersionsResource(), ns_, ModelVersion("mv", "llm-step-9000"))
          .ok());
  ASSERT_TRUE(PollUntil(
      [&] {
        return GetModel("mv")
                   .value("status", Json::object())
                   .value("checkpoint", Json::object())
                   .value("step", 0) == 9000;
      },
      absl::Seconds(30)))
      << GetModel("mv").dump();
  EXPECT_EQ(GetModel("mv")["status"]["checkpoint"].value("jobName", ""), "llm")
      << GetModel("mv").dump();
  ASSERT_TRUE(
      client_
          ->Create(kube::InferenceServicesResource(), ns_, InferenceService("chat", suite_, "mv"))
          .ok());
  ASSERT_TRUE(PollUntil(
      [&] {
        const Json m = GetModel("mv");
        return m.value("status", Json::object()).value("servedBy", Json::array()) ==
                   Json::array({"chat"}) &&
               m["metadata"].value("finalizers", Json::array()).size() == 1;
      },
      absl::Seconds(30)))
      << GetModel("mv").dump();
  // Refused, with the message the standalone server gives; nothing changed.
  absl::Status refused = client_->Delete(kube::ModelVersionsResource(), ns_, "mv");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("modelversion \"mv\" is served by inferenceservice chat"),
            std::string::npos)
      << refused;
  EXPECT_FALSE(GetModel("mv")["metadata"].contains("deletionTimestamp"));
  // Without the webhook the finalizer holds it until the service goes.
  ASSERT_TRUE(client_->Delete(vwcs, "", hook).ok());
  ASSERT_TRUE(
      PollUntil([&] { return client_->Delete(kube::ModelVersionsResource(), ns_, "mv").ok(); },
                absl::Seconds(30)));
  EXPECT_TRUE(GetModel("mv")["metadata"].contains("deletionTimestamp"));
  ASSERT_TRUE(client_->Delete(kube::InferenceServicesResource(), ns_, "chat").ok());
  EXPECT_TRUE(PollUntil(
      [&] {
        return kube::IsApiNotFound(client_->Get(kube::ModelVersionsResource(), ns_, "mv").status());
      },
      absl::Seconds(30)))
      << GetModel("mv").dump();
}

TEST_F(KubeOperatorTest, AGpuPoolCountsItsNodesCordonsThemAndConfinesItsQueues) {
  KUBE_BED_OR_SKIP(bed);
  SetUpBed(bed);
  AddNode("a", 8);
  AddNode("b", 8);
  // The pool takes the Nodes labelled with this test's suite and pool=x: "a" only, for now.
  for (const char* n : {"a"}) {
    ASSERT_TRUE(client_
                    ->MergePatch(kube::NodesResource(), "", suite_ + "-" + n,
                                 {{"metadata", {{"labels", {{"pool", "x-" + suite_}}}}}})
                    .ok());
  }
  const std::string queue = "pq-" + ns_;
  ASSERT_TRUE(client_
                  ->Create(kube::QueuesResource(), "",
                           {{"apiVersion", "tessera.dev/v1"},
                            {"kind", "Queue"},
                            {"metadata", {{"name", queue}}},
                            {"spec", {{"gpuQuota", {{"NVIDIA-H100-80GB-HBM3", 16}}}}}})
                  .ok());
  ASSERT_TRUE(client_
                  ->Create(kube::GpuPoolsResource(), ns_,
                           {{"apiVersion", "tessera.dev/v1"},
                            {"kind", "GPUPool"},
                            {"metadata", {{"name", "x"}}},
                            {"spec",
                             {{"gpuType", "NVIDIA-H100-80GB-HBM3"},
                              {"nodeSelector", {{"pool", "x-" + suite_}}},
                              {"queues", {queue}}}}})
                  .ok());
  StartScheduler();
  StartOperator();
  auto pool = [&] {
    absl::StatusOr<Json> p = client_->Get(kube::GpuPoolsResource(), ns_, "x");
    return p.ok() ? p->value("status", Json::object()) : Json::object();
  };
  Json st;
  ASSERT_TRUE(PollUntil(
      [&] {
        st = pool();
        return st.value("nodes", 0) == 1 && st.value("gpus", 0) == 8;
      },
      absl::Seconds(30)))
      << st.dump();
  // A job of the pool's queue runs only on the pool's Node, and counts as allocated there.
  CreateJob(TrainingJob("confined", suite_, 1, 2, {{"queue", queue}}));
  ASSERT_TRUE(pods_->Until([&] { return pods_->Bound() == 1; }, absl::Seconds(60)))
      << GetJob("confined").dump();
  EXPECT_EQ(pods_->Nodes()["confined-g0-worker-0"], suite_ + "-a");
  ASSERT_TRUE(PollUntil([&] { return pool().value("allocated", 0) == 2; }, absl::Seconds(30)))
      << pool().dump();
  // A Node joins the pool (labelled), one is cordoned by hand, one goes.
  ASSERT_TRUE(client_
                  ->MergePatch(kube::NodesResource(), "", suite_ + "-b",
                               {{"metadata", {{"labels", {{"pool", "x-" + suite_}}}}}})
                  .ok());
  ASSERT_TRUE(PollUntil([&] { return pool().value("nodes", 0) == 2; }, absl::Seconds(30)))
      << pool().dump();
  ASSERT_TRUE(client_
                  ->MergePatch(kube::NodesResource(), "", suite_ + "-b",
                               {{"spec", {{"unschedulable", true}}}})
                  .ok());
  ASSERT_TRUE(PollUntil(
      [&] { return pool().value("cordoned", 0) == 1 && pool().value("allocatable", 0) == 8; },
      absl::Seconds(30)))
      << pool().dump();
  ASSERT_TRUE(client_->Delete(kube::NodesResource(), "", suite_ + "-b").ok());
  ASSERT_TRUE(PollUntil([&] { return pool().value("nodes", 0) == 1; }, absl::Seconds(30)))
      << pool().dump();
  // The whole pool cordoned, then not: its Node follows, and only what the pool did is undone.
  ASSERT_TRUE(
      client_->MergePatch(kube::GpuPoolsResource(), ns_, "x", {{"spec", {{"cordon", true}}}}).ok());
  auto unschedulable = [&](const std::string& n) {
    absl::StatusOr<Json> node = client_->Get(kube::NodesResource(), "", suite_ + "-" + n);
    return node.ok() && (*node)["spec"].value("unschedulable", false);
  };
  ASSERT_TRUE(PollUntil([&] { return unschedulable("a"); }, absl::Seconds(30)));
  EXPECT_TRUE(PollUntil([&] { return pool().value("phase", "") == "Draining"; }, absl::Seconds(30)))
      << pool().dump();
  ASSERT_TRUE(
      client_->MergePatch(kube::GpuPoolsResource(), ns_, "x", {{"spec", {{"cordon", false}}}})
          .ok());
  ASSERT_TRUE(PollUntil([&] { return !unschedulable("a"); }, absl::Seconds(30)));
  (void)client_->Delete(kube::QueuesResource(), "", queue);
}

// Two `tessera operator` processes with leader election: the leader is SIGKILLed while it creates
// a gang; the standby takes the lease and creates the members that are missing, each once.
TEST_F(KubeOperatorTest, AReplicaTakingOverMidGangCreatesEachMemberOnce) {
  KUBE_BED_OR_SKIP(bed);
  if (TesseraBin().empty()) GTEST_SKIP() << "TESSERA_BIN is not set (run through ctest)";
  SetUpBed(bed);
  AddNode("a", 8);
  // Every Pod name the API ever showed, from the watch's events.
  std::set<std::string> seen;
  absl::Mutex mu;
  kube::ReflectorOptions o;
  o.type = kube::PodsResource();
  o.ns = ns_;
  kube::Informer all(*client_, o);
  all.AddEventHandlers({[&](const kube::ObjectPtr& p, bool) {
                          absl::MutexLock l(&mu);
                          seen.insert((*p)["metadata"]["name"].get<std::string>());
                        },
                        nullptr, nullptr});
  all.Start();
  ASSERT_TRUE(all.WaitForSync(absl::Seconds(30)));
  const std::string dir = MakeTempDir("kube_operator_failover");
  auto start = [&](const std::string& tag) {
    FirstLine f = SpawnForFirstLine(
        {TesseraBin(), "operator", "--kubeconfig", bed->admin_kubeconfig(), "--lease-namespace",
         ns_, "--leader-elect-lease-duration", "4", "--leader-elect-renew-deadline", "3",
         "--leader-elect-retry-period", "1", "--metrics-addr", "127.0.0.1:0", "--workers", "1"},
        dir + "/" + tag + ".log", 30000);
    EXPECT_NE(f.out.find("metrics http://127.0.0.1:"), std::string::npos) << f.out;
    return f;
  };
  FirstLine a = start("a");
  ASSERT_GT(a.pid, 0);
  // The leader is known once it holds the lease; the standby starts after, so `a` leads.
  ASSERT_TRUE(PollUntil(
      [&] {
        absl::StatusOr<Json> l = client_->Get(kube::LeasesResource(), ns_, "tessera-operator");
        return l.ok() && !(*l)["spec"].value("holderIdentity", "").empty();
      },
      absl::Seconds(30)))
      << Slurp(dir + "/a.log");
  FirstLine b = start("b");
  ASSERT_GT(b.pid, 0);
  constexpr int kMembers = 40;
  CreateJob(TrainingJob("big", suite_, kMembers, 0));
  ASSERT_TRUE(AwaitTrue(
      mu, [&] { return !seen.empty(); }, absl::Seconds(60)))
      << Slurp(dir + "/a.log");
  kill(a.pid, SIGKILL);
  waitpid(a.pid, nullptr, 0);
  {
    absl::MutexLock l(&mu);
    // Usually part of the gang; all of it if the leader was quicker than the kill.
    std::cerr << "the leader had created " << seen.size() << " of " << kMembers << " Pods\n";
  }
  ASSERT_TRUE(AwaitTrue(
      mu, [&] { return seen.size() >= kMembers; }, absl::Seconds(60)))
      << Slurp(dir + "/b.log");
  // The new leader has the job's status current too.
  Json st;
  EXPECT_TRUE(JobUntil(
      "big", [](const Json& s) { return s.value("generation", -1) == 0 && s.contains("phase"); },
      &st))
      << st.dump();
  kill(b.pid, SIGTERM);
  int rc = 0;
  waitpid(b.pid, &rc, 0);
  EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << rc;
  all.Stop();
  absl::MutexLock l(&mu);
  EXPECT_EQ(seen.size(), static_cast<size_t>(kMembers));
  for (int i = 0; i < kMembers; ++i) {
    EXPECT_EQ(seen.count("big-g0-worker-" + std::to_string(i)), 1u) << i;
  }
}

}  // namespace
}  // namespace tessera::testing
