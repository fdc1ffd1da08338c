#include "cli/yaml_json.h"

#include <gmock/gmock.h>
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

// yaml-cpp 0.7 loops forever, allocating, on a top-level scalar followed by ',' (found by
// fuzz/manifest_fuzzer.cc; a 56-byte file took `tessera apply` past 12 GB): refused at once.
TEST(YamlJson, TextThatStallsTheYamlParserIsRefusedWithItsLine) {
  for (const std::string text : {"\"a\",b", "'a',", "\"a\" , b", "kind: Job\n---\n\"x\", y\n",
                                 " \"3\",es,  *x0x10, 1e3, .inf]\nb: *x\nc: |\n  multi\n"}) {
    absl::StatusOr<std::vector<Json>> r = ParseManifests(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_THAT(std::string(r.status().message()), ::testing::HasSubstr("not valid YAML")) << text;
  }
  absl::StatusOr<std::vector<Json>> r = ParseManifests("kind: Job\n---\n\"x\", y\n");
  EXPECT_THAT(std::string(r.status().message()), ::testing::HasSubstr("line 3")) << r.status();
  // Numbers JSON cannot carry are refused, not sent as null.
  r = ParseManifests("a: [1, 2]\nb: 1e999\n");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()),
              ::testing::HasSubstr("line 2: the number 1e999 is out of range"));
  // A key longer than YAML's 1,024-character implicit keys survives -o yaml.
  const Json long_key = {{std::string(1500, 'k') + "\x16", "v"}, {"b", 1}};
  r = ParseManifests(ToYaml(long_key));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0], long_key);
  // Strings YAML would trim or break (a trailing \r, spaces at the ends, tabs) are quoted.
  const Json odd = {{"a", "/x/\r"}, {"b", " lead"}, {"c", "trail "}, {"d", "t\tab"}, {"e", "-"}};
  r = ParseManifests(ToYaml(odd));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0], odd);
  // Unicode noncharacters (which yaml-cpp's emitter turns into U+FFFD) survive too, in keys and
  // values, plain or otherwise, beside a private-use character like the mark ToYaml picks.
  const Json nonchars = {{"f\xef\xbf\xbf]x\x0b", "\xef\xbf\xbe\xef\xb7\x90"},
                         {"k\xef\xbf\xbf", "\xf0\x9f\xbf\xbf plain \xee\x80\x80"},
                         {"list", {"\xef\xb7\xaf", "ok"}}};
  const std::string yaml = ToYaml(nonchars);
  EXPECT_THAT(yaml, ::testing::HasSubstr("\\uFFFF")) << yaml;
  EXPECT_THAT(yaml, ::testing::HasSubstr("\\U0001FFFF")) << yaml;
  r = ParseManifests(yaml);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0], nonchars) << yaml;
  // Documents, empty ones included, still parse.
  r = ParseManifests("a: 1\n---\n---\nb: 2\n");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->size(), 2u);
}

}  // namespace
}  // namespace tessera::cli
