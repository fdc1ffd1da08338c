// The queueing layer inside the controller, over the real (memory) store:
// Queue objects become the live tree, quotas hold with many jobs, a
// higher-priority job preempts (checkpoint signal, then Preempted and
// requeued from the last Checkpoint), queue changes apply without a restart,
// and a restart rebuilds the tree from the store.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "controller/controller_test_fixture.h"
#include "controller/queue_codec.h"
#include "metrics/registry.h"

namespace tessera::controller {
namespace {

using ::testing::HasSubstr;

class QueueControllerTest : public ControllerTest {
 protected:
  void AddQueue(const std::string& name, Json spec) {
    Create("queues", "",
           {{"kind", "Queue"},
            {"metadata", {{"name", name}}},
            {"spec", std::move(spec)},
            {"status", {{"phase", "Active"}}}});
  }
  // One 8-GPU node full with a development-priority job "low" in queue
  // "research"; preemption with no minimum runtime and the given grace.
  void RunLowPriorityJob(absl::Duration grace) {
    base_options_.queues.preemption.min_runtime = absl::ZeroDuration();
    base_options_.queues.preemption.grace_period = grace;
    Restart();
    AddNode("gpu-0", 8);
    AddQueue("research", {{"gpuQuota", {{"H100", 8}}}});
    AddJob("low", 1, 8, {{"queue", "research"}, {"priorityClassName", "development"}});
    Step();
    ASSERT_EQ(Job("low")["status"]["phase"], "Scheduled");
  }
  // GPUs bound per queue, from the store.
  std::map<std::string, int> BoundByQueue() {
    std::map<std::string, int> out;
    absl::StatusOr<store::ListResult> l = store_.List(kTrainingJobsPrefix, {});
    for (const store::KeyValue& kv : l->kvs) {
      Json j = *ParseStored(kv.value);
      if (!j["status"].contains("placement")) continue;
      for (const Json& m : j["status"]["placement"]) {
        out[j["spec"].value("queue", "default")] += static_cast<int>(m["gpus"].size());
      }
    }
    return out;
  }
  // Two nodes of 8 GPUs, each full with a development-priority job ("low1",
  // "low2") in queue "research"; preemption with no minimum runtime.
  void TwoDevelopmentJobs(absl::Duration grace) {
    base_options_.queues.preemption.min_runtime = absl::ZeroDuration();
    base_options_.queues.preemption.grace_period = grace;
    Restart();
    AddNode("gpu-0", 8);
    AddNode("gpu-1", 8);
    AddQueue("research", {{"gpuQuota", {{"H100", 16}}}});
    for (const char* name : {"low1", "low2"}) {
      AddJob(name, 1, 8, {{"queue", "research"}, {"priorityClassName", "development"}});
    }
    Step();
    ASSERT_EQ(Job("low1")["status"]["phase"], "Scheduled");
    ASSERT_EQ(Job("low2")["status"]["phase"], "Scheduled");
  }
  // Time passes in 5 s steps with both nodes' heartbeats and a controller step.
  void Pass(absl::Duration d) {
    for (absl::Duration t; t < d; t += absl::Seconds(5)) {
      clock_.Advance(absl::Seconds(5));
      Heartbeat("gpu-0");
      Heartbeat("gpu-1");
      Step();
    }
  }
  // A Ready checkpoint of `job`, written now (creationTimestamp).
  void Checkpoint(const std::string& job, int step) {
    Create("checkpoints", "team-a",
           {{"kind", "Checkpoint"},
            {"metadata",
             {{"name", absl::StrCat(job, "-step-", step)},
              {"creationTimestamp", Timestamp(clock_.Now())}}},
            {"spec", {{"jobName", job}, {"step", step}, {"path", "/ckpt"}}},
            {"status", {{"phase", "Ready"}}}});
  }
  int CountPhase(const std::string& phase) {
    int n = 0;
    absl::StatusOr<store::ListResult> l = store_.List(kTrainingJobsPrefix, {});
    for (const store::KeyValue& kv : l->kvs)
      n += (*ParseStored(kv.value))["status"]["phase"] == phase;
    return n;
  }
};

TEST_F(QueueControllerTest, QuotaHoldsWithManyJobsAndTheWaitSaysWhy) {
  for (int i = 0; i < 8; ++i) AddNode(absl::StrCat("gpu-", i), 8);  // 64 GPUs
  AddQueue("org", {{"gpuQuota", {{"H100", 48}}}});
  AddQueue("team-a", {{"parent", "org"}, {"gpuQuota", {{"H100", 16}}}});
  AddQueue("team-b", {{"parent", "org"}, {"gpuQuota", {{"H100", 24}}}, {"borrowing", true}});
  for (int i = 0; i < 40; ++i) AddJob(absl::StrCat("a", i), 1, 2, {{"queue", "team-a"}});
  for (int i = 0; i < 40; ++i) AddJob(absl::StrCat("b", i), 1, 2, {{"queue", "team-b"}});
  for (int s = 0; s < 3; ++s) Step();
  std::map<std::string, int> bound = BoundByQueue();
  EXPECT_EQ(bound["team-a"], 16);  // never more than its quota
  // team-b may borrow what team-a leaves of org's 48, but org never exceeds 48.
  EXPECT_EQ(bound["team-b"], 32);
  EXPECT_EQ(BoundGpus(), 48);
  Json a = Job("a39");
  EXPECT_EQ(a["status"]["phase"], "Queued");
  EXPECT_EQ(a["status"]["reason"], "OverQuota");  // the bounded class; the prose follows
  const std::string msg = a["status"]["message"];
  EXPECT_THAT(msg, HasSubstr("waiting: queue team-a over quota"));
  EXPECT_THAT(msg, HasSubstr("16 H100 GPUs"));
  bool cond = false;
  for (const Json& c : a["status"]["conditions"]) {
    if (c["reason"] == "Unschedulable" &&
        c["message"].get<std::string>().find("over quota") != std::string::npos) {
      cond = true;
    }
  }
  EXPECT_TRUE(cond) << a["status"].dump();
  // Queue status for `tessera top queues`.
  Json qa = Get("queues", "", "team-a");
  EXPECT_EQ(qa["status"]["gpusAllocated"]["H100"], 16.0);
  EXPECT_EQ(qa["status"]["admittedJobs"], 8);
  EXPECT_EQ(qa["status"]["pendingJobs"], 32);
  EXPECT_GT(qa["status"]["fairShare"].get<double>(), 0.0);
  // Jobs end: the queue's freed quota goes to its own waiting jobs.
  for (int i = 0; i < 40; ++i) {
    Json j = Job(absl::StrCat("a", i));
    if (j["status"]["phase"] == "Scheduled") {
      Modify("trainingjobs", "team-a", absl::StrCat("a", i),
             [](Json& o) { o["status"]["phase"] = "Succeeded"; });
    }
  }
  Step();
  EXPECT_EQ(BoundByQueue()["team-a"], 16);
  EXPECT_EQ(CountPhase("Succeeded"), 8);
  EXPECT_TRUE(ctl_->cluster().CheckConsistency().ok());
}

TEST_F(QueueControllerTest, HigherPriorityPreemptsAndVictimResumesFromCheckpoint) {
  ASSERT_NO_FATAL_FAILURE(RunLowPriorityJob(absl::Seconds(30)));
  Create("checkpoints", "team-a",
         {{"kind", "Checkpoint"},
          {"metadata", {{"name", "low-step-7"}}},
          {"spec", {{"jobName", "low"}, {"step", 7}, {"path", "/ckpt/low/7"}}},
          {"status", {{"phase", "Ready"}}}});
  clock_.Advance(absl::Seconds(1));
  Heartbeat("gpu-0");
  AddJob("high", 1, 8, {{"queue", "research"}, {"priorityClassName", "production"}});
  Step();
  // The victim is told to checkpoint; it keeps its GPUs during the grace period.
  Json low = Job("low");
  EXPECT_EQ(low["status"]["phase"], "Scheduled");
  bool signalled = false;
  for (const Json& c : low["status"]["conditions"]) {
    signalled |= c["type"] == "PreemptionPending" && c["status"] == "True";
  }
  EXPECT_TRUE(signalled) << low["status"].dump();
  EXPECT_THAT(Job("high")["status"]["message"].get<std::string>(),
              HasSubstr("admitted after preemption"));
  EXPECT_EQ(BoundGpus(), 8);
  clock_.Advance(absl::Seconds(31));
  Heartbeat("gpu-0");
  Step();
  low = Job("low");
  EXPECT_EQ(low["status"]["phase"], "Preempted");
  EXPECT_FALSE(low["status"].contains("placement"));
  EXPECT_EQ(low["status"]["resumeFrom"]["checkpoint"], "low-step-7");
  std::string preempted_msg;
  absl::StatusOr<store::ListResult> events = store_.List(kEventsPrefix, {});
  ASSERT_TRUE(events.ok());
  for (const store::KeyValue& kv : events->kvs) {
    Json e = *ParseStored(kv.value);
    if (e["spec"]["reason"] == "Preempted") preempted_msg = e["spec"]["message"];
  }
  EXPECT_THAT(preempted_msg, HasSubstr("preempted by team-a/high"));
  EXPECT_THAT(preempted_msg, HasSubstr("will resume from checkpoint low-step-7 (step 7)"));
  Json high = Job("high");
  EXPECT_EQ(high["status"]["phase"], "Scheduled");
  EXPECT_EQ(BoundGpus(), 8);
  std::vector<std::string> reasons = EventReasons("low");
  EXPECT_NE(std::find(reasons.begin(), reasons.end(), "Preempting"), reasons.end());
  EXPECT_NE(std::find(reasons.begin(), reasons.end(), "Preempted"), reasons.end());
  // The victim waits again and runs, with a new generation, once the preemptor ends.
  Modify("trainingjobs", "team-a", "high", [](Json& o) { o["status"]["phase"] = "Succeeded"; });
  Step();
  low = Job("low");
  EXPECT_EQ(low["status"]["phase"], "Scheduled");
  EXPECT_EQ(low["status"]["generation"], 2);
  EXPECT_EQ(ctl_->stats().preempted, 1);
}

bool ConditionTrueIn(const Json& obj, const std::string& type) {
  if (!obj["status"].contains("conditions")) return false;
  for (const Json& c : obj["status"]["conditions"]) {
    if (c["type"] == type) return c["status"] == "True";
  }
  return false;
}

TEST_F(QueueControllerTest, VictimThatExitsOnTheSignalHandsItsGpusOverEarly) {
  ASSERT_NO_FATAL_FAILURE(RunLowPriorityJob(absl::Seconds(300)));
  clock_.Advance(absl::Seconds(1));
  AddJob("high", 1, 8, {{"queue", "research"}, {"priorityClassName", "production"}});
  Step();
  ASSERT_EQ(Job("high")["status"].value("phase", ""), "Queued");
  // 5 s later the victim's member has checkpointed and exited (code 0, which
  // is not success here: the agent leaves the phase alone while preempting).
  clock_.Advance(absl::Seconds(5));
  Heartbeat("gpu-0");
  ReportJob("low", api::MemberState::kExited, 0);
  Step();
  Json low = Job("low");
  EXPECT_EQ(low["status"]["phase"], "Preempted") << low["status"].dump();
  EXPECT_FALSE(low["status"].contains("placement"));
  EXPECT_EQ(Job("high")["status"]["phase"], "Scheduled");  // 295 s before the deadline
  EXPECT_EQ(BoundGpus(), 8);
  EXPECT_EQ(ctl_->stats().preempted, 1);
}

TEST_F(QueueControllerTest, RestartCarriesAPreemptionInFlightOn) {
  // Two development jobs fill two nodes; "high" preempts "low1", whose
  // checkpoint is fresher. During the grace period "low2" checkpoints too
  // (now the cheaper victim) and the controller restarts: the new one must
  // finish the preemption it finds in the store, not search again and
  // signal a second victim.
  ASSERT_NO_FATAL_FAILURE(TwoDevelopmentJobs(absl::Seconds(300)));
  Pass(absl::Minutes(10));
  Checkpoint("low1", 1);
  Pass(absl::Minutes(1));
  AddJob("high", 1, 8, {{"queue", "research"}, {"priorityClassName", "production"}});
  Step();
  Json low1 = Job("low1");
  ASSERT_TRUE(low1["status"].contains("preemption")) << low1["status"].dump();
  EXPECT_EQ(low1["status"]["preemption"]["preemptor"], "team-a/high");
  Pass(absl::Minutes(1));
  Checkpoint("low2", 1);
  Restart();
  Step();
  EXPECT_EQ(ctl_->stats().preemptions_resumed, 1);
  EXPECT_THAT(Job("high")["status"]["message"].get<std::string>(),
              HasSubstr("admitted after preemption"));
  Pass(absl::Minutes(5));  // through the rest of the grace period
  low1 = Job("low1");
  EXPECT_EQ(low1["status"]["phase"], "Preempted") << low1["status"].dump();
  EXPECT_FALSE(low1["status"].contains("preemption"));
  EXPECT_EQ(Job("high")["status"]["phase"], "Scheduled");
  Json low2 = Job("low2");
  EXPECT_EQ(low2["status"]["phase"], "Scheduled");
  EXPECT_EQ(low2["status"]["generation"], 1);
  EXPECT_FALSE(ConditionTrueIn(low2, "PreemptionPending")) << low2["status"].dump();
  const std::vector<std::string> low1_events = EventReasons("low1");
  EXPECT_EQ(std::count(low1_events.begin(), low1_events.end(), "Preempting"), 1);
  const std::vector<std::string> low2_events = EventReasons("low2");
  EXPECT_EQ(std::count(low2_events.begin(), low2_events.end(), "Preempting"), 0);
  EXPECT_EQ(BoundGpus(), 16);
}

TEST_F(QueueControllerTest, RestartSparesAVictimWhosePreemptorIsGone) {
  // The preemptor is deleted during the grace period, then the controller
  // restarts: the victim runs on (as the running controller spares a
  // cancelled preemptor's victims), not stopped at the recorded deadline.
  ASSERT_NO_FATAL_FAILURE(TwoDevelopmentJobs(absl::Seconds(60)));
  Pass(absl::Minutes(1));
  AddJob("high", 1, 8, {{"queue", "research"}, {"priorityClassName", "production"}});
  Step();
  ASSERT_TRUE(ConditionTrueIn(Job("low1"), "PreemptionPending") ||
              ConditionTrueIn(Job("low2"), "PreemptionPending"));
  ASSERT_TRUE(store_.Delete(Key("trainingjobs", "team-a", "high")).ok());
  Restart();
  Pass(absl::Minutes(2));  // past the recorded deadline
  EXPECT_EQ(ctl_->stats().preemptions_resumed, 0);
  for (const char* name : {"low1", "low2"}) {
    const Json job = Job(name);
    EXPECT_EQ(job["status"]["phase"], "Scheduled") << name;
    EXPECT_EQ(job["status"]["generation"], 1) << name << ": stopped and placed again";
    const std::vector<std::string> events = EventReasons(name);
    EXPECT_EQ(std::count(events.begin(), events.end(), "Preempted"), 0) << name;
  }
  EXPECT_EQ(BoundGpus(), 16);
}

TEST_F(QueueControllerTest, RestartRemembersWhoCheckpointed) {
  // Two equal development jobs; "low2" checkpoints, then the controller
  // restarts. The new one must still see that preempting "low2" loses less
  // work (its run's start and checkpoint come from the store, not from the
  // restart), so the production job takes "low2", not "low1".
  ASSERT_NO_FATAL_FAILURE(TwoDevelopmentJobs(absl::Seconds(30)));
  Pass(absl::Minutes(20));
  Checkpoint("low2", 1);
  Pass(absl::Minutes(5));
  Restart();
  AddJob("high", 1, 8, {{"queue", "research"}, {"priorityClassName", "production"}});
  Step();
  EXPECT_FALSE(ConditionTrueIn(Job("low1"), "PreemptionPending"));
  EXPECT_TRUE(ConditionTrueIn(Job("low2"), "PreemptionPending")) << Job("low2")["status"].dump();
}

TEST_F(QueueControllerTest, ExitsOfAJobNotBeingPreemptedFinishIt) {
  AddNode("gpu-0", 8);
  AddJob("a", 1, 8);
  Step();
  ASSERT_EQ(Job("a")["status"]["phase"], "Scheduled");
  // Without the PreemptionPending condition, exits are the job's end, not a
  // preemption's: it succeeded and gives its GPUs back; it is not requeued.
  ReportJob("a", api::MemberState::kExited, 0);
  Step();
  EXPECT_EQ(Job("a")["status"]["phase"], "Succeeded");
  EXPECT_EQ(BoundGpus(), 0);
  EXPECT_EQ(ctl_->stats().requeued, 0);
}

TEST_F(QueueControllerTest, QueueChangesApplyLiveAndRestartRebuildsTheTree) {
  for (int i = 0; i < 4; ++i) AddNode(absl::StrCat("gpu-", i), 8);
  AddQueue("team-a", {{"gpuQuota", {{"H100", 8}}}});
  for (int i = 0; i < 10; ++i) AddJob(absl::StrCat("j", i), 1, 4, {{"queue", "team-a"}});
  Step();
  EXPECT_EQ(BoundGpus(), 8);
  // Raise the quota through the object: no restart.
  Modify("queues", "", "team-a", [](Json& o) { o["spec"]["gpuQuota"]["H100"] = 24; });
  Step();
  EXPECT_EQ(BoundGpus(), 24);
  // Restart: the tree comes back from the store and the quota still holds.
  Restart();
  Step();
  EXPECT_EQ(BoundGpus(), 24);
  EXPECT_EQ(ctl_->stats().restored, 6);
  absl::StatusOr<sched::QueueStatus> st = ctl_->queues().Queue("team-a");
  ASSERT_TRUE(st.ok());
  const sched::QueueTree& tree = ctl_->queues().tree();
  EXPECT_EQ(tree.usage(tree.Find("team-a"), tree.FindResource("gpu/H100")), 24000);
  AddJob("late", 1, 4, {{"queue", "team-a"}});
  Step();
  EXPECT_THAT(Job("late")["status"]["message"].get<std::string>(), HasSubstr("over quota"));
  EXPECT_EQ(BoundGpus(), 24);
  // Deleting the Queue object leaves an implicit queue without quota.
  ASSERT_TRUE(store_.Delete(Key("queues", "", "team-a")).ok());
  Step();
  EXPECT_EQ(BoundGpus(), 32);
}

TEST_F(QueueControllerTest, RestartResumesFairShareHistory) {
  for (int i = 0; i < 2; ++i) AddNode(absl::StrCat("gpu-", i), 8);
  AddQueue("team-a", {{"gpuQuota", {{"H100", 8}}}});
  AddQueue("team-b", {{"gpuQuota", {{"H100", 8}}}});
  AddJob("a", 1, 8, {{"queue", "team-a"}});
  for (int m = 0; m < 90; ++m) {  // team-a holds half the fleet for 90 minutes
    Step();
    clock_.Advance(absl::Minutes(1));
    for (int i = 0; i < 2; ++i) Heartbeat(absl::StrCat("gpu-", i));
  }
  Step();
  ASSERT_EQ(BoundGpus(), 8);
  const sched::QueueStatus a = *ctl_->queues().Queue("team-a");
  const sched::QueueStatus b = *ctl_->queues().Queue("team-b");
  ASSERT_GT(a.decayed_usage, 0.3);
  ASSERT_GT(b.credit, 0);
  Json stored = Get("queues", "", "team-a");
  EXPECT_NEAR(stored["status"]["decayedUsage"].get<double>(), a.decayed_usage, 1e-6);
  Restart();
  Step();
  EXPECT_NEAR(ctl_->queues().Queue("team-a")->decayed_usage, a.decayed_usage, 1e-3);
  EXPECT_NEAR(ctl_->queues().Queue("team-b")->credit, b.credit, 1e-3);
}

TEST_F(QueueControllerTest, ExportsPerQueueMetrics) {
  metrics::Registry registry;
  base_options_.metrics = &registry;
  Restart();
  AddNode("gpu-0", 8);
  AddQueue("team-a", {{"gpuQuota", {{"H100", 4}}}, {"weight", 2}});
  AddJob("a", 1, 4, {{"queue", "team-a"}});
  AddJob("b", 1, 4, {{"queue", "team-a"}});
  Step();
  const std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("tessera_queue_gpus_allocated{queue=\"team-a\",model=\"H100\"} 4\n"));
  EXPECT_THAT(text,
              HasSubstr("tessera_queue_gpu_quota_guaranteed{queue=\"team-a\",model=\"H100\"} 4\n"));
  EXPECT_THAT(
      text,
      HasSubstr("tessera_queue_gpu_quota_borrowing_limit{queue=\"team-a\",model=\"H100\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("tessera_queue_fair_share{queue=\"team-a\"}"));
  EXPECT_THAT(text, HasSubstr("tessera_queue_burst_credit_gpu_seconds{queue=\"team-a\"}"));
  EXPECT_THAT(text, HasSubstr("tessera_pending_jobs{queue=\"team-a\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("# HELP tessera_queue_fair_share "));
}

TEST_F(QueueControllerTest, IdleStepsDoNotRetryEveryPendingJob) {
  AddNode("gpu-0", 8);
  AddJob("a", 1, 8);
  AddJob("b", 1, 8);
  Step();
  Step();  // sees the events of its own writes
  const int64_t attempts = ctl_->stats().cycles;
  Step();
  EXPECT_EQ(ctl_->stats().cycles, attempts);  // nothing changed: no cycle
  clock_.Advance(absl::Seconds(6));           // past ControllerOptions::idle_cycle
  Step();
  EXPECT_GT(ctl_->stats().cycles, attempts);
  Modify("trainingjobs", "team-a", "a", [](Json& o) { o["status"]["phase"] = "Succeeded"; });
  Step();
  EXPECT_EQ(Job("b")["status"]["phase"], "Scheduled");
}

TEST(QueueCodecTest, InvalidQueueChangesNameTheField) {
  sched::QueueManagerConfig base;
  auto q = [](const std::string& name, Json spec) {
    return Json{{"kind", "Queue"}, {"metadata", {{"name", name}}}, {"spec", std::move(spec)}};
  };
  std::vector<Json> stored = {q("org", {{"gpuQuota", {{"H100", 16}}}}),
                              q("team-a", {{"parent", "org"}, {"gpuQuota", {{"H100", 8}}}})};
  EXPECT_TRUE(ValidateQueueChange(base, stored, "team-b", nullptr).ok());
  Json ok = q("team-b", {{"parent", "org"}, {"gpuQuota", {{"H100", 8}}}});
  EXPECT_TRUE(ValidateQueueChange(base, stored, "team-b", &ok).ok());
  Json orphan = q("team-b", {{"parent", "nope"}});
  absl::Status s = ValidateQueueChange(base, stored, "team-b", &orphan);
  EXPECT_THAT(std::string(s.message()), HasSubstr("spec.parent: unknown queue \"nope\""));
  Json big = q("team-b", {{"parent", "org"}, {"gpuQuota", {{"H100", 9}}}});
  s = ValidateQueueChange(base, stored, "team-b", &big);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("gpu/H100"));
  Json cycle = q("org", {{"parent", "team-a"}});
  EXPECT_THAT(std::string(ValidateQueueChange(base, stored, "org", &cycle).message()),
              HasSubstr("cycle"));
  s = ValidateQueueChange(base, stored, "org", nullptr);
  EXPECT_THAT(std::string(s.message()), HasSubstr("deleting queue \"org\""));
  Json bad = q("x", {{"quotas", {{"gpu/H100", {{"guaranteed", -1}}}}}});
  EXPECT_THAT(std::string(ValidateQueueChange(base, stored, "x", &bad).message()),
              HasSubstr("spec.quotas.gpu/H100.guaranteed: must be a number >= 0"));
  Json unk = q("x", {{"quotas", {{"tpu", {{"guaranteed", 1}}}}}});
  EXPECT_THAT(std::string(ValidateQueueChange(base, stored, "x", &unk).message()),
              HasSubstr("spec.quotas.tpu: unknown resource"));
}

TEST_F(QueueControllerTest, AJobNamingAnUnknownQueueWaitsAndIsToldTheNearestOne) {
  // Queues are configured: a typo is not a new queue without quota.
  AddNode("gpu-0", 8);
  AddQueue("research", {{"gpuQuota", {{"H100", 4}}}});
  AddJob("typo", 1, 8, {{"queue", "reserch"}});
  AddJob("plain", 1, 2);  // no spec.queue: `default` stays implicit, and it holds 2 GPUs
  Step();
  Step();
  const Json typo = Job("typo");
  EXPECT_FALSE(typo["status"].contains("placement"));
  EXPECT_EQ(typo["status"]["message"],
            "waiting: spec.queue: unknown queue \"reserch\"; did you mean \"research\"?");
  EXPECT_THAT(EventReasons("typo"), ::testing::Contains("QueueRejected"));
  EXPECT_TRUE(Job("plain")["status"].contains("placement"));
  EXPECT_EQ(BoundGpus(), 2);
  // Once the queue exists the refusal is gone at once, although the job still waits (for GPUs).
  AddQueue("reserch", {{"gpuQuota", {{"H100", 8}}}});
  Step();
  Step();
  Json waiting = Job("typo");
  EXPECT_FALSE(waiting["status"].contains("placement"));
  EXPECT_EQ(waiting["status"]["message"].get<std::string>().find("unknown queue"),
            std::string::npos)
      << waiting.dump();
  for (const Json& c : waiting["status"]["conditions"]) {
    EXPECT_NE(c.value("reason", ""), "QueueRejected") << waiting.dump();
  }
  // And it runs, within its queue's quota, when the GPUs are free.
  ASSERT_TRUE(store_.Delete(Key("trainingjobs", "team-a", "plain")).ok());
  Step();
  Step();
  EXPECT_TRUE(Job("typo")["status"].contains("placement")) << Job("typo").dump();
}

TEST_F(QueueControllerTest, WithoutAnyQueueConfiguredEveryQueueNameIsImplicit) {
  AddNode("gpu-0", 8);
  AddJob("a", 1, 4, {{"queue", "team-x"}});
  Step();
  Step();
  EXPECT_TRUE(Job("a")["status"].contains("placement")) << Job("a").dump();
}

// A job that no placement can ever hold (24 GPUs on a 16-GPU fleet) says so once, as a Warning
// Event, and in a word; a job that only waits for room gets no Warning.
TEST_F(ControllerTest, AJobThatCanNeverRunGetsOneWarningAndSaysUnschedulable) {
  AddNode("gpu-0", 8);
  AddNode("gpu-1", 8);
  AddJob("fits", 2, 8);
  AddJob("never", 3, 8);
  Step();
  AddJob("later", 1, 8);         // waits for room behind "fits"
  for (int i = 0; i < 3; ++i) {  // more cycles: the Warning is not repeated
    clock_.Advance(absl::Seconds(1));
    Heartbeat("gpu-0");
    Heartbeat("gpu-1");
    Step();
  }
  const Json never = Job("never");
  EXPECT_EQ(never["status"]["reason"], "Unschedulable") << never["status"].dump();
  const std::vector<std::string> reasons = EventReasons("never");
  EXPECT_EQ(std::count(reasons.begin(), reasons.end(), "Unschedulable"), 1);
  absl::StatusOr<store::ListResult> events = store_.List(kEventsPrefix, {});
  ASSERT_TRUE(events.ok());
  for (const store::KeyValue& kv : events->kvs) {
    const Json e = *ParseStored(kv.value);
    if (e["spec"]["reason"] != "Unschedulable") continue;
    EXPECT_EQ(e["spec"]["involvedObject"]["name"], "never") << e.dump();
    EXPECT_EQ(e["spec"]["type"], "Warning") << e.dump();
  }
  EXPECT_NE(Job("later")["status"].value("reason", ""), "Unschedulable");
}

}  // namespace
}  // namespace tessera::controller
