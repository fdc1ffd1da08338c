#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "model/job.h"
#include "model/node.h"
#include "model/node_topology.h"
#include "model/resources.h"
#include "model/synthetic_cluster.h"
#include "model/taint.h"

namespace tessera::model {
namespace {

using ::testing::HasSubstr;

TEST(ResourcesTest, FractionNeedsOneGpu) {
  ResourceRequest r{.gpus = 2, .gpu_milli = 500};
  absl::Status s = ValidateRequest(r, "spec.groups[0].resources");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("spec.groups[0].resources.gpuMilli"));
  r.gpus = 1;
  EXPECT_TRUE(ValidateRequest(r, "x").ok());
  EXPECT_TRUE(r.fractional());
}

TEST(ResourcesTest, RejectsNegativesAndEmpty) {
  EXPECT_FALSE(ValidateRequest({.gpus = -1}, "r").ok());
  EXPECT_FALSE(ValidateRequest({.gpus = 1, .cpu_milli = -5}, "r").ok());
  EXPECT_FALSE(ValidateRequest({.gpus = 1, .gpu_milli = 0}, "r").ok());
  EXPECT_FALSE(ValidateRequest({.gpus = 1, .gpu_milli = 1001}, "r").ok());
  absl::Status s = ValidateRequest({}, "r");
  EXPECT_THAT(std::string(s.message()), HasSubstr("r.gpus"));
}

TEST(NodeTopologyTest, NvSwitchIsAllToAll) {
  NodeTopology t = NodeTopology::NvSwitch(8);
  EXPECT_EQ(t.num_domains(), 1);
  EXPECT_EQ(t.link(0, 7), LinkClass::kNvSwitch);
  EXPECT_EQ(t.link(3, 3), LinkClass::kSelf);
}

TEST(NodeTopologyTest, NvLinkPairs) {
  NodeTopology t = NodeTopology::NvLinkGroups(4, 2);
  EXPECT_EQ(t.num_domains(), 2);
  EXPECT_EQ(t.link(0, 1), LinkClass::kNvLink);
  EXPECT_EQ(t.link(2, 3), LinkClass::kNvLink);
  EXPECT_EQ(t.link(1, 2), LinkClass::kCrossNuma);
  EXPECT_EQ(t.domain(0), t.domain(1));
  EXPECT_NE(t.domain(1), t.domain(2));
}

TEST(NodeTopologyTest, PcieSwitchPairs) {
  NodeTopology t = NodeTopology::PcieSwitchPairs(8);
  EXPECT_EQ(t.num_domains(), 8);
  EXPECT_EQ(t.link(0, 1), LinkClass::kPcieSwitch);
  EXPECT_EQ(t.link(0, 2), LinkClass::kPcieHostBridge);
  EXPECT_EQ(t.link(0, 5), LinkClass::kCrossNuma);
}

TEST(NodeTopologyTest, FromMatrixValidates) {
  using L = LinkClass;
  auto ok = NodeTopology::FromMatrix(2, {L::kSelf, L::kNvLink, L::kNvLink, L::kSelf}, {7, 7});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->num_domains(), 1);
  auto asym = NodeTopology::FromMatrix(2, {L::kSelf, L::kNvLink, L::kCrossNuma, L::kSelf}, {0, 1});
  EXPECT_FALSE(asym.ok());
  auto diag = NodeTopology::FromMatrix(1, {L::kNvLink}, {0});
  EXPECT_FALSE(diag.ok());
}

TEST(TaintTest, Toleration) {
  Taint t{.key = "gpu", .value = "h100", .effect = TaintEffect::kNoSchedule};
  EXPECT_TRUE(Tolerates({.key = "gpu", .op = Toleration::Op::kEqual, .value = "h100"}, t));
  EXPECT_FALSE(Tolerates({.key = "gpu", .op = Toleration::Op::kEqual, .value = "a100"}, t));
  EXPECT_TRUE(Tolerates({.key = "gpu", .op = Toleration::Op::kExists}, t));
  EXPECT_TRUE(Tolerates({.key = "", .op = Toleration::Op::kExists}, t));
  EXPECT_FALSE(Tolerates(
      {.key = "gpu", .op = Toleration::Op::kExists, .effect = TaintEffect::kNoExecute}, t));
}

TEST(JobTest, ValidateNamesTheField) {
  Job j;
  j.name = "train";
  j.groups.push_back({.name = "w", .count = 4, .resources = {.gpus = 8}});
  EXPECT_TRUE(ValidateJob(j, nullptr).ok());
  j.gang.min_member = 5;
  absl::Status s = ValidateJob(j, nullptr);
  EXPECT_THAT(std::string(s.message()), HasSubstr("spec.gang.minMember"));
  j.gang.min_member = 0;
  j.groups[0].count = 0;
  EXPECT_THAT(std::string(ValidateJob(j, nullptr).message()), HasSubstr("spec.groups[0].count"));
  j.groups[0].count = 1;
  j.gpu_models = {"B200"};
  absl::flat_hash_set<std::string> models = {"H100", "A100"};
  s = ValidateJob(j, &models);
  EXPECT_THAT(std::string(s.message()), HasSubstr("spec.gpuModels[0]: unknown GPU model"));
  j.gpu_models = {"H100"};
  EXPECT_TRUE(ValidateJob(j, &models).ok());
  EXPECT_EQ(j.total_gpu_milli(), 8000);
}

TEST(NodeTest, ValidateRejectsMixedModels) {
  auto nodes = BuildSyntheticCluster({.nodes = 2, .gpus_per_node = 4});
  ASSERT_TRUE(nodes.ok());
  Node n = (*nodes)[0];
  EXPECT_TRUE(ValidateNode(n).ok());
  n.gpus[2].model = "A100";
  EXPECT_THAT(std::string(ValidateNode(n).message()), HasSubstr("gpus[2].model"));
}

TEST(SyntheticClusterTest, RacksAndBlocks) {
  auto nodes = BuildSyntheticCluster(
      {.nodes = 70, .gpus_per_node = 8, .nodes_per_rack = 32, .racks_per_block = 2});
  ASSERT_TRUE(nodes.ok());
  EXPECT_EQ((*nodes)[31].rack, "r000");
  EXPECT_EQ((*nodes)[32].rack, "r001");
  EXPECT_EQ((*nodes)[64].block, "b01");
  EXPECT_FALSE(BuildSyntheticCluster({.nodes = 0}).ok());
}

}  // namespace
}  // namespace tessera::model
