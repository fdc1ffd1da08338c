#include "api/schema.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>

#include "api/kinds.h"
#include "api/object_codec.h"

namespace tessera::api {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::vector<std::string> Errors(const KindInfo& kind, const Json& obj) {
  std::vector<std::string> out;
  for (const FieldError& e : ValidateObject(kind, obj, "team-a", "")) out.push_back(e.ToString());
  return out;
}

Json Job() {
  return Json::parse(R"({
    "apiVersion": "tessera.dev/v1", "kind": "TrainingJob",
    "metadata": {"name": "llm-7b", "labels": {"team": "nlp"}},
    "spec": {"queue": "research", "groups": [{"name": "workers", "count": 4, "gpusPerReplica": 8}]}
  })");
}

TEST(SchemaTest, ValidJobPasses) {
  EXPECT_THAT(Errors(*KindByPlural("trainingjobs"), Job()), IsEmpty());
}

TEST(SchemaTest, ErrorsNameTheFieldPath) {
  Json j = Job();
  j["spec"]["groups"][0]["count"] = 0;
  j["spec"]["groups"].push_back({{"name", "x"}, {"count", "3"}, {"gpusPerReplica", 1}});
  j["spec"]["bogus"] = 1;
  j["metadata"]["name"] = "Not_A_Label";
  EXPECT_THAT(Errors(*KindByPlural("trainingjobs"), j),
              ElementsAre("metadata.name: must be a lower-case DNS label (a-z, 0-9, '-', at most "
                          "63 characters)",
                          "spec.groups[0].count: must be > 0",
                          "spec.groups[1].count: must be an integer", "spec.bogus: unknown field"));
}

TEST(SchemaTest, AnUnknownFieldNamesTheNearestKnownOne) {
  Json j = Job();
  j["spec"]["gpuModel"] = {"H100"};
  j["spec"]["groups"][0]["gpusPerReplicas"] = 8;
  j["spec"]["groups"][0].erase("gpusPerReplica");
  EXPECT_THAT(Errors(*KindByPlural("trainingjobs"), j),
              ElementsAre("spec.groups[0].gpusPerReplica: is required",
                          "spec.groups[0].gpusPerReplicas: unknown field; did you mean "
                          "\"gpusPerReplica\"?",
                          "spec.gpuModel: unknown field; did you mean \"gpuModels\"?"));
}

TEST(SchemaTest, ElasticMustMatchTheGroups) {
  Json j = Job();
  j["spec"]["elastic"] = {{"minReplicas", 2}, {"maxReplicas", 4}};
  EXPECT_THAT(Errors(*KindByPlural("trainingjobs"), j), IsEmpty());
  j["spec"]["elastic"]["maxReplicas"] = 8;
  EXPECT_THAT(Errors(*KindByPlural("trainingjobs"), j),
              ElementsAre("spec.elastic.maxReplicas: must equal the job's replicas, the sum of "
                          "spec.groups[].count (4): the groups' counts are the maximum, got 8"));
  j["spec"]["elastic"] = {{"minReplicas", 5}, {"maxReplicas", 4}};
  EXPECT_THAT(Errors(*KindByPlural("trainingjobs"), j),
              ElementsAre("spec.elastic.minReplicas: must be <= spec.elastic.maxReplicas"));
  j["spec"]["elastic"] = {{"minReplicas", 2}, {"maxReplicas", 4}};
  j["spec"]["gang"] = {{"minMember", 3}};
  EXPECT_THAT(Errors(*KindByPlural("trainingjobs"), j),
              ElementsAre("spec.gang.minMember: conflicts with spec.elastic.minReplicas (2); set "
                          "one of them"));
}

TEST(SchemaTest, RequiredAndTypes) {
  Json j = Job();
  j.erase("spec");
  j["status"] = {{"phase", "Dancing"}};
  j["extra"] = true;
  EXPECT_THAT(Errors(*KindByPlural("trainingjobs"), j),
              ElementsAre("spec: is required",
                          "status.phase: must be one of Pending, Admitted, Queued, Scheduled, "
                          "Running, Suspended, Succeeded, Failed, Preempted, NodeLost, Dispatched",
                          "extra: unknown field"));
  j = Job();
  j["spec"]["groups"][0]["count"] = 2.5;
  j["metadata"]["labels"]["n"] = 3;
  EXPECT_THAT(Errors(*KindByPlural("trainingjobs"), j),
              ElementsAre("metadata.labels[\"n\"]: must be a string",
                          "spec.groups[0].count: must be an integer"));
}

TEST(SchemaTest, LabelsMustBeSelectable) {
  Json j = Job();
  j["metadata"]["labels"] = {{"ok.example/key", "v-1"}, {"bad key", "x"}, {"k", "no spaces"}};
  EXPECT_THAT(Errors(*KindByPlural("trainingjobs"), j),
              ElementsAre("metadata.labels[\"bad key\"]: key must be 1-253 characters of a-z, "
                          "A-Z, 0-9, '.', '_', '-', '/'",
                          "metadata.labels[\"k\"]: value must be 0-63 characters of a-z, A-Z, "
                          "0-9, '.', '_', '-'"));
}

TEST(SchemaTest, KindAndNamespaceMustMatch) {
  Json j = Job();
  j["kind"] = "Queue";
  j["metadata"]["namespace"] = "team-b";
  auto errs = Errors(*KindByPlural("trainingjobs"), j);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0], "kind: must be one of TrainingJob");
  j["kind"] = "TrainingJob";
  EXPECT_THAT(
      Errors(*KindByPlural("trainingjobs"), j),
      ElementsAre("metadata.namespace: does not match the namespace \"team-a\" in the URL"));
}

TEST(SchemaTest, AMapsKeysMayBeRestrictedToNamesAndPrefixes) {
  const Schema s = Schema::Map(Schema::Int()).Keys({"cpu", "memory", "gpu/*"});
  std::vector<FieldError> errors;
  s.Validate(Json::parse(R"({"cpu": 1, "memory": 2, "gpu/H100": 3, "gpu/": 4})"), "q", errors);
  EXPECT_TRUE(errors.empty());
  s.Validate(Json::parse(R"({"disk": 1, "gpu": 2, "cpus": "x"})"), "q", errors);
  std::vector<std::string> got;
  for (const FieldError& e : errors) got.push_back(e.ToString());
  // A refused key's value is not judged: "cpus" is named once.
  EXPECT_THAT(got, ElementsAre("q[\"cpus\"]: unknown key; expected one of: cpu, memory, gpu/*",
                               "q[\"disk\"]: unknown key; expected one of: cpu, memory, gpu/*",
                               "q[\"gpu\"]: unknown key; expected one of: cpu, memory, gpu/*"));
  EXPECT_EQ(s.Constraints(), "keys: cpu, memory, gpu/*");
  // A Queue's full-form quotas.
  Json q = {{"apiVersion", "tessera.dev/v1"},
            {"kind", "Queue"},
            {"metadata", {{"name", "org"}}},
            {"spec", {{"quotas", {{"tpu", {{"guaranteed", 1}}}}}}}};
  std::vector<std::string> queue_errors;
  for (const FieldError& e : ValidateObject(*KindByPlural("queues"), q, "", "")) {
    queue_errors.push_back(e.ToString());
  }
  EXPECT_THAT(queue_errors, ElementsAre("spec.quotas[\"tpu\"]: unknown key; expected one of: cpu, "
                                        "memory, gpu/*"));
}

TEST(SchemaTest, EveryKindHasASchemaAndPhases) {
  EXPECT_EQ(AllKinds().size(), 11u);  // + Event, Cluster, ResourceQuota
  for (const KindInfo& k : AllKinds()) {
    EXPECT_FALSE(k.phases.empty()) << k.kind;
    EXPECT_EQ(k.object_schema.type(), Schema::Type::kObject);
  }
  EXPECT_FALSE(KindByPlural("nodes")->namespaced);
  EXPECT_TRUE(KindByPlural("checkpoints")->namespaced);
}

TEST(ObjectCodecTest, ParseBodyRejectsBadInput) {
  EXPECT_TRUE(ParseBody(R"({"a": [1, {"b": "x{[["}]})").ok());
  EXPECT_EQ(ParseBody("{\"a\": \"\xff\"}").status().message(), "request body is not valid UTF-8");
  EXPECT_EQ(ParseBody("{\"a\": \"\xed\xa0\x80\"}").status().code(),
            absl::StatusCode::kInvalidArgument);  // a UTF-16 surrogate
  std::string deep = std::string(40, '[') + std::string(40, ']');
  EXPECT_EQ(ParseBody("{\"a\":" + deep + "}").status().message(),
            "request body nests deeper than 32 levels");
  EXPECT_EQ(ParseBody("{").status().message(), "request body is not valid JSON");
  EXPECT_EQ(ParseBody("[1]").status().message(), "request body must be a JSON object");
  EXPECT_EQ(ParseBody(R"({"a": {"b": 1, "b": 2}})").status().message(),
            "request body repeats the field \"b\"");
  EXPECT_TRUE(ParseBody(R"({"a": {"b": 1}, "c": {"b": 2}})").ok()) << "same key, other objects";
  EXPECT_TRUE(IsValidUtf8("h\xc3\xa9llo \xf0\x9f\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));  // overlong '/'
}

TEST(ObjectCodecTest, StoredFormDropsResourceVersion) {
  Json j = Job();
  j["metadata"]["resourceVersion"] = "5";
  std::string stored = ToStored(j);
  EXPECT_EQ(stored.find("resourceVersion"), std::string::npos);
  auto back = FromStored(stored, 9);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ((*back)["metadata"]["resourceVersion"], "9");
  EXPECT_EQ(FromStored("garbage", 1).status().code(), absl::StatusCode::kDataLoss);
  // The splicing fast path gives the same object, also for tricky values.
  j["metadata"]["annotations"] = {{"note", "\"metadata\":{ in a string"}};
  j["metadata"]["labels"] = Json::object();
  stored = ToStored(j);
  auto text = StoredToApiText(stored, 9);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(Json::parse(*text), *FromStored(stored, 9));
  Json bare = {{"apiVersion", "v"}, {"kind", "K"}, {"metadata", Json::object()}};
  EXPECT_EQ(Json::parse(*StoredToApiText(bare.dump(), 3)), *FromStored(bare.dump(), 3));
  EXPECT_FALSE(StoredToApiText("{}", 1).ok());
  EXPECT_EQ(StoreKey(*KindByPlural("trainingjobs"), "ns", "a"), "/registry/trainingjobs/ns/a");
  EXPECT_EQ(StoreKey(*KindByPlural("nodes"), "", "n1"), "/registry/nodes/n1");
}

}  // namespace
}  // namespace tessera::api

namespace tessera::api {
namespace {

// Issue 26's out-of-range values: each refused with the field and the limit, at the edge.
TEST(LimitsTest, OutOfRangeValuesAreRefusedNamingTheFieldAndTheLimit) {
  const KindInfo& jobs = *KindByPlural("trainingjobs");
  auto one = [&](const std::function<void(Json&)>& f) {
    Json j = Job();
    f(j);
    return Errors(jobs, j);
  };
  EXPECT_THAT(one([](Json& j) { j["spec"]["groups"][0]["count"] = 2000000; }),
              ElementsAre("spec.groups[0].count: must be <= 16384"));
  EXPECT_THAT(one([](Json& j) { j["spec"]["groups"][0]["count"] = 4294967297LL; }),
              ElementsAre("spec.groups[0].count: must be <= 16384"));
  EXPECT_THAT(one([](Json& j) { j["spec"]["groups"][0]["gpusPerReplica"] = 17; }),
              ElementsAre("spec.groups[0].gpusPerReplica: must be <= 16"));
  EXPECT_THAT(one([](Json& j) { j["spec"]["groups"][0]["gpuMilli"] = 1001; }),
              ElementsAre("spec.groups[0].gpuMilli: must be <= 1000"));
  EXPECT_THAT(one([](Json& j) {
                j["spec"]["groups"][0]["resources"] = {{"memoryGiB", 1e308}};
              }),
              ElementsAre("spec.groups[0].resources.memoryGiB: must be <= 65536"));
  EXPECT_THAT(
      one([](Json& j) {
        j["spec"]["groups"][0]["count"] = 10000;
        j["spec"]["groups"].push_back({{"name", "more"}, {"count", 10000}, {"gpusPerReplica", 0}});
      }),
      ElementsAre(::testing::HasSubstr("add up to 20000 members; a job has at most 16384")));
  EXPECT_THAT(one([](Json& j) { j["spec"]["command"] = {std::string("a\0b", 3)}; }),
              ElementsAre("spec.command[0]: must not contain a NUL character"));
  EXPECT_THAT(one([](Json& j) {
                j["metadata"]["annotations"] = {{"tessera.dev/grace-seconds", "3600"}};
              }),
              ElementsAre("metadata.annotations[\"tessera.dev/grace-seconds\"]: must be a number "
                          "of seconds from 0 to 600"));
  Json node = {{"apiVersion", "tessera.dev/v1"},
               {"kind", "Node"},
               {"metadata", {{"name", "n1"}}},
               {"spec", {{"gpuType", "H100"}, {"gpuCount", 1000000000}}}};
  std::vector<std::string> node_errors;
  for (const FieldError& e : ValidateObject(*KindByPlural("nodes"), node, "", "")) {
    node_errors.push_back(e.ToString());
  }
  EXPECT_THAT(node_errors, ElementsAre("spec.gpuCount: must be <= 16"));
}

TEST(LimitsTest, ABodyWithAByteOrderMarkIsRefused) {
  absl::StatusOr<Json> j = ParseBody("\xEF\xBB\xBF{\"a\": 1}");
  ASSERT_FALSE(j.ok());
  EXPECT_THAT(std::string(j.status().message()), ::testing::HasSubstr("byte order mark"));
  EXPECT_TRUE(ParseBody("{\"a\": 1}").ok());
}

}  // namespace
}  // namespace tessera::api
