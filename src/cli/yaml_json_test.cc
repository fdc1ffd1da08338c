#include "cli/yaml_json.h"

#include <gtest/gtest.h>

#include "cli/api_client.h"
#include "cli/resources.h"

namespace tessera::cli {
namespace {

TEST(YamlJson, TypesScalarsAndKeepsQuotedStrings) {
  absl::StatusOr<std::vector<Json>> docs = ParseManifests(R"(
apiVersion: tessera.dev/v1
kind: TrainingJob
metadata: {name: a}
spec:
  count: 4
  ratio: 0.5
  flag: true
  version: "7"
  none: null
---
{"kind": "Node", "metadata": {"name": "n"}, "spec": {"gpuCount": 8}}
)");
  ASSERT_TRUE(docs.ok()) << docs.status();
  ASSERT_EQ(docs->size(), 2u);
  const Json& s = (*docs)[0]["spec"];
  EXPECT_EQ(s["count"], 4);
  EXPECT_EQ(s["ratio"], 0.5);
  EXPECT_EQ(s["flag"], true);
  EXPECT_EQ(s["version"], "7");
  EXPECT_TRUE(s["none"].is_null());
  EXPECT_EQ((*docs)[1]["spec"]["gpuCount"], 8);
}

TEST(YamlJson, ListsAreFlattenedAndYamlRoundTrips) {
  Json list = {{"kind", "List"},
               {"items",
                {{{"kind", "Node"}, {"metadata", {{"name", "a"}}}},
                 {{"kind", "Node"}, {"metadata", {{"name", "b"}, {"labels", {{"v", "1"}}}}}}}}};
  absl::StatusOr<std::vector<Json>> docs = ParseManifests(ToYaml(list));
  ASSERT_TRUE(docs.ok()) << docs.status();
  ASSERT_EQ(docs->size(), 2u);
  EXPECT_EQ((*docs)[1]["metadata"]["labels"]["v"], "1");  // stays a string
  EXPECT_FALSE(ParseManifests("a: [1, 2").ok());
  EXPECT_FALSE(ParseManifests("- 1\n- 2\n").ok());
}

TEST(Resources, Aliases) {
  EXPECT_EQ(FindResource("jobs")->plural, "trainingjobs");
  EXPECT_EQ(FindResource("isvc")->plural, "inferenceservices");
  EXPECT_EQ(FindResource("Node")->plural, "nodes");
  EXPECT_EQ(FindResource("nope"), nullptr);
  EXPECT_EQ(CollectionPath(*FindResource("jobs"), "team-a", false),
            "/api/v1/namespaces/team-a/trainingjobs");
  EXPECT_EQ(ItemPath(*FindResource("nodes"), "team-a", "n1"), "/api/v1/nodes/n1");
  EXPECT_EQ(QueryEscape("a in (x,y)"), "a%20in%20%28x%2cy%29");
}

TEST(Config, FileEnvAndFlags) {
  std::string path = ::testing::TempDir() + "/tessera_config";
  FILE* f = fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs(
      "current-context: b\ncontexts:\n- name: a\n  server: http://a:1\n"
      "- name: b\n  server: b:2\n  token: t\n  namespace: team-b\n",
      f);
  fclose(f);
  ConfigFlags flags;
  flags.config_file = path;
  absl::StatusOr<ClientConfig> c = ResolveConfig(flags);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server, "http://b:2");
  EXPECT_EQ(c->token, "t");
  EXPECT_EQ(c->ns, "team-b");
  flags.context = "a";
  flags.ns = "x";
  c = ResolveConfig(flags);
  EXPECT_EQ(c->server, "http://a:1");
  EXPECT_EQ(c->ns, "x");
  flags.context = "zzz";
  EXPECT_NE(ResolveConfig(flags).status().message().find("zzz"), std::string::npos);
}

}  // namespace
}  // namespace tessera::cli
