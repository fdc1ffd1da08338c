// The CRDs generated from the standalone server's schema table (api/crd_gen.h, `tessera crds`) on
// a real kube-apiserver (the bed): all of them install strictly and become Established, and ONE
// set of test vectors per kind -- a valid minimal and a valid full object, a missing required
// field, a wrong type, a value out of range, an unknown enum value, an unknown field, and the
// kind's CEL rules -- is judged by both
//   - the standalone server's validation of a create (api::ValidateObject, what its API server
//     runs on the body), and
//   - the apiserver, creating the object with fieldValidation=Strict (as kubectl does):
// both accept, or both refuse naming the same field. Where the two cannot agree, the vector is in
// kKnownDifferences with the reason, and the test checks that each side still answers as listed
// (a difference that disappears fails the test: move its vector to the shared set).
//
// Not compared here, because neither validator sees it (both accept such objects): what needs
// other objects -- a Queue's parent existing and the tree it builds (the standalone server's
// admission, the scheduler here), a job asking more GPUs than the fleet's largest node (the
// standalone server at create, the scheduler here), names of queues, priority classes, model
// versions, checkpoints and jobs that exist.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <optional>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/crd_gen.h"
#include "api/kinds.h"
#include "api/object_codec.h"
#include "kube_test_util.h"

namespace tessera::testing {
namespace {

using kube::Json;
using kube::ResourceType;
using kube::RestClient;

const ResourceType& CrdsResource() { return kube::CustomResourceDefinitionsResource(); }

const api::KindInfo& Kind(const std::string& kind) {
  for (const api::KindInfo& k : api::AllKinds()) {
    if (k.kind == kind) return k;
  }
  ADD_FAILURE() << "no kind " << kind;
  return api::AllKinds().front();
}

ResourceType ResourceOf(const std::string& kind) {
  const api::KindInfo& k = Kind(kind);
  return {api::kCrdGroup, "v1", k.plural, k.kind, k.namespaced};
}

// Creates every generated CRD (strictly: a CRD field the apiserver does not know fails) once per
// process and waits until each is Established and its resource served; "" or what failed.
std::string InstallCrds(RestClient& c) {
  static std::optional<std::string> result;
  if (result) return *result;
  std::vector<std::string> errors;
  for (const api::GeneratedCrd& g : api::GenerateCrds()) {
    absl::StatusOr<kube::HttpResult> r = c.Raw(
        "POST", kube::ResourcePath(CrdsResource(), "") + "?fieldValidation=Strict", g.crd.dump());
    if (!r.ok() || r->status != 201) {
      errors.push_back(absl::StrCat(g.file_name, ": ", r.ok() ? r->body : r.status().ToString()));
      continue;
    }
    const std::string name = g.crd["metadata"]["name"];
    std::string last;
    const bool established = PollUntil(
        [&] {
          absl::StatusOr<Json> got = c.Get(CrdsResource(), "", name);
          if (!got.ok()) return false;
          last = got->value("status", Json::object()).dump();
          for (const Json& cond : (*got)["status"].value("conditions", Json::array())) {
            if (cond["type"] == "Established" && cond["status"] == "True") return true;
          }
          return false;
        },
        absl::Seconds(60));
    if (!established) errors.push_back(absl::StrCat(name, " not Established: ", last));
    const std::string path = kube::ResourcePath(ResourceOf(g.kind), "");
    if (!PollUntil(
            [&] {
              absl::StatusOr<kube::HttpResult> l = c.Raw("GET", path);
              return l.ok() && l->status == 200;
            },
            absl::Seconds(30))) {
      errors.push_back(path + " not served");
    }
  }
  result = absl::StrJoin(errors, "\n");
  return *result;
}

#define CRDS_OR_FAIL(client_var)                                               \
  KUBE_BED_OR_SKIP(bed);                                                       \
  std::unique_ptr<RestClient> client_var = ClientFor(bed->admin_kubeconfig()); \
  ASSERT_NE(client_var, nullptr);                                              \
  ASSERT_EQ(InstallCrds(*client_var), "")

// One object to judge.
struct Vector {
  std::string name;  // metadata.name, unique within its kind
  Json spec;         // null: no spec at all
  // "": valid. Else the field both refusals name, dotted as the apiserver writes it
  // ("spec.gpuQuota.H100", where the standalone server writes spec.gpuQuota["H100"]).
  std::string field;
  Json metadata = Json::object();  // merged into metadata (null: nothing)
  // Valid, but the apiserver drops part of what was sent (a null): the stored spec is not
  // compared with the one sent.
  bool pruned = false;
};

struct KindVectors {
  std::string kind;
  std::vector<Vector> vectors;
};

// `j` with the value at JSON pointer `ptr` set to `v`, or removed when `v` is discarded.
Json Set(Json j, const std::string& ptr, Json v) {
  j[Json::json_pointer(ptr)] = std::move(v);
  return j;
}
Json Drop(Json j, const std::string& ptr) {
  const Json::json_pointer p(ptr);
  j[p.parent_pointer()].erase(p.back());
  return j;
}

std::vector<KindVectors> SharedVectors();  // below

// The standalone server's field path in the apiserver's form: `a["k"]` -> `a.k`.
std::string Dotted(const std::string& field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field.compare(i, 2, "[\"") == 0) {
      const size_t end = field.find("\"]", i + 2);
      if (end != std::string::npos) {
        absl::StrAppend(&out, ".", field.substr(i + 2, end - i - 2));
        i = end + 1;
        continue;
      }
    }
    out += field[i];
  }
  return out;
}

// NOLINTNEXTLINE(bugprone-exception-escape): nlohmann::json's move only asserts.
struct Verdicts {
  std::vector<api::FieldError> standalone;  // empty: accepted
  int kube_status = 0;                      // 201: created
  std::string kube_message;
  Json kube_object;  // when created: what the apiserver stored
  bool standalone_ok() const { return standalone.empty(); }
  bool kube_ok() const { return kube_status == 201; }
  std::string ToString() const {
    return absl::StrCat("standalone: ", standalone_ok() ? "accepted" : standalone[0].ToString(),
                        "; apiserver: ", kube_status, " ", kube_ok() ? "created" : kube_message);
  }
};

std::string TestNamespace(RestClient& c) {
  static const std::string ns = MakeNamespace(c, "crd-vectors");
  return ns;
}

Json ObjectOf(const std::string& kind, const Vector& v) {
  Json obj = {{"apiVersion", api::kApiVersion}, {"kind", kind}, {"metadata", {{"name", v.name}}}};
  if (v.metadata.is_object()) obj["metadata"].update(v.metadata);
  if (!v.spec.is_null()) obj["spec"] = v.spec;
  return obj;
}

Verdicts Judge(RestClient& c, const std::string& kind, const Json& obj) {
  const api::KindInfo& info = Kind(kind);
  const std::string ns = info.namespaced ? TestNamespace(c) : "";
  Verdicts v;
  v.standalone = api::ValidateObject(info, obj, ns, "");
  absl::StatusOr<kube::HttpResult> r = c.Raw(
      "POST", kube::ResourcePath(ResourceOf(kind), ns) + "?fieldValidation=Strict", obj.dump());
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return v;
  v.kube_status = r->status;
  const Json body = Json::parse(r->body, nullptr, false);
  if (v.kube_ok()) {
    v.kube_object = body;
  } else {
    v.kube_message = body.is_object() ? body.value("message", r->body) : r->body;
  }
  return v;
}

TEST(KubeCrdTest, EveryGeneratedCrdIsEstablishedWithItsNamesColumnsAndStatus) {
  CRDS_OR_FAIL(c);
  for (const api::GeneratedCrd& g : api::GenerateCrds()) {
    SCOPED_TRACE(g.kind);
    absl::StatusOr<Json> crd =
        c->Get(CrdsResource(), "", g.crd["metadata"]["name"].get<std::string>());
    ASSERT_TRUE(crd.ok()) << crd.status();
    // Stored as generated: the apiserver dropped or defaulted nothing we wrote (only added).
    EXPECT_EQ((*crd)["spec"]["names"], g.crd["spec"]["names"]);
    EXPECT_EQ((*crd)["spec"]["versions"][0]["schema"], g.crd["spec"]["versions"][0]["schema"]);
    EXPECT_EQ((*crd)["spec"]["versions"][0]["additionalPrinterColumns"],
              g.crd["spec"]["versions"][0]["additionalPrinterColumns"]);
    // Discovery serves the short names, the categories and the status subresource.
    absl::StatusOr<kube::HttpResult> d = c->Raw("GET", "/apis/tessera.dev/v1");
    ASSERT_TRUE(d.ok()) << d.status();
    const std::string plural = g.crd["spec"]["names"]["plural"];
    bool found = false, status = false;
    const Json discovery = Json::parse(d->body);
    for (const Json& res : discovery["resources"]) {
      if (res["name"] == plural) {
        found = true;
        EXPECT_EQ(res["shortNames"], g.crd["spec"]["names"]["shortNames"]);
        EXPECT_EQ(res["categories"], Json({"tessera"}));
        EXPECT_EQ(res["namespaced"], Kind(g.kind).namespaced);
      }
      if (res["name"] == plural + "/status") status = true;
    }
    EXPECT_TRUE(found && status) << d->body;
  }
}

TEST(KubeCrdTest, BothAcceptAndRefuseTheSameObjects) {
  CRDS_OR_FAIL(c);
  int judged = 0;
  for (const KindVectors& kv : SharedVectors()) {
    for (const Vector& v : kv.vectors) {
      const Json obj = ObjectOf(kv.kind, v);
      SCOPED_TRACE(absl::StrCat(kv.kind, " ", v.name, " ", obj.dump().substr(0, 400)));
      const Verdicts got = Judge(*c, kv.kind, obj);
      ++judged;
      EXPECT_EQ(got.standalone_ok(), got.kube_ok()) << "they disagree: " << got.ToString();
      EXPECT_EQ(got.standalone_ok(), v.field.empty())
          << (v.field.empty() ? "should be valid: " : "should be refused: ") << got.ToString();
      if (!v.field.empty()) {
        // Both name the field.
        bool named = false;
        for (const api::FieldError& e : got.standalone) {
          named = named || absl::StartsWith(Dotted(e.field), v.field);
        }
        EXPECT_TRUE(named || got.standalone_ok()) << v.field << ": " << got.ToString();
        EXPECT_TRUE(got.kube_ok() || absl::StrContains(got.kube_message, v.field))
            << v.field << ": " << got.ToString();
        EXPECT_TRUE(got.kube_ok() || got.kube_status == 422 || got.kube_status == 400)
            << got.ToString();
      } else if (got.kube_ok() && !v.pruned) {
        // Nothing was pruned: every field is in the CRD's schema.
        EXPECT_EQ(got.kube_object["spec"], obj["spec"]);
      }
    }
  }
  EXPECT_GT(judged, 80);
}

// Where the two cannot agree, and why. Each is checked to still answer as listed.
struct Difference {
  std::string kind;
  Vector vector;
  bool standalone_accepts;
  bool kube_accepts;
  std::string reason;
};

std::vector<Difference> KnownDifferences() {
  const Json mv = {{"model", "llama-3"}, {"version", "v1"}};
  const Json ck = {{"jobName", "llm-7b"}, {"step", 1000}, {"path", "s3://ckpt/llm/1000"}};
  const Json tj = {{"groups", {{{"name", "worker"}, {"count", 1}, {"gpusPerReplica", 8}}}}};
  std::string multibyte;
  for (int i = 0; i < 40; ++i) multibyte += "\xc3\xa9";  // 40 x U+00E9: 40 characters, 80 bytes
  return {
      {"ModelVersion",
       {"kd-multibyte", Set(mv, "/version", multibyte)},
       false,
       true,
       "maxLength: the standalone server counts bytes (80 > 63), OpenAPI characters (40)"},
      {"Checkpoint",
       {"kd-nul", Set(ck, "/path", std::string("s3://a\0b", 8))},
       false,
       true,
       "a NUL character: the standalone server refuses it in every string (nothing downstream of "
       "it can carry one); a pattern on every string field of every CRD would be the only way "
       "here, so it is left to whoever passes the string on (the operator, the kubelet)"},
      {"ModelVersion",
       {"kd-label-value", mv, "", {{"labels", {{"team", "-nlp"}}}}},
       true,
       false,
       "label values: the standalone server allows 0-63 of [A-Za-z0-9._-]; Kubernetes also "
       "requires an alphanumeric first and last character (its own metadata rules, which a CRD "
       "cannot relax)"},
      {"ModelVersion",
       {"kd-long-annotation", mv, "", {{"annotations", {{"note", std::string(5000, 'x')}}}}},
       false,
       true,
       "annotation values: at most 4096 bytes each on the standalone server; Kubernetes limits "
       "all annotations together (256 KiB), and a CRD's schema cannot reach metadata beyond "
       "name"},
      {"TrainingJob",
       {"kd-grace", tj, "", {{"annotations", {{"tessera.dev/grace-seconds", "forever"}}}}},
       false,
       true,
       "tessera.dev/grace-seconds: checked by the standalone server; CEL cannot read "
       "annotations, so the reader clamps it (the agent does, to 0..600)"},
      {"Queue",
       {"kd-namespace", Json::object(), "", {{"namespace", "default"}}},
       false,
       true,
       "metadata.namespace on a cluster-scoped kind: the standalone server refuses it, the "
       "apiserver drops it"},
      {"Checkpoint",
       {"kd-whole-float", Set(ck, "/step", 1000.0)},
       false,
       true,
       "an integer written as 1000.0: the standalone server's JSON parser keeps it a float and "
       "refuses it for an integer field; the apiserver takes a float with no fraction as an "
       "integer"},
  };
}

TEST(KubeCrdTest, KnownDifferencesAreStillWhatTheyAre) {
  CRDS_OR_FAIL(c);
  for (const Difference& d : KnownDifferences()) {
    const Json obj = ObjectOf(d.kind, d.vector);
    SCOPED_TRACE(absl::StrCat(d.kind, " ", d.vector.name, ": ", d.reason));
    const Verdicts got = Judge(*c, d.kind, obj);
    EXPECT_EQ(got.standalone_ok(), d.standalone_accepts) << got.ToString();
    EXPECT_EQ(got.kube_ok(), d.kube_accepts) << got.ToString();
  }
}

// The status is the controllers': the CRD keeps it whole and unvalidated (its fields grow with
// them), where the standalone server checks a status write against the table. A known difference
// too, on the status subresource rather than at create.
TEST(KubeCrdTest, KnownDifferenceTheStatusIsNotValidatedByTheCrd) {
  CRDS_OR_FAIL(c);
  const std::string ns = TestNamespace(*c);
  const Json tj = {{"groups", {{{"name", "worker"}, {"count", 1}, {"gpusPerReplica", 8}}}}};
  const Verdicts created = Judge(*c, "TrainingJob", ObjectOf("TrainingJob", {"kd-status", tj}));
  ASSERT_TRUE(created.kube_ok() && created.standalone_ok()) << created.ToString();
  Json obj = created.kube_object;
  obj["status"] = {{"phase", "Bogus"}, {"restarts", -1}, {"aFieldOfALaterOperator", {{"x", 1}}}};
  std::vector<api::FieldError> standalone;
  Kind("TrainingJob")
      .object_schema.FieldSchema("status")
      ->Validate(obj["status"], "status", standalone);
  EXPECT_GE(standalone.size(), 3u);  // phase, restarts, the unknown field
  absl::StatusOr<Json> written =
      c->Update(ResourceOf("TrainingJob"), ns, "kd-status", obj, "status");
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ((*written)["status"], obj["status"]);
  // A write of the object itself leaves the status alone (the subresource owns it).
  Json user = *written;
  user["spec"]["suspend"] = true;
  user["status"] = {{"phase", "Running"}};
  absl::StatusOr<Json> u = c->Update(ResourceOf("TrainingJob"), ns, "kd-status", user);
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ((*u)["status"], obj["status"]);
}

// --- The shared vectors -------------------------------------------------------------------------

std::vector<KindVectors> SharedVectors() {
  const std::string long64(64, 'a'), long1025(1025, 'a');
  const Json tj_min = Json::parse(R"({"groups": [{"name": "worker", "count": 1,
                                                  "gpusPerReplica": 8}]})");
  const Json tj_full = Json::parse(R"({
    "queue": "research", "priorityClassName": "high", "image": "registry.example/llm:1",
    "command": ["torchrun", "--nproc-per-node=8", "train.py"],
    "groups": [{"name": "worker", "count": 3, "gpusPerReplica": 8, "gpuMemoryMiB": 81920,
                "gpuType": "H100", "resources": {"cpu": 32.5, "memoryGiB": 512}},
               {"name": "eval", "count": 1, "gpusPerReplica": 1, "gpuMilli": 500,
                "resources": {"cpu": 4}},
               {"name": "ps", "count": 1, "gpusPerReplica": 0}],
    "elastic": {"minReplicas": 2, "maxReplicas": 5}, "maxRuntimeSeconds": 86400,
    "maxRestarts": 3, "checkpoint": {"intervalSeconds": 600, "path": "/ckpt/llm", "keep": 3},
    "suspend": false, "priority": 100, "gang": {"minMember": 2, "timeoutSeconds": 300},
    "placement": "Pack", "topology": {"level": "rack", "required": true},
    "gpuModels": ["H100", "A100"], "nodeSelector": {"tessera.dev/pool": "a"},
    "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
                    {"key": "zone", "operator": "Equal", "value": "b"}]})");
  const Json is_min = Json::parse(R"({"modelVersion": "llama-3-v1",
                                      "replicas": {"min": 1, "max": 1}, "gpusPerReplica": 1})");
  const Json is_full = Json::parse(R"({
    "modelVersion": "llama-3-v1", "image": "registry.example/serve:2", "command": ["serve"],
    "queue": "serving", "priorityClassName": "high", "replicas": {"min": 1, "max": 4},
    "gpusPerReplica": 1, "gpuMilli": 500, "gpuMemoryMiB": 40960, "gpuType": "A100",
    "resources": {"cpu": 4, "memoryGiB": 16.5},
    "slo": {"p99LatencyMs": 250.5, "minThroughputRps": 10}, "priority": -5,
    "gang": {"minMember": 0}, "placement": "Spread", "topology": {"level": "node"},
    "gpuModels": ["A100"], "nodeSelector": {},
    "tolerations": [{"key": "x", "operator": "Equal", "value": "y", "effect": "NoExecute"}]})");
  const Json gp_min = {{"gpuType", "H100"}};
  const Json gp_full = Json::parse(R"({"gpuType": "H100", "nodeSelector": {"tessera.dev/pool":
    "a"}, "capacity": 64, "queues": ["team-a", "team-b"], "cordon": false, "drain": true})");
  const Json ck_min = {{"jobName", "llm-7b"}, {"step", 1000}, {"path", "s3://ckpt/llm/1000"}};
  const Json ck_full = Set(ck_min, "/sizeBytes", 123456789012);
  const Json mv_min = {{"model", "llama-3"}, {"version", "v1"}};
  const Json mv_full = Json::parse(R"({"model": "llama-3", "version": "2024-06.1+rc",
    "checkpoint": "llm-7b-1000", "artifactPath": "s3://models/llama-3/v1"})");
  const Json q_full = Json::parse(R"({
    "parent": "org", "weight": 2.5, "gpuQuota": {"H100": 64, "A100": 0}, "borrowing": true,
    "quotas": {"gpu/H100": {"guaranteed": 64, "borrowingLimit": 16, "lendingLimit": 8},
               "cpu": {"guaranteed": 512}, "memory": {"guaranteed": 4096.5}},
    "namespaces": ["team-a", "team-b"]})");
  const Json one_group = Json::parse(R"([{"name": "w", "count": 16384, "gpusPerReplica": 1},
                                         {"name": "x", "count": 1, "gpusPerReplica": 1}])");
  return {
      {"TrainingJob",
       {
           {"tj-min", tj_min, ""},
           {"tj-full", tj_full, ""},
           {"tj-null-optional", Set(tj_min, "/queue", nullptr), "", {}, true},
           {"tj-no-spec", nullptr, "spec"},
           {"tj-missing-groups", Json::object(), "spec.groups"},
           {"tj-null-groups", Set(tj_min, "/groups", nullptr), "spec.groups"},
           {"tj-missing-gpus", Drop(tj_min, "/groups/0/gpusPerReplica"),
            "spec.groups[0].gpusPerReplica"},
           {"tj-no-groups", Set(tj_min, "/groups", Json::array()), "spec.groups"},
           {"tj-count-string", Set(tj_min, "/groups/0/count", "2"), "spec.groups[0].count"},
           {"tj-count-fraction", Set(tj_min, "/groups/0/count", 1.5), "spec.groups[0].count"},
           {"tj-suspend-string", Set(tj_min, "/suspend", "yes"), "spec.suspend"},
           {"tj-command-string", Set(tj_min, "/command", "python"), "spec.command"},
           {"tj-groups-object", Set(tj_min, "/groups", tj_min["groups"][0]), "spec.groups"},
           {"tj-count-zero", Set(tj_min, "/groups/0/count", 0), "spec.groups[0].count"},
           {"tj-gpus-17", Set(tj_min, "/groups/0/gpusPerReplica", 17),
            "spec.groups[0].gpusPerReplica"},
           {"tj-gpu-milli-zero", Set(tj_min, "/groups/0/gpuMilli", 0), "spec.groups[0].gpuMilli"},
           {"tj-priority-huge", Set(tj_min, "/priority", 1000000001), "spec.priority"},
           {"tj-cpu-huge", Set(tj_min, "/groups/0/resources", {{"cpu", 4096.5}}),
            "spec.groups[0].resources.cpu"},
           {"tj-restarts-negative", Set(tj_min, "/maxRestarts", -1), "spec.maxRestarts"},
           {"tj-keep-negative", Set(tj_min, "/checkpoint", {{"keep", -1}}), "spec.checkpoint.keep"},
           {"tj-image-long", Set(tj_min, "/image", long1025), "spec.image"},
           {"tj-placement-enum", Set(tj_min, "/placement", "Packed"), "spec.placement"},
           {"tj-level-enum", Set(tj_min, "/topology", {{"level", "zone"}}), "spec.topology.level"},
           {"tj-level-missing", Set(tj_min, "/topology", {{"required", true}}),
            "spec.topology.level"},
           {"tj-effect-enum", Set(tj_min, "/tolerations", {{{"key", "a"}, {"effect", "NoRun"}}}),
            "spec.tolerations[0].effect"},
           {"tj-unknown-field", Set(tj_min, "/gpus", 8), "spec.gpus"},
           {"tj-unknown-nested", Set(tj_min, "/groups/0/replicas", 2), "spec.groups[0].replicas"},
           {"tj-queue-upper", Set(tj_min, "/queue", "Research"), "spec.queue"},
           {"tj.dotted", tj_min, "metadata.name"},
           // The CEL rules: object_codec.cc's and elastic_spec.cc's cross-field checks.
           {"tj-too-many-members", Set(tj_min, "/groups", one_group), "spec.groups"},
           {"tj-elastic-max", Set(tj_min, "/elastic", {{"minReplicas", 1}, {"maxReplicas", 3}}),
            "spec.elastic.maxReplicas"},
           {"tj-elastic-min",
            Set(Set(tj_min, "/groups/0/count", 2), "/elastic",
                {{"minReplicas", 3}, {"maxReplicas", 2}}),
            "spec.elastic.minReplicas"},
           {"tj-elastic-gang", Set(Set(tj_full, "/gang/minMember", 3), "/elastic/minReplicas", 2),
            "spec.gang.minMember"},
           {"tj-elastic-gang-zero", Set(tj_full, "/gang/minMember", 0), ""},
       }},
      {"InferenceService",
       {
           {"is-min", is_min, ""},
           {"is-full", is_full, ""},
           {"is-missing-replicas", Drop(is_min, "/replicas"), "spec.replicas"},
           {"is-missing-max", Drop(is_min, "/replicas/max"), "spec.replicas.max"},
           {"is-missing-model", Drop(is_min, "/modelVersion"), "spec.modelVersion"},
           {"is-replicas-string", Set(is_min, "/replicas", "3"), "spec.replicas"},
           {"is-p99-string", Set(is_min, "/slo", {{"p99LatencyMs", "fast"}}),
            "spec.slo.p99LatencyMs"},
           {"is-gpus-zero", Set(is_min, "/gpusPerReplica", 0), "spec.gpusPerReplica"},
           {"is-max-huge", Set(is_min, "/replicas/max", 16385), "spec.replicas.max"},
           {"is-p99-zero", Set(is_min, "/slo", {{"p99LatencyMs", 0}}), "spec.slo.p99LatencyMs"},
           {"is-milli-huge", Set(is_min, "/gpuMilli", 1001), "spec.gpuMilli"},
           {"is-placement-enum", Set(is_min, "/placement", "Random"), "spec.placement"},
           {"is-operator-enum", Set(is_min, "/tolerations", {{{"key", "a"}, {"operator", "In"}}}),
            "spec.tolerations[0].operator"},
           {"is-model-upper", Set(is_min, "/modelVersion", "Llama_3"), "spec.modelVersion"},
           {"is-unknown-field", Set(is_min, "/model", "x"), "spec.model"},
           {"is-min-over-max", Set(is_min, "/replicas", {{"min", 3}, {"max", 2}}),
            "spec.replicas.min"},
       }},
      {"GPUPool",
       {
           {"gp-min", gp_min, ""},
           {"gp-full", gp_full, ""},
           {"gp-missing-type", Json::object(), "spec.gpuType"},
           {"gp-capacity-string", Set(gp_min, "/capacity", "64"), "spec.capacity"},
           {"gp-selector-int", Set(gp_min, "/nodeSelector", {{"a", 1}}), "spec.nodeSelector.a"},
           {"gp-queues-string", Set(gp_min, "/queues", "team-a"), "spec.queues"},
           {"gp-capacity-negative", Set(gp_min, "/capacity", -1), "spec.capacity"},
           {"gp-type-long", Set(gp_min, "/gpuType", long64), "spec.gpuType"},
           // GPUPool's spec has no enum: a queue name that is no DNS label instead.
           {"gp-queue-upper", Set(gp_min, "/queues", Json::array({"Team A"})), "spec.queues[0]"},
           {"gp-unknown-field", Set(gp_min, "/selector", Json::object()), "spec.selector"},
           {"gp-cordon-string", Set(gp_min, "/cordon", "true"), "spec.cordon"},
           {"gp-drain-int", Set(gp_min, "/drain", 1), "spec.drain"},
       }},
      {"Checkpoint",
       {
           {"ck-min", ck_min, ""},
           {"ck-full", ck_full, ""},
           {"ck-missing-path", Drop(ck_min, "/path"), "spec.path"},
           {"ck-step-string", Set(ck_min, "/step", "1000"), "spec.step"},
           {"ck-step-negative", Set(ck_min, "/step", -1), "spec.step"},
           {"ck-size-negative", Set(ck_min, "/sizeBytes", -1), "spec.sizeBytes"},
           {"ck-path-long", Set(ck_min, "/path", long1025), "spec.path"},
           {"ck-job-upper", Set(ck_min, "/jobName", "LLM"), "spec.jobName"},
           {"ck-unknown-field", Set(ck_min, "/ready", true), "spec.ready"},
       }},
      {"ModelVersion",
       {
           {"mv-min", mv_min, ""},
           {"mv-full", mv_full, ""},
           {"mv-missing-version", Drop(mv_min, "/version"), "spec.version"},
           {"mv-version-int", Set(mv_min, "/version", 1), "spec.version"},
           {"mv-version-long", Set(mv_min, "/version", long64), "spec.version"},
           {"mv-model-upper", Set(mv_min, "/model", "Llama"), "spec.model"},
           {"mv-checkpoint-dotted", Set(mv_min, "/checkpoint", "a.b"), "spec.checkpoint"},
           {"mv-unknown-field", Set(mv_min, "/lineage", Json::object()), "spec.lineage"},
       }},
      {"Queue",
       {
           {"q-min", Json::object(), ""},
           {"q-full", q_full, ""},
           {"q-no-spec", nullptr, "spec"},
           {"q-weight-string", {{"weight", "x"}}, "spec.weight"},
           {"q-weight-zero", {{"weight", 0}}, "spec.weight"},
           {"q-gpu-negative", {{"gpuQuota", {{"H100", -1}}}}, "spec.gpuQuota.H100"},
           {"q-gpu-fraction", {{"gpuQuota", {{"H100", 1.5}}}}, "spec.gpuQuota.H100"},
           {"q-gpu-huge", {{"gpuQuota", {{"H100", 10000001}}}}, "spec.gpuQuota.H100"},
           {"q-parent-upper", {{"parent", "Org"}}, "spec.parent"},
           {"q-parent-empty", {{"parent", ""}}, "spec.parent"},
           {"q-quota-key", {{"quotas", {{"disk", {{"guaranteed", 1}}}}}}, "spec.quotas"},
           {"q-quota-field",
            {{"quotas", {{"cpu", {{"guaranted", 1}}}}}},
            "spec.quotas.cpu.guaranted"},
           {"q-quota-not-object", {{"quotas", {{"cpu", 4}}}}, "spec.quotas.cpu"},
           {"q-namespaces-string", {{"namespaces", "team-a"}}, "spec.namespaces"},
           {"q.dotted", Json::object(), "metadata.name"},
       }},
  };
}

}  // namespace
}  // namespace tessera::testing
