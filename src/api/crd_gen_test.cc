#include "api/crd_gen.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace tessera::api {
namespace {

using Json = nlohmann::json;
using ::testing::ElementsAre;

const GeneratedCrd& CrdOf(const std::vector<GeneratedCrd>& crds, const std::string& kind) {
  for (const GeneratedCrd& c : crds) {
    if (c.kind == kind) return c;
  }
  ADD_FAILURE() << "no CRD for " << kind;
  static const GeneratedCrd none;
  return none;
}

TEST(CrdGenTest, TheSixKindsInTheirScopesWithNamesAndTheStatusSubresource) {
  EXPECT_THAT(CrdKinds(), ElementsAre("TrainingJob", "InferenceService", "GPUPool", "Checkpoint",
                                      "ModelVersion", "Queue"));
  const std::vector<GeneratedCrd> crds = GenerateCrds();
  ASSERT_EQ(crds.size(), CrdKinds().size());
  std::set<std::string> short_names;
  for (size_t i = 0; i < crds.size(); ++i) {
    const GeneratedCrd& g = crds[i];
    SCOPED_TRACE(g.kind);
    EXPECT_EQ(g.kind, CrdKinds()[i]);
    const KindInfo* info = nullptr;
    for (const KindInfo& k : AllKinds()) {
      if (k.kind == g.kind) info = &k;
    }
    ASSERT_NE(info, nullptr);
    Json crd = g.crd;
    EXPECT_EQ(g.file_name, "tessera.dev_" + info->plural + ".yaml");
    EXPECT_EQ(crd["apiVersion"], "apiextensions.k8s.io/v1");
    EXPECT_EQ(crd["metadata"]["name"], info->plural + ".tessera.dev");
    EXPECT_EQ(crd["spec"]["group"], "tessera.dev");
    // The standalone kind's scope: Queue is cluster-scoped, GPUPool (as in kinds.cc) is not.
    EXPECT_EQ(crd["spec"]["scope"], info->namespaced ? "Namespaced" : "Cluster");
    EXPECT_EQ(crd["spec"]["names"]["kind"], g.kind);
    EXPECT_EQ(crd["spec"]["names"]["plural"], info->plural);
    EXPECT_EQ(crd["spec"]["names"]["listKind"], g.kind + "List");
    ASSERT_FALSE(crd["spec"]["names"]["shortNames"].empty());
    for (const Json& s : crd["spec"]["names"]["shortNames"]) {
      EXPECT_TRUE(short_names.insert(s.get<std::string>()).second) << s;
    }
    ASSERT_EQ(crd["spec"]["versions"].size(), 1u);
    Json v = crd["spec"]["versions"][0];
    EXPECT_EQ(v["name"], "v1");
    EXPECT_EQ(v["served"], true);
    EXPECT_EQ(v["storage"], true);
    EXPECT_EQ(v["subresources"], Json({{"status", Json::object()}}));
    EXPECT_EQ(v["additionalPrinterColumns"].back()["name"], "Age");
    Json root = v["schema"]["openAPIV3Schema"];
    EXPECT_EQ(root["required"], Json({"spec"}));
    EXPECT_EQ(root["properties"]["status"],
              Json({{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}}));
    EXPECT_EQ(root["properties"]["metadata"], Json({{"type", "object"}}));
    // metadata.name as a DNS label, by a CEL rule at the root.
    ASSERT_EQ(root["x-kubernetes-validations"].size(), 1u);
    EXPECT_TRUE(absl::StrContains(root["x-kubernetes-validations"][0]["rule"].get<std::string>(),
                                  "self.metadata.name.matches"));
  }
  EXPECT_EQ(CrdOf(crds, "Queue").crd["spec"]["scope"], "Cluster");
  EXPECT_EQ(CrdOf(crds, "Queue").crd["spec"]["names"]["shortNames"], Json({"tq"}));
  EXPECT_EQ(CrdOf(crds, "GPUPool").crd["spec"]["scope"], "Namespaced");
}

TEST(CrdGenTest, OutputIsDeterministic) {
  const std::vector<GeneratedCrd> a = GenerateCrds(), b = GenerateCrds();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].crd.dump(), b[i].crd.dump());
    EXPECT_EQ(a[i].header, b[i].header);
  }
}

// The CRD's constraints, read back from OpenAPI (and a key rule's CEL) into the words of
// Schema::Constraints(): an independent reading of what the generator wrote.
std::string CrdConstraints(const Json& p) {
  std::vector<std::string> parts;
  const bool exclusive = p.value("exclusiveMinimum", false);
  if (p.contains("minimum") && exclusive && p["minimum"] == 0) parts.emplace_back("> 0");
  if (p.contains("minimum") && !exclusive)
    parts.push_back(absl::StrCat(">= ", p["minimum"].dump()));
  if (p.contains("maximum")) parts.push_back(absl::StrCat("<= ", p["maximum"].dump()));
  const bool dns = p.value("pattern", "") == kDnsLabelPattern && p.value("maxLength", 0) == 63;
  if (dns) parts.emplace_back("a DNS label (a-z, 0-9, '-'; at most 63)");
  if (p.contains("maxLength") && !dns) {
    parts.push_back(absl::StrCat("at most ", p["maxLength"].dump(), " characters"));
  }
  if (p.contains("pattern") && !dns) parts.push_back("pattern " + p["pattern"].dump());
  if (p.contains("enum")) {
    std::vector<std::string> values;
    for (const Json& v : p["enum"]) values.push_back(v.get<std::string>());
    parts.push_back(absl::StrCat("one of: ", absl::StrJoin(values, ", ")));
  }
  if (p.contains("minItems"))
    parts.push_back(absl::StrCat("at least ", p["minItems"].dump(), " items"));
  if (p.contains("maxItems") || p.contains("maxProperties")) {
    parts.push_back(
        absl::StrCat("at most ", p.value("maxItems", p.value("maxProperties", 0)), " items"));
  }
  // self.all(k, k == 'cpu' || k.startsWith('gpu/')) -> keys: cpu, gpu/*
  for (const Json& r : p.value("x-kubernetes-validations", Json::array())) {
    const std::string rule_text = r.value("rule", "");
    absl::string_view rule = rule_text;
    if (!absl::ConsumePrefix(&rule, "self.all(k, ") || !absl::ConsumeSuffix(&rule, ")")) continue;
    std::vector<std::string> keys;
    for (absl::string_view alt : absl::StrSplit(rule, " || ")) {
      if (absl::ConsumePrefix(&alt, "k == '") && absl::ConsumeSuffix(&alt, "'")) {
        keys.emplace_back(alt);
      } else if (absl::ConsumePrefix(&alt, "k.startsWith('") && absl::ConsumeSuffix(&alt, "')")) {
        keys.push_back(absl::StrCat(alt, "*"));
      } else {
        keys.push_back(absl::StrCat("(", alt, ")"));
      }
    }
    parts.push_back(absl::StrCat("keys: ", absl::StrJoin(keys, ", ")));
  }
  return absl::StrJoin(parts, ", ");
}

// Differences between the standalone schema `s` and the CRD's structural schema `p` at `path`.
void CompareSchema(const Schema& s, const Json& p, const std::string& path,
                   std::vector<std::string>* diffs) {
  using T = Schema::Type;
  static const std::map<T, std::string> kTypes = {
      {T::kString, "string"}, {T::kInt, "integer"}, {T::kNumber, "number"}, {T::kBool, "boolean"},
      {T::kObject, "object"}, {T::kMap, "object"},  {T::kArray, "array"}};
  if (s.type() == T::kAny) return;
  if (p.value("type", "") != kTypes.at(s.type())) {
    diffs->push_back(
        absl::StrCat(path, ": type ", p.value("type", "(none)"), ", standalone ", s.TypeName()));
    return;
  }
  if (CrdConstraints(p) != s.Constraints()) {
    diffs->push_back(absl::StrCat(path, ": constraints \"", CrdConstraints(p), "\", standalone \"",
                                  s.Constraints(), "\""));
  }
  if (s.type() == T::kObject) {
    const Json props = p.value("properties", Json::object());
    std::set<std::string> required;
    for (const Json& r : p.value("required", Json::array())) required.insert(r.get<std::string>());
    for (const Schema::Field& f : s.fields()) {
      const std::string fp = absl::StrCat(path, ".", f.name);
      if (!props.contains(f.name)) {
        diffs->push_back(fp + ": missing from the CRD");
        continue;
      }
      if (f.required != required.contains(f.name)) diffs->push_back(fp + ": required differs");
      CompareSchema(f.schema, props[f.name], fp, diffs);
    }
    for (const auto& [name, unused] : props.items()) {
      if (s.FieldSchema(name) == nullptr)
        diffs->push_back(absl::StrCat(path, ".", name, ": only in the CRD"));
    }
  } else if (s.type() == T::kMap) {
    if (!p.contains("additionalProperties")) return diffs->push_back(path + ": not a map");
    CompareSchema(*s.element(), p["additionalProperties"], path + "[*]", diffs);
  } else if (s.type() == T::kArray) {
    CompareSchema(*s.element(), p.value("items", Json::object()), path + "[*]", diffs);
  }
}

TEST(CrdGenTest, EachSpecSchemaIsTheStandaloneServersFieldByField) {
  for (const GeneratedCrd& g : GenerateCrds()) {
    SCOPED_TRACE(g.kind);
    const KindInfo* info = nullptr;
    for (const KindInfo& k : AllKinds()) {
      if (k.kind == g.kind) info = &k;
    }
    ASSERT_NE(info, nullptr);
    Json crd = g.crd;
    std::vector<std::string> diffs;
    CompareSchema(*info->object_schema.FieldSchema("spec"),
                  crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"],
                  "spec", &diffs);
    EXPECT_TRUE(diffs.empty()) << absl::StrJoin(diffs, "\n");
  }
}

// Structural (apiextensions' rules): every node has a type, unless it keeps unknown fields; no
// node has both properties and additionalProperties; additionalProperties is never false.
void CheckStructural(const Json& n, const std::string& path, std::vector<std::string>* bad) {
  if (!n.contains("type") && !n.value("x-kubernetes-preserve-unknown-fields", false)) {
    bad->push_back(path + ": no type");
  }
  if (n.contains("properties") && n.contains("additionalProperties")) {
    bad->push_back(path + ": properties and additionalProperties");
  }
  if (n.contains("additionalProperties") && n["additionalProperties"].is_boolean()) {
    bad->push_back(path + ": additionalProperties is a boolean");
  }
  const Json props = n.value("properties", Json::object());
  for (const auto& [name, child] : props.items()) {
    CheckStructural(child, absl::StrCat(path, ".", name), bad);
  }
  if (n.contains("items")) CheckStructural(n["items"], path + "[*]", bad);
  if (n.contains("additionalProperties")) {
    CheckStructural(n["additionalProperties"], path + "[*]", bad);
  }
}

TEST(CrdGenTest, SchemasAreStructural) {
  for (const GeneratedCrd& g : GenerateCrds()) {
    Json crd = g.crd;
    std::vector<std::string> bad;
    CheckStructural(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"], g.kind, &bad);
    EXPECT_TRUE(bad.empty()) << absl::StrJoin(bad, "\n");
  }
}

TEST(CrdGenTest, ConstraintsMapOntoOpenApi) {
  EXPECT_EQ(
      OpenApiSchema(Schema::Int().Positive().Max(16)),
      Json({{"type", "integer"}, {"minimum", 0}, {"exclusiveMinimum", true}, {"maximum", 16}}));
  EXPECT_EQ(OpenApiSchema(Schema::Number().Min(0)), Json({{"type", "number"}, {"minimum", 0}}));
  EXPECT_EQ(OpenApiSchema(Schema::String().DnsLabel()),
            Json({{"type", "string"}, {"maxLength", 63}, {"pattern", kDnsLabelPattern}}));
  EXPECT_EQ(OpenApiSchema(Schema::String().OneOf({"a", "b"}).MaxLength(8)),
            Json({{"type", "string"}, {"maxLength", 8}, {"enum", {"a", "b"}}}));
  EXPECT_EQ(
      OpenApiSchema(Schema::Array(Schema::Bool()).MinItems(1).MaxItems(3)),
      Json(
          {{"type", "array"}, {"items", {{"type", "boolean"}}}, {"minItems", 1}, {"maxItems", 3}}));
  EXPECT_EQ(OpenApiSchema(Schema::Map(Schema::String()).MaxItems(4).Keys({"a", "it's/*"})),
            Json::parse(R"js({"type": "object", "additionalProperties": {"type": "string"},
              "maxProperties": 4, "x-kubernetes-validations": [{
                "rule": "self.all(k, k == 'a' || k.startsWith('it\\'s/'))",
                "message": "unknown key; expected one of: a, it's/*"}]})js"));
  EXPECT_EQ(OpenApiSchema(
                Schema::Object({Required("a", Schema::Int()), Optional("b", Schema::String())})),
            Json::parse(R"({"type": "object", "required": ["a"], "properties": {
              "a": {"type": "integer"}, "b": {"type": "string"}}})"));
}

TEST(CrdGenTest, CrossFieldRulesSitWhereTheStandaloneServerNamesTheField) {
  const std::vector<GeneratedCrd> crds = GenerateCrds();
  Json is = CrdOf(crds, "InferenceService").crd;
  Json replicas = is["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
                    ["properties"]["replicas"];
  EXPECT_EQ(replicas["x-kubernetes-validations"],
            Json::parse(R"([{"rule": "self.min <= self.max", "fieldPath": ".min",
                             "message": "must be <= spec.replicas.max"}])"));
  Json tj = CrdOf(crds, "TrainingJob").crd;
  Json spec = tj["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
  EXPECT_EQ(spec["x-kubernetes-validations"].size(), 2u);  // elastic.maxReplicas, gang.minMember
  EXPECT_EQ(spec["properties"]["groups"]["x-kubernetes-validations"].size(), 1u);
  EXPECT_EQ(spec["properties"]["elastic"]["x-kubernetes-validations"].size(), 1u);
  // The quota keys of a Queue, from the table's Keys().
  Json q = CrdOf(crds, "Queue").crd;
  EXPECT_EQ(q["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
             ["properties"]["quotas"]["x-kubernetes-validations"][0]["rule"],
            "self.all(k, k == 'cpu' || k == 'memory' || k.startsWith('gpu/'))");
  // The header says what is left to others.
  const std::string header = absl::StrJoin(CrdOf(crds, "Queue").header, "\n");
  EXPECT_TRUE(absl::StrContains(header, "tessera crds -o deploy/kubernetes/crds")) << header;
  EXPECT_TRUE(absl::StrContains(header, "tree as a whole")) << header;
}

}  // namespace
}  // namespace tessera::api
