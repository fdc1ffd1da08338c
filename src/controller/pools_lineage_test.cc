// GPUPool, Checkpoint retention and ModelVersion lineage in the standalone controller
// (pools_lineage.cc): the api/ decisions applied to the store.
#include <gtest/gtest.h>

#include "controller/controller_internal.h"
#include "controller/controller_test_fixture.h"

namespace tessera::controller {
namespace {

class PoolsLineageTest : public ControllerTest {
 protected:
  void AddLabelledNode(const std::string& name, int gpus, const std::string& zone) {
    Create("nodes", "",
           {{"kind", "Node"},
            {"metadata", {{"name", name}, {"labels", {{"zone", zone}}}}},
            {"spec", {{"gpuType", "H100"}, {"gpuCount", gpus}, {"rack", "r1"}}}});
  }
  void AddPool(const std::string& name, Json spec) {
    Create("gpupools", "team-a",
           {{"kind", "GPUPool"}, {"metadata", {{"name", name}}}, {"spec", std::move(spec)}});
  }
  void AddCheckpoint(const std::string& job, int step, const std::string& phase = "Ready") {
    const std::string name = job + "-step-" + std::to_string(step);
    Create("checkpoints", "team-a",
           {{"kind", "Checkpoint"},
            {"metadata", {{"name", name}, {"creationTimestamp", Timestamp(clock_.Now())}}},
            {"spec", {{"jobName", job}, {"step", step}, {"path", "/ckpt/" + name}}},
            {"status", {{"phase", phase}}}});
  }
  bool Exists(const std::string& plural, const std::string& name) {
    return store_.Get(Key(plural, "team-a", name)).ok();
  }
  std::vector<std::string> PlacedNodes(const std::string& job) {
    std::vector<std::string> out;
    for (const Json& m : Job(job)["status"].value("placement", Json::array())) {
      out.push_back(m["node"]);
    }
    return out;
  }
};

TEST_F(PoolsLineageTest, RetentionKeepsTheNewestReadyCheckpoints) {
  AddNode("n1", 8);
  AddJob("train", 1, 8, {{"checkpoint", {{"keep", 2}}}});
  Step();
  for (int step : {10, 20, 30}) {
    clock_.Advance(absl::Seconds(1));
    AddCheckpoint("train", step);
    Step();
  }
  AddCheckpoint("train", 40, "Writing");  // still being written: kept
  AddCheckpoint("other", 1);              // another job's: untouched
  Step();
  EXPECT_FALSE(Exists("checkpoints", "train-step-10"));
  EXPECT_TRUE(Exists("checkpoints", "train-step-20"));
  EXPECT_TRUE(Exists("checkpoints", "train-step-30"));
  EXPECT_TRUE(Exists("checkpoints", "train-step-40"));
  EXPECT_TRUE(Exists("checkpoints", "other-step-1"));
  std::vector<std::string> reasons = EventReasons("train");
  EXPECT_NE(std::find(reasons.begin(), reasons.end(), "CheckpointsPruned"), reasons.end());
  // A ModelVersion's checkpoint is its lineage: never pruned.
  Create("modelversions", "team-a",
         {{"kind", "ModelVersion"},
          {"metadata", {{"name", "v1"}}},
          {"spec", {{"model", "llm"}, {"version", "1"}, {"checkpoint", "train-step-20"}}}});
  Step();
  AddCheckpoint("train", 50);
  Step();
  // ...nor counted among the `keep` newest.
  EXPECT_TRUE(Exists("checkpoints", "train-step-20"));
  EXPECT_TRUE(Exists("checkpoints", "train-step-30"));
  EXPECT_FALSE(Exists("checkpoints", "train-step-40"));  // older than the newest Ready now
  EXPECT_TRUE(Exists("checkpoints", "train-step-50"));
  AddCheckpoint("train", 60);
  Step();
  EXPECT_TRUE(Exists("checkpoints", "train-step-20"));
  EXPECT_FALSE(Exists("checkpoints", "train-step-30"));
}

TEST_F(PoolsLineageTest, NoRetentionWithoutKeep) {
  AddNode("n1", 8);
  AddJob("train", 1, 8);
  Step();
  for (int step : {10, 20, 30}) AddCheckpoint("train", step);
  Step();
  EXPECT_TRUE(Exists("checkpoints", "train-step-10"));
}

TEST_F(PoolsLineageTest, PoolStatusFollowsItsNodes) {
  AddLabelledNode("a1", 8, "a");
  AddLabelledNode("a2", 8, "a");
  AddLabelledNode("b1", 8, "b");
  AddPool("zone-a", {{"gpuType", "H100"}, {"nodeSelector", {{"zone", "a"}}}});
  AddPool("none", {{"gpuType", "A100"}});
  Step();
  Step();
  Json st = Get("gpupools", "team-a", "zone-a")["status"];
  EXPECT_EQ(st["phase"], "Ready");
  EXPECT_EQ(st["nodes"], 2);
  EXPECT_EQ(st["gpus"], 16);
  EXPECT_EQ(st["allocatable"], 16);
  EXPECT_EQ(st["nodeNames"], Json::array({"a1", "a2"}));
  EXPECT_EQ(Get("gpupools", "team-a", "none")["status"]["phase"], "Pending");
  // A job takes 8 GPUs in zone a: allocated follows (at the next status period).
  AddJob("j", 1, 8, {{"nodeSelector", {{"zone", "a"}}}});
  Step();
  clock_.Advance(absl::Seconds(10));
  Step();
  EXPECT_EQ(Get("gpupools", "team-a", "zone-a")["status"]["allocated"], 8);
  // A node cordoned by hand leaves allocatable; a new node joins; a deleted one leaves.
  Modify("nodes", "", "a2", [](Json& o) { o["spec"]["unschedulable"] = true; });
  AddLabelledNode("a3", 4, "a");
  ASSERT_TRUE(store_.Delete(Key("nodes", "", "a1")).ok());
  Step();
  Step();
  st = Get("gpupools", "team-a", "zone-a")["status"];
  EXPECT_EQ(st["nodes"], 2);
  EXPECT_EQ(st["nodeNames"], Json::array({"a2", "a3"}));
  EXPECT_EQ(st["gpus"], 12);
  EXPECT_EQ(st["allocatable"], 4);
  EXPECT_EQ(st["cordoned"], 1);
  // Unchanged: no further writes.
  const int64_t rev = store_.CurrentRevision();
  Step();
  Step();
  EXPECT_EQ(store_.CurrentRevision(), rev);
}

TEST_F(PoolsLineageTest, PoolCordonAndDrainApplyToItsNodesAndEndCleanly) {
  AddLabelledNode("a1", 8, "a");
  AddLabelledNode("b1", 8, "b");
  Modify("nodes", "", "b1", [](Json& o) { o["spec"]["unschedulable"] = true; });  // by hand
  AddJob("j", 1, 8, {{"nodeSelector", {{"zone", "a"}}}});
  Step();
  ASSERT_EQ(PlacedNodes("j"), std::vector<std::string>{"a1"});
  AddPool("all", {{"gpuType", "*"}, {"cordon", true}});
  Step();
  Step();
  Json a1 = Get("nodes", "", "a1");
  EXPECT_EQ(a1["spec"]["unschedulable"], true);
  EXPECT_EQ(a1["metadata"]["annotations"][kPoolCordonAnnotation], "cordon");
  EXPECT_FALSE(Get("nodes", "", "b1")["metadata"].contains("annotations"));
  EXPECT_EQ(Get("gpupools", "team-a", "all")["status"]["phase"], "Draining");
  EXPECT_EQ(PlacedNodes("j"), std::vector<std::string>{"a1"});  // a cordon evicts nothing
  // Drain: the job on a1 is evicted and requeued (it fits nowhere else).
  Modify("gpupools", "team-a", "all", [](Json& o) { o["spec"]["drain"] = true; });
  Step();
  Step();
  Step();
  a1 = Get("nodes", "", "a1");
  EXPECT_EQ(a1["metadata"]["annotations"][kPoolCordonAnnotation], "drain");
  ASSERT_TRUE(a1["spec"].contains("taints"));
  EXPECT_EQ(a1["spec"]["taints"][0]["key"], kDrainTaintKey);
  EXPECT_TRUE(PlacedNodes("j").empty());
  std::vector<std::string> reasons = EventReasons("j");
  EXPECT_NE(std::find(reasons.begin(), reasons.end(), "NodeDrained"), reasons.end());
  // The pool goes: a1 is uncordoned (and the job placed again); b1, cordoned by hand, stays.
  ASSERT_TRUE(store_.Delete(Key("gpupools", "team-a", "all")).ok());
  for (int i = 0; i < 4; ++i) Step();
  a1 = Get("nodes", "", "a1");
  EXPECT_EQ(a1["spec"]["unschedulable"], false);
  EXPECT_FALSE(a1["spec"].contains("taints"));
  EXPECT_FALSE(a1["metadata"].contains("annotations"));
  EXPECT_EQ(Get("nodes", "", "b1")["spec"]["unschedulable"], true);
  EXPECT_EQ(PlacedNodes("j"), std::vector<std::string>{"a1"});
}

TEST_F(PoolsLineageTest, QueuesNamedByPoolsRunOnlyOnTheirNodes) {
  AddLabelledNode("a1", 8, "a");
  AddLabelledNode("b1", 8, "b");
  AddPool("research",
          {{"gpuType", "H100"}, {"nodeSelector", {{"zone", "b"}}}, {"queues", {"research"}}});
  Step();
  AddJob("r1", 1, 8, {{"queue", "research"}});
  AddJob("r2", 1, 8, {{"queue", "research"}});
  Step();
  Step();
  EXPECT_EQ(PlacedNodes("r1"), std::vector<std::string>{"b1"});
  EXPECT_TRUE(PlacedNodes("r2").empty()) << "a1 is free but outside the queue's pool";
  // Another queue is not confined.
  AddJob("free", 1, 8);
  Step();
  EXPECT_EQ(PlacedNodes("free"), std::vector<std::string>{"a1"});
  // A pool that changes takes its queued jobs with it: zone a joins (a1 frees up first).
  ASSERT_TRUE(store_.Delete(Key("trainingjobs", "team-a", "free")).ok());
  Modify("gpupools", "team-a", "research", [](Json& o) { o["spec"].erase("nodeSelector"); });
  Step();
  Step();
  EXPECT_EQ(PlacedNodes("r2"), std::vector<std::string>{"a1"});
}

TEST_F(PoolsLineageTest, ModelVersionStatusShowsLineageAndServers) {
  AddNode("n1", 8);
  AddJob("train", 1, 8);
  AddCheckpoint("train", 400);
  Create("modelversions", "team-a",
         {{"kind", "ModelVersion"},
          {"metadata", {{"name", "v3"}}},
          {"spec", {{"model", "llm"}, {"version", "3"}, {"checkpoint", "train-step-400"}}}});
  Create("modelversions", "team-a",
         {{"kind", "ModelVersion"},
          {"metadata", {{"name", "v4"}}},
          {"spec", {{"model", "llm"}, {"version", "4"}, {"checkpoint", "missing"}}}});
  Create(
      "inferenceservices", "team-a",
      {{"kind", "InferenceService"},
       {"metadata", {{"name", "chat"}}},
       {"spec",
        {{"modelVersion", "v3"}, {"replicas", {{"min", 1}, {"max", 1}}}, {"gpusPerReplica", 1}}}});
  Step();
  Step();
  Json st = Get("modelversions", "team-a", "v3")["status"];
  EXPECT_EQ(st["phase"], "Ready");
  EXPECT_EQ(st["servedBy"], Json::array({"chat"}));
  EXPECT_EQ(st["checkpoint"], Json::parse(R"({"name": "train-step-400", "jobName": "train",
                                              "step": 400, "path": "/ckpt/train-step-400"})"));
  st = Get("modelversions", "team-a", "v4")["status"];
  EXPECT_EQ(st["phase"], "Pending");
  EXPECT_EQ(st["reason"], "CheckpointMissing");
  EXPECT_EQ(st["servedBy"], Json::array());
  // The service moves to v4: servedBy follows.
  Modify("inferenceservices", "team-a", "chat", [](Json& o) { o["spec"]["modelVersion"] = "v4"; });
  Step();
  Step();
  EXPECT_EQ(Get("modelversions", "team-a", "v3")["status"]["servedBy"], Json::array());
  EXPECT_EQ(Get("modelversions", "team-a", "v4")["status"]["servedBy"], Json::array({"chat"}));
  const int64_t rev = store_.CurrentRevision();
  Step();
  EXPECT_EQ(store_.CurrentRevision(), rev);
}

}  // namespace
}  // namespace tessera::controller
