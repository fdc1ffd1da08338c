// The dispatcher's view of a member cluster: capacity from its fleet summary
// and the largest-first fit of a job's members.
#include "federation/member_capacity.h"

#include <gtest/gtest.h>

#include "controller/job_codec.h"

namespace tessera::federation {
namespace {

// Two Ready H100 nodes of 8 GPUs (one with GPU 7 unhealthy), a cordoned one,
// a NotReady one, an A100 node of 4; a job holds 6 GPUs of n1 and half of
// GPU 0 of n2.
Json Fleet() {
  auto node = [](const std::string& name, const std::string& phase, const std::string& model,
                 int unsched, const std::string& health) {
    return Json::array({name, "r", "b", phase, model, unsched, Json::array(), health, "", {}});
  };
  return {{"nodes",
           {node("n1", "Ready", "H100", 0, "HHHHHHHH"), node("n2", "Ready", "H100", 0, "HHHHHHHU"),
            node("n3", "Ready", "H100", 1, "HHHHHHHH"), node("n4", "NotReady", "H100", 0, "HHHH"),
            node("a1", "Ready", "A100", 0, "HHHH")}},
          {"jobs",
           {Json::array({"T",
                         "ns",
                         "big",
                         "Running",
                         "q",
                         6,
                         0,
                         {Json::array({"n1", {0, 1, 2, 3, 4, 5}, 1000})},
                         ""}),
            Json::array(
                {"T", "ns", "small", "Running", "q", 0.5, 0, {Json::array({"n2", {0}, 500})}, ""}),
            Json::array({"T",
                         "ns",
                         "done",
                         "Succeeded",
                         "q",
                         8,
                         0,
                         {Json::array({"n2", {1, 2, 3, 4, 5, 6}, 1000})},
                         ""})}}};
}

// The demand of a `kind` spec, decoded as the dispatcher does.
JobDemand DemandOf(const std::string& kind, const Json& spec) {
  Json obj = {{"apiVersion", "tessera.dev/v1"},
              {"kind", kind},
              {"metadata", {{"name", "j"}, {"namespace", "ns"}}},
              {"spec", spec}};
  absl::StatusOr<model::Job> job =
      controller::JobFromObject(obj, [](absl::string_view) { return std::optional<int32_t>(0); });
  EXPECT_TRUE(job.ok()) << job.status();
  return job.ok() ? federation::DemandOf(*job, kind == "InferenceService") : JobDemand();
}

Json Train(int count, int gpus, const std::string& model = "") {
  Json g = {{"name", "w"}, {"count", count}, {"gpusPerReplica", gpus}};
  if (!model.empty()) g["gpuType"] = model;
  return {{"groups", {g}}};
}

TEST(MemberCapacity, CountsHealthyGpusOfReadySchedulableNodesAndWhatJobsHold) {
  absl::StatusOr<MemberCapacity> c = CapacityFromFleet(Fleet());
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->nodes.size(), 3u);  // n1, n2, a1
  EXPECT_EQ(c->gpus, 8 + 7 + 4);
  EXPECT_EQ(c->free_gpus, 2 + 6 + 4);  // n2's GPU 0 is half used; a finished job holds nothing
  EXPECT_EQ(c->nodes[1].free_milli[0], 500);
  EXPECT_EQ(c->nodes[1].free_milli[7], -1);
}

TEST(MemberCapacity, FitsEveryMemberOnOneNodeOfAnAllowedModel) {
  MemberCapacity c = *CapacityFromFleet(Fleet());
  EXPECT_TRUE(Fits(c, DemandOf("TrainingJob", Train(1, 6))));           // n2
  EXPECT_FALSE(Fits(c, DemandOf("TrainingJob", Train(1, 7))));          // no node has 7 free
  EXPECT_TRUE(Fits(c, DemandOf("TrainingJob", Train(3, 2))));           // n1, n2, n2
  EXPECT_FALSE(Fits(c, DemandOf("TrainingJob", Train(2, 4, "A100"))));  // one A100 node of 4
  EXPECT_TRUE(Fits(c, DemandOf("TrainingJob", Train(1, 4, "A100"))));
  Json share = {
      {"groups", {{{"name", "w"}, {"count", 1}, {"gpusPerReplica", 1}, {"gpuMilli", 400}}}}};
  EXPECT_TRUE(Fits(c, DemandOf("TrainingJob", share)));
  // An InferenceService needs replicas.min replicas to start.
  Json svc = {{"replicas", {{"min", 3}, {"max", 8}}}, {"gpusPerReplica", 2}, {"gpuType", "A100"}};
  EXPECT_FALSE(Fits(c, DemandOf("InferenceService", svc)));
  svc["replicas"]["min"] = 2;
  EXPECT_TRUE(Fits(c, DemandOf("InferenceService", svc)));
}

TEST(MemberCapacity, AMemberWithoutGpusNeedsNone) {
  MemberCapacity c = *CapacityFromFleet(Fleet());
  ASSERT_TRUE(Take(&c, DemandOf("TrainingJob", Train(1, 4, "A100"))));
  Json spec = Train(3, 0, "A100");
  spec["groups"][0]["resources"] = {{"cpu", 2}};
  const JobDemand cpu = DemandOf("TrainingJob", spec);
  EXPECT_EQ(cpu.gpus(), 0);
  EXPECT_TRUE(Fits(c, cpu));  // the A100 node has no GPU free, and none is needed
}

TEST(MemberCapacity, TakeRemovesWhatItPlacedAndNothingWhenItDoesNotFit) {
  MemberCapacity c = *CapacityFromFleet(Fleet());
  ASSERT_TRUE(Take(&c, DemandOf("TrainingJob", Train(1, 6, "H100"))));
  EXPECT_EQ(c.free_gpus, 2 + 0 + 4);
  EXPECT_FALSE(Take(&c, DemandOf("TrainingJob", Train(2, 2, "H100"))));  // only n1's 2 left
  EXPECT_EQ(c.free_gpus, 6);
  EXPECT_TRUE(Take(&c, DemandOf("TrainingJob", Train(1, 2, "H100"))));
  EXPECT_EQ(c.free_gpus, 4);
}

TEST(MemberCapacity, AMalformedSummaryIsAnErrorNamingTheRow) {
  EXPECT_FALSE(CapacityFromFleet(Json::object()).ok());
  Json f = Fleet();
  f["nodes"][2] = "n3";
  absl::StatusOr<MemberCapacity> c = CapacityFromFleet(f);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("nodes[2]"), std::string::npos) << c.status();
}

}  // namespace
}  // namespace tessera::federation
