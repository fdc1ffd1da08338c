#include "api/table.h"

#include <gtest/gtest.h>

#include "absl/time/time.h"
#include "api/kinds.h"
#include "api/store_layout.h"

namespace tessera::api {
namespace {

using Json = nlohmann::json;

TEST(TableTest, EveryKindHasOneCellPerColumn) {
  const absl::Time now = absl::FromUnixSeconds(1780000000);
  const Json job = {
      {"kind", "TrainingJob"},
      {"metadata",
       {{"name", "llm"},
        {"namespace", "team-a"},
        {"creationTimestamp", Timestamp(now - absl::Minutes(5))},
        {"annotations", {{kSubmittedByAnnotation, "alice"}}}}},
      {"spec",
       {{"queue", "research"}, {"groups", {{{"name", "w"}, {"count", 2}, {"gpusPerReplica", 8}}}}}},
      {"status",
       {{"phase", "Running"},
        {"generation", 3},
        {"placement",
         {{{"node", "n1"}, {"gpus", {0, 1, 2, 3, 4, 5, 6, 7}}},
          {{"node", "n2"}, {"gpus", {0, 1, 2, 3, 4, 5, 6, 7}}}}}}}};
  const std::vector<std::string> cells = TableCells("TrainingJob", job, now);
  const std::vector<TableColumn> columns = TableColumns("TrainingJob");
  ASSERT_EQ(cells.size(), columns.size());
  auto cell = [&](const std::string& name) {
    for (size_t i = 0; i < columns.size(); ++i) {
      if (columns[i].name == name) return cells[i];
    }
    return std::string("?");
  };
  EXPECT_EQ(cell("NAME"), "llm");
  EXPECT_EQ(cell("PHASE"), "Running");
  EXPECT_EQ(cell("REASON"), "-");
  EXPECT_EQ(cell("GPUS"), "16");
  EXPECT_EQ(cell("MEMBERS"), "2");
  EXPECT_EQ(cell("GENERATION"), "3");
  EXPECT_EQ(cell("AGE"), "5m");
  EXPECT_EQ(cell("QUEUE"), "research");
  EXPECT_EQ(cell("USER"), "alice");
  EXPECT_EQ(cell("NODES"), "n1,n2");
  // Objects missing whole sections, or with the wrong types, still give a full row.
  for (const char* kind :
       {"TrainingJob", "InferenceService", "Node", "Event", "Cluster", "Queue"}) {
    for (const Json& odd : {Json::object(), Json{{"spec", 3}, {"status", "x"}, {"metadata", 1}},
                            Json{{"spec", {{"groups", 1}, {"involvedObject", 2}, {"taints", 4}}}},
                            // Every field of another type than the cells read: no exception.
                            Json{{"kind", 1},
                                 {"metadata", {{"name", 2}, {"annotations", 3}}},
                                 {"spec",
                                  {{"groups", {{{"count", "x"}}, 5}},
                                   {"elastic", {{"maxReplicas", "y"}}},
                                   {"queue", 6},
                                   {"unschedulable", "no"},
                                   {"taints", {{{"key", 1}}}},
                                   {"replicas", 7}}},
                                 {"status",
                                  {{"phase", 8},
                                   {"generation", "9"},
                                   {"placement", {{{"node", 1}, {"gpus", 2}}, 3}},
                                   {"gpus", {{{"health", 4}}}},
                                   {"priority", "high"}}}}}) {
      EXPECT_EQ(TableCells(kind, odd, now).size(), TableColumns(kind).size()) << kind << odd;
    }
  }
}

TEST(TableTest, TableTextIsAMetaV1Table) {
  const absl::Time now = absl::FromUnixSeconds(1780000000);
  const Json node = {{"kind", "Node"},
                     {"metadata", {{"name", "n1"}, {"resourceVersion", "7"}}},
                     {"spec", {{"gpuType", "H100"}, {"gpuCount", 8}}},
                     {"status", {{"phase", "Ready"}}}};
  const PreparedRow prepared = PrepareRow("Node", node);
  const std::string rows =
      RowText(prepared, now, true) + "," + RowText(prepared, now + absl::Hours(3), false);
  const Json t = Json::parse(TableText("Node", rows, {{"resourceVersion", "9"}}));
  EXPECT_EQ(t["apiVersion"], "meta.k8s.io/v1");
  EXPECT_EQ(t["kind"], "Table");
  EXPECT_EQ(t["metadata"]["resourceVersion"], "9");
  ASSERT_EQ(t["columnDefinitions"].size(), TableColumns("Node").size());
  EXPECT_EQ(t["columnDefinitions"][0]["name"], "NAME");
  EXPECT_EQ(t["columnDefinitions"][6]["priority"], 1);  // BLOCK: -o wide
  ASSERT_EQ(t["rows"].size(), 2u);
  EXPECT_EQ(t["rows"][0]["cells"][0], "n1");
  EXPECT_EQ(t["rows"][0]["cells"][2], "8");
  EXPECT_EQ(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
  EXPECT_EQ(t["rows"][0]["object"]["metadata"]["resourceVersion"], "7");
  EXPECT_FALSE(t["rows"][1].contains("object"));
  // The prepared row is the object's cells, its age written as of each time asked.
  EXPECT_EQ(t["rows"][0]["cells"], TableCells("Node", node, now));
  EXPECT_EQ(t["rows"][1]["cells"], TableCells("Node", node, now + absl::Hours(3)));
  EXPECT_EQ(t["rows"][0]["cells"][5], "<unknown>");  // no creationTimestamp
  for (const char* kind : {"Event", "Queue", "TrainingJob"}) {
    const Json obj = {
        {"metadata", {{"creationTimestamp", Timestamp(now - absl::Hours(50))}}},
        {"spec", {{"eventTime", Timestamp(now - absl::Seconds(7))}, {"message", "a \"q\" \n"}}}};
    const Json row = Json::parse(RowText(PrepareRow(kind, obj), now, false));
    EXPECT_EQ(row["cells"], TableCells(kind, obj, now)) << kind;
  }
}

TEST(TableTest, AcceptsTableAsKubectlAsks) {
  EXPECT_TRUE(AcceptsTable(kTableAccept));
  EXPECT_TRUE(AcceptsTable(
      "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;"
      "g=meta.k8s.io,application/json"));
  EXPECT_FALSE(AcceptsTable("application/json"));
  EXPECT_FALSE(AcceptsTable(""));
  EXPECT_FALSE(AcceptsTable("application/json, application/json;as=Table;v=v1;g=meta.k8s.io"));
  EXPECT_FALSE(AcceptsTable("application/json;as=Table;v=v1beta1;g=meta.k8s.io"));
}

}  // namespace
}  // namespace tessera::api
