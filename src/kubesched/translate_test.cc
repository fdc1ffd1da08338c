#include "kubesched/translate.h"

#include <gtest/gtest.h>

#include "kube/codec.h"
#include "model/node_affinity.h"

namespace tessera::kubesched {
namespace {

kube::Node DecodeNodeJson(const kube::Json& j) {
  absl::StatusOr<kube::Node> n = kube::DecodeNode(j);
  EXPECT_TRUE(n.ok()) << n.status();
  return *n;
}

kube::Pod DecodePodJson(const kube::Json& j) {
  absl::StatusOr<kube::Pod> p = kube::DecodePod(j);
  EXPECT_TRUE(p.ok()) << p.status();
  return *p;
}

kube::Json GpuNode(const std::string& name, int gpus) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata",
           {{"name", name},
            {"labels",
             {{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
              {"nvidia.com/gpu.memory", "81559"},
              {"tessera.dev/rack", "r1"},
              {"tessera.dev/block", "b0"}}},
            {"annotations", {{"tessera.dev/nvlink-domains", "0,0,1,1"}}}}},
          {"spec", {{"taints", {{{"key", "gpu"}, {"value", "yes"}, {"effect", "NoSchedule"}}}}}},
          {"status",
           {{"allocatable",
             {{"nvidia.com/gpu", std::to_string(gpus)},
              {"cpu", "64"},
              {"memory", "512Gi"},
              {"pods", "110"}}},
            {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

TEST(TranslateTest, NodeFromKubeReadsGpusIslandsRackAndCapacity) {
  absl::StatusOr<model::Node> n = NodeFromKube(DecodeNodeJson(GpuNode("n1", 4)), {});
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(n->gpus.size(), 4u);
  EXPECT_EQ(n->gpu_model(), "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(n->gpus[0].memory_mib, 81559);
  EXPECT_EQ(n->topology.num_domains(), 2);
  EXPECT_EQ(n->topology.domain(1), n->topology.domain(0));
  EXPECT_NE(n->topology.domain(2), n->topology.domain(0));
  EXPECT_EQ(n->rack, "r1");
  EXPECT_EQ(n->block, "b0");
  EXPECT_EQ(n->cpu_milli, 64000);
  EXPECT_EQ(n->memory_mib, 512 * 1024);
  EXPECT_EQ(n->max_members, 110);
  ASSERT_EQ(n->taints.size(), 1u);
  EXPECT_FALSE(n->unschedulable);
  EXPECT_TRUE(model::ValidateNode(*n).ok());
  EXPECT_TRUE(n->scalars.empty());
}

TEST(TranslateTest, NodeFromKubeOffersItsMigSlicesAsExtendedResources) {
  kube::Json j = GpuNode("n1", 0);
  j["status"]["allocatable"]["nvidia.com/mig-3g.40gb"] = "2";
  j["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] = "7";
  absl::StatusOr<model::Node> n = NodeFromKube(DecodeNodeJson(j), {});
  ASSERT_TRUE(n.ok()) << n.status();
  ASSERT_EQ(n->scalars.size(), 2u);
  EXPECT_EQ(n->scalars[0], (std::pair<std::string, int64_t>{"nvidia.com/mig-1g.10gb", 7}));
  EXPECT_EQ(n->scalars[1], (std::pair<std::string, int64_t>{"nvidia.com/mig-3g.40gb", 2}));
  EXPECT_TRUE(model::ValidateNode(*n).ok());
}

TEST(TranslateTest, NotReadyNodeIsUnschedulableAndBadIslandsAreNamed) {
  kube::Json j = GpuNode("n1", 4);
  j["status"]["conditions"][0]["status"] = "False";
  absl::StatusOr<model::Node> n = NodeFromKube(DecodeNodeJson(j), {});
  ASSERT_TRUE(n.ok());
  EXPECT_TRUE(n->unschedulable);
  j = GpuNode("n1", 8);  // 4 ids for 8 GPUs
  n = NodeFromKube(DecodeNodeJson(j), {});
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("tessera.dev/nvlink-domains"), std::string::npos);
  j = GpuNode("n1", 32);
  n = NodeFromKube(DecodeNodeJson(j), {});
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("status.capacity[nvidia.com/gpu]"), std::string::npos);
}

TEST(TranslateTest, GpusOutsideAllocatableAreUnhealthyAndKeepTheirIslands) {
  // An XID took one GPU out of allocatable; capacity and the islands annotation still count 4.
  kube::Json j = GpuNode("n1", 3);
  j["status"]["capacity"] = {{"nvidia.com/gpu", "4"}};
  absl::StatusOr<model::Node> n = NodeFromKube(DecodeNodeJson(j), {});
  ASSERT_TRUE(n.ok()) << n.status();
  ASSERT_EQ(n->gpus.size(), 4u);
  EXPECT_EQ(n->gpus[3].health, model::GpuHealth::kUnhealthy);
  EXPECT_EQ(n->gpus[2].health, model::GpuHealth::kHealthy);
  EXPECT_EQ(n->topology.num_domains(), 2);
}

kube::Json Pod(const kube::Json& resources) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", "p"}, {"namespace", "ml"}}},
          {"spec",
           {{"schedulerName", "tessera"},
            {"containers", {{{"name", "a"}, {"image", "x"}, {"resources", resources}}}}}}};
}

TEST(TranslateTest, PodRequestSumsContainersAndTakesLimitsForGpus) {
  kube::Json j = Pod(
      {{"requests", {{"cpu", "500m"}, {"memory", "1Gi"}}}, {"limits", {{"nvidia.com/gpu", "2"}}}});
  j["spec"]["containers"].push_back(
      {{"name", "b"}, {"image", "x"}, {"resources", {{"requests", {{"cpu", "1500m"}}}}}});
  j["spec"]["initContainers"] = {
      {{"name", "i"}, {"image", "x"}, {"resources", {{"requests", {{"cpu", "4"}}}}}}};
  absl::StatusOr<model::ResourceRequest> r = PodRequest(DecodePodJson(j));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->gpus, 2);
  EXPECT_EQ(r->cpu_milli, 4000);  // the init container's 4 beats 0.5 + 1.5
  EXPECT_EQ(r->memory_mib, 1024);
}

TEST(TranslateTest, PodRequestNamesEveryResourceItCannotPlace) {
  kube::Json j = Pod({{"limits", {{"nvidia.com/gpu", "20"}, {"example.com/fpga", "500m"}}}});
  absl::StatusOr<model::ResourceRequest> r = PodRequest(DecodePodJson(j));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("example.com/fpga: an extended resource is counted in whole"),
            std::string::npos)
      << r.status();
  EXPECT_NE(r.status().message().find("20 GPUs"), std::string::npos) << r.status();
}

TEST(TranslateTest, MigProfilesAndOtherExtendedResourcesAreCounted) {
  kube::Json j = Pod({{"limits", {{"nvidia.com/mig-1g.10gb", "2"}, {"rdma/ib", "1"}}}});
  j["spec"]["containers"].push_back(
      {{"name", "b"},
       {"image", "x"},
       {"resources", {{"limits", {{"nvidia.com/mig-1g.10gb", "1"}}}}}});
  absl::StatusOr<model::ResourceRequest> r = PodRequest(DecodePodJson(j));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->gpus, 0);
  ASSERT_EQ(r->scalars.size(), 2u);
  EXPECT_EQ(r->scalars[0], (std::pair<std::string, int64_t>{"nvidia.com/mig-1g.10gb", 3}));
  EXPECT_EQ(r->scalars[1], (std::pair<std::string, int64_t>{"rdma/ib", 1}));
}

TEST(TranslateTest, ConstraintsBecomeNodeAffinityAndTolerations) {
  kube::Json j = Pod({});
  j["spec"]["nodeSelector"] = {{"zone", "a"}};
  j["spec"]["tolerations"] = {{{"key", "gpu"}, {"operator", "Exists"}}};
  j["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = {
      {"nodeSelectorTerms",
       {{{"matchExpressions",
          {{{"key", "tessera.dev/rack"}, {"operator", "In"}, {"values", {"r1", "r2"}}}}}}}}};
  model::Job job;
  ASSERT_TRUE(ApplyPodConstraints(DecodePodJson(j), &job).ok());
  EXPECT_EQ(job.node_selector.at("zone"), "a");
  ASSERT_EQ(job.tolerations.size(), 1u);
  EXPECT_EQ(job.tolerations[0].op, model::Toleration::Op::kExists);
  EXPECT_TRUE(model::MatchesNodeAffinity(job.node_affinity, "n", {{"tessera.dev/rack", "r2"}}));
  EXPECT_FALSE(model::MatchesNodeAffinity(job.node_affinity, "n", {{"tessera.dev/rack", "r3"}}));
  EXPECT_FALSE(model::MatchesNodeAffinity(job.node_affinity, "n", {}));

  j["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
   ["nodeSelectorTerms"][0]["matchExpressions"][0]["operator"] = "Gt";
  absl::Status s = ApplyPodConstraints(DecodePodJson(j), &job);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("nodeSelectorTerms[0].requirements[0].values"), std::string::npos)
      << s;
}

TEST(TranslateTest, NodeAffinityOperators) {
  using Op = model::NodeSelectorRequirement::Op;
  std::vector<model::NodeSelectorTerm> terms = {
      {{{"gen", Op::kGt, {"3"}, false}, {"spot", Op::kDoesNotExist, {}, false}}},
      {{{"metadata.name", Op::kIn, {"special"}, true}}}};
  EXPECT_TRUE(model::MatchesNodeAffinity(terms, "n", {{"gen", "4"}}));
  EXPECT_FALSE(model::MatchesNodeAffinity(terms, "n", {{"gen", "3"}}));
  EXPECT_FALSE(model::MatchesNodeAffinity(terms, "n", {{"gen", "4"}, {"spot", ""}}));
  EXPECT_TRUE(model::MatchesNodeAffinity(terms, "special", {}));
  EXPECT_TRUE(model::ValidateNodeAffinity(terms, "f").ok());
}

TEST(TranslateTest, GangsOfBothApis) {
  kube::Json j = Pod({});
  EXPECT_FALSE(GangOf(DecodePodJson(j)).has_value());
  j["metadata"]["labels"] = {{"scheduling.x-k8s.io/pod-group", "g1"}};
  std::optional<GangRef> g = GangOf(DecodePodJson(j));
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->Key(), "x:ml/g1");

  kube::CoschedulingPodGroup pg;
  pg.min_member = 4;
  pg.schedule_timeout_seconds = 30;
  pg.metadata.annotations[kTopologyAnnotation] = "rack";
  absl::StatusOr<GangSpec> s = GangSpecOf(pg, {});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->min_member, 4);
  EXPECT_EQ(s->timeout, absl::Seconds(30));
  EXPECT_EQ(s->topology.level, model::TopologyLevel::kRack);
  EXPECT_TRUE(s->topology.required);
  pg.metadata.annotations[kTopologyAnnotation] = "row";
  EXPECT_FALSE(GangSpecOf(pg, {}).ok());

  kube::PodGroup kg;
  kg.policy.gang_min_count = 8;
  kg.topology_keys = {"tessera.dev/block", "tessera.dev/rack"};
  s = GangSpecOf(kg, {});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->min_member, 8);
  EXPECT_EQ(s->topology.level, model::TopologyLevel::kRack);  // the smallest domain rules
  kg.topology_keys = {"example.com/row"};
  EXPECT_FALSE(GangSpecOf(kg, {}).ok());
}

}  // namespace
}  // namespace tessera::kubesched
