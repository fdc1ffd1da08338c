#include "cli/jsonpath.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera::cli {
namespace {

using ::testing::HasSubstr;

const Json kList = Json::parse(R"({
  "kind": "List",
  "items": [
    {"metadata": {"name": "a", "labels": {"app.kubernetes.io/name": "x"}},
     "spec": {"groups": [{"count": 2}, {"count": 3}]}, "status": {"phase": "Running"}},
    {"metadata": {"name": "b"}, "spec": {"groups": [{"count": 1}]}, "status": {}}
  ]
})");

std::string Exec(const std::string& tmpl, const Json& root = kList) {
  absl::StatusOr<JsonPathTemplate> t = JsonPathTemplate::Parse(tmpl);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? t->Execute(root) : "";
}

TEST(JsonPathTest, PathsSelectAndJoinWithSpaces) {
  EXPECT_EQ(Exec("{.items[*].metadata.name}"), "a b");
  EXPECT_EQ(Exec("{.items[0].spec.groups[*].count}"), "2 3");
  EXPECT_EQ(Exec("{.items[-1].metadata.name}"), "b");
  EXPECT_EQ(Exec("{.items[0].metadata.labels['app.kubernetes.io/name']}"), "x");
  EXPECT_EQ(Exec("{..count}"), "2 3 1");
  EXPECT_EQ(Exec("{.items[1].status.phase}"), "");  // missing: nothing
  EXPECT_EQ(Exec("{.items[0].spec.groups[0]}"), R"({"count":2})");
  EXPECT_EQ(Exec("{.kind}"), "List");
}

TEST(JsonPathTest, RangeAndLiterals) {
  EXPECT_EQ(Exec(R"({range .items[*]}{.metadata.name}{"\t"}{.status.phase}{"\n"}{end})"),
            "a\tRunning\nb\t\n");
  EXPECT_EQ(Exec("names: {.items[*].metadata.name}!"), "names: a b!");
  EXPECT_EQ(Exec(R"({"{}"})"), "{}");
}

TEST(JsonPathTest, MalformedTemplatesSayWhere) {
  for (const char* bad : {"{.items[*", "{range .items[*]}{.x}", "{end}", "{.items[?(@.x)]}",
                          "{.items[x]}", "{\"open}"}) {
    absl::StatusOr<JsonPathTemplate> t = JsonPathTemplate::Parse(bad);
    EXPECT_FALSE(t.ok()) << bad;
    EXPECT_THAT(t.status().message(), HasSubstr("at character")) << bad;
  }
}

TEST(JsonPathTest, BarePathsAsCustomColumnsAndSortByWriteThem) {
  absl::StatusOr<std::vector<PathStep>> p = ParsePath(".metadata.name");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(Select(kList["items"][0], *p).size(), 1u);
  for (const char* same : {"metadata.name", "{.metadata.name}", " .metadata.name "}) {
    absl::StatusOr<std::vector<PathStep>> q = ParsePath(same);
    ASSERT_TRUE(q.ok()) << same;
    ASSERT_EQ(Select(kList["items"][1], *q).size(), 1u) << same;
    EXPECT_EQ(PrintValue(*Select(kList["items"][1], *q)[0]), "b");
  }
}

}  // namespace
}  // namespace tessera::cli
