#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "controller/job_codec.h"
#include "controller/node_codec.h"
#include "model/priority.h"
#include "sched/framework/cluster_state.h"

namespace tessera::controller {
namespace {

Json Training(Json spec) {
  return {{"apiVersion", kApiVersion},
          {"kind", "TrainingJob"},
          {"metadata", {{"name", "llm"}, {"namespace", "team-a"}}},
          {"spec", std::move(spec)}};
}

Json NodeObj(const std::string& name, Json spec) {
  return {{"apiVersion", kApiVersion},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", {{"zone", "a"}}}}},
          {"spec", std::move(spec)}};
}

TEST(JobCodec, MapsEveryField) {
  Json spec = Json::parse(R"({
    "queue": "research", "priorityClassName": "production", "placement": "Spread",
    "gang": {"minMember": 2, "timeoutSeconds": 600},
    "topology": {"level": "rack", "required": true},
    "nodeSelector": {"zone": "a"},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}],
    "groups": [{"name": "worker", "count": 4, "gpusPerReplica": 8, "gpuType": "H100",
                "resources": {"cpu": 16, "memoryGiB": 2}},
               {"name": "ps", "count": 1, "gpusPerReplica": 1, "gpuMilli": 500}]
  })");
  absl::StatusOr<model::Job> j = JobFromObject(Training(spec), nullptr);
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(j->key(), "team-a/llm");
  EXPECT_EQ(j->queue, "research");
  EXPECT_EQ(j->priority, model::kPriorityProduction);
  EXPECT_EQ(j->placement, model::PlacementPreference::kSpread);
  EXPECT_EQ(j->gang.min_member, 2);
  EXPECT_EQ(j->gang.timeout, absl::Seconds(600));
  EXPECT_EQ(j->topology.level, model::TopologyLevel::kRack);
  EXPECT_TRUE(j->topology.required);
  EXPECT_EQ(j->gpu_models, std::vector<std::string>{"H100"});
  ASSERT_EQ(j->groups.size(), 2u);
  EXPECT_EQ(j->groups[0].resources.cpu_milli, 16000);
  EXPECT_EQ(j->groups[0].resources.memory_mib, 2048);
  EXPECT_EQ(j->groups[1].resources.gpu_milli, 500);
  ASSERT_EQ(j->tolerations.size(), 1u);
  EXPECT_EQ(j->node_selector.at("zone"), "a");
}

TEST(JobCodec, PriorityResolution) {
  Json spec = {{"priorityClassName", "gold"},
               {"groups", {{{"name", "w"}, {"count", 1}, {"gpusPerReplica", 1}}}}};
  absl::StatusOr<model::Job> j = JobFromObject(Training(spec), nullptr);
  EXPECT_TRUE(absl::IsNotFound(j.status()));
  EXPECT_NE(j.status().message().find("spec.priorityClassName"), std::string::npos);
  j = JobFromObject(Training(spec), [](absl::string_view n) -> std::optional<int32_t> {
    if (n == "gold") return 77;
    return std::nullopt;
  });
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j->priority, 77);
  spec["priority"] = 5;  // an explicit value wins
  EXPECT_EQ(JobFromObject(Training(spec), nullptr)->priority, 5);
}

TEST(JobCodec, ErrorsNameTheField) {
  Json spec = {{"groups",
                {{{"name", "a"}, {"count", 1}, {"gpusPerReplica", 1}, {"gpuType", "H100"}},
                 {{"name", "b"}, {"count", 1}, {"gpusPerReplica", 1}, {"gpuType", "A100"}}}}};
  absl::Status s = JobFromObject(Training(spec), nullptr).status();
  EXPECT_NE(s.message().find("spec.groups[1].gpuType"), std::string::npos) << s;
  spec = {{"gang", {{"minMember", 9}}},
          {"groups", {{{"name", "a"}, {"count", 2}, {"gpusPerReplica", 1}}}}};
  s = JobFromObject(Training(spec), nullptr).status();
  EXPECT_NE(s.message().find("spec.gang.minMember"), std::string::npos) << s;
  spec = {{"groups", {{{"name", "a"}, {"count", 1}, {"gpusPerReplica", 2}, {"gpuMilli", 500}}}}};
  s = JobFromObject(Training(spec), nullptr).status();
  EXPECT_NE(s.message().find("spec.groups[0]"), std::string::npos) << s;
  spec = {{"groups", {{{"name", "a"}, {"count", "x"}, {"gpusPerReplica", 1}}}}};
  s = JobFromObject(Training(spec), nullptr).status();
  EXPECT_NE(s.message().find("spec.groups[0].count"), std::string::npos) << s;
}

TEST(JobCodec, ElasticMinReplicasBecomesTheGangMinimum) {
  Json spec = {{"elastic", {{"minReplicas", 2}, {"maxReplicas", 5}}},
               {"groups",
                {{{"name", "w"}, {"count", 4}, {"gpusPerReplica", 8}},
                 {{"name", "ps"}, {"count", 1}, {"gpusPerReplica", 1}}}}};
  absl::StatusOr<model::Job> j = JobFromObject(Training(spec), nullptr);
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(j->gang.min_member, 2);
  EXPECT_TRUE(j->gang.elastic);
  EXPECT_EQ(j->total_members(), 5);
  int32_t min = -1;
  EXPECT_FALSE(api::CheckElastic(spec, &min).has_value());
  EXPECT_EQ(min, 2);
  // The same minimum in spec.gang is accepted.
  spec["gang"] = {{"minMember", 2}};
  EXPECT_TRUE(JobFromObject(Training(spec), nullptr).ok());
  // Without spec.elastic the job is not elastic.
  Json plain = {{"groups", {{{"name", "w"}, {"count", 4}, {"gpusPerReplica", 8}}}}};
  EXPECT_FALSE(api::CheckElastic(plain, &min).has_value());
  EXPECT_EQ(min, 0);
  EXPECT_EQ(JobFromObject(Training(plain), nullptr)->gang.min_member, 0);
  EXPECT_FALSE(JobFromObject(Training(plain), nullptr)->gang.elastic);
}

TEST(JobCodec, ElasticErrorsNameTheField) {
  auto error = [](Json spec) {
    int32_t min = 0;
    std::optional<api::SpecError> e = api::CheckElastic(spec, &min);
    absl::Status s = JobFromObject(Training(spec), nullptr).status();
    EXPECT_FALSE(s.ok());
    EXPECT_TRUE(e.has_value());
    // The controller's decoding and the API's 422 say the same thing.
    if (e) {
      EXPECT_EQ(s.message(), absl::StrCat(e->field, ": ", e->message));
    }
    return e ? e->field : std::string();
  };
  Json groups = {{{"name", "w"}, {"count", 4}, {"gpusPerReplica", 8}}};
  // maxReplicas must equal the groups' counts: they are the maximum.
  EXPECT_EQ(error({{"elastic", {{"minReplicas", 2}, {"maxReplicas", 8}}}, {"groups", groups}}),
            "spec.elastic.maxReplicas");
  EXPECT_EQ(error({{"elastic", {{"minReplicas", 2}, {"maxReplicas", 3}}}, {"groups", groups}}),
            "spec.elastic.maxReplicas");
  EXPECT_EQ(error({{"elastic", {{"minReplicas", 5}, {"maxReplicas", 4}}}, {"groups", groups}}),
            "spec.elastic.minReplicas");
  EXPECT_EQ(error({{"elastic", {{"minReplicas", 0}, {"maxReplicas", 4}}}, {"groups", groups}}),
            "spec.elastic.minReplicas");
  EXPECT_EQ(error({{"elastic", {{"maxReplicas", 4}}}, {"groups", groups}}),
            "spec.elastic.minReplicas");
  EXPECT_EQ(error({{"elastic", {{"minReplicas", 2}, {"maxReplicas", 4}}},
                   {"gang", {{"minMember", 3}}},
                   {"groups", groups}}),
            "spec.gang.minMember");
}

TEST(JobCodec, InferenceServiceDefaultsToSpreadAndElasticGang) {
  Json obj = {{"apiVersion", kApiVersion},
              {"kind", "InferenceService"},
              {"metadata", {{"name", "chat"}, {"namespace", "serve"}}},
              {"spec",
               {{"modelVersion", "v1"},
                {"replicas", {{"min", 2}, {"max", 4}}},
                {"gpusPerReplica", 1},
                {"gpuType", "L40S"}}}};
  absl::StatusOr<model::Job> j = JobFromObject(obj, nullptr);
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(j->key(), "serve/isvc.chat");
  EXPECT_EQ(j->placement, model::PlacementPreference::kSpread);
  EXPECT_EQ(j->total_members(), 4);
  EXPECT_EQ(j->gang.min_member, 2);
}

TEST(NodeCodec, CountAndLayout) {
  absl::StatusOr<model::Node> n =
      NodeFromObject(NodeObj("gpu-1", {{"gpuType", "H100"},
                                       {"gpuCount", 8},
                                       {"rack", "r1"},
                                       {"block", "b1"},
                                       {"cpuMilli", 96000},
                                       {"taints", {{{"key", "k"}, {"effect", "NoSchedule"}}}}}));
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(n->gpus.size(), 8u);
  EXPECT_EQ(n->gpu_model(), "H100");
  EXPECT_EQ(n->topology.num_domains(), 1);
  EXPECT_EQ(n->rack, "r1");
  EXPECT_EQ(n->cpu_milli, 96000);
  EXPECT_EQ(n->memory_mib, kUnlimitedMemoryMiB);
  EXPECT_EQ(n->labels.at("zone"), "a");
  ASSERT_EQ(n->taints.size(), 1u);
}

TEST(NodeCodec, ExplicitGpusLinksAndHealth) {
  Json obj = NodeObj("gpu-2", Json::parse(R"({
    "gpus": [{"index": 0, "uuid": "GPU-a", "model": "A100", "memoryMiB": 40960},
             {"index": 1, "uuid": "GPU-b", "model": "A100", "memoryMiB": 40960}],
    "links": [["X", "NVLINK"], ["NVLINK", "X"]], "nvlinkDomains": [0, 0]})"));
  obj["status"] = {{"gpus", {{{"index", 1}, {"health", "Unhealthy"}}}}};
  absl::StatusOr<model::Node> n = NodeFromObject(obj);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(n->topology.link(0, 1), model::LinkClass::kNvLink);
  EXPECT_EQ(n->gpus[1].health, model::GpuHealth::kUnhealthy);
  EXPECT_EQ(UnhealthyMask(obj), 2u);

  obj["spec"]["links"] = {{"X", "NVLINK"}, {"PIX", "X"}};
  EXPECT_NE(NodeFromObject(obj).status().message().find("spec.links"), std::string::npos);
  obj["spec"]["links"] = {{"X", "NVLINK"}};
  EXPECT_NE(NodeFromObject(obj).status().message().find("spec.links"), std::string::npos);
  absl::Status s = NodeFromObject(NodeObj("n", {{"gpuCount", 2}})).status();
  EXPECT_NE(s.message().find("spec.gpuType"), std::string::npos) << s;
  s = NodeFromObject(NodeObj("n", Json::parse(R"({"gpus": [{"index": 0, "model": "A"},
                                                          {"index": 1, "model": "B"}]})")))
          .status();
  EXPECT_NE(s.message().find("gpus[1].model"), std::string::npos) << s;
}

TEST(PlacementCodec, RoundTrip) {
  sched::ClusterState cs;
  absl::StatusOr<model::Node> n =
      NodeFromObject(NodeObj("gpu-1", {{"gpuType", "H100"}, {"gpuCount", 8}}));
  ASSERT_TRUE(n.ok());
  ASSERT_TRUE(cs.AddNode(*n).ok());
  Json spec = {{"groups", {{{"name", "w"}, {"count", 2}, {"gpusPerReplica", 2}}}}};
  absl::StatusOr<model::Job> j = JobFromObject(Training(spec), nullptr);
  ASSERT_TRUE(j.ok());
  sched::Placement p;
  p.job_key = j->key();
  p.members.push_back({.group = 0, .member = 0, .node = 0, .gpus = {{0, 1000}, {1, 1000}}});
  p.members.push_back({.group = 0, .member = 1, .node = 0, .gpus = {{2, 1000}, {3, 1000}}});
  Json js = PlacementToJson(p, *j, cs, 3);
  EXPECT_EQ(js[1]["node"], "gpu-1");
  EXPECT_EQ(js[1]["gpus"], Json({2, 3}));
  EXPECT_EQ(js[1]["generation"], 3);
  absl::StatusOr<sched::Placement> back = PlacementFromJson(js, *j, cs);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->members.size(), 2u);
  EXPECT_EQ(back->members[1].gpus, p.members[1].gpus);
  js[0]["node"] = "gone";
  EXPECT_TRUE(absl::IsNotFound(PlacementFromJson(js, *j, cs).status()));
}

}  // namespace
}  // namespace tessera::controller
