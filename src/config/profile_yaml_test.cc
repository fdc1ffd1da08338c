#include "config/profile_yaml.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sched/plugins/default_registry.h"

namespace tessera::config {
namespace {

using ::testing::HasSubstr;

std::string Err(absl::string_view yaml) {
  auto p = ParseProfileYaml(yaml, sched::DefaultRegistry());
  return p.ok() ? "" : std::string(p.status().message());
}

TEST(ProfileYamlTest, ParsesAFullProfile) {
  auto p = ParseProfileYaml(R"(
name: training
queueSort: priority
gpuChooser: nvlink-aware
nodesToScore: 0
maxDomains: 2
plugins:
  - name: resource-fit
  - name: gang
  - name: topology
    weight: 5
  - name: pack-spread
)",
                            sched::DefaultRegistry());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->name, "training");
  EXPECT_EQ(p->nodes_to_score, 0);
  EXPECT_EQ(p->max_domains, 2);
  ASSERT_EQ(p->plugins.size(), 4u);
  EXPECT_EQ(p->plugins[2].weight, 5);
}

TEST(ProfileYamlTest, ErrorsNameTheField) {
  EXPECT_THAT(Err("plugins:\n  - name: no-such\n"),
              HasSubstr("profile.plugins[0].name: unknown plugin"));
  EXPECT_THAT(Err("plugins:\n  - name: gang\n    weight: 0\n"),
              HasSubstr("profile.plugins[0].weight: must be in 1..100, got 0"));
  EXPECT_THAT(Err("plugins:\n  - name: gang\n    weight: heavy\n"),
              HasSubstr("profile.plugins[0].weight: expected an integer"));
  EXPECT_THAT(Err("plugins:\n  - name: gang\n    colour: red\n"),
              HasSubstr("profile.plugins[0].colour: unknown field"));
  EXPECT_THAT(Err("nodesToScore: -1\nplugins: []\n"), HasSubstr("profile.nodesToScore"));
  EXPECT_THAT(Err("queueSort: gang\nplugins: []\n"), HasSubstr("profile.queueSort"));
  EXPECT_THAT(Err("name: x\n"), HasSubstr("profile.plugins: expected a list"));
  EXPECT_THAT(Err("plugins: [\n"), HasSubstr("invalid YAML"));
  EXPECT_THAT(Err("plugins:\n  - name: gang\n    args: {x: y}\n"),
              HasSubstr("profile.plugins[0].args: plugin gang takes no arguments"));
}

TEST(ProfileYamlTest, ShippedDefaultProfileIsValid) {
  auto p =
      LoadProfileFile(TESSERA_SOURCE_DIR "/deploy/profiles/default.yaml", sched::DefaultRegistry());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->plugins.size(), sched::Profile::Default().plugins.size());
  EXPECT_FALSE(LoadProfileFile("/nonexistent.yaml", sched::DefaultRegistry()).ok());
}

}  // namespace
}  // namespace tessera::config
