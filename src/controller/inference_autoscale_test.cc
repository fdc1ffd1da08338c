// InferenceServices with spec.slo in the controller (inference_autoscale.cc):
// status.desiredReplicas follows the replicas' readings, the bound replicas
// follow it (grown through the QueueManager, shrunk after the stabilization
// window with GPUs and quota given back), and a service without an SLO is
// placed exactly as before.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "controller/controller_test_fixture.h"
#include "controller/scheduling_controller.h"
#include "metrics/registry.h"

namespace tessera::controller {
namespace {

class InferenceAutoscaleTest : public ControllerTest {
 protected:
  void SetUp() override {
    base_options_.metrics = &registry_;
    ControllerTest::SetUp();
    AddNode("gpu-0", 4);
    AddNode("gpu-1", 4);
  }

  void AddService(const std::string& name, Json slo, int min, int max) {
    Json spec = {{"modelVersion", "llama-v1"},
                 {"replicas", {{"min", min}, {"max", max}}},
                 {"gpusPerReplica", 1},
                 {"command", {"serve"}}};
    if (!slo.is_null()) spec["slo"] = slo;
    Create("inferenceservices", "team-a",
           {{"kind", "InferenceService"}, {"metadata", {{"name", name}}}, {"spec", spec}});
  }

  Json Svc(const std::string& name) { return Get("inferenceservices", "team-a", name); }

  static size_t Placed(const Json& svc) {
    const Json& st = svc["status"];
    return st.contains("placement") ? st["placement"].size() : 0;
  }

  // What every placed replica's node agent reports: p99 `p99` ms written now.
  void Report(const std::string& name, double p99, double rps = 10) {
    Modify("inferenceservices", "team-a", name, [&](Json& o) {
      Json& st = o["status"];
      for (const Json& m : st["placement"]) {
        st["replicaMetrics"]
          [absl::StrCat(m["group"].get<std::string>(), "-", m["member"].get<int>())] = {
              {"p99LatencyMs", p99},
              {"rps", rps},
              {"time", Timestamp(clock_.Now())},
              {"node", m["node"]},
              {"generation", st["generation"]}};
      }
    });
  }

  // `d` later, nodes alive, every replica reporting p99.
  void Tick(const std::string& name, absl::Duration d, double p99) {
    clock_.Advance(d);
    Heartbeat("gpu-0");
    Heartbeat("gpu-1");
    Report(name, p99);
    Step();
  }

  int Count(const std::vector<std::string>& v, const std::string& s) {
    return static_cast<int>(std::count(v.begin(), v.end(), s));
  }

  std::string EventMessage(const std::string& reason) {
    std::string out;
    absl::StatusOr<store::ListResult> l = store_.List(kEventsPrefix, {});
    for (const store::KeyValue& kv : l->kvs) {
      Json e = *ParseStored(kv.value);
      if (e["spec"]["reason"] == reason) out = e["spec"]["message"];
    }
    return out;
  }

  metrics::Registry registry_;
};

TEST_F(InferenceAutoscaleTest, StartsAtMinWritesDesiredAndScalesUpOnLatency) {
  AddService("svc", {{"p99LatencyMs", 100}}, 1, 8);
  Step();
  Json s = Svc("svc");
  ASSERT_EQ(s["status"]["phase"], "Scheduled");
  EXPECT_EQ(Placed(s), 1u);                      // started at replicas.min, not as many as fit
  EXPECT_EQ(s["status"]["desiredReplicas"], 1);  // no readings: holds
  EXPECT_EQ(ctl_->cluster().allocated_milli(), 1000);
  const int64_t gen = s["status"]["generation"];

  // p99 300 ms over 100: ceil(1 x 3) = 3, at most doubling: 2, at once.
  Tick("svc", absl::Seconds(5), 300);
  s = Svc("svc");
  EXPECT_EQ(s["status"]["desiredReplicas"], 2);
  EXPECT_EQ(Placed(s), 2u);
  EXPECT_EQ(s["status"]["replicas"], 2);
  EXPECT_EQ(s["status"]["generation"], gen + 1);
  EXPECT_EQ(Count(EventReasons("svc"), "ScaledUp"), 1);
  EXPECT_NE(EventMessage("ScaledUp").find("p99 300 ms over target 100 ms"), std::string::npos)
      << EventMessage("ScaledUp");
  // Then 4, then 8 (the fleet's 8 GPUs), and not beyond replicas.max.
  Tick("svc", absl::Seconds(5), 300);
  EXPECT_EQ(Placed(Svc("svc")), 4u);
  Tick("svc", absl::Seconds(5), 300);
  s = Svc("svc");
  EXPECT_EQ(Placed(s), 8u);
  EXPECT_EQ(s["status"]["desiredReplicas"], 8);
  EXPECT_EQ(ctl_->cluster().allocated_milli(), 8000);
  const sched::RunningJob* rj = ctl_->queues().running().Find("team-a/isvc.svc");
  ASSERT_NE(rj, nullptr);
  EXPECT_EQ(rj->members.size(), 8u);
  EXPECT_EQ(ctl_->stats().scale_ups, 3);
  EXPECT_TRUE(ctl_->cluster().CheckConsistency().ok());
  const std::string text = registry_.Render();
  EXPECT_NE(text.find("tessera_inference_desired_replicas{namespace=\"team-a\",name=\"svc\"} 8"),
            std::string::npos)
      << text;
}

TEST_F(InferenceAutoscaleTest, PlacedAgainItStartsAtTheReplicasItLastWanted) {
  // Scaled to 4, then unbound (suspended here; a lost node or a preemption
  // requeues it the same way) and placed again: 4 replicas at once, not
  // replicas.min.
  AddService("svc", {{"p99LatencyMs", 100}}, 1, 8);
  Step();
  Tick("svc", absl::Seconds(5), 300);
  Tick("svc", absl::Seconds(5), 300);
  ASSERT_EQ(Placed(Svc("svc")), 4u);
  auto suspend = [&](bool on) {
    Modify("inferenceservices", "team-a", "svc", [&](Json& o) { o["spec"]["suspend"] = on; });
    clock_.Advance(absl::Seconds(1));
    Heartbeat("gpu-0");
    Heartbeat("gpu-1");
    Step();
  };
  suspend(true);
  Json s = Svc("svc");
  ASSERT_EQ(s["status"]["phase"], "Suspended") << s["status"].dump();
  EXPECT_EQ(Placed(s), 0u);
  EXPECT_EQ(s["status"]["desiredReplicas"], 4);
  suspend(false);
  s = Svc("svc");
  EXPECT_EQ(s["status"]["phase"], "Scheduled") << s["status"].dump();
  EXPECT_EQ(Placed(s), 4u);
  EXPECT_EQ(ctl_->cluster().allocated_milli(), 4000);
  EXPECT_TRUE(ctl_->cluster().CheckConsistency().ok());
}

TEST_F(InferenceAutoscaleTest, GrowsOnlyWhenRoomExistsAndSaysWhy) {
  // A training job takes 6 of the 8 GPUs: the service can grow to 2 only.
  AddJob("big", 2, 3);
  AddService("svc", {{"p99LatencyMs", 100}}, 1, 8);
  Step();
  ASSERT_EQ(Placed(Svc("svc")), 1u);
  Tick("svc", absl::Seconds(5), 300);
  Tick("svc", absl::Seconds(5), 300);
  Json s = Svc("svc");
  EXPECT_EQ(Placed(s), 2u);
  EXPECT_EQ(s["status"]["desiredReplicas"], 4);  // wanted, no room
  EXPECT_EQ(ctl_->cluster().allocated_milli(), 8000);
}

TEST_F(InferenceAutoscaleTest, ScalesDownAfterTheWindowAndFreesTheGpus) {
  AddService("svc", {{"p99LatencyMs", 100}}, 1, 8);
  Step();
  Tick("svc", absl::Seconds(5), 300);
  Tick("svc", absl::Seconds(5), 300);
  ASSERT_EQ(Placed(Svc("svc")), 4u);
  const absl::Time busy = clock_.Now();
  // Load falls to p99 20 ms: ceil(4 x 0.2) = 1, but only once 5 minutes of
  // recommendations all say so.
  while (clock_.Now() - busy < absl::Minutes(5)) {
    Tick("svc", absl::Seconds(30), 20);
    ASSERT_EQ(Placed(Svc("svc")), 4u)
        << "scaled down inside the window at " << absl::FormatDuration(clock_.Now() - busy);
  }
  Tick("svc", absl::Seconds(30), 20);
  Json s = Svc("svc");
  EXPECT_EQ(s["status"]["desiredReplicas"], 1);
  ASSERT_EQ(Placed(s), 1u);
  EXPECT_EQ(s["status"]["placement"][0]["member"], 0);  // the highest ordinals went
  EXPECT_EQ(s["status"]["replicaMetrics"].size(), 1u);  // the dropped ones' readings too
  EXPECT_EQ(Count(EventReasons("svc"), "ScaledDown"), 1);
  EXPECT_NE(EventMessage("ScaledDown").find("4 -> 1 replicas"), std::string::npos)
      << EventMessage("ScaledDown");
  // GPUs and quota back: memory agrees, and a job can take the room.
  EXPECT_EQ(ctl_->cluster().allocated_milli(), 1000);
  const sched::RunningJob* rj = ctl_->queues().running().Find("team-a/isvc.svc");
  ASSERT_NE(rj, nullptr);
  EXPECT_EQ(rj->gpu_milli, 1000);
  AddJob("next", 1, 4);
  Heartbeat("gpu-0");
  Heartbeat("gpu-1");
  Step();
  EXPECT_EQ(Job("next")["status"]["phase"], "Scheduled");
  EXPECT_EQ(ctl_->stats().scale_downs, 1);
  EXPECT_TRUE(ctl_->cluster().CheckConsistency().ok());
}

TEST_F(InferenceAutoscaleTest, StaleReadingsHold) {
  AddService("svc", {{"p99LatencyMs", 100}}, 1, 8);
  Step();
  Report("svc", 500);
  clock_.Advance(absl::Seconds(31));  // the reading is stale by the next cycle
  Heartbeat("gpu-0");
  Heartbeat("gpu-1");
  Step();
  EXPECT_EQ(Placed(Svc("svc")), 1u);
  EXPECT_EQ(Svc("svc")["status"]["desiredReplicas"], 1);
}

TEST_F(InferenceAutoscaleTest, WithoutAnSloTheServiceIsPlacedAsBeforeAndNeverScaled) {
  AddService("plain", Json(), 1, 6);
  Step();
  Json s = Svc("plain");
  ASSERT_EQ(s["status"]["phase"], "Scheduled");
  EXPECT_EQ(Placed(s), 6u);  // as many as fit up to max, as today
  const Json gen = s["status"]["generation"];
  Tick("plain", absl::Seconds(5), 900);
  Tick("plain", absl::Seconds(5), 1);
  s = Svc("plain");
  EXPECT_EQ(Placed(s), 6u);
  EXPECT_FALSE(s["status"].contains("desiredReplicas"));
  EXPECT_EQ(s["status"]["generation"], gen);
  EXPECT_EQ(ctl_->stats().scale_ups + ctl_->stats().scale_downs, 0);
}

}  // namespace
}  // namespace tessera::controller
