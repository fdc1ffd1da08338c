// Elastic TrainingJobs in the controller: shrink on a lost node or GPU
// instead of a requeue, grow back when room returns, and the gang rules
// everywhere else (docs/control-plane.md, "Elastic jobs").
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "controller/controller_test_fixture.h"
#include "controller/scheduling_controller.h"
#include "metrics/registry.h"

namespace tessera::controller {
namespace {

class ElasticTest : public ControllerTest {
 protected:
  void SetUp() override {
    base_options_.elastic_grow_interval = absl::Seconds(30);
    ControllerTest::SetUp();
  }

  // Two 8-GPU nodes and a job of 4 members x 4 GPUs on both.
  void StartJob(const std::string& name, int min_replicas) {
    AddNode("gpu-0", 8);
    AddNode("gpu-1", 8);
    Json extra = Json::object();
    if (min_replicas > 0) extra["elastic"] = {{"minReplicas", min_replicas}, {"maxReplicas", 4}};
    AddJob(name, 4, 4, extra);
    Step();
    Json j = Job(name);
    ASSERT_EQ(j["status"]["phase"], "Scheduled");
    ASSERT_EQ(j["status"]["placement"].size(), 4u);
    ASSERT_EQ(j["status"]["replicas"], 4);
    ASSERT_EQ(Nodes(j), (std::set<std::string>{"gpu-0", "gpu-1"}));
    Modify("trainingjobs", "team-a", name, [](Json& o) { o["status"]["phase"] = "Running"; });
    Create("checkpoints", "team-a",
           {{"kind", "Checkpoint"},
            {"metadata", {{"name", name + "-step-100"}}},
            {"spec", {{"jobName", name}, {"step", 100}, {"path", "s3://ckpt/100"}}},
            {"status", {{"phase", "Ready"}}}});
    Step();
  }

  static std::set<std::string> Nodes(const Json& job) {
    std::set<std::string> out;
    if (!job["status"].contains("placement")) return out;
    for (const Json& m : job["status"]["placement"]) out.insert(m["node"].get<std::string>());
    return out;
  }

  // gpu-1 falls silent while gpu-0 heartbeats, until gpu-1 is evicted.
  void LoseGpu1() {
    for (int i = 0; i < 16; ++i) {
      clock_.Advance(absl::Seconds(5));
      Heartbeat("gpu-0");
      Step();
    }
    ASSERT_EQ(Get("nodes", "", "gpu-1")["status"]["phase"], "NotReady");
  }

  // Bound GPUs in the store (none twice) agree with memory.
  void CheckBindings(int gpus) {
    EXPECT_EQ(BoundGpus(), gpus);
    EXPECT_EQ(ctl_->cluster().allocated_milli(), gpus * 1000);
    EXPECT_TRUE(ctl_->cluster().CheckConsistency().ok());
  }

  int Count(const std::vector<std::string>& v, const std::string& s) {
    return static_cast<int>(std::count(v.begin(), v.end(), s));
  }
};

TEST_F(ElasticTest, LostNodeShrinksTheJobAndItGrowsBackWhenTheNodeReturns) {
  StartJob("el", 2);
  LoseGpu1();
  Json j = Job("el");
  EXPECT_EQ(j["status"]["phase"], "Running");  // kept running, not requeued
  EXPECT_EQ(j["status"]["generation"], 2);     // agents restart the survivors
  EXPECT_EQ(j["status"]["replicas"], 2);
  ASSERT_EQ(j["status"]["placement"].size(), 2u);
  EXPECT_EQ(Nodes(j), std::set<std::string>{"gpu-0"});
  for (const Json& m : j["status"]["placement"]) EXPECT_EQ(m["generation"], 2);
  EXPECT_EQ(j["status"]["resumeFrom"]["checkpoint"], "el-step-100");
  std::vector<std::string> reasons = EventReasons("el");
  EXPECT_EQ(Count(reasons, "ElasticShrink"), 1);
  EXPECT_EQ(Count(reasons, "NodeLost"), 0);
  EXPECT_EQ(ctl_->stats().elastic_shrinks, 1);
  EXPECT_EQ(ctl_->stats().requeued, 0);
  CheckBindings(8);
  // The queue's running set and charge shrank too.
  const sched::RunningJob* rj = ctl_->queues().running().Find("team-a/el");
  ASSERT_NE(rj, nullptr);
  EXPECT_EQ(rj->members.size(), 2u);
  EXPECT_EQ(rj->gpu_milli, 8000);

  // gpu-1 comes back: not at once (rate limit), then the job grows to 4.
  Heartbeat("gpu-1");
  Heartbeat("gpu-0");
  Step();
  EXPECT_EQ(Get("nodes", "", "gpu-1")["status"]["phase"], "Ready");
  const absl::Time shrunk_at = clock_.Now();
  while (Job("el")["status"]["replicas"] == 2 && clock_.Now() - shrunk_at < absl::Seconds(60)) {
    EXPECT_LT(clock_.Now() - shrunk_at, absl::Seconds(30)) << "grew before its interval";
    clock_.Advance(absl::Seconds(5));
    Heartbeat("gpu-0");
    Heartbeat("gpu-1");
    Step();
  }
  j = Job("el");
  EXPECT_EQ(j["status"]["phase"], "Running");
  EXPECT_EQ(j["status"]["generation"], 3);
  EXPECT_EQ(j["status"]["replicas"], 4);
  ASSERT_EQ(j["status"]["placement"].size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(j["status"]["placement"][i]["member"], i);
  EXPECT_EQ(Nodes(j), (std::set<std::string>{"gpu-0", "gpu-1"}));
  EXPECT_EQ(Count(EventReasons("el"), "ElasticGrow"), 1);
  EXPECT_EQ(ctl_->stats().elastic_grows, 1);
  EXPECT_EQ(ctl_->queues().running().Find("team-a/el")->gpu_milli, 16000);
  CheckBindings(16);
  // A restart rebuilds the grown binding without writing anything.
  const int64_t rev = store_.CurrentRevision();
  Restart();
  Step();
  EXPECT_EQ(store_.CurrentRevision(), rev);
  CheckBindings(16);
}

TEST_F(ElasticTest, NonElasticJobIsRequeuedAsBefore) {
  StartJob("gang", 0);
  LoseGpu1();
  Json j = Job("gang");
  EXPECT_EQ(j["status"]["phase"], "NodeLost");  // 16 GPUs do not fit on gpu-0 alone
  EXPECT_FALSE(j["status"].contains("placement"));
  EXPECT_FALSE(j["status"].contains("replicas"));
  std::vector<std::string> reasons = EventReasons("gang");
  EXPECT_EQ(Count(reasons, "NodeLost"), 1);
  EXPECT_EQ(Count(reasons, "ElasticShrink"), 0);
  EXPECT_EQ(ctl_->stats().requeued, 1);
  CheckBindings(0);
}

TEST_F(ElasticTest, ElasticJobBelowItsMinimumIsRequeued) {
  StartJob("el", 3);
  LoseGpu1();
  Json j = Job("el");
  EXPECT_EQ(j["status"]["phase"], "NodeLost");
  EXPECT_EQ(Count(EventReasons("el"), "ElasticShrink"), 0);
  EXPECT_EQ(Count(EventReasons("el"), "NodeLost"), 1);
  CheckBindings(0);
}

TEST_F(ElasticTest, UnhealthyGpuDropsOnlyTheMemberOnIt) {
  StartJob("el", 2);
  Json j = Job("el");
  int bad_member = -1, bad_gpu = -1;
  for (const Json& m : j["status"]["placement"]) {
    if (m["node"] == "gpu-1") {
      bad_member = m["member"];
      bad_gpu = m["gpus"][0];
      break;
    }
  }
  ASSERT_GE(bad_gpu, 0);
  Modify("nodes", "", "gpu-1", [&](Json& o) {
    o["status"]["gpus"] = {{{"index", bad_gpu}, {"health", "Unhealthy"}, {"message", "XID 79"}}};
  });
  Step();
  j = Job("el");
  EXPECT_EQ(j["status"]["phase"], "Running");
  EXPECT_EQ(j["status"]["replicas"], 3);
  EXPECT_EQ(j["status"]["generation"], 2);
  for (const Json& m : j["status"]["placement"]) EXPECT_NE(m["member"], bad_member);
  EXPECT_EQ(Count(EventReasons("el"), "ElasticShrink"), 1);
  CheckBindings(12);
  // gpu-1 has 3 healthy free GPUs left, one short of a member: no grow.
  clock_.Advance(absl::Seconds(31));
  Heartbeat("gpu-0");
  Heartbeat("gpu-1");
  Step();
  EXPECT_EQ(Job("el")["status"]["replicas"], 3);
  CheckBindings(12);
}

TEST_F(ElasticTest, DeletedNodeShrinksAndAPendingJobComesBeforeGrowing) {
  StartJob("el", 2);
  ASSERT_TRUE(store_.Delete(Key("nodes", "", "gpu-1")).ok());
  Step();
  Json j = Job("el");
  EXPECT_EQ(j["status"]["phase"], "Running");
  EXPECT_EQ(j["status"]["replicas"], 2);
  EXPECT_EQ(Count(EventReasons("el"), "ElasticShrink"), 1);
  CheckBindings(8);
  // A pending job waits for room; a new node arrives after the grow interval:
  // the pending job gets it, the elastic job does not grow into it.
  AddJob("next", 1, 8);
  clock_.Advance(absl::Seconds(40));
  Heartbeat("gpu-0");
  Step();
  EXPECT_EQ(Job("next")["status"]["phase"], "Queued");
  AddNode("gpu-2", 8);
  Step();
  EXPECT_EQ(Job("next")["status"]["phase"], "Scheduled");
  EXPECT_EQ(Nodes(Job("next")), std::set<std::string>{"gpu-2"});
  EXPECT_EQ(Job("el")["status"]["replicas"], 2);
  EXPECT_EQ(Count(EventReasons("el"), "ElasticGrow"), 0);
  CheckBindings(16);
}

TEST_F(ElasticTest, StartsWithItsMinimumAndGrowsWhenANodeJoins) {
  AddNode("gpu-0", 8);
  Create("queues", "",
         {{"kind", "Queue"},
          {"metadata", {{"name", "team"}}},
          {"spec", {{"gpuQuota", {{"H100", 16}}}}},
          {"status", {{"phase", "Active"}}}});
  AddJob("el", 4, 4, {{"queue", "team"}, {"elastic", {{"minReplicas", 2}, {"maxReplicas", 4}}}});
  Step();
  Json j = Job("el");
  EXPECT_EQ(j["status"]["phase"], "Scheduled");
  EXPECT_EQ(j["status"]["replicas"], 2);  // 2 of 4 fit: it starts
  // Charged what it holds, not its maximum.
  EXPECT_EQ(ctl_->queues().running().Find("team-a/el")->gpu_milli, 8000);
  const sched::QueueTree& tree = ctl_->queues().tree();
  int64_t charged = -1;
  for (size_t r = 0; r < tree.resources().size(); ++r) {
    if (tree.resources()[r] == "gpu/H100") charged = tree.usage(tree.Find("team"), r);
  }
  EXPECT_EQ(charged, 8000);
  AddNode("gpu-1", 8);
  Step();
  EXPECT_EQ(Job("el")["status"]["replicas"], 2);  // not before the grow interval
  clock_.Advance(absl::Seconds(31));
  Heartbeat("gpu-0");
  Heartbeat("gpu-1");
  Step();
  j = Job("el");
  EXPECT_EQ(j["status"]["replicas"], 4);
  EXPECT_EQ(j["status"]["generation"], 2);
  EXPECT_EQ(Nodes(j), (std::set<std::string>{"gpu-0", "gpu-1"}));
  EXPECT_EQ(Count(EventReasons("el"), "ElasticGrow"), 1);
  EXPECT_EQ(ctl_->queues().running().Find("team-a/el")->gpu_milli, 16000);
  for (size_t r = 0; r < tree.resources().size(); ++r) {
    if (tree.resources()[r] == "gpu/H100") {
      EXPECT_EQ(tree.usage(tree.Find("team"), r), 16000);
    }
  }
  CheckBindings(16);
}

TEST_F(ElasticTest, DrainedOrReconfiguredNodeShrinksTheJob) {
  StartJob("el", 2);
  // Drain = cordon + a NoExecute taint: the members there leave for good.
  Modify("nodes", "", "gpu-1", [](Json& o) {
    o["spec"]["unschedulable"] = true;
    o["spec"]["taints"] = {{{"key", "tessera.dev/drain"}, {"effect", "NoExecute"}}};
  });
  Step();
  Json j = Job("el");
  EXPECT_EQ(j["status"]["phase"], "Running");  // not requeued (Preempted)
  EXPECT_EQ(j["status"]["generation"], 2);
  EXPECT_EQ(j["status"]["replicas"], 2);
  EXPECT_EQ(Nodes(j), std::set<std::string>{"gpu-0"});
  EXPECT_EQ(j["status"]["resumeFrom"]["checkpoint"], "el-step-100");
  EXPECT_EQ(Count(EventReasons("el"), "ElasticShrink"), 1);
  EXPECT_EQ(Count(EventReasons("el"), "NodeDrained"), 0);
  EXPECT_EQ(ctl_->stats().requeued, 0);
  CheckBindings(8);
  // The drained node keeps it off: no grow back onto it.
  clock_.Advance(absl::Seconds(31));
  Heartbeat("gpu-0");
  Heartbeat("gpu-1");
  Step();
  EXPECT_EQ(Job("el")["status"]["replicas"], 2);
  // A reconfigured node (a new label) re-adds the node; a job there shrinks too.
  AddNode("gpu-2", 8);
  Step();
  clock_.Advance(absl::Seconds(31));
  Heartbeat("gpu-0");
  Heartbeat("gpu-2");
  Step();
  ASSERT_EQ(Job("el")["status"]["replicas"], 4);  // grew onto gpu-2
  Modify("nodes", "", "gpu-2", [](Json& o) { o["metadata"]["labels"]["zone"] = "b"; });
  Step();
  j = Job("el");
  EXPECT_EQ(j["status"]["phase"], "Running");
  EXPECT_EQ(j["status"]["replicas"], 2);
  EXPECT_EQ(Nodes(j), std::set<std::string>{"gpu-0"});
  EXPECT_EQ(Count(EventReasons("el"), "ElasticShrink"), 2);
  EXPECT_EQ(ctl_->stats().elastic_shrinks, 2);
  CheckBindings(8);
}

TEST_F(ElasticTest, DrainBelowTheMinimumRequeuesTheJob) {
  StartJob("el", 3);
  Modify("nodes", "", "gpu-1", [](Json& o) {
    o["spec"]["taints"] = {{{"key", "tessera.dev/drain"}, {"effect", "NoExecute"}}};
  });
  Step();
  Json j = Job("el");
  EXPECT_EQ(j["status"]["phase"], "Preempted");
  EXPECT_EQ(Count(EventReasons("el"), "ElasticShrink"), 0);
  EXPECT_EQ(Count(EventReasons("el"), "NodeDrained"), 1);
  CheckBindings(0);
}

// The elastic job "el" (4 x 4 GPUs on gpu-0 and gpu-1, minReplicas 2) runs
// at priority 0; "high" (1 x 8 GPUs, production) needs one whole node.
class ElasticPreemptionTest : public ElasticTest {
 protected:
  void SetUp() override {
    base_options_.queues.preemption.min_runtime = absl::ZeroDuration();
    base_options_.queues.preemption.grace_period = absl::Seconds(30);
    base_options_.metrics = &registry_;
    ElasticTest::SetUp();
    StartJob("el", 2);
    clock_.Advance(absl::Seconds(1));
    Beat();
    AddJob("high", 1, 8, {{"priorityClassName", "production"}});
    Step();
  }
  void TearDown() override { ctl_.reset(); }  // before the registry goes

  void Beat() {
    Heartbeat("gpu-0");
    Heartbeat("gpu-1");
  }

  static bool PreemptionPending(const Json& job) {
    for (const Json& c : job["status"]["conditions"]) {
      if (c["type"] == "PreemptionPending") return c["status"] == "True";
    }
    return false;
  }

  // The message of the last Event `reason` about `involved`.
  std::string EventMessage(const std::string& involved, const std::string& reason) {
    std::string msg;
    absl::StatusOr<store::ListResult> l = store_.List(kEventsPrefix, {});
    for (const store::KeyValue& kv : l->kvs) {
      Json e = *ParseStored(kv.value);
      if (e["spec"]["involvedObject"]["name"] == involved && e["spec"]["reason"] == reason) {
        msg = e["spec"]["message"];
      }
    }
    return msg;
  }

  // After the shrink: el keeps 2 members on one node, high holds the other.
  void CheckShrunk() {
    Json el = Job("el");
    EXPECT_EQ(el["status"]["phase"], "Running");  // never requeued
    EXPECT_EQ(el["status"]["generation"], 2);
    EXPECT_EQ(el["status"]["replicas"], 2);
    ASSERT_EQ(el["status"]["placement"].size(), 2u);
    for (const Json& m : el["status"]["placement"]) EXPECT_EQ(m["generation"], 2);
    EXPECT_EQ(el["status"]["resumeFrom"]["checkpoint"], "el-step-100");
    EXPECT_FALSE(PreemptionPending(el));
    const std::set<std::string> el_nodes = Nodes(el);
    ASSERT_EQ(el_nodes.size(), 1u);
    const std::vector<std::string> reasons = EventReasons("el");
    EXPECT_EQ(Count(reasons, "ElasticShrink"), 1);
    EXPECT_EQ(Count(reasons, "Preempted"), 0);
    const std::string msg = EventMessage("el", "ElasticShrink");
    EXPECT_NE(msg.find("preempted by team-a/high; elastic: dropped 2 member(s) on "),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("running 2 of 4 replicas (minReplicas 2) (generation 2)"), std::string::npos)
        << msg;
    Json high = Job("high");
    EXPECT_EQ(high["status"]["phase"], "Scheduled");
    const std::set<std::string> high_nodes = Nodes(high);
    ASSERT_EQ(high_nodes.size(), 1u);
    EXPECT_FALSE(el_nodes.contains(*high_nodes.begin()));  // the GPUs el gave up
    EXPECT_EQ(ctl_->stats().preempt_shrinks, 1);
    EXPECT_EQ(ctl_->stats().elastic_shrinks, 1);
    EXPECT_EQ(ctl_->stats().preempted, 0);
    EXPECT_EQ(ctl_->queues().running().Find("team-a/el")->gpu_milli, 8000);
    CheckBindings(16);
    const std::string text = registry_.Render();
    EXPECT_NE(
        text.find("tessera_elastic_resizes_total{direction=\"shrink\",reason=\"Preempted\"} 1"),
        std::string::npos)
        << text;
    EXPECT_NE(text.find("tessera_preempted_gpus_total 8\n"), std::string::npos);
  }

  metrics::Registry registry_;
};

TEST_F(ElasticPreemptionTest, VictimIsSignalledThenShrunkAtItsDeadline) {
  // Signalled: it keeps all its members through the grace period.
  Json el = Job("el");
  EXPECT_TRUE(PreemptionPending(el));
  EXPECT_EQ(el["status"]["replicas"], 4);
  const std::string signal = EventMessage("el", "Preempting");
  EXPECT_NE(signal.find("checkpoint now: 2 member(s) on gpu-"), std::string::npos) << signal;
  EXPECT_NE(signal.find("preempted for team-a/high; elastic: shrunk at"), std::string::npos);
  EXPECT_EQ(Job("high")["status"]["phase"], "Queued");
  CheckBindings(16);
  clock_.Advance(absl::Seconds(31));
  Beat();
  Step();
  CheckShrunk();
  // A restart rebuilds both bindings from the store without writing anything.
  const int64_t rev = store_.CurrentRevision();
  Restart();
  Step();
  EXPECT_EQ(store_.CurrentRevision(), rev);
  CheckBindings(16);
  EXPECT_EQ(ctl_->queues().running().Find("team-a/el")->gpu_milli, 8000);
}

TEST_F(ElasticPreemptionTest, VictimWhoseMembersExitIsShrunkBeforeItsDeadline) {
  clock_.Advance(absl::Seconds(5));
  Beat();
  // The agents passed the signal on; every member checkpointed and exited.
  ReportJob("el", api::MemberState::kExited, 0);
  Step();
  Step();  // the cycle the exit asked for
  CheckShrunk();
}

TEST_F(ElasticTest, MaxReplicasMustMatchTheGroups) {
  AddNode("gpu-0", 8);
  AddJob("bad", 4, 1, {{"elastic", {{"minReplicas", 2}, {"maxReplicas", 8}}}});
  Step();
  Json j = Job("bad");
  EXPECT_EQ(j["status"]["phase"], "Failed");
  EXPECT_NE(j["status"]["message"].get<std::string>().find("spec.elastic.maxReplicas"),
            std::string::npos);
}

}  // namespace
}  // namespace tessera::controller
