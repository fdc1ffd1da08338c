#include "config/profile_yaml.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "sched/pack/plugin_set.h"
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

TEST(ProfileYamlTest, TieBreakAndDedupe) {
  auto p = ParseProfileYaml(R"(
nodesToScore: 0
dedupeEquivalentNodes: true
tieBreak: lowestNodeId
plugins:
  - name: resource-fit
)",
                            sched::DefaultRegistry());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->dedupe_equivalent_nodes);
  EXPECT_EQ(p->tie_break, sched::Profile::TieBreak::kLowestNodeId);
  EXPECT_THAT(Err("tieBreak: first\nplugins: []\n"),
              HasSubstr("profile.tieBreak: expected firstCandidate, random or lowestNodeId"));
  EXPECT_THAT(Err("dedupeEquivalentNodes: maybe\nnodesToScore: 0\nplugins: []\n"),
              HasSubstr("profile.dedupeEquivalentNodes"));
  EXPECT_THAT(Err("dedupeEquivalentNodes: true\nplugins: []\n"),
              HasSubstr("profile.dedupeEquivalentNodes: needs nodesToScore: 0"));
}

// Every profile shipped in deploy/profiles/ loads with the plugins a server runs.
TEST(ProfileYamlTest, ShippedProfilesAreValid) {
  sched::pack::PluginSet plugins;
  for (const char* name : {"default", "tessera"}) {
    auto p = LoadProfileFile(absl::StrCat(TESSERA_SOURCE_DIR "/deploy/profiles/", name, ".yaml"),
                             plugins.Registry());
    ASSERT_TRUE(p.ok()) << name << ": " << p.status();
    EXPECT_EQ(p->name, name);
  }
  // The packing plugins are not built in: without them the tessera profile is refused.
  EXPECT_THAT(std::string(LoadProfileFile(TESSERA_SOURCE_DIR "/deploy/profiles/tessera.yaml",
                                          sched::DefaultRegistry())
                              .status()
                              .message()),
              HasSubstr("profile.gpuChooser: unknown plugin \"pack-gpu-tessera\""));
}

}  // namespace
}  // namespace tessera::config
