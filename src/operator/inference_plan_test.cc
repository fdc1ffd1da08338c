#include "operator/inference_plan.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tessera::op {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1'800'000'000);

Json Service(const std::string& mv = "v1") {
  return {{"apiVersion", "tessera.dev/v1"},
          {"kind", "InferenceService"},
          {"metadata", {{"name", "chat"}, {"namespace", "team"}, {"uid", "s-1"}}},
          {"spec",
           {{"modelVersion", mv},
            {"image", "ghcr.io/acme/serve:1"},
            {"replicas", {{"min", 2}, {"max", 4}}},
            {"gpusPerReplica", 1}}}};
}

Json Model(const std::string& name) {
  return {{"metadata", {{"name", name}, {"namespace", "team"}}},
          {"spec", {{"model", "llama"}, {"version", name}, {"artifactPath", "/models/" + name}}}};
}

struct World {
  Json svc = Service();
  std::vector<Json> pods;
  Json model = Model("v1");
  bool model_exists = true;
  int desired = 2;

  InferencePlan Plan() const {
    InferenceInputs in;
    in.service = &svc;
    for (const Json& p : pods) in.pods.push_back(&p);
    in.service_object_exists = true;
    in.model_version = model_exists ? &model : nullptr;
    in.desired = desired;
    in.now = kNow;
    return PlanInferenceService(in, GangOptions{});
  }
  void Apply(const InferencePlan& plan) {
    if (plan.status) svc["status"] = *plan.status;
    for (const ObjectName& n : plan.delete_pods) {
      std::erase_if(pods, [&](const Json& p) { return p["metadata"]["name"] == n.name; });
    }
    for (const Json& p : plan.create_pods) pods.push_back(p);
  }
  // The kubelet's part: every Pod Ready.
  void AllReady() {
    for (Json& p : pods) p["status"] = {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}};
  }
  int Ready() const {
    return static_cast<int>(
        std::count_if(pods.begin(), pods.end(), [](const Json& p) { return PodReady(p); }));
  }
};

TEST(InferencePlanTest, CreatesReplicasOfTheModelVersionWithItsPath) {
  World w;
  InferencePlan plan = w.Plan();
  ASSERT_EQ(plan.create_pods.size(), 2u);
  const Json& p = plan.create_pods[1];
  EXPECT_EQ(p["metadata"]["name"], "chat-v1-1");
  EXPECT_EQ(p["spec"]["schedulerName"], "tessera");
  EXPECT_EQ(p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"], "1");
  bool path = false;
  for (const Json& e : p["spec"]["containers"][0]["env"]) {
    if (e["name"] == "TESSERA_MODEL_PATH") path = e["value"] == "/models/v1";
  }
  EXPECT_TRUE(path);
  ASSERT_TRUE(plan.status);
  EXPECT_EQ((*plan.status)["phase"], "Deploying");
  w.Apply(plan);
  w.AllReady();
  w.Apply(w.Plan());
  EXPECT_EQ(w.svc["status"]["phase"], "Ready");
  EXPECT_EQ(w.svc["status"]["readyReplicas"], 2);
  EXPECT_EQ(w.svc["status"]["modelVersion"], "v1");
}

TEST(InferencePlanTest, ScalesToDesiredUpAndDown) {
  World w;
  w.Apply(w.Plan());
  w.desired = 4;
  w.Apply(w.Plan());
  EXPECT_EQ(w.pods.size(), 4u);
  w.desired = 3;
  InferencePlan down = w.Plan();
  ASSERT_EQ(down.delete_pods.size(), 1u);
  EXPECT_EQ(down.delete_pods[0].name, "chat-v1-3");
}

// Property: at every step of a rollout Ready replicas stay >= desired, at most desired + 1
// replicas exist, and the rollout ends with every replica on the new version.
TEST(InferencePlanTest, RollsOneReplicaAtATimeWithoutDroppingReady) {
  for (int desired : {1, 2, 3, 5}) {
    World w;
    w.desired = desired;
    w.Apply(w.Plan());
    w.AllReady();
    w.Apply(w.Plan());
    ASSERT_EQ(w.Ready(), desired);
    w.svc["spec"]["modelVersion"] = "v2";
    w.model = Model("v2");
    bool told = false;
    for (int step = 0; step < 4 * desired + 4; ++step) {
      InferencePlan plan = w.Plan();
      for (const EventNote& e : plan.events) told |= e.reason == "RollingUpdate";
      w.Apply(plan);
      EXPECT_GE(w.Ready(), desired) << "desired " << desired << " step " << step;
      EXPECT_LE(static_cast<int>(w.pods.size()), desired + 1) << "step " << step;
      w.AllReady();  // the new replica becomes Ready before the next round
    }
    EXPECT_TRUE(told);
    ASSERT_EQ(static_cast<int>(w.pods.size()), desired);
    for (const Json& p : w.pods)
      EXPECT_EQ(p["metadata"]["labels"]["tessera.dev/model-version"], "v2");
    EXPECT_EQ(w.svc["status"]["modelVersion"], "v2");
    EXPECT_FALSE(w.svc["status"].contains("rollingTo"));
  }
}

TEST(InferencePlanTest, AMissingModelVersionKeepsTheServingReplicas) {
  World w;
  w.Apply(w.Plan());
  w.AllReady();
  w.Apply(w.Plan());
  w.svc["spec"]["modelVersion"] = "v9";
  w.model_exists = false;
  InferencePlan plan = w.Plan();
  EXPECT_TRUE(plan.create_pods.empty());
  EXPECT_TRUE(plan.delete_pods.empty());
  ASSERT_TRUE(plan.status);
  EXPECT_EQ((*plan.status)["reason"], "ModelVersionNotFound");
  EXPECT_NE((*plan.status)["message"].get<std::string>().find("\"v9\""), std::string::npos);
}

}  // namespace
}  // namespace tessera::op
