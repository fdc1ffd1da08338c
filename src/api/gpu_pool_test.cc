#include "api/gpu_pool.h"

#include <gtest/gtest.h>

#include <random>

namespace tessera::api {
namespace {

using Json = nlohmann::json;

PoolNode Node(std::string name, std::string type, std::map<std::string, std::string> labels,
              int gpus, int unhealthy = 0, int allocated = 0, bool cordoned = false) {
  return PoolNode{std::move(name), std::move(type), std::move(labels), gpus,
                  unhealthy,       allocated,       cordoned};
}

Json Pool(Json spec) { return {{"metadata", {{"name", "p"}}}, {"spec", std::move(spec)}}; }

TEST(GpuPoolTest, SelectsByTypeAndEveryLabel) {
  const PoolNode n = Node("n1", "H100", {{"zone", "a"}, {"team", "x"}}, 8);
  EXPECT_TRUE(PoolSelects(Json::parse(R"({"gpuType": "H100"})"), n));
  EXPECT_TRUE(PoolSelects(Json::parse(R"({"gpuType": ""})"), n));
  EXPECT_TRUE(PoolSelects(Json::parse(R"({"gpuType": "*"})"), n));
  EXPECT_TRUE(PoolSelects(Json::object(), n));
  EXPECT_FALSE(PoolSelects(Json::parse(R"({"gpuType": "A100"})"), n));
  EXPECT_TRUE(PoolSelects(
      Json::parse(R"({"gpuType": "*", "nodeSelector": {"zone": "a", "team": "x"}})"), n));
  EXPECT_FALSE(PoolSelects(Json::parse(R"({"gpuType": "*", "nodeSelector": {"zone": "b"}})"), n));
  EXPECT_FALSE(PoolSelects(Json::parse(R"({"gpuType": "*", "nodeSelector": {"rack": "a"}})"), n));
  EXPECT_FALSE(PoolSelects(Json(), n));
}

TEST(GpuPoolTest, StatusCountsTheSelectedNodes) {
  const std::vector<PoolNode> nodes = {
      Node("h2", "H100", {{"zone", "a"}}, 8, 1, 4),
      Node("h1", "H100", {{"zone", "a"}}, 8, 0, 8, /*cordoned=*/true),
      Node("h3", "H100", {{"zone", "b"}}, 8, 0, 2),
      Node("a1", "A100", {{"zone", "a"}}, 4),
  };
  const Json st = PoolStatus(Pool(Json::parse(R"({"gpuType": "H100",
                                                   "nodeSelector": {"zone": "a"}})")),
                             nodes);
  EXPECT_EQ(st, Json::parse(R"({"phase": "Ready", "nodes": 2, "gpus": 16, "allocatable": 7,
                                "allocated": 12, "unhealthy": 1, "nodeNames": ["h1", "h2"],
                                "cordoned": 1})"));
  EXPECT_EQ(PoolStatus(Pool(Json::parse(R"({"gpuType": "B200"})")), nodes),
            Json::parse(R"({"phase": "Pending", "nodes": 0, "gpus": 0, "allocatable": 0,
                            "allocated": 0, "unhealthy": 0, "nodeNames": [], "cordoned": 0})"));
  EXPECT_EQ(PoolStatus(Pool(Json::parse(R"({"gpuType": "*", "cordon": true})")), nodes)["phase"],
            "Draining");
  EXPECT_EQ(PoolStatus(Pool(Json::parse(R"({"gpuType": "*", "drain": true})")), {})["phase"],
            "Draining");
  Json deleting = Pool(Json::parse(R"({"gpuType": "*"})"));
  deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  EXPECT_EQ(PoolStatus(deleting, nodes)["nodes"], 0);
}

TEST(GpuPoolTest, NodeNamesAreCapped) {
  std::vector<PoolNode> nodes;
  for (int i = 0; i < kPoolStatusMaxNodeNames + 10; ++i) {
    nodes.push_back(Node("n" + std::to_string(1000 + i), "H100", {}, 1));
  }
  const Json st = PoolStatus(Pool({{"gpuType", "H100"}}), nodes);
  EXPECT_EQ(st["nodes"], kPoolStatusMaxNodeNames + 10);
  EXPECT_EQ(st["gpus"], kPoolStatusMaxNodeNames + 10);
  ASSERT_EQ(st["nodeNames"].size(), static_cast<size_t>(kPoolStatusMaxNodeNames));
  EXPECT_EQ(st["nodeNames"][0], "n1000");
}

TEST(GpuPoolTest, CordonDrainAndQueueConfinement) {
  const std::vector<PoolNode> nodes = {Node("h1", "H100", {{"zone", "a"}}, 8),
                                       Node("h2", "H100", {{"zone", "b"}}, 8),
                                       Node("a1", "A100", {{"zone", "a"}}, 8)};
  const Json zone_a = Pool(Json::parse(R"({"gpuType": "*", "nodeSelector": {"zone": "a"},
                                           "queues": ["research"], "cordon": true})"));
  const Json h100 = Pool(Json::parse(R"({"gpuType": "H100", "queues": ["research", "prod"],
                                         "drain": true})"));
  const Json empty = Pool(Json::parse(R"({"gpuType": "B200", "queues": ["late"]})"));
  Json deleting = Pool(Json::parse(R"({"gpuType": "*", "queues": ["gone"], "drain": true})"));
  deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  const std::vector<const Json*> pools = {&zone_a, &h100, &empty, &deleting, nullptr};
  EXPECT_EQ(NodesCordonedByPools(pools, nodes), (std::set<std::string>{"a1", "h1", "h2"}));
  EXPECT_EQ(NodesDrainedByPools(pools, nodes), (std::set<std::string>{"h1", "h2"}));
  EXPECT_EQ(QueuePoolNodes("research", pools, nodes), (std::vector<std::string>{"a1", "h1", "h2"}));
  EXPECT_EQ(QueuePoolNodes("prod", pools, nodes), (std::vector<std::string>{"h1", "h2"}));
  EXPECT_EQ(QueuePoolNodes("late", pools, nodes), std::vector<std::string>{});
  EXPECT_FALSE(QueuePoolNodes("gone", pools, nodes).has_value());
  EXPECT_FALSE(QueuePoolNodes("other", pools, nodes).has_value());
}

// Invariants over random fleets: allocatable + the cordoned nodes' healthy GPUs + unhealthy ==
// gpus; every listed node is selected; a drained node is cordoned.
TEST(GpuPoolTest, StatusInvariantsOverRandomFleets) {
  std::mt19937_64 rng(7);
  const char* types[] = {"H100", "A100", "L4"};
  const char* zones[] = {"a", "b"};
  for (int round = 0; round < 200; ++round) {
    std::vector<PoolNode> nodes;
    const int n = static_cast<int>(rng() % 10);
    for (int i = 0; i < n; ++i) {
      const int gpus = static_cast<int>(rng() % 9);
      nodes.push_back(Node("n" + std::to_string(i), types[rng() % 3], {{"zone", zones[rng() % 2]}},
                           gpus, gpus == 0 ? 0 : static_cast<int>(rng() % (gpus + 1)),
                           gpus == 0 ? 0 : static_cast<int>(rng() % (gpus + 1)), rng() % 3 == 0));
    }
    Json spec = {{"gpuType", rng() % 2 ? "*" : types[rng() % 3]}};
    if (rng() % 2) spec["nodeSelector"] = {{"zone", zones[rng() % 2]}};
    if (rng() % 3 == 0) spec["drain"] = true;
    const Json pool = Pool(spec);
    const Json st = PoolStatus(pool, nodes);
    int healthy_cordoned = 0, selected = 0;
    for (const PoolNode& node : nodes) {
      if (!PoolSelects(spec, node)) continue;
      ++selected;
      if (node.cordoned) healthy_cordoned += node.gpus - node.unhealthy;
    }
    EXPECT_EQ(st["nodes"], selected);
    EXPECT_EQ(st["allocatable"].get<int>() + healthy_cordoned + st["unhealthy"].get<int>(),
              st["gpus"].get<int>());
    for (const Json& name : st["nodeNames"]) {
      const std::string s = name;
      const auto it =
          std::find_if(nodes.begin(), nodes.end(), [&](const PoolNode& x) { return x.name == s; });
      ASSERT_NE(it, nodes.end());
      EXPECT_TRUE(PoolSelects(spec, *it));
    }
    const std::vector<const Json*> pools = {&pool};
    const std::set<std::string> cordoned = NodesCordonedByPools(pools, nodes);
    for (const std::string& d : NodesDrainedByPools(pools, nodes)) EXPECT_TRUE(cordoned.count(d));
    EXPECT_EQ(st["phase"], spec.contains("drain") ? "Draining" : selected ? "Ready" : "Pending");
  }
}

}  // namespace
}  // namespace tessera::api
