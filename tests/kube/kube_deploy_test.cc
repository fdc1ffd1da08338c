// The scheduler's deployment manifests (deploy/kubernetes: namespace.yaml, crds/, scheduler/)
// against a real kube-apiserver (the bed):
// - every object is created as `kubectl create` would (strict field validation, so a misspelt
//   field fails instead of being pruned) and both CRDs become Established;
// - the Queue CRD, generated from the standalone server's schema table (api/crd_gen.h), accepts
//   exactly what that server's Queue schema accepts (the same samples judged by both), keeps the
//   scheduler's status fields, and scheduler-plugins' PodGroup is accepted and decodes with the
//   scheduler's codec (the other generated CRDs are judged by kube_crd_test);
// - the scheduler's ServiceAccount may do what the scheduler does and nothing else
//   (SubjectAccessReviews, and a real token that runs leader election);
// - the manifests agree with each other (names, lease, profile path, metrics port) and the
//   ConfigMap's profile is deploy/profiles/default.yaml.
// The tests of the files alone run without the bed.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/crd_gen.h"
#include "api/kinds.h"
#include "cli/yaml_json.h"
#include "common/clock.h"
#include "kube/api_error.h"
#include "kube/gang_objects.h"
#include "kube/leader_election.h"
#include "kube_test_util.h"

namespace tessera::testing {
namespace {

using kube::Json;
using kube::ResourceType;
using kube::RestClient;

constexpr char kNamespace[] = "tessera-system";

using kube::QueuesResource;
const ResourceType& CrdsResource() { return kube::CustomResourceDefinitionsResource(); }

std::string ReadText(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// One object of the manifests and the file it came from.
struct Manifest {
  std::string file;  // relative to deploy/kubernetes
  Json object;
};

// namespace.yaml, crds/*.yaml, scheduler/*.yaml, operator/*.yaml, in that order (the order of
// `kubectl apply`).
std::vector<Manifest> LoadManifests() {
  const std::filesystem::path root =
      std::filesystem::path(TESSERA_SOURCE_DIR) / "deploy/kubernetes";
  std::vector<std::string> files = {"namespace.yaml"};
  for (const char* dir : {"crds", "scheduler", "operator"}) {
    std::vector<std::string> in_dir;
    for (const auto& e : std::filesystem::directory_iterator(root / dir)) {
      if (e.path().extension() == ".yaml")
        in_dir.push_back(absl::StrCat(dir, "/", e.path().filename().string()));
    }
    std::sort(in_dir.begin(), in_dir.end());
    files.insert(files.end(), in_dir.begin(), in_dir.end());
  }
  std::vector<Manifest> out;
  for (const std::string& f : files) {
    absl::StatusOr<std::vector<Json>> objs = cli::ParseManifests(ReadText(root / f));
    EXPECT_TRUE(objs.ok()) << f << ": " << objs.status();
    if (!objs.ok()) continue;
    EXPECT_FALSE(objs->empty()) << f;
    for (Json& o : *objs) out.push_back({f, std::move(o)});
  }
  return out;
}

std::string NameOf(const Json& obj) {
  return obj.value("metadata", Json::object()).value("name", "");
}

// A copy of the object of `kind` named `name` in the manifests (null when absent: the test
// fails). The tests read what they expect with operator[] on such copies, which makes a missing
// key null rather than undefined behaviour (as const access would).
Json Find(const std::vector<Manifest>& ms, const std::string& kind, const std::string& name) {
  for (const Manifest& m : ms) {
    if (m.object.value("kind", "") == kind && NameOf(m.object) == name) return m.object;
  }
  ADD_FAILURE() << "no " << kind << " " << name << " in the manifests";
  return Json();
}

// --- The files alone ----------------------------------------------------------------------------

TEST(KubeDeployManifestTest, ConfigMapCarriesTheDefaultProfileVerbatim) {
  const std::vector<Manifest> ms = LoadManifests();
  Json cm = Find(ms, "ConfigMap", "tessera-scheduler-profile");
  ASSERT_TRUE(cm.is_object());
  EXPECT_EQ(cm["data"].value("profile.yaml", ""),
            ReadText(std::string(TESSERA_SOURCE_DIR) + "/deploy/profiles/default.yaml"));
}

// The value of `--flag=value` in `args`, or "".
std::string Arg(const Json& args, const std::string& flag) {
  for (const Json& a : args) {
    const std::string s = a.get<std::string>();
    if (absl::StartsWith(s, flag + "=")) return s.substr(flag.size() + 1);
  }
  return "";
}

TEST(KubeDeployManifestTest, DeploymentNamesTheOtherObjectsConsistently) {
  const std::vector<Manifest> ms = LoadManifests();
  for (const Manifest& m : ms) {
    if (!absl::StartsWith(m.file, "scheduler/")) continue;
    const Json meta = m.object.value("metadata", Json::object());
    const std::string kind = m.object.value("kind", "");
    if (kind != "ClusterRole" && kind != "ClusterRoleBinding") {
      EXPECT_EQ(meta.value("namespace", ""), kNamespace) << m.file << " " << kind;
    }
  }
  Json d = Find(ms, "Deployment", "tessera-scheduler");
  Json role = Find(ms, "Role", "tessera-scheduler-leader-election");
  ASSERT_TRUE(d.is_object() && role.is_object());
  Json pod = d["spec"]["template"]["spec"];
  EXPECT_EQ(d["spec"]["replicas"], 2);
  EXPECT_EQ(pod["priorityClassName"], "system-cluster-critical");
  // Placed by the default scheduler: it cannot schedule its own replacement.
  EXPECT_FALSE(pod.contains("schedulerName"));
  EXPECT_EQ(pod["securityContext"]["runAsNonRoot"], true);
  EXPECT_TRUE(pod["affinity"].contains("podAntiAffinity"));
  Find(ms, "ServiceAccount", pod.value("serviceAccountName", ""));
  ASSERT_EQ(pod["containers"].size(), 1u);
  Json c = pod["containers"][0];
  EXPECT_EQ(c["command"], Json({"tessera", "scheduler"}));
  EXPECT_EQ(c["securityContext"]["readOnlyRootFilesystem"], true);
  const Json args = c["args"];
  EXPECT_EQ(Arg(args, "--leader-elect"), "true");
  EXPECT_EQ(Arg(args, "--scheduler-name"), "tessera");
  // The lease the Role lets it get and update.
  EXPECT_EQ(Arg(args, "--lease-namespace"), role["metadata"].value("namespace", ""));
  bool named = false;
  for (Json rule : role["rules"]) {
    if (rule.contains("resourceNames")) {
      EXPECT_EQ(rule["resourceNames"], Json({Arg(args, "--lease-name")}));
      named = true;
    }
  }
  EXPECT_TRUE(named) << role.dump();
  // --profile is the ConfigMap's key where its volume is mounted.
  std::map<std::string, std::string> mounts;  // volume -> mountPath
  for (Json vm : c["volumeMounts"]) mounts[vm["name"]] = vm["mountPath"];
  bool profile_found = false;
  for (Json v : pod["volumes"]) {
    if (!v.contains("configMap")) continue;
    Json cm = Find(ms, "ConfigMap", v["configMap"].value("name", ""));
    for (const Json& item : v["configMap"]["items"]) {
      EXPECT_TRUE(cm["data"].contains(item.value("key", ""))) << item.dump();
      if (mounts[v["name"]] + "/" + item.value("path", "") == Arg(args, "--profile")) {
        profile_found = true;
      }
    }
  }
  EXPECT_TRUE(profile_found) << "--profile=" << Arg(args, "--profile");
  // The probes reach the metrics server: its port is the container's port they name.
  const std::string addr = Arg(args, "--metrics-addr");
  ASSERT_NE(addr.rfind(':'), std::string::npos) << addr;
  ASSERT_EQ(c["ports"].size(), 1u);
  EXPECT_EQ(std::to_string(c["ports"][0]["containerPort"].get<int>()),
            addr.substr(addr.rfind(':') + 1));
  EXPECT_EQ(c["livenessProbe"]["httpGet"]["port"], c["ports"][0]["name"]);
  EXPECT_EQ(c["livenessProbe"]["httpGet"]["path"], "/healthz");
}

// The Queue CRD is the one generated from the standalone server's schema table (api/crd_gen.h,
// whose unit test walks the two side by side; crds_test checks every committed CRD is current).
TEST(KubeDeployManifestTest, QueueCrdIsGeneratedFromTheStandaloneServersQueueSchema) {
  const std::vector<Manifest> ms = LoadManifests();
  Json crd = Find(ms, "CustomResourceDefinition", "queues.tessera.dev");
  ASSERT_TRUE(crd.is_object());
  bool generated = false;
  for (const api::GeneratedCrd& g : api::GenerateCrds()) {
    if (g.kind != "Queue") continue;
    EXPECT_EQ(crd, g.crd) << "run tessera crds -o deploy/kubernetes/crds";
    generated = true;
  }
  EXPECT_TRUE(generated);
  Json version = crd["spec"]["versions"][0];
  EXPECT_EQ(crd["spec"]["scope"], "Cluster");
  EXPECT_EQ(crd["spec"]["names"]["shortNames"], Json({"tq"}));
  EXPECT_EQ(version["subresources"], Json({{"status", Json::object()}}));
  Json root = version["schema"]["openAPIV3Schema"];
  EXPECT_EQ(root["properties"]["status"]["x-kubernetes-preserve-unknown-fields"], true);
  EXPECT_EQ(root.value("required", Json::array()), Json({"spec"}));
}

// --- On the apiserver ---------------------------------------------------------------------------

// The resource of `obj`'s kind, from the apiserver's discovery of its apiVersion.
absl::StatusOr<ResourceType> Discover(RestClient& c, const Json& obj) {
  const std::string gv = obj.value("apiVersion", "");
  const std::string kind = obj.value("kind", "");
  absl::StatusOr<kube::HttpResult> r = c.Raw("GET", gv == "v1" ? "/api/v1" : "/apis/" + gv);
  if (!r.ok()) return r.status();
  if (r->status != 200) return absl::NotFoundError(absl::StrCat(gv, " is not served: ", r->body));
  const Json discovery = Json::parse(r->body);
  for (const Json& res : discovery.value("resources", Json::array())) {
    const std::string name = res.value("name", "");
    if (res.value("kind", "") == kind && name.find('/') == std::string::npos) {
      const size_t slash = gv.find('/');
      return ResourceType{slash == std::string::npos ? "" : gv.substr(0, slash),
                          slash == std::string::npos ? gv : gv.substr(slash + 1), name, kind,
                          res.value("namespaced", false)};
    }
  }
  return absl::NotFoundError(absl::StrCat(gv, " serves no ", kind));
}

// POSTs `obj` with fieldValidation=Strict, as kubectl create/apply do: an unknown or duplicate
// field is an error rather than pruned.
absl::StatusOr<kube::HttpResult> CreateStrict(RestClient& c, const ResourceType& t,
                                              const Json& obj) {
  const std::string ns =
      t.namespaced ? obj.value("metadata", Json::object()).value("namespace", "default") : "";
  return c.Raw("POST", kube::ResourcePath(t, ns) + "?fieldValidation=Strict", obj.dump());
}

// Creates every object of the manifests on the bed once per process and waits until the CRDs
// are Established and their resources served; "" or what failed.
std::string Deploy(RestClient& c) {
  static std::optional<std::string> result;
  if (result) return *result;
  std::vector<std::string> errors;
  std::vector<Json> crds;
  for (const Manifest& m : LoadManifests()) {
    absl::StatusOr<ResourceType> t = Discover(c, m.object);
    const std::string what =
        absl::StrCat(m.file, ": ", m.object.value("kind", ""), " ", NameOf(m.object));
    if (!t.ok()) {
      errors.push_back(absl::StrCat(what, ": ", t.status().message()));
      continue;
    }
    absl::StatusOr<kube::HttpResult> r = CreateStrict(c, *t, m.object);
    if (!r.ok() || r->status != 201) {
      errors.push_back(absl::StrCat(what, ": ", r.ok() ? r->body : r.status().ToString()));
    }
    if (t->plural == "customresourcedefinitions") crds.push_back(m.object);
  }
  for (Json crd : crds) {
    const std::string name = crd["metadata"]["name"];
    std::string last;
    const bool established = PollUntil(
        [&] {
          absl::StatusOr<Json> got = c.Get(CrdsResource(), "", name);
          if (!got.ok()) return false;
          const Json status = got->value("status", Json::object());
          last = status.dump();
          for (const Json& cond : status.value("conditions", Json::array())) {
            if (cond["type"] == "Established" && cond["status"] == "True") return true;
          }
          return false;
        },
        absl::Seconds(60));
    if (!established) errors.push_back(absl::StrCat(name, " not Established: ", last));
    // Established: the apiserver accepted the names; the resource is served a moment later.
    const std::string path = absl::StrCat("/apis/", crd["spec"]["group"].get<std::string>(), "/",
                                          crd["spec"]["versions"][0]["name"].get<std::string>(),
                                          "/", crd["spec"]["names"]["plural"].get<std::string>());
    const bool served = PollUntil(
        [&] {
          absl::StatusOr<kube::HttpResult> r = c.Raw("GET", path);
          return r.ok() && r->status == 200;
        },
        absl::Seconds(30));
    if (!served) errors.push_back(path + " not served");
  }
  result = absl::StrJoin(errors, "\n");
  return *result;
}

#define DEPLOYED_OR_FAIL(client_var)                                           \
  KUBE_BED_OR_SKIP(bed);                                                       \
  std::unique_ptr<RestClient> client_var = ClientFor(bed->admin_kubeconfig()); \
  ASSERT_NE(client_var, nullptr);                                              \
  ASSERT_EQ(Deploy(*client_var), "")

TEST(KubeDeployTest, EveryManifestIsAcceptedStrictlyAndTheCrdsAreEstablished) {
  DEPLOYED_OR_FAIL(c);
  absl::StatusOr<Json> d =
      c->Get({"apps", "v1", "deployments", "Deployment", true}, kNamespace, "tessera-scheduler");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ((*d)["spec"]["replicas"], 2);
  // No kubelet or controller-manager: the Deployment is stored, nothing runs.
  for (const char* name : {"queues.tessera.dev", "podgroups.scheduling.x-k8s.io"}) {
    absl::StatusOr<Json> crd = c->Get(CrdsResource(), "", name);
    ASSERT_TRUE(crd.ok()) << crd.status();
    EXPECT_TRUE(crd->dump().find("\"NamesAccepted\"") != std::string::npos) << crd->dump();
  }
  absl::StatusOr<kube::HttpResult> x = c->Raw("GET", "/apis/scheduling.x-k8s.io/v1alpha1");
  ASSERT_TRUE(x.ok()) << x.status();
  EXPECT_TRUE(absl::StrContains(x->body, "\"podgroups/status\"")) << x->body;
  EXPECT_TRUE(absl::StrContains(x->body, "\"pgs\"")) << x->body;
}

Json QueueObject(const std::string& name, const Json& spec) {
  Json q = {{"apiVersion", "tessera.dev/v1"}, {"kind", "Queue"}, {"metadata", {{"name", name}}}};
  if (!spec.is_null()) q["spec"] = spec;
  return q;
}

TEST(KubeDeployTest, QueueCrdAcceptsWhatTheStandaloneServerAccepts) {
  DEPLOYED_OR_FAIL(c);
  const api::KindInfo* kind = api::KindByPlural("queues");
  ASSERT_NE(kind, nullptr);
  struct Sample {
    std::string name;
    Json spec;        // null: no spec
    std::string why;  // "": accepted; else what the apiserver's refusal names
  };
  const Json full = Json::parse(R"({
    "parent": "org", "weight": 2.5, "gpuQuota": {"H100": 64, "A100": 0}, "borrowing": true,
    "quotas": {"gpu/H100": {"guaranteed": 64, "borrowingLimit": 16, "lendingLimit": 8},
               "cpu": {"guaranteed": 512}, "memory": {"guaranteed": 4096.5}},
    "namespaces": ["team-a", "team-b"]})");
  const std::string must_match = "should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'";
  const std::vector<Sample> samples = {
      {"q-full", full, ""},
      {"q-empty", Json::object(), ""},
      {"q-weight-int", {{"weight", 3}}, ""},
      {"q-no-spec", Json(), "spec: Required value"},
      {"q-weight-string", {{"weight", "x"}}, "spec.weight in body must be of type number"},
      {"q-weight-zero", {{"weight", 0}}, "spec.weight in body should be greater than 0"},
      {"q-weight-negative", {{"weight", -1}}, "spec.weight in body should be greater than 0"},
      {"q-parent-empty", {{"parent", ""}}, "spec.parent in body " + must_match},
      {"q-parent-upper", {{"parent", "Org"}}, "spec.parent in body " + must_match},
      {"q-parent-dot", {{"parent", "org.a"}}, "spec.parent in body " + must_match},
      {"q-gpu-negative",
       {{"gpuQuota", {{"H100", -1}}}},
       "spec.gpuQuota.H100 in body should be greater than or equal to 0"},
      {"q-gpu-fraction",
       {{"gpuQuota", {{"H100", 1.5}}}},
       "spec.gpuQuota.H100 in body must be of type integer"},
      {"q-gpu-string",
       {{"gpuQuota", {{"H100", "8"}}}},
       "spec.gpuQuota.H100 in body must be of type integer"},
      {"q-gpu-huge",
       {{"gpuQuota", {{"H100", 10000001}}}},
       "spec.gpuQuota.H100 in body should be less than or equal to 10000000"},
      {"q-borrowing-string",
       {{"borrowing", "yes"}},
       "spec.borrowing in body must be of type boolean"},
      {"q-quota-negative",
       {{"quotas", {{"gpu/H100", {{"guaranteed", -1}}}}}},
       "spec.quotas.gpu/H100.guaranteed in body should be greater than or equal to 0"},
      {"q-quota-string",
       {{"quotas", {{"cpu", {{"guaranteed", "4"}}}}}},
       "spec.quotas.cpu.guaranteed in body must be of type number"},
      {"q-quota-not-object",
       {{"quotas", {{"cpu", 4}}}},
       "spec.quotas.cpu in body must be of type object"},
      {"q-quota-unknown-resource",
       {{"quotas", {{"disk", {{"guaranteed", 1}}}}}},
       "unknown key; expected one of: cpu, memory, gpu/*"},
      // Strict decoding (400) names an unknown field.
      {"q-quota-unknown-field",
       {{"quotas", {{"cpu", {{"guaranted", 1}}}}}},
       "unknown field \"spec.quotas.cpu.guaranted\""},
      {"q-unknown-field", {{"wieght", 2}}, "unknown field \"spec.wieght\""},
      {"q-namespace-upper", {{"namespaces", {"Team"}}}, "spec.namespaces[0] in body " + must_match},
      {"q-namespaces-string",
       {{"namespaces", "team-a"}},
       "spec.namespaces in body must be of type array"},
      {"Q-Upper", Json::object(), "metadata.name: must be a lower-case DNS label"},
      // The apiserver allows dots in a cluster-scoped name; the CRD's CEL rule does not.
      {"q.dotted", Json::object(), "metadata.name: must be a lower-case DNS label"},
  };
  for (const Sample& s : samples) {
    SCOPED_TRACE(s.name + " " + s.spec.dump());
    const Json obj = QueueObject(s.name, s.spec);
    std::vector<api::FieldError> errors;
    kind->object_schema.Validate(obj, "", errors);
    EXPECT_EQ(errors.empty(), s.why.empty())
        << "standalone schema: " << (errors.empty() ? "" : errors[0].ToString());
    absl::StatusOr<kube::HttpResult> r = CreateStrict(*c, QueuesResource(), obj);
    ASSERT_TRUE(r.ok()) << r.status();
    if (!s.why.empty()) {
      // 422 Invalid from the schema; 400 from strict decoding.
      EXPECT_TRUE(r->status == 422 || r->status == 400) << r->status << " " << r->body;
      EXPECT_TRUE(absl::StrContains(Json::parse(r->body).value("message", ""), s.why)) << r->body;
      continue;
    }
    ASSERT_EQ(r->status, 201) << r->body;
    // Nothing was pruned: every field is in the schema.
    absl::StatusOr<Json> got = c->Get(QueuesResource(), "", s.name);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ((*got)["spec"], s.spec);
  }
  // Without strict validation (a client that does not ask), an unknown field is pruned, not kept.
  absl::StatusOr<Json> pruned =
      c->Create(QueuesResource(), "", QueueObject("q-pruned", {{"weight", 2}, {"wieght", 3}}));
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  EXPECT_EQ((*pruned)["spec"], Json({{"weight", 2}}));
}

TEST(KubeDeployTest, QueueStatusIsTheSchedulersAndKeepsUnknownFields) {
  DEPLOYED_OR_FAIL(c);
  absl::StatusOr<Json> q =
      c->Create(QueuesResource(), "", QueueObject("org", {{"gpuQuota", {{"H100", 8}}}}));
  ASSERT_TRUE(q.ok()) << q.status();
  Json with_status = *q;
  with_status["status"] = {{"phase", "Active"},
                           {"fairShare", 0.25},
                           {"gpusAllocated", {{"H100", 4}}},
                           {"aFieldOfALaterScheduler", {{"x", 1}}}};
  absl::StatusOr<Json> s = c->Update(QueuesResource(), "", "org", with_status, "status");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)["status"], with_status["status"]);
  // A user's update of the Queue leaves the status alone.
  Json user = *s;
  user["spec"]["weight"] = 2;
  user["status"] = {{"phase", "Closed"}};
  absl::StatusOr<Json> u = c->Update(QueuesResource(), "", "org", user);
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ((*u)["spec"]["weight"], 2);
  EXPECT_EQ((*u)["status"], with_status["status"]);
}

TEST(KubeDeployTest, CoschedulingPodGroupIsAcceptedAndDecodesForTheScheduler) {
  DEPLOYED_OR_FAIL(c);
  const std::string ns = MakeNamespace(*c, "cosched");
  const Json pg = {{"apiVersion", "scheduling.x-k8s.io/v1alpha1"},
                   {"kind", "PodGroup"},
                   {"metadata", {{"name", "train"}, {"namespace", ns}}},
                   {"spec",
                    {{"minMember", 4},
                     {"minResources", {{"cpu", "16"}, {"memory", "64Gi"}, {"nvidia.com/gpu", 32}}},
                     {"scheduleTimeoutSeconds", 60}}}};
  absl::StatusOr<kube::HttpResult> r = CreateStrict(*c, kube::CoschedulingPodGroupsResource(), pg);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->status, 201) << r->body;
  absl::StatusOr<kube::CoschedulingPodGroup> g =
      kube::DecodeCoschedulingPodGroup(Json::parse(r->body));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->min_member, 4);
  EXPECT_EQ(g->schedule_timeout_seconds, 60);
  EXPECT_EQ(g->min_resources.size(), 3u);
  // The scheduler's status write, through the subresource.
  g->phase = "Scheduling";
  g->running = 2;
  g->schedule_start_time = "2026-01-02T03:04:05Z";
  absl::StatusOr<Json> s = c->Update(kube::CoschedulingPodGroupsResource(), ns, "train",
                                     kube::EncodeCoschedulingPodGroup(*g), "status");
  ASSERT_TRUE(s.ok()) << s.status();
  absl::StatusOr<kube::CoschedulingPodGroup> back = kube::DecodeCoschedulingPodGroup(*s);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->phase, "Scheduling");
  EXPECT_EQ(back->running, 2);
  EXPECT_EQ(back->schedule_start_time, "2026-01-02T03:04:05Z");
  // Refused by the schema: wrong types, a quantity that is none, an unknown field.
  const std::vector<std::pair<Json, std::string>> bad_specs = {
      {{{"minMember", "four"}}, "spec.minMember in body must be of type integer"},
      {{{"minMember", 1.5}}, "spec.minMember in body must be of type int32"},
      {{{"minMember", 1}, {"minResources", {{"cpu", "lots"}}}},
       "spec.minResources.cpu in body should match"},
      {{{"minMember", 1}, {"scheduleTimeoutSeconds", "60s"}},
       "spec.scheduleTimeoutSeconds in body must be of type integer"},
      {{{"minMember", 1}, {"minMembers", 2}}, "unknown field \"spec.minMembers\""},
  };
  for (const auto& [bad_spec, why] : bad_specs) {
    Json bad = pg;
    bad["metadata"]["name"] = "bad";
    bad["spec"] = bad_spec;
    absl::StatusOr<kube::HttpResult> b =
        CreateStrict(*c, kube::CoschedulingPodGroupsResource(), bad);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_TRUE(b->status == 422 || b->status == 400) << bad_spec.dump() << ": " << b->body;
    EXPECT_TRUE(absl::StrContains(Json::parse(b->body).value("message", ""), why)) << b->body;
  }
}

// Would the scheduler's ServiceAccount be allowed `a`?
absl::StatusOr<bool> SchedulerMay(RestClient& admin, const Access& a) {
  return ServiceAccountMay(admin, "tessera-system", "tessera-scheduler", a);
}

TEST(KubeDeployTest, SchedulerServiceAccountMayDoWhatTheSchedulerDoesAndNothingElse) {
  DEPLOYED_OR_FAIL(c);
  const std::string sk = "scheduling.k8s.io", sx = "scheduling.x-k8s.io";
  const std::string lease = "coordination.k8s.io";
  const std::vector<Access> allowed = {
      {"list", "", "pods", "", "", ""},
      {"watch", "", "pods", "", "", ""},
      {"get", "", "pods", "", "team-a", "p"},
      {"create", "", "pods", "binding", "team-a", "p"},
      {"patch", "", "pods", "status", "team-a", "p"},
      {"update", "", "pods", "status", "team-a", "p"},
      {"create", "", "pods", "eviction", "team-a", "victim"},
      {"list", "", "nodes", "", "", ""},
      {"watch", "", "nodes", "", "", ""},
      {"list", "", "namespaces", "", "", ""},
      {"watch", "", "namespaces", "", "", ""},
      {"create", "events.k8s.io", "events", "", "team-a", ""},
      {"patch", "events.k8s.io", "events", "", "team-a", "e"},
      {"create", "", "events", "", "team-a", ""},
      {"list", sk, "priorityclasses", "", "", ""},
      {"watch", sk, "priorityclasses", "", "", ""},
      {"list", "policy", "poddisruptionbudgets", "", "", ""},
      {"watch", "policy", "poddisruptionbudgets", "", "", ""},
      {"list", sk, "podgroups", "", "", ""},
      {"watch", sk, "podgroups", "", "", ""},
      {"list", sk, "workloads", "", "", ""},
      {"watch", sk, "workloads", "", "", ""},
      {"list", sx, "podgroups", "", "", ""},
      {"watch", sx, "podgroups", "", "", ""},
      {"update", sk, "podgroups", "status", "team-a", "g"},
      {"update", sx, "podgroups", "status", "team-a", "g"},
      {"list", "tessera.dev", "queues", "", "", ""},
      {"watch", "tessera.dev", "queues", "", "", ""},
      {"update", "tessera.dev", "queues", "status", "", "org"},
      {"watch", "resource.k8s.io", "resourceslices", "", "", ""},
      {"watch", "resource.k8s.io", "deviceclasses", "", "", ""},
      {"watch", "resource.k8s.io", "resourceclaims", "", "", ""},
      {"get", "resource.k8s.io", "resourceclaims", "", "team-a", "c"},
      {"patch", "resource.k8s.io", "resourceclaims", "status", "team-a", "c"},
      {"get", lease, "leases", "", kNamespace, "tessera-scheduler"},
      {"update", lease, "leases", "", kNamespace, "tessera-scheduler"},
      {"create", lease, "leases", "", kNamespace, ""},
  };
  const std::vector<Access> denied = {
      {"delete", "", "nodes", "", "", "n1"},
      {"patch", "", "nodes", "", "", "n1"},
      {"create", "resource.k8s.io", "resourceclaims", "", "team-a", ""},
      {"update", "resource.k8s.io", "resourceslices", "", "", "s"},
      {"create", "", "pods", "", "team-a", ""},
      {"update", "", "pods", "", "team-a", "p"},
      {"delete", "", "pods", "", "team-a", "p"},
      {"get", "", "secrets", "", kNamespace, "s"},
      {"list", "", "secrets", "", "", ""},
      {"list", "", "configmaps", "", "", ""},
      {"update", lease, "leases", "", "kube-system", "tessera-scheduler"},
      {"create", lease, "leases", "", "kube-system", ""},
      {"update", lease, "leases", "", kNamespace, "kube-scheduler"},
      {"delete", lease, "leases", "", kNamespace, "tessera-scheduler"},
      {"create", "tessera.dev", "queues", "", "", ""},
      {"update", "tessera.dev", "queues", "", "", "org"},
      {"update", sx, "podgroups", "", "team-a", "g"},
      {"create", sk, "podgroups", "", "team-a", ""},
      {"update", "", "pods", "eviction", "team-a", "victim"},
      {"create", "", "serviceaccounts", "token", kNamespace, "tessera-scheduler"},
      {"escalate", "rbac.authorization.k8s.io", "clusterroles", "", "", "tessera-scheduler"},
  };
  for (const Access& a : allowed) {
    absl::StatusOr<bool> may = SchedulerMay(*c, a);
    ASSERT_TRUE(may.ok()) << may.status();
    EXPECT_TRUE(*may) << "should be allowed: " << a.ToString();
  }
  for (const Access& a : denied) {
    absl::StatusOr<bool> may = SchedulerMay(*c, a);
    ASSERT_TRUE(may.ok()) << may.status();
    EXPECT_FALSE(*may) << "should be denied: " << a.ToString();
  }
}

TEST(KubeDeployTest, OperatorServiceAccountMayDoWhatTheOperatorDoesAndNothingElse) {
  DEPLOYED_OR_FAIL(c);
  const std::string t = "tessera.dev", sx = "scheduling.x-k8s.io";
  const std::string lease = "coordination.k8s.io";
  const std::vector<Access> allowed = {
      {"list", t, "trainingjobs", "", "", ""},
      {"watch", t, "inferenceservices", "", "", ""},
      {"list", t, "modelversions", "", "", ""},
      {"watch", t, "gpupools", "", "", ""},
      {"list", t, "queues", "", "", ""},
      {"update", t, "trainingjobs", "status", "team-a", "llm"},
      {"update", t, "inferenceservices", "status", "team-a", "chat"},
      {"update", t, "gpupools", "status", "team-a", "x"},
      {"update", t, "modelversions", "status", "team-a", "mv"},
      {"create", t, "checkpoints", "", "team-a", ""},
      {"delete", t, "checkpoints", "", "team-a", "c"},
      {"update", t, "checkpoints", "status", "team-a", "c"},
      {"patch", t, "modelversions", "", "team-a", "mv"},
      {"create", "", "pods", "", "team-a", ""},
      {"delete", "", "pods", "", "team-a", "p"},
      {"patch", "", "pods", "", "team-a", "p"},
      {"watch", "", "pods", "", "", ""},
      {"create", "", "services", "", "team-a", ""},
      {"create", sx, "podgroups", "", "team-a", ""},
      {"delete", sx, "podgroups", "", "team-a", "g"},
      {"patch", "", "nodes", "", "", "n1"},
      {"watch", "", "nodes", "", "", ""},
      {"create", "", "pods", "eviction", "team-a", "p"},
      {"create", "events.k8s.io", "events", "", "team-a", ""},
      {"get", lease, "leases", "", kNamespace, "tessera-operator"},
      {"update", lease, "leases", "", kNamespace, "tessera-operator"},
  };
  const std::vector<Access> denied = {
      {"create", "", "pods", "binding", "team-a", "p"},
      {"update", "", "pods", "status", "team-a", "p"},
      {"delete", "", "nodes", "", "", "n1"},
      {"get", "", "secrets", "", kNamespace, "s"},
      {"list", "", "secrets", "", "", ""},
      {"update", t, "trainingjobs", "", "team-a", "llm"},
      {"delete", t, "trainingjobs", "", "team-a", "llm"},
      {"delete", t, "modelversions", "", "team-a", "mv"},
      {"create", t, "queues", "", "", ""},
      {"update", lease, "leases", "", kNamespace, "tessera-scheduler"},
      {"escalate", "rbac.authorization.k8s.io", "clusterroles", "", "", "tessera-operator"},
  };
  for (const Access& a : allowed) {
    absl::StatusOr<bool> may = ServiceAccountMay(*c, kNamespace, "tessera-operator", a);
    ASSERT_TRUE(may.ok()) << may.status();
    EXPECT_TRUE(*may) << "should be allowed: " << a.ToString();
  }
  for (const Access& a : denied) {
    absl::StatusOr<bool> may = ServiceAccountMay(*c, kNamespace, "tessera-operator", a);
    ASSERT_TRUE(may.ok()) << may.status();
    EXPECT_FALSE(*may) << "should be denied: " << a.ToString();
  }
  // The webhook Service routes to the operator's Pods; its configuration names that Service.
  absl::StatusOr<Json> vwc =
      c->Get({"admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
              "ValidatingWebhookConfiguration", false},
             "", "tessera-operator");
  ASSERT_TRUE(vwc.ok()) << vwc.status();
  EXPECT_EQ((*vwc)["webhooks"][0]["clientConfig"]["service"]["name"], "tessera-operator-webhook");
}

TEST(KubeDeployTest, SchedulerTokenElectsALeaderAndIsRefusedWhatItMayNotDo) {
  DEPLOYED_OR_FAIL(c);
  // A token of the ServiceAccount, as the kubelet would project into the scheduler's Pod.
  absl::StatusOr<Json> tr =
      c->PostSubresource({"", "v1", "serviceaccounts", "ServiceAccount", true}, kNamespace,
                         "tessera-scheduler", "token",
                         {{"apiVersion", "authentication.k8s.io/v1"},
                          {"kind", "TokenRequest"},
                          {"spec", {{"expirationSeconds", 3600}}}});
  ASSERT_TRUE(tr.ok()) << tr.status();
  const std::string kubeconfig =
      (std::filesystem::path(bed->admin_kubeconfig()).parent_path() / "scheduler.kubeconfig")
          .string();
  bed->WriteKubeconfig(kubeconfig, "token: " + (*tr)["status"]["token"].get<std::string>());
  std::unique_ptr<RestClient> sa = ClientFor(kubeconfig);
  ASSERT_NE(sa, nullptr);

  RealClock clock;
  kube::LeaderElectionConfig cfg;
  cfg.lease_namespace = kNamespace;
  cfg.lease_name = "tessera-scheduler";
  cfg.identity = "tessera-scheduler-0";
  absl::StatusOr<std::unique_ptr<kube::LeaderElector>> e =
      kube::LeaderElector::Create(*sa, clock, cfg);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_TRUE((*e)->TryAcquireOrRenew()) << (*e)->last_error();  // creates the Lease
  EXPECT_TRUE((*e)->TryAcquireOrRenew()) << (*e)->last_error();  // renews it
  EXPECT_TRUE((*e)->Release().ok());
  // Another lease name is not its to read (--lease-name needs the Role's resourceNames).
  cfg.lease_name = "kube-scheduler";
  absl::StatusOr<std::unique_ptr<kube::LeaderElector>> other =
      kube::LeaderElector::Create(*sa, clock, cfg);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_FALSE((*other)->TryAcquireOrRenew());
  EXPECT_TRUE(absl::StrContains((*other)->last_error(), "Forbidden")) << (*other)->last_error();

  EXPECT_TRUE(sa->List(kube::PodsResource(), "").ok());
  EXPECT_TRUE(sa->List(QueuesResource(), "").ok());
  EXPECT_TRUE(sa->List(kube::CoschedulingPodGroupsResource(), "").ok());
  EXPECT_TRUE(sa->List(kube::PodGroupsResource(), "").ok());
  const std::string ns = MakeNamespace(*c, "sa");
  absl::StatusOr<Json> pod = sa->Create(
      kube::PodsResource(), ns,
      {{"apiVersion", "v1"},
       {"kind", "Pod"},
       {"metadata", {{"name", "p"}}},
       {"spec", {{"containers", {{{"name", "c"}, {"image", "registry.invalid/x:1"}}}}}}});
  EXPECT_EQ(pod.status().code(), absl::StatusCode::kPermissionDenied) << pod.status();
  absl::StatusOr<Json> secrets = sa->List({"", "v1", "secrets", "Secret", true}, kNamespace);
  EXPECT_EQ(secrets.status().code(), absl::StatusCode::kPermissionDenied) << secrets.status();
}

}  // namespace
}  // namespace tessera::testing
