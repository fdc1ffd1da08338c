// SchedulingController on a MemoryStore with a ManualClock: deterministic.
#include "controller/scheduling_controller.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "controller/controller_test_fixture.h"
#include "controller/node_leases.h"
#include "store/memory_store.h"

namespace tessera::controller {
namespace {

TEST_F(ControllerTest, SchedulesAGangAndRecordsTheTransitions) {
  for (int i = 0; i < 4; ++i) AddNode("gpu-" + std::to_string(i), 8);
  AddJob("llm", 2, 8);
  Step();
  Json j = Job("llm");
  EXPECT_EQ(j["status"]["phase"], "Scheduled");
  EXPECT_EQ(j["status"]["generation"], 1);
  ASSERT_EQ(j["status"]["placement"].size(), 2u);
  EXPECT_NE(j["status"]["placement"][0]["node"], j["status"]["placement"][1]["node"]);
  EXPECT_EQ(j["status"]["placement"][0]["gpus"].size(), 8u);
  EXPECT_EQ(EventReasons("llm"), (std::vector<std::string>{"Admitted", "Scheduled"}));
  EXPECT_EQ(Get("nodes", "", "gpu-0")["status"]["phase"], "Ready");
  EXPECT_EQ(BoundGpus(), 16);
  EXPECT_TRUE(ctl_->cluster().CheckConsistency().ok());
}

// `tessera server --profile deploy/profiles/tessera.yaml`: the controller runs the packing
// plugins (sched/pack/plugin_set.h) -- without them such a profile is refused at start.
TEST_F(ControllerTest, RunsThePackingProfile) {
  ControllerOptions opts = base_options_;
  opts.profile = sched::Profile::Default();
  opts.profile.name = "tessera";
  opts.profile.gpu_chooser = "pack-gpu-tessera";
  opts.profile.nodes_to_score = 0;
  opts.profile.dedupe_equivalent_nodes = true;
  opts.profile.tie_break = sched::Profile::TieBreak::kLowestNodeId;
  opts.profile.plugins.push_back({.name = "pack-observe"});
  opts.profile.plugins.push_back({.name = "pack-tessera", .weight = 2});
  Restart(opts);
  for (int i = 0; i < 2; ++i) AddNode("gpu-" + std::to_string(i), 4);
  AddJob("gang", 2, 2);
  Json half = {
      {"groups", {{{"name", "w"}, {"count", 3}, {"gpusPerReplica", 1}, {"gpuMilli", 500}}}}};
  Create("trainingjobs", "team-a",
         {{"kind", "TrainingJob"}, {"metadata", {{"name", "half"}}}, {"spec", half}});
  Step();
  EXPECT_EQ(Job("gang")["status"]["phase"], "Scheduled");
  Json h = Job("half");
  ASSERT_EQ(h["status"]["phase"], "Scheduled");
  // Three half GPUs take two GPUs, not three: the shared GPU is filled first.
  std::set<std::pair<std::string, int>> gpus;
  for (const Json& m : h["status"]["placement"]) gpus.insert({m["node"], m["gpus"][0].get<int>()});
  EXPECT_EQ(gpus.size(), 2u);
  EXPECT_TRUE(ctl_->cluster().CheckConsistency().ok());

  ControllerOptions bad = base_options_;
  bad.profile.plugins.push_back({.name = "pack-nothing"});
  absl::StatusOr<std::unique_ptr<SchedulingController>> c =
      SchedulingController::Create(store_, clock_, bad);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("pack-nothing"), std::string::npos) << c.status();
}

// A cycle's bindings are one store transaction: eight jobs placed in one Step share one new
// revision (one commit) and each has its Scheduled Event.
TEST_F(ControllerTest, ACyclesBindingsAreOneTransaction) {
  for (int i = 0; i < 2; ++i) AddNode("gpu-" + std::to_string(i), 8);
  for (int i = 0; i < 8; ++i) AddJob(absl::StrCat("j", i), 1, 2);
  const int64_t before = store_.CurrentRevision();
  Step();
  std::set<int64_t> revisions;
  for (int i = 0; i < 8; ++i) {
    const std::string name = absl::StrCat("j", i);
    EXPECT_EQ(Job(name)["status"]["phase"], "Scheduled") << name;
    revisions.insert(store_.Get(Key("trainingjobs", "team-a", name))->mod_revision);
    EXPECT_THAT(EventReasons(name), ::testing::Contains("Scheduled"));
  }
  EXPECT_EQ(revisions.size(), 1u);
  EXPECT_GT(*revisions.begin(), before);
  EXPECT_EQ(BoundGpus(), 16);
  EXPECT_EQ(ctl_->stats().bound, 8);
}

// A Store that lets a user edit one job just before the controller's next transaction of more
// than one binding, so that transaction fails on the edited job's CAS.
TEST_F(ControllerTest, WaitsWithAReasonThenRunsWhenTheFirstJobEnds) {
  AddNode("gpu-0", 8);
  AddJob("a", 1, 8, {{"priority", 10}});
  AddJob("b", 1, 8);
  Step();
  EXPECT_EQ(Job("a")["status"]["phase"], "Scheduled");
  Json b = Job("b");
  EXPECT_EQ(b["status"]["phase"], "Queued");
  EXPECT_NE(b["status"]["message"].get<std::string>().find("waiting"), std::string::npos);
  EXPECT_EQ(BoundGpus(), 8);
  // The agent reports its member running, then exited with 0: the controller moves the job
  // to Running, then to Succeeded, and unbinds it.
  ReportJob("a", api::MemberState::kRunning);
  Step();
  EXPECT_EQ(Job("a")["status"]["phase"], "Running");
  ReportJob("a", api::MemberState::kExited, 0);
  Step();
  EXPECT_EQ(Job("a")["status"]["phase"], "Succeeded");
  EXPECT_FALSE(Job("a")["status"].contains("placement"));
  EXPECT_EQ(Job("b")["status"]["phase"], "Scheduled");
  EXPECT_EQ(EventReasons("a"),
            (std::vector<std::string>{"Admitted", "Scheduled", "Started", "Succeeded"}));
}

TEST_F(ControllerTest, RestartRebuildsPlacementsWithoutWriting) {
  for (int i = 0; i < 3; ++i) AddNode("gpu-" + std::to_string(i), 8);
  AddJob("a", 2, 8);
  AddJob("b", 1, 4);
  Step();
  const int64_t rev = store_.CurrentRevision();
  Json a = Job("a");
  Restart();
  Step();
  EXPECT_EQ(store_.CurrentRevision(), rev);  // nothing rescheduled or rewritten
  EXPECT_EQ(ctl_->stats().restored, 2);
  EXPECT_EQ(ctl_->cluster().allocated_milli(), 20000);
  EXPECT_EQ(Job("a")["status"]["placement"], a["status"]["placement"]);
  // A new job sees the restored allocations.
  AddJob("c", 1, 8);
  Step();
  EXPECT_EQ(Job("c")["status"]["phase"], "Queued");
  AddJob("d", 1, 4);
  Step();
  EXPECT_EQ(Job("d")["status"]["phase"], "Scheduled");
  EXPECT_EQ(BoundGpus(), 24);
}

TEST_F(ControllerTest, DeletedJobFreesItsGpus) {
  AddNode("gpu-0", 8);
  AddJob("a", 1, 8);
  AddJob("b", 1, 8);
  Step();
  ASSERT_TRUE(store_.Delete(Key("trainingjobs", "team-a", "a")).ok());
  Step();
  EXPECT_EQ(Job("b")["status"]["phase"], "Scheduled");
}

TEST_F(ControllerTest, NodeLostRequeuesTheGangFromTheLastCheckpoint) {
  AddNode("gpu-0", 8);
  AddJob("a", 1, 8);
  Step();
  ASSERT_EQ(Job("a")["status"]["placement"][0]["node"], "gpu-0");
  Create("checkpoints", "team-a",
         {{"kind", "Checkpoint"},
          {"metadata", {{"name", "a-step-100"}}},
          {"spec", {{"jobName", "a"}, {"step", 100}, {"path", "s3://ckpt/a/100"}}},
          {"status", {{"phase", "Ready"}}}});
  AddNode("gpu-1", 8);
  Step();
  // gpu-1 keeps heartbeating, gpu-0 falls silent.
  clock_.Advance(absl::Seconds(6));
  Heartbeat("gpu-1");
  Step();
  clock_.Advance(absl::Seconds(6));
  Heartbeat("gpu-1");
  Step();
  EXPECT_EQ(Get("nodes", "", "gpu-0")["status"]["phase"], "NotReady");
  EXPECT_EQ(Get("nodes", "", "gpu-1")["status"]["phase"], "Ready");
  EXPECT_EQ(Job("a")["status"]["phase"], "Scheduled");  // not before the eviction delay
  for (int i = 0; i < 13; ++i) {
    clock_.Advance(absl::Seconds(5));
    Heartbeat("gpu-1");
    Step();
  }
  Json a = Job("a");
  EXPECT_EQ(a["status"]["phase"], "Scheduled");
  EXPECT_EQ(a["status"]["generation"], 2);  // fencing: a new binding
  EXPECT_EQ(a["status"]["placement"][0]["node"], "gpu-1");
  EXPECT_EQ(a["status"]["resumeFrom"]["checkpoint"], "a-step-100");
  std::vector<std::string> reasons = EventReasons("a");
  EXPECT_NE(std::find(reasons.begin(), reasons.end(), "NodeLost"), reasons.end());
  std::vector<std::string> node_reasons = EventReasons("gpu-0");
  EXPECT_NE(std::find(node_reasons.begin(), node_reasons.end(), "NodeNotReady"),
            node_reasons.end());
  // The lost node comes back: Ready again, but the job stays where it is.
  Heartbeat("gpu-0");
  Step();
  EXPECT_EQ(Get("nodes", "", "gpu-0")["status"]["phase"], "Ready");
  EXPECT_EQ(Job("a")["status"]["generation"], 2);
  EXPECT_EQ(BoundGpus(), 8);
}

// A gang its node's loss stopped goes before older jobs waiting in its
// queue (QueueManager SubmitOptions::restart): "w" was created first but was
// suspended while "a" started; when "a"'s node is lost and "b" ends, the room
// goes to "a".
TEST_F(ControllerTest, GangStoppedByANodeLossGoesBeforeOlderWaitingJobs) {
  AddNode("gpu-0", 8);
  AddNode("gpu-1", 8);
  AddJob("w", 1, 8, {{"suspend", true}});
  Modify("trainingjobs", "team-a", "w", [&](Json& o) {
    o["metadata"]["creationTimestamp"] = Timestamp(clock_.Now() - absl::Hours(1));
  });
  AddJob("a", 1, 8);
  AddJob("b", 1, 8);
  Heartbeat("gpu-0");
  Heartbeat("gpu-1");
  Step();
  ASSERT_EQ(Job("a")["status"]["phase"], "Scheduled");
  ASSERT_EQ(Job("b")["status"]["phase"], "Scheduled");
  const std::string a_node = Job("a")["status"]["placement"][0]["node"];
  const std::string b_node = a_node == "gpu-0" ? "gpu-1" : "gpu-0";
  Modify("trainingjobs", "team-a", "w", [](Json& o) { o["spec"]["suspend"] = false; });
  Step();
  ASSERT_EQ(Job("w")["status"]["phase"], "Queued");  // waiting for room
  // a's node falls silent; past the eviction delay a is requeued (NodeLost).
  for (int i = 0; i < 16; ++i) {
    clock_.Advance(absl::Seconds(5));
    Heartbeat(b_node);
    Step();
  }
  ASSERT_EQ(Job("a")["status"]["phase"], "NodeLost");
  // b ends: its node's GPUs go to a, not to the older w.
  Modify("trainingjobs", "team-a", "b", [](Json& o) { o["status"]["phase"] = "Succeeded"; });
  Step();
  EXPECT_EQ(Job("a")["status"]["phase"], "Scheduled");
  EXPECT_EQ(Job("a")["status"]["placement"][0]["node"], b_node);
  EXPECT_EQ(Job("w")["status"]["phase"], "Queued");
  EXPECT_EQ(BoundGpus(), 8);
}

TEST_F(ControllerTest, LeaseRenewalsAloneKeepANodeReady) {
  // Heartbeats that only renew the in-memory lease (the API server wrote
  // nothing) count like stored ones: gpu-0 stays Ready past the grace
  // period, turns NotReady when its lease stops, and Ready when it resumes.
  NodeLeases leases;
  base_options_.leases = &leases;
  Restart();
  AddNode("gpu-0", 8);
  Step();
  ASSERT_EQ(Get("nodes", "", "gpu-0")["status"]["phase"], "Ready");
  const int64_t rev = store_.CurrentRevision();
  for (int i = 0; i < 10; ++i) {  // 50 s of 5 s renewals, grace 10 s
    clock_.Advance(absl::Seconds(5));
    leases.Renew("gpu-0", clock_.Now());
    Step();
  }
  EXPECT_EQ(Get("nodes", "", "gpu-0")["status"]["phase"], "Ready");
  EXPECT_EQ(store_.CurrentRevision(), rev);  // nothing was written for them
  clock_.Advance(absl::Seconds(11));
  Step();
  EXPECT_EQ(Get("nodes", "", "gpu-0")["status"]["phase"], "NotReady");
  leases.Renew("gpu-0", clock_.Now());
  Step();
  EXPECT_EQ(Get("nodes", "", "gpu-0")["status"]["phase"], "Ready");
  std::vector<std::string> reasons = EventReasons("gpu-0");
  EXPECT_NE(std::find(reasons.begin(), reasons.end(), "NodeReady"), reasons.end());
}

TEST_F(ControllerTest, MaxRuntimeStopsTheJobAndFreesItsGpus) {
  AddNode("gpu-0", 8);
  AddJob("limited", 1, 8, {{"maxRuntimeSeconds", 60}});
  Step();
  ASSERT_EQ(Job("limited")["status"]["phase"], "Scheduled");
  AddJob("next", 1, 8);
  Step();
  ASSERT_NE(Job("next")["status"]["phase"], "Scheduled");
  // A restart in between: the limit counts from the stored scheduledTime.
  clock_.Advance(absl::Seconds(30));
  Heartbeat("gpu-0");
  Restart();
  Step();
  clock_.Advance(absl::Seconds(29));
  Heartbeat("gpu-0");
  Step();
  EXPECT_EQ(Job("limited")["status"]["phase"], "Scheduled");
  clock_.Advance(absl::Seconds(2));
  Heartbeat("gpu-0");
  Step();
  Json j = Job("limited");
  EXPECT_EQ(j["status"]["phase"], "Failed");
  EXPECT_FALSE(j["status"].contains("placement"));
  EXPECT_THAT(j["status"]["message"].get<std::string>(),
              ::testing::HasSubstr("past its maxRuntimeSeconds (60): stopped"));
  std::vector<std::string> reasons = EventReasons("limited");
  EXPECT_NE(std::find(reasons.begin(), reasons.end(), "DeadlineExceeded"), reasons.end());
  EXPECT_EQ(ctl_->stats().deadline_exceeded, 1);
  // Its GPUs went to the next job.
  Step();
  EXPECT_EQ(Job("next")["status"]["phase"], "Scheduled");
  EXPECT_EQ(BoundGpus(), 8);
}

TEST_F(ControllerTest, EventsOlderThanTheirTtlAreCollected) {
  base_options_.event_ttl = absl::Minutes(10);
  Restart();
  AddNode("gpu-0", 8);
  AddJob("old", 1, 4);
  Step();
  ASSERT_FALSE(EventReasons("old").empty());
  clock_.Advance(absl::Minutes(11));
  Heartbeat("gpu-0");
  AddJob("new", 1, 4);
  Step();
  Step();  // the collection's pass is due: the first step's events are past 10 minutes
  EXPECT_TRUE(EventReasons("old").empty());
  EXPECT_TRUE(EventReasons("gpu-0").empty());
  EXPECT_FALSE(EventReasons("new").empty());
  EXPECT_GT(ctl_->stats().events_collected, 0);
  // The objects themselves are untouched.
  EXPECT_EQ(Job("old")["status"]["phase"], "Scheduled");
}

TEST_F(ControllerTest, UnhealthyGpuLeavesThePoolAndRequeuesItsGang) {
  metrics::Registry registry;
  ControllerOptions opts;
  opts.metrics = &registry;
  Restart(opts);
  AddNode("gpu-0", 8);
  AddJob("a", 1, 2);
  Step();
  Json p = Job("a")["status"]["placement"][0];
  const int bad = p["gpus"][0];
  Modify("nodes", "", "gpu-0", [&](Json& o) {
    o["status"]["gpus"] = {{{"index", bad}, {"health", "Unhealthy"}}};
  });
  Step();
  Json a = Job("a");
  EXPECT_EQ(a["status"]["phase"], "Scheduled");
  EXPECT_EQ(a["status"]["generation"], 2);
  for (const Json& g : a["status"]["placement"][0]["gpus"]) EXPECT_NE(g.get<int>(), bad);
  std::vector<std::string> reasons = EventReasons("a");
  EXPECT_NE(std::find(reasons.begin(), reasons.end(), "GpuUnhealthy"), reasons.end());
  // Counted by its cause, not as a lost node.
  EXPECT_THAT(registry.Render(),
              ::testing::HasSubstr("tessera_requeues_total{reason=\"GpuUnhealthy\"} 1\n"));
  EXPECT_TRUE(ctl_->cluster().CheckConsistency().ok());
}

TEST_F(ControllerTest, CordonAndDrain) {
  AddNode("gpu-0", 8);
  AddNode("gpu-1", 8);
  Modify("nodes", "", "gpu-1", [](Json& o) { o["spec"]["unschedulable"] = true; });
  AddJob("a", 2, 8);
  Step();
  EXPECT_EQ(Job("a")["status"]["phase"], "Queued");  // only one schedulable node
  Modify("nodes", "", "gpu-1", [](Json& o) { o["spec"]["unschedulable"] = false; });
  Step();
  EXPECT_EQ(Job("a")["status"]["phase"], "Scheduled");
  // Drain = cordon + a NoExecute taint: the gang leaves and cannot come back.
  Modify("nodes", "", "gpu-1", [](Json& o) {
    o["spec"]["unschedulable"] = true;
    o["spec"]["taints"] = {{{"key", "tessera.dev/drain"}, {"effect", "NoExecute"}}};
  });
  Step();
  Json a = Job("a");
  EXPECT_EQ(a["status"]["phase"], "Preempted");
  EXPECT_FALSE(a["status"].contains("placement"));
  EXPECT_EQ(BoundGpus(), 0);
  EXPECT_EQ(EventReasons("a").back(), "NodeDrained");
}

TEST_F(ControllerTest, InvalidSpecFailsAndUnknownPriorityClassWaits) {
  AddNode("gpu-0", 8);
  AddJob("bad", 1, 1, {{"gang", {{"minMember", 5}}}});
  AddJob("gold", 1, 1, {{"priorityClassName", "gold"}});
  Step();
  Json bad = Job("bad");
  EXPECT_EQ(bad["status"]["phase"], "Failed");
  EXPECT_NE(bad["status"]["message"].get<std::string>().find("spec.gang.minMember"),
            std::string::npos);
  Json gold = Job("gold");
  EXPECT_EQ(gold["status"]["phase"], "Pending");
  EXPECT_NE(gold["status"]["message"].get<std::string>().find("gold"), std::string::npos);
  Create(
      "priorityclasses", "",
      {{"kind", "PriorityClass"}, {"metadata", {{"name", "gold"}}}, {"spec", {{"value", 4242}}}});
  Step();
  gold = Job("gold");
  EXPECT_EQ(gold["status"]["phase"], "Scheduled");
  EXPECT_EQ(gold["status"]["priority"], 4242);
}

TEST_F(ControllerTest, BindingIsCompareAndSwapOnTheJobRevision) {
  AddNode("gpu-0", 8);
  AddJob("a", 1, 8);
  Step();  // admitted and bound
  // A user changes the spec of a waiting job between the controller's read
  // and its write: simulate by updating a job the controller has not seen.
  AddJob("b", 1, 4);
  Step();
  EXPECT_EQ(Job("b")["status"]["phase"], "Queued");
  Modify("trainingjobs", "team-a", "a", [](Json& o) { o["status"]["phase"] = "Failed"; });
  Modify("trainingjobs", "team-a", "b",
         [](Json& o) { o["spec"]["groups"][0]["gpusPerReplica"] = 2; });
  Step();
  Json b = Job("b");
  EXPECT_EQ(b["status"]["phase"], "Scheduled");
  EXPECT_EQ(b["status"]["placement"][0]["gpus"].size(), 2u);  // the new spec, not the old
  EXPECT_EQ(BoundGpus(), 2);
}

TEST_F(ControllerTest, SuspendUnbindsAndResumeRequeues) {
  AddNode("gpu-0", 8);
  AddJob("a", 1, 8, {{"suspend", true}});
  AddJob("b", 1, 8);
  Step();
  EXPECT_EQ(Job("a")["status"]["phase"], "Suspended");
  EXPECT_EQ(Job("b")["status"]["phase"], "Scheduled");
  Modify("trainingjobs", "team-a", "b", [](Json& o) { o["spec"]["suspend"] = true; });
  Step();
  Json b = Job("b");
  EXPECT_EQ(b["status"]["phase"], "Suspended");
  EXPECT_FALSE(b["status"].contains("placement"));
  Modify("trainingjobs", "team-a", "a", [](Json& o) { o["spec"]["suspend"] = false; });
  Step();
  EXPECT_EQ(Job("a")["status"]["phase"], "Scheduled");
  EXPECT_EQ(Job("b")["status"]["phase"], "Suspended");
  EXPECT_EQ(BoundGpus(), 8);
}

// Suspensions are written with the page's other admissions; a job suspended and resumed before
// the controller wrote anything is admitted, not left Suspended.
TEST_F(ControllerTest, ASuspendedThenResumedJobIsAdmitted) {
  AddNode("gpu-0", 8);
  Step();
  AddJob("s1", 1, 1, {{"suspend", true}});
  AddJob("s2", 1, 1, {{"suspend", true}});
  AddJob("flip", 1, 1, {{"suspend", true}});
  Modify("trainingjobs", "team-a", "flip", [](Json& o) { o["spec"]["suspend"] = false; });
  Step();
  EXPECT_EQ(Job("s1")["status"]["phase"], "Suspended");
  EXPECT_EQ(Job("s2")["status"]["phase"], "Suspended");
  EXPECT_EQ(Job("flip")["status"]["phase"], "Scheduled");
  EXPECT_EQ(BoundGpus(), 1);
}

TEST_F(ControllerTest, InferenceServiceSpreadsReplicas) {
  for (int i = 0; i < 3; ++i) AddNode("gpu-" + std::to_string(i), 8);
  Create(
      "inferenceservices", "serve",
      {{"kind", "InferenceService"},
       {"metadata", {{"name", "chat"}}},
       {"spec",
        {{"modelVersion", "v1"}, {"replicas", {{"min", 1}, {"max", 3}}}, {"gpusPerReplica", 1}}}});
  Step();
  Json s = Get("inferenceservices", "serve", "chat");
  EXPECT_EQ(s["status"]["phase"], "Scheduled");
  std::set<std::string> nodes;
  for (const Json& m : s["status"]["placement"]) nodes.insert(m["node"]);
  EXPECT_EQ(nodes.size(), 3u);
  // Its agents report the replicas; the controller derives Ready, then Degraded (a replica
  // down, being restarted by its agent), records each as an event, and the service keeps its
  // GPUs.
  auto report = [&](api::MemberState state, std::set<std::string> only = {}) {
    Report("inferenceservices", "serve", "chat", state, 1, only);
    Step();
  };
  auto events = [&] {  // in the order they were written
    std::vector<std::pair<int64_t, std::string>> byrev;
    absl::StatusOr<store::ListResult> l = store_.List(kEventsPrefix, {});
    for (const store::KeyValue& kv : l->kvs) {
      Json e = *ParseStored(kv.value);
      if (e["spec"]["involvedObject"]["name"] == "chat") {
        byrev.emplace_back(kv.mod_revision, e["spec"]["reason"]);
      }
    }
    std::sort(byrev.begin(), byrev.end());
    std::vector<std::string> out;
    for (auto& [rev, reason] : byrev) out.push_back(reason);
    return absl::StrJoin(out, ",");
  };
  report(api::MemberState::kRunning, {"replica-0"});
  EXPECT_EQ(Get("inferenceservices", "serve", "chat")["status"]["phase"], "Deploying");
  report(api::MemberState::kRunning);
  EXPECT_EQ(Get("inferenceservices", "serve", "chat")["status"]["phase"], "Ready");
  report(api::MemberState::kFailed, {"replica-1"});
  EXPECT_EQ(Get("inferenceservices", "serve", "chat")["status"]["phase"], "Degraded");
  report(api::MemberState::kRunning, {"replica-1"});
  EXPECT_THAT(events(), ::testing::EndsWith("Ready,Degraded,Ready"));
  s = Get("inferenceservices", "serve", "chat");
  EXPECT_EQ(s["status"]["placement"].size(), 3u);
}

// Invariant test: random submissions, deletions, completions, GPU failures,
// cordons and controller restarts. After every step the store never shows a
// GPU bound twice, and the controller's memory holds exactly what the store
// says is bound.
TEST_F(ControllerTest, RandomLifecycleNeverBindsAGpuTwice) {
  std::mt19937_64 rng(7);
  const int kNodes = 6;
  std::vector<std::set<int>> bad(kNodes);
  std::vector<bool> cordoned(kNodes, false);
  for (int i = 0; i < kNodes; ++i) AddNode(absl::StrCat("gpu-", i), 8, i < 3 ? "r1" : "r2");
  int next = 0, max_bound = 0;
  auto node = [](int i) { return absl::StrCat("gpu-", i); };
  for (int step = 0; step < 250; ++step) {
    const int op = static_cast<int>(rng() % 10);
    const std::string victim = absl::StrCat("j", next > 0 ? rng() % next : 0);
    if (op < 4) {
      AddJob(absl::StrCat("j", next++), 1 + static_cast<int>(rng() % 3),
             1 << static_cast<int>(rng() % 4));
    } else if (op == 4 && next > 0) {
      (void)store_.Delete(Key("trainingjobs", "team-a", victim));
    } else if (op == 5 && next > 0 && store_.Get(Key("trainingjobs", "team-a", victim)).ok()) {
      Modify("trainingjobs", "team-a", victim, [](Json& o) { o["status"]["phase"] = "Succeeded"; });
    } else if (op == 6) {
      const int n = static_cast<int>(rng() % kNodes), g = static_cast<int>(rng() % 8);
      if (!bad[n].erase(g)) bad[n].insert(g);
      Modify("nodes", "", node(n), [&](Json& o) {
        Json gpus = Json::array();
        for (int b : bad[n]) gpus.push_back({{"index", b}, {"health", "Unhealthy"}});
        o["status"]["gpus"] = gpus;
      });
    } else if (op == 7) {
      const int n = static_cast<int>(rng() % kNodes);
      cordoned[n] = !cordoned[n];
      Modify("nodes", "", node(n), [&](Json& o) { o["spec"]["unschedulable"] = cordoned[n]; });
    } else if (op == 8) {
      Restart();
    }
    clock_.Advance(absl::Seconds(1));
    for (int i = 0; i < kNodes; ++i) Heartbeat(node(i));
    Step();
    max_bound = std::max(max_bound, BoundGpus());  // fails the test on a GPU bound twice
    int64_t stored_milli = 0;
    absl::StatusOr<store::ListResult> l = store_.List(kTrainingJobsPrefix, {});
    for (const store::KeyValue& kv : l->kvs) {
      Json j = *ParseStored(kv.value);
      const std::string phase = j["status"].value("phase", "");
      if (phase == "Succeeded" || phase == "Failed" || !j["status"].contains("placement")) continue;
      for (const Json& m : j["status"]["placement"]) {
        stored_milli += m.value("gpuMilli", 1000) * static_cast<int64_t>(m["gpus"].size());
      }
    }
    ASSERT_EQ(ctl_->cluster().allocated_milli(), stored_milli) << "step " << step;
    ASSERT_TRUE(ctl_->cluster().CheckConsistency().ok()) << "step " << step;
  }
  EXPECT_GE(max_bound, 40);  // the fleet (48 GPUs) was nearly full at some point
}

TEST_F(ControllerTest, AShortGpuModelNameSchedulesOnNvmlNamedGpusAndTheRejectionIsCleared) {
  // Submitted before the fleet has the model: refused, with the fleet's names.
  AddJob("h", 1, 4, {{"gpuModels", {"H100"}}});
  Step();
  Json job = Job("h");
  EXPECT_THAT(job["status"]["message"].get<std::string>(), ::testing::HasSubstr("H100"));
  // A node as an agent registers it: NVML's full product string.
  Json gpus = Json::array();
  for (int i = 0; i < 8; ++i) {
    gpus.push_back({{"index", i}, {"model", "NVIDIA H100 80GB HBM3"}, {"memoryMiB", 81559}});
  }
  Create("nodes", "",
         {{"kind", "Node"},
          {"metadata", {{"name", "real-0"}}},
          {"spec", {{"gpus", gpus}, {"layout", "nvswitch"}}}});
  Step();
  Step();
  job = Job("h");
  ASSERT_TRUE(job["status"].contains("placement")) << job.dump();
  EXPECT_EQ(job["status"]["placement"][0]["node"], "real-0");
  for (const Json& c : job["status"]["conditions"]) {
    EXPECT_NE(c.value("reason", ""), "QueueRejected") << job.dump();
  }
  EXPECT_EQ(job["status"]["message"].get<std::string>().find("unknown GPU model"),
            std::string::npos);
}

}  // namespace
}  // namespace tessera::controller

namespace tessera::controller {
namespace {

class ControllerMetricsTest : public ControllerTest {
 protected:
  // A controller exporting into registry_, with two 8-GPU nodes.
  void StartWithMetrics() {
    ControllerOptions opts;
    opts.metrics = &registry_;
    Restart(opts);
    AddNode("gpu-0", 8);
    AddNode("gpu-1", 8);
  }
  metrics::Registry registry_;
};

TEST_F(ControllerMetricsTest, ExportsSchedulingAndFleetMetricsAndExplainsPlacements) {
  StartWithMetrics();
  AddJob("fits", 1, 8);
  AddJob("waits", 3, 8);
  Step();
  std::string text = registry_.Render();
  EXPECT_THAT(text,
              ::testing::HasSubstr("tessera_scheduling_attempts_total{result=\"scheduled\"} 1\n"));
  EXPECT_THAT(text, ::testing::HasSubstr(
                        "tessera_scheduling_attempts_total{result=\"unschedulable\"} 1\n"));
  EXPECT_THAT(text, ::testing::HasSubstr(
                        "tessera_scheduling_duration_seconds_count{result=\"scheduled\"} 1\n"));
  EXPECT_THAT(text, ::testing::HasSubstr("tessera_gpus_capacity{model=\"H100\"} 16\n"));
  EXPECT_THAT(text, ::testing::HasSubstr("tessera_gpus_allocated{model=\"H100\"} 8\n"));
  EXPECT_THAT(text, ::testing::HasSubstr("tessera_gpus_healthy{model=\"H100\"} 16\n"));
  EXPECT_THAT(text, ::testing::HasSubstr("tessera_node_ready{node=\"gpu-0\"} 1\n"));
  EXPECT_THAT(text, ::testing::HasSubstr("tessera_pending_jobs{queue=\"default\"} 1\n"));
  EXPECT_THAT(
      text, ::testing::HasSubstr("tessera_job_pending_seconds{namespace=\"team-a\",name=\"waits\","
                                 "reason=\"Unschedulable\"}"));
  // describe job shows the scheduler's explanation.
  EXPECT_THAT(Job("fits")["status"]["message"].get<std::string>(),
              ::testing::HasSubstr("because pack: fullest feasible nodes first"));
}

TEST_F(ControllerMetricsTest, FleetGaugesAreRefreshedAtMostEverySecond) {
  StartWithMetrics();
  AddJob("first", 1, 8);
  Step();
  EXPECT_THAT(registry_.Render(),
              ::testing::HasSubstr("tessera_gpus_allocated{model=\"H100\"} 8\n"));
  // Bound at once, told within the second: the gauges walk every node and job, so a step in the
  // same second leaves them as they were.
  AddJob("second", 1, 8);
  Step();
  EXPECT_EQ(Job("second")["status"]["phase"], "Scheduled");
  EXPECT_THAT(registry_.Render(),
              ::testing::HasSubstr("tessera_gpus_allocated{model=\"H100\"} 8\n"));
  clock_.Advance(absl::Seconds(1));  // SchedulingController::kGaugeEvery
  Step();
  EXPECT_THAT(registry_.Render(),
              ::testing::HasSubstr("tessera_gpus_allocated{model=\"H100\"} 16\n"));
}

// A store that someone else keeps writing to: every Events() call is
// preceded by an unrelated write, as under a steady stream of API requests.
class BusyStore : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  absl::StatusOr<store::EventsResult> Events(std::string_view prefix, int64_t since,
                                             int64_t limit) override {
    if (busy && writes < 1000) {
      ++writes;
      (void)inner_.Put(absl::StrCat("/registry/checkpoints/other/c", writes), "{}");
    }
    return inner_.Events(prefix, since, limit);
  }

  bool busy = false;
  int writes = 0;
};

// A step catches up with the revision it started at and then schedules; it
// does not chase writes that keep arriving (that starved binding under load).
TEST_F(ControllerTest, StepSchedulesUnderAStreamOfWrites) {
  AddNode("n1", 8);
  AddJob("train", 1, 4);
  BusyStore busy(store_);
  auto c = SchedulingController::Create(busy, clock_, {});
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE((*c)->Start().ok());
  busy.busy = true;
  ASSERT_TRUE((*c)->Step().ok());
  EXPECT_LT(busy.writes, 10) << "the step chased the stream of writes";
  EXPECT_EQ(Job("train")["status"]["phase"], "Scheduled");
}

}  // namespace
}  // namespace tessera::controller

namespace tessera::controller {
namespace {

// Every decision reaches on_decision as one trace: a "schedule" root whose
// children are queue_sort and the scheduler's phases, with the node counts.
TEST_F(ControllerTest, EachDecisionIsOneTraceWithPhaseSpans) {
  std::vector<obs::TraceRecord> traces;
  ControllerOptions o;
  o.on_decision = [&traces](obs::TraceRecord t) { traces.push_back(std::move(t)); };
  Restart(o);
  AddNode("n1", 8);
  AddNode("n2", 8);
  AddJob("fits", 1, 4);
  AddJob("toobig", 1, 16);
  Step();
  ASSERT_GE(traces.size(), 2u);
  std::map<std::string, const obs::TraceRecord*> by_job;
  for (const obs::TraceRecord& t : traces) {
    ASSERT_FALSE(t.empty());
    EXPECT_EQ(t[0].name, "schedule");
    EXPECT_EQ(t[0].parent, -1);
    for (const obs::SpanAttribute& a : t[0].attributes) {
      if (a.key == "tessera.job") by_job[std::get<std::string>(a.value)] = &t;
    }
  }
  ASSERT_TRUE(by_job.count("fits") && by_job.count("toobig"));
  auto attr = [](const obs::SpanRecord& s, const std::string& k) -> std::string {
    for (const obs::SpanAttribute& a : s.attributes) {
      if (a.key != k) continue;
      if (auto* v = std::get_if<std::string>(&a.value)) return *v;
      if (auto* v = std::get_if<int64_t>(&a.value)) return std::to_string(*v);
    }
    return "";
  };
  const obs::TraceRecord& fits = *by_job["fits"];
  EXPECT_EQ(attr(fits[0], "tessera.result"), "scheduled");
  EXPECT_EQ(attr(fits[0], "tessera.namespace"), "team-a");
  std::vector<std::string> names;
  for (size_t i = 1; i < fits.size(); ++i) {
    EXPECT_EQ(fits[i].parent, 0);
    EXPECT_GE(fits[i].end, fits[i].start);
    names.push_back(fits[i].name);
    if (fits[i].name == "filter") {
      EXPECT_EQ(attr(fits[i], "tessera.candidates"), "2");
    }
  }
  EXPECT_EQ(names, (std::vector<std::string>{"queue_sort", "prefilter", "filter", "score",
                                             "reserve", "permit", "bind"}));
  const obs::TraceRecord& big = *by_job["toobig"];
  EXPECT_EQ(attr(big[0], "tessera.result"), "unschedulable");
  EXPECT_NE(attr(big[0], "tessera.reason"), "");
}

}  // namespace
}  // namespace tessera::controller

namespace tessera::controller {
namespace {

// A placement the controller did not write (a forged status, written past the API) is not
// adopted while the controller runs: it is removed with a Warning, and the job is placed by the
// scheduler, on GPUs no one else holds.
TEST_F(ControllerTest, APlacementItDidNotWriteIsRemovedNotAdopted) {
  AddNode("gpu-0", 8);
  AddJob("victim", 1, 8);
  Step();
  ASSERT_EQ(Job("victim")["status"]["phase"], "Scheduled");
  AddNode("gpu-1", 8);
  Step();
  Json spec = {{"groups", {{{"name", "worker"}, {"count", 1}, {"gpusPerReplica", 8}}}}};
  Create("trainingjobs", "team-a",
         {{"kind", "TrainingJob"},
          {"metadata", {{"name", "forged"}}},
          {"spec", spec},
          {"status",
           {{"phase", "Scheduled"},
            {"generation", 1},
            {"placement",
             {{{"group", "worker"},
               {"member", 0},
               {"node", "gpu-0"},
               {"gpus", {0, 1, 2, 3, 4, 5, 6, 7}},
               {"generation", 1}}}}}}});
  Step();
  Json forged = Job("forged");
  EXPECT_EQ(EventReasons("forged").front(), "PlacementIgnored");
  // Placed by the scheduler on the free node, at a new generation.
  ASSERT_EQ(forged["status"]["phase"], "Scheduled") << forged["status"].dump();
  EXPECT_EQ(forged["status"]["placement"][0]["node"], "gpu-1");
  EXPECT_GT(forged["status"]["generation"].get<int64_t>(), 1);
  EXPECT_EQ(BoundGpus(), 16);
  EXPECT_TRUE(ctl_->cluster().CheckConsistency().ok());
}

}  // namespace
}  // namespace tessera::controller
