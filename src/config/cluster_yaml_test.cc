#include "config/cluster_yaml.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera::config {
namespace {

using ::testing::HasSubstr;

TEST(ClusterYamlTest, ParsesAndDefaults) {
  auto s = ParseClusterYaml("nodes: 3125\ngpusPerNode: 4\nlayout: pcie\ngpuModel: A100\n");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->nodes, 3125);
  EXPECT_EQ(s->gpus_per_node, 4);
  EXPECT_EQ(s->layout, model::GpuLayout::kPcieSwitchPairs);
  EXPECT_EQ(s->gpu_model, "A100");
  EXPECT_EQ(s->nodes_per_rack, model::SyntheticClusterSpec{}.nodes_per_rack);
  auto shipped = LoadClusterFile(TESSERA_SOURCE_DIR "/deploy/clusters/25k-h100.yaml");
  ASSERT_TRUE(shipped.ok()) << shipped.status();
  EXPECT_EQ(int64_t{shipped->nodes} * shipped->gpus_per_node, 25000);
}

TEST(ClusterYamlTest, ErrorsNameTheField) {
  auto err = [](absl::string_view y) {
    return std::string(ParseClusterYaml(y).status().message());
  };
  EXPECT_THAT(err("gpusPerNode: 17\n"), HasSubstr("cluster.gpusPerNode: must be in 0..16, got 17"));
  EXPECT_THAT(err("nodes: many\n"), HasSubstr("cluster.nodes: expected an integer"));
  EXPECT_THAT(err("layout: torus\n"), HasSubstr("cluster.layout: unknown \"torus\""));
  EXPECT_THAT(err("racks: 3\n"), HasSubstr("cluster.racks: unknown field"));
  EXPECT_THAT(err("nodes: [\n"), HasSubstr("invalid YAML"));
  EXPECT_FALSE(LoadClusterFile("/nonexistent.yaml").ok());
}

}  // namespace
}  // namespace tessera::config
