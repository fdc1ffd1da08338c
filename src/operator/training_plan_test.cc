#include "operator/training_plan.h"

#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tessera::op {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1'800'000'000);

Json Job(Json spec_extra = Json::object()) {
  Json spec = {{"image", "ghcr.io/acme/train:1"},
               {"command", {"torchrun", "train.py"}},
               {"queue", "research"},
               {"maxRestarts", 2},
               {"checkpoint", {{"path", "/ckpt/llm"}}},
               {"groups", {{{"name", "worker"}, {"count", 2}, {"gpusPerReplica", 8}}}}};
  spec.update(spec_extra);
  return {{"apiVersion", "tessera.dev/v1"},
          {"kind", "TrainingJob"},
          {"metadata", {{"name", "llm"}, {"namespace", "team"}, {"uid", "u-1"}, {"generation", 1}}},
          {"spec", spec}};
}

// The objects a plan created, as the API would show them (uids, a phase).
struct World {
  Json job;
  std::vector<Json> pods, groups;
  bool service = false;
  std::optional<ResumePoint> checkpoint;
  bool queue_known = true;

  TrainingPlan Plan() const {
    TrainingInputs in;
    in.job = &job;
    for (const Json& p : pods) in.pods.push_back(&p);
    for (const Json& g : groups) in.pod_groups.push_back(&g);
    in.service_exists = service;
    in.newest_checkpoint = checkpoint;
    in.queue_known = queue_known;
    in.now = kNow;
    return PlanTrainingJob(in, GangOptions{});
  }
  // Applies `plan` as the executor and the API would.
  void Apply(const TrainingPlan& plan) {
    if (plan.status) job["status"] = *plan.status;
    auto drop = [](std::vector<Json>& objs, const std::vector<ObjectName>& names) {
      for (const ObjectName& n : names) {
        std::erase_if(objs, [&](const Json& o) { return o["metadata"]["name"] == n.name; });
      }
    };
    drop(pods, plan.delete_pods);
    drop(groups, plan.delete_pod_groups);
    if (plan.create_service) service = true;
    if (plan.create_pod_group) groups.push_back(*plan.create_pod_group);
    for (Json p : plan.create_pods) {
      p["metadata"]["uid"] = "uid-" + p["metadata"]["name"].get<std::string>();
      p["status"] = {{"phase", "Pending"}};
      pods.push_back(p);
    }
  }
  void SetPods(const std::string& phase, bool bound = true) {
    for (Json& p : pods) {
      p["status"]["phase"] = phase;
      if (bound) p["spec"]["nodeName"] = "n1";
    }
  }
  std::string Phase() const { return job["status"].value("phase", ""); }
};

std::map<std::string, std::string> EnvOf(const Json& pod) {
  std::map<std::string, std::string> env;
  for (const Json& e : pod["spec"]["containers"][0]["env"]) {
    if (e.contains("value")) env[e["name"]] = e["value"];
  }
  return env;
}

TEST(TrainingPlanTest, NewJobCreatesTheGangServiceAndPodGroup) {
  World w{Job()};
  TrainingPlan plan = w.Plan();
  ASSERT_TRUE(plan.status);
  EXPECT_EQ((*plan.status)["phase"], "Queued");
  EXPECT_EQ((*plan.status)["generation"], 0);
  EXPECT_EQ((*plan.status)["replicas"], 2);
  ASSERT_TRUE(plan.create_service);
  EXPECT_EQ((*plan.create_service)["spec"]["clusterIP"], "None");
  ASSERT_TRUE(plan.create_pod_group);
  EXPECT_EQ((*plan.create_pod_group)["metadata"]["name"], "llm-g0");
  EXPECT_EQ((*plan.create_pod_group)["spec"]["minMember"], 2);
  ASSERT_EQ(plan.create_pods.size(), 2u);
  const Json& p1 = plan.create_pods[1];
  EXPECT_EQ(p1["metadata"]["name"], "llm-g0-worker-1");
  EXPECT_EQ(p1["spec"]["schedulerName"], "tessera");
  EXPECT_EQ(p1["spec"]["restartPolicy"], "Never");
  EXPECT_EQ(p1["spec"]["hostname"], "worker-1");
  EXPECT_EQ(p1["spec"]["subdomain"], "llm");
  EXPECT_EQ(p1["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"], "8");
  EXPECT_EQ(p1["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"], "llm-g0");
  EXPECT_EQ(p1["metadata"]["labels"]["tessera.dev/queue"], "research");
  EXPECT_EQ(p1["metadata"]["ownerReferences"][0]["uid"], "u-1");
  EXPECT_TRUE(p1["metadata"]["ownerReferences"][0]["controller"].get<bool>());
  std::map<std::string, std::string> env = EnvOf(p1);
  EXPECT_EQ(env["MASTER_ADDR"], "worker-0.llm");
  EXPECT_EQ(env["MASTER_PORT"], "29500");
  EXPECT_EQ(env["WORLD_SIZE"], "2");
  EXPECT_EQ(env["RANK"], "1");
  EXPECT_EQ(env["PET_NNODES"], "2");
  EXPECT_EQ(env["PET_NPROC_PER_NODE"], "8");
  EXPECT_EQ(env["PET_NODE_RANK"], "1");
  EXPECT_EQ(env["TESSERA_CHECKPOINT_PATH"], "/ckpt/llm");
  EXPECT_EQ(env.count("TESSERA_RESUME_STEP"), 0u);
}

TEST(TrainingPlanTest, ThePlanIsIdempotentOnceApplied) {
  World w{Job()};
  w.Apply(w.Plan());
  TrainingPlan again = w.Plan();
  EXPECT_FALSE(again.status);
  EXPECT_FALSE(again.create_service);
  EXPECT_FALSE(again.create_pod_group);
  EXPECT_TRUE(again.create_pods.empty());
  EXPECT_TRUE(again.delete_pods.empty());
}

TEST(TrainingPlanTest, PhaseFollowsTheMembers) {
  World w{Job()};
  w.Apply(w.Plan());
  w.SetPods("Pending", /*bound=*/true);
  w.Apply(w.Plan());
  EXPECT_EQ(w.Phase(), "Scheduled");
  w.SetPods("Running");
  w.Apply(w.Plan());
  EXPECT_EQ(w.Phase(), "Running");
  EXPECT_TRUE(w.job["status"].contains("startTime"));
  w.SetPods("Succeeded");
  w.Apply(w.Plan());
  EXPECT_EQ(w.Phase(), "Succeeded");
  EXPECT_TRUE(w.job["status"].contains("completionTime"));
  // Finished: nothing more happens.
  TrainingPlan after = w.Plan();
  EXPECT_FALSE(after.status);
  EXPECT_TRUE(after.create_pods.empty());
}

TEST(TrainingPlanTest, AFailedMemberRestartsTheGangFromTheNewestCheckpoint) {
  World w{Job()};
  w.Apply(w.Plan());
  w.SetPods("Running");
  w.Apply(w.Plan());
  w.pods[1]["status"] = {{"phase", "Failed"},
                         {"containerStatuses",
                          {{{"name", "trainer"},
                            {"state", {{"terminated", {{"exitCode", 3}, {"reason", "Error"}}}}}}}}};
  w.checkpoint = ResumePoint{"llm-step-1200", 1200, "/ckpt/llm/1200"};
  TrainingPlan plan = w.Plan();
  ASSERT_TRUE(plan.status);
  EXPECT_EQ((*plan.status)["generation"], 1);
  EXPECT_EQ((*plan.status)["restarts"], 1);
  EXPECT_EQ((*plan.status)["resumeFrom"]["step"], 1200);
  EXPECT_EQ(plan.delete_pods.size(), 2u);
  EXPECT_EQ(plan.delete_pod_groups.size(), 1u);
  ASSERT_EQ(plan.events.size(), 1u);
  EXPECT_NE(plan.events[0].note.find("exited with code 3 (Error)"), std::string::npos)
      << plan.events[0].note;
  w.Apply(plan);
  // The next round creates generation 1, resuming at step 1200.
  TrainingPlan next = w.Plan();
  ASSERT_EQ(next.create_pods.size(), 2u);
  EXPECT_EQ(next.create_pods[0]["metadata"]["name"], "llm-g1-worker-0");
  EXPECT_EQ(EnvOf(next.create_pods[0])["TESSERA_RESUME_STEP"], "1200");
  EXPECT_EQ(EnvOf(next.create_pods[0])["TESSERA_RESUME_FROM"], "/ckpt/llm/1200");
  ASSERT_TRUE(next.create_pod_group);
  EXPECT_EQ((*next.create_pod_group)["metadata"]["name"], "llm-g1");
}

TEST(TrainingPlanTest, NoRestartsLeftFailsTheJobNamingTheMember) {
  World w{Job({{"maxRestarts", 0}})};
  w.Apply(w.Plan());
  w.SetPods("Running");
  w.Apply(w.Plan());
  w.pods[0]["status"] = {
      {"phase", "Failed"},
      {"containerStatuses",
       {{{"state", {{"terminated", {{"exitCode", 137}, {"reason", "OOMKilled"}}}}}}}}};
  TrainingPlan plan = w.Plan();
  ASSERT_TRUE(plan.status);
  EXPECT_EQ((*plan.status)["phase"], "Failed");
  EXPECT_EQ((*plan.status)["failure"]["member"], "worker-0");
  EXPECT_EQ((*plan.status)["failure"]["exitCode"], 137);
  EXPECT_EQ((*plan.status)["failure"]["reason"], "OOMKilled");
  bool failed_condition = false;
  for (const Json& c : (*plan.status)["conditions"]) {
    if (c["type"] == "Failed" && c["status"] == "True") failed_condition = true;
  }
  EXPECT_TRUE(failed_condition);
  // The running member is stopped; the failed one stays for its logs.
  ASSERT_EQ(plan.delete_pods.size(), 1u);
  EXPECT_EQ(plan.delete_pods[0].name, "llm-g0-worker-1");
}

TEST(TrainingPlanTest, AnEvictedMemberStartsANewGenerationWithoutCountingARestart) {
  World w{Job()};
  w.Apply(w.Plan());
  w.SetPods("Running");
  w.Apply(w.Plan());
  w.pods[0]["status"]["conditions"] = {{{"type", "DisruptionTarget"}, {"status", "True"}}};
  w.Apply(w.Plan());
  EXPECT_EQ(w.job["status"]["generation"], 1);
  EXPECT_EQ(w.job["status"].value("restarts", 0), 0);
  EXPECT_EQ(w.job["status"]["reason"], "Preempted");
  // A member deleted outright after placement counts the same.
  w.Apply(w.Plan());
  w.SetPods("Running");
  w.Apply(w.Plan());
  w.pods.pop_back();
  w.Apply(w.Plan());
  EXPECT_EQ(w.job["status"]["generation"], 2);
}

TEST(TrainingPlanTest, WaitsNamingTheFieldOrTheQueue) {
  World bad{
      Job({{"image", nullptr},
           {"groups", {{{"name", "w"}, {"count", 1}, {"gpusPerReplica", 1}, {"gpuMilli", 500}}}}})};
  bad.job["spec"].erase("image");
  TrainingPlan plan = bad.Plan();
  ASSERT_TRUE(plan.status);
  EXPECT_EQ((*plan.status)["phase"], "Pending");
  const std::string msg = (*plan.status)["message"];
  EXPECT_NE(msg.find("spec.image"), std::string::npos) << msg;
  EXPECT_NE(msg.find("spec.groups[0].gpuMilli"), std::string::npos) << msg;
  EXPECT_TRUE(plan.create_pods.empty());

  World noq{Job()};
  noq.queue_known = false;
  plan = noq.Plan();
  ASSERT_TRUE(plan.status);
  EXPECT_EQ((*plan.status)["reason"], "QueueNotFound");
  EXPECT_NE((*plan.status)["message"].get<std::string>().find("\"research\""), std::string::npos);
  EXPECT_TRUE(plan.create_pods.empty());
  EXPECT_FALSE(plan.create_pod_group);
}

TEST(TrainingPlanTest, SuspendDeletesTheGangAndResumeStartsANewGeneration) {
  World w{Job()};
  w.Apply(w.Plan());
  w.SetPods("Running");
  w.Apply(w.Plan());
  w.job["spec"]["suspend"] = true;
  w.Apply(w.Plan());
  EXPECT_EQ(w.Phase(), "Suspended");
  EXPECT_TRUE(w.pods.empty());
  EXPECT_TRUE(w.groups.empty());
  w.job["spec"]["suspend"] = false;
  w.Apply(w.Plan());
  EXPECT_EQ(w.job["status"]["generation"], 1);
  w.Apply(w.Plan());
  ASSERT_EQ(w.pods.size(), 2u);
  EXPECT_EQ(w.pods[0]["metadata"]["name"], "llm-g1-worker-0");
}

TEST(TrainingPlanTest, ResizeRestartsARigidGangAndGrowsAnElasticOneInPlace) {
  World rigid{Job()};
  rigid.Apply(rigid.Plan());
  rigid.SetPods("Running");
  rigid.Apply(rigid.Plan());
  rigid.job["spec"]["groups"][0]["count"] = 3;
  rigid.Apply(rigid.Plan());
  EXPECT_EQ(rigid.job["status"]["generation"], 1);
  EXPECT_EQ(rigid.job["status"]["reason"], "Resized");
  rigid.Apply(rigid.Plan());
  EXPECT_EQ(rigid.pods.size(), 3u);

  World el{Job({{"elastic", {{"minReplicas", 1}, {"maxReplicas", 2}}}})};
  TrainingPlan first = el.Plan();
  EXPECT_EQ((*first.create_pod_group)["spec"]["minMember"], 1);
  EXPECT_EQ(EnvOf(first.create_pods[0])["PET_NNODES"], "1:2");
  el.Apply(first);
  el.SetPods("Running");
  el.Apply(el.Plan());
  el.job["spec"]["groups"][0]["count"] = 3;
  el.job["spec"]["elastic"]["maxReplicas"] = 3;
  TrainingPlan grow = el.Plan();
  EXPECT_TRUE(grow.delete_pods.empty());
  ASSERT_EQ(grow.create_pods.size(), 1u);
  EXPECT_EQ(grow.create_pods[0]["metadata"]["name"], "llm-g0-worker-2");
}

TEST(TrainingPlanTest, PodsOfAnotherGenerationAreDeleted) {
  World w{Job()};
  w.Apply(w.Plan());
  Json stray = w.pods[0];
  stray["metadata"]["name"] = "llm-g7-worker-0";
  stray["metadata"]["labels"]["tessera.dev/generation"] = "7";
  w.pods.push_back(stray);
  TrainingPlan plan = w.Plan();
  ASSERT_EQ(plan.delete_pods.size(), 1u);
  EXPECT_EQ(plan.delete_pods[0].name, "llm-g7-worker-0");
}

TEST(TrainingPlanTest, ACheckpointCostLetsTesseraChooseTheInterval) {
  World w{Job({{"checkpoint", {{"path", "/ckpt"}, {"costSeconds", 60}}}})};
  TrainingPlan plan = w.Plan();
  ASSERT_TRUE(plan.status);
  // 16 GPUs, 60 s per checkpoint, 50,000 GPU-hours each: sqrt(2 x 60 x 50000 x 3600 / 16).
  const int64_t want = 36742;
  EXPECT_NEAR((*plan.status)["checkpointIntervalSeconds"].get<int64_t>(), want, 1);
  EXPECT_NEAR(std::stoll(EnvOf(plan.create_pods[0])["TESSERA_CHECKPOINT_INTERVAL_SECONDS"]), want,
              1);
  World fixed{Job({{"checkpoint", {{"intervalSeconds", 600}}}})};
  plan = fixed.Plan();
  EXPECT_FALSE((*plan.status).contains("checkpointIntervalSeconds"));
  EXPECT_EQ(EnvOf(plan.create_pods[0])["TESSERA_CHECKPOINT_INTERVAL_SECONDS"], "600");
}

TEST(TrainingPlanTest, ServiceNamesAreDns1035Labels) {
  EXPECT_EQ(ServiceName("llm"), "llm");
  EXPECT_EQ(ServiceName("7b-run"), "tj-7b-run");
  EXPECT_EQ(ServiceName(std::string(63, '1')).size(), 63u);
}

}  // namespace
}  // namespace tessera::op
