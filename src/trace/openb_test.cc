#include "trace/openb.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera::trace {
namespace {

using ::testing::HasSubstr;

TEST(OpenbTest, NodesRoundTrip) {
  std::vector<OpenbNode> nodes = {{"n0", 96000, 393216, 8, "G2"},
                                  {"n1", 104000, 786432, 2, "T4"},
                                  {"cpu0", 64000, 262144, 0, ""}};
  std::string text = FormatOpenbNodes(nodes);
  auto back = ParseOpenbNodes(text, "nodes.csv");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, nodes);
  EXPECT_EQ(FormatOpenbNodes(*back), text);
}

TEST(OpenbTest, PodsRoundTripElevenAndFiveColumns) {
  std::vector<OpenbPod> pods = {
      {"p0", 12000, 16384, 1, 1000, "", "LS", "Running", 0, 12537496, 0},
      {"p1", 6000, 12288, 1, 460, "V100M16|V100M32", "BE", "Failed", 427061, 0, 427061},
      {"p2", 88000, 327680, 8, 1000, "G2", "LS", "Running", 5, 9, 5},
      {"p3", 4000, 8192, 0, 0, "", "Burstable", "Succeeded", 1, 2, 1}};
  std::string text = FormatOpenbPods(pods);
  auto back = ParseOpenbPods(text, "pods.csv");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, pods);

  std::string five = FormatOpenbPods(pods, /*five_columns=*/true);
  auto short_back = ParseOpenbPods(five, "multigpu.csv");
  ASSERT_TRUE(short_back.ok()) << short_back.status();
  ASSERT_EQ(short_back->size(), pods.size());
  EXPECT_EQ((*short_back)[1].gpu_milli, 460);
  EXPECT_EQ((*short_back)[1].gpu_spec, "");
  EXPECT_EQ(FormatOpenbPods(*short_back, true), five);
}

TEST(OpenbTest, MalformedRowsNameFileLineAndColumn) {
  const std::string head = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n";
  struct Case {
    std::string text;
    std::string want;
  } cases[] = {
      {head + "p0,1000,10,1,500\np1,x,10,1,500\n",
       "pods.csv:3: column 2 (cpu_milli): expected an integer"},
      {head + "p0,1000,10,1\n", "pods.csv:2: expected 5 columns, got 4"},
      {head + "p0,1000,10,2,500\n",
       "pods.csv:2: column 5 (gpu_milli): a GPU share (500) needs num_gpu == 1"},
      {head + "p0,1000,10,1,1500\n", "pods.csv:2: column 5 (gpu_milli): must be in 0..1000"},
      {head + "p0,1000,10,1,0\n",
       "pods.csv:2: column 5 (gpu_milli): a pod with GPUs needs gpu_milli"},
      {head + "p0,-5,10,1,100\n", "pods.csv:2: column 2 (cpu_milli): must be in 0.."},
      {head + ",1000,10,1,100\n", "pods.csv:2: column 1 (name): must not be empty"},
      {head + "p0,1000,10,17,1000\n", "pods.csv:2: column 4 (num_gpu): must be in 0..16"},
      {"name,cpu\np0,1\n", "pods.csv:1: unexpected header"},
      {"", "pods.csv:1: empty file"},
  };
  for (const Case& c : cases) {
    auto r = ParseOpenbPods(c.text, "pods.csv");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.want)) << c.text;
  }
  auto n = ParseOpenbNodes("sn,cpu_milli,memory_mib,gpu,model\nn0,1000,10,2,\n", "nodes.csv");
  ASSERT_FALSE(n.ok());
  EXPECT_THAT(std::string(n.status().message()),
              HasSubstr("nodes.csv:2: column 5 (model): a node with GPUs needs a GPU model"));
  n = ParseOpenbNodes("sn,cpu_milli,memory_mib,gpu,model\nn0,1000,10,two,G2\n", "nodes.csv");
  ASSERT_FALSE(n.ok());
  EXPECT_THAT(std::string(n.status().message()), HasSubstr("nodes.csv:2: column 4 (gpu)"));
  auto missing = LoadOpenbPods("/nonexistent/pods.csv");
  EXPECT_FALSE(missing.ok());
}

TEST(OpenbTest, MapsToModelValues) {
  model::Node node = ToNode({"n0", 96000, 393216, 8, "G2"});
  EXPECT_TRUE(model::ValidateNode(node).ok());
  EXPECT_EQ(node.gpus.size(), 8u);
  EXPECT_EQ(node.gpu_model(), "G2");
  EXPECT_EQ(node.cpu_milli, 96000);
  model::Node cpu = ToNode({"c0", 64000, 1024, 0, ""});
  EXPECT_TRUE(model::ValidateNode(cpu).ok());
  EXPECT_TRUE(cpu.gpus.empty());

  OpenbPod share{"p1", 6000, 12288, 1, 460, "V100M16|V100M32|V100M32", "BE", "Running", 0, 0, 0};
  model::Job j = ToJob(share, "p1-copy");
  EXPECT_TRUE(model::ValidateJob(j, nullptr).ok());
  EXPECT_EQ(j.name, "p1-copy");
  ASSERT_EQ(j.groups.size(), 1u);
  EXPECT_EQ(j.groups[0].count, 1);
  EXPECT_TRUE(j.groups[0].resources.fractional());
  EXPECT_EQ(j.groups[0].resources.gpu_milli, 460);
  EXPECT_EQ(j.gpu_models, (std::vector<std::string>{"V100M16", "V100M32"}));

  OpenbPod cpu_only{"p2", 4000, 8192, 0, 0, "", "", "", 0, 0, 0};
  model::Job c = ToJob(cpu_only, "p2");
  EXPECT_TRUE(model::ValidateJob(c, nullptr).ok());
  EXPECT_EQ(c.groups[0].resources.gpus, 0);
  EXPECT_TRUE(c.gpu_models.empty());
}

}  // namespace
}  // namespace tessera::trace
