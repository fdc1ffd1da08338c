// The Kubernetes REST client against a real kube-apiserver (the bed): the APIs the scheduler
// needs are served, CRUD with optimistic concurrency, merge patch, the status/binding/eviction
// subresources (eviction refused by a PodDisruptionBudget that kube-controller-manager's
// disruption controller keeps), paging, authentication by token, token file, client certificate
// and in-cluster config, RBAC denials, and a wrong CA.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "kube/api_error.h"
#include "kube/codec.h"
#include "kube/gang_objects.h"
#include "kube_test_util.h"

namespace tessera::testing {
namespace {

using kube::Json;
using kube::RestClient;

kube::Pod MakePod(const std::string& ns, const std::string& name,
                  std::map<std::string, std::string> labels = {}) {
  kube::Pod p;
  p.metadata.name = name;
  p.metadata.ns = ns;
  p.metadata.labels = std::move(labels);
  kube::Container c;
  c.name = "main";
  c.image = "registry.invalid/train:1";
  c.resources.requests["nvidia.com/gpu"] = kube::UnitsQuantity(1);
  c.resources.limits["nvidia.com/gpu"] = kube::UnitsQuantity(1);
  c.resources.requests["cpu"] = kube::MilliQuantity(500);
  p.spec.containers.push_back(std::move(c));
  p.spec.scheduler_name = "tessera";
  return p;
}

Json MakeNode(const std::string& name) {
  kube::Node n;
  n.metadata.name = name;
  n.metadata.labels["tessera.dev/rack"] = "r1";
  return kube::EncodeNode(n);
}

TEST(KubeClientTest, ServesTheVersionAndTheWorkloadApisOfKep4671) {
  KUBE_BED_OR_SKIP(bed);
  std::unique_ptr<RestClient> c = ClientFor(bed->admin_kubeconfig());
  ASSERT_NE(c, nullptr);
  absl::StatusOr<kube::HttpResult> v = c->Raw("GET", "/version");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(Json::parse(v->body)["gitVersion"], "v1.37.2") << v->body;
  absl::StatusOr<kube::HttpResult> group = c->Raw("GET", "/apis/scheduling.k8s.io/v1alpha3");
  ASSERT_TRUE(group.ok()) << group.status();
  ASSERT_EQ(group->status, 200) << group->body;
  std::set<std::string> served;
  const Json resources = Json::parse(group->body)["resources"];
  for (const Json& r : resources) served.insert(r["name"].get<std::string>());
  EXPECT_TRUE(served.count("workloads")) << group->body;
  EXPECT_TRUE(served.count("podgroups")) << group->body;
  EXPECT_TRUE(served.count("podgroups/status")) << group->body;

  // A gang: a PodGroup with a gang policy, and a Pod that names it.
  const std::string ns = MakeNamespace(*c, "gang");
  absl::StatusOr<Json> pg =
      c->Create(kube::PodGroupsResource(), ns,
                {{"apiVersion", "scheduling.k8s.io/v1alpha3"},
                 {"kind", "PodGroup"},
                 {"metadata", {{"name", "train"}}},
                 {"spec", {{"schedulingPolicy", {{"gang", {{"minCount", 4}}}}}}}});
  ASSERT_TRUE(pg.ok()) << pg.status();
  absl::StatusOr<kube::PodGroup> group_obj = kube::DecodePodGroup(*pg);
  ASSERT_TRUE(group_obj.ok()) << group_obj.status();
  EXPECT_EQ(group_obj->policy.gang_min_count, 4);
  // A scheduler says why the gang waits, on the status subresource.
  group_obj->conditions.push_back({"PodGroupScheduled", "False", "Unschedulable",
                                   "3/4 members have a place",
                                   kube::FormatMicroTime(absl::Now()).substr(0, 19) + "Z", 0});
  absl::StatusOr<Json> with_status =
      c->Update(kube::PodGroupsResource(), ns, "train", kube::EncodePodGroup(*group_obj), "status");
  ASSERT_TRUE(with_status.ok()) << with_status.status();
  absl::StatusOr<kube::PodGroup> reread = kube::DecodePodGroup(*with_status);
  ASSERT_TRUE(reread.ok()) << reread.status();
  ASSERT_EQ(reread->conditions.size(), 1u);
  EXPECT_EQ(reread->conditions[0].message, "3/4 members have a place");
  kube::Pod member = MakePod(ns, "train-0");
  member.spec.pod_group_name = "train";
  absl::StatusOr<Json> created = c->Create(kube::PodsResource(), ns, kube::EncodePod(member));
  ASSERT_TRUE(created.ok()) << created.status();
  absl::StatusOr<kube::Pod> decoded = kube::DecodePod(*created);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->spec.pod_group_name, "train");
  // A malformed PodGroup is refused by the apiserver's validation, named.
  absl::StatusOr<Json> bad =
      c->Create(kube::PodGroupsResource(), ns,
                {{"apiVersion", "scheduling.k8s.io/v1alpha3"},
                 {"kind", "PodGroup"},
                 {"metadata", {{"name", "bad"}}},
                 {"spec", {{"schedulingPolicy", {{"gang", {{"minCount", -1}}}}}}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
  EXPECT_EQ(kube::ApiReason(bad.status()), "Invalid");
  EXPECT_NE(bad.status().message().find("create podgroups " + ns + "/bad: Invalid"),
            absl::string_view::npos)
      << bad.status();
}

TEST(KubeClientTest, CrudWithOptimisticConcurrencyPatchStatusAndBinding) {
  KUBE_BED_OR_SKIP(bed);
  std::unique_ptr<RestClient> c = ClientFor(bed->admin_kubeconfig());
  ASSERT_NE(c, nullptr);
  const std::string ns = MakeNamespace(*c, "crud");
  ASSERT_TRUE(c->Create(kube::NodesResource(), "", MakeNode("crud-node-1")).ok());

  absl::StatusOr<Json> created =
      c->Create(kube::PodsResource(), ns, kube::EncodePod(MakePod(ns, "p0", {{"app", "x"}})));
  ASSERT_TRUE(created.ok()) << created.status();
  absl::StatusOr<Json> dup =
      c->Create(kube::PodsResource(), ns, kube::EncodePod(MakePod(ns, "p0")));
  EXPECT_TRUE(kube::IsApiAlreadyExists(dup.status())) << dup.status();
  EXPECT_NE(dup.status().message().find("create pods " + ns + "/p0: AlreadyExists"),
            absl::string_view::npos)
      << dup.status();

  absl::StatusOr<Json> got = c->Get(kube::PodsResource(), ns, "p0");
  ASSERT_TRUE(got.ok()) << got.status();
  absl::StatusOr<kube::Pod> pod = kube::DecodePod(*got);
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_EQ(pod->spec.containers[0].resources.requests.at("cpu").milli, 500);
  EXPECT_FALSE(pod->metadata.uid.empty());

  // Update with the resourceVersion read: accepted; again with the now stale one: Conflict.
  kube::Pod stale = *pod;
  pod->metadata.labels["tier"] = "gold";
  absl::StatusOr<Json> updated = c->Update(kube::PodsResource(), ns, "p0", kube::EncodePod(*pod));
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ((*updated)["metadata"]["labels"]["tier"], "gold");
  EXPECT_EQ((*updated)["spec"]["containers"][0]["image"], "registry.invalid/train:1");
  stale.metadata.labels["tier"] = "silver";
  absl::StatusOr<Json> conflict = c->Update(kube::PodsResource(), ns, "p0", kube::EncodePod(stale));
  EXPECT_TRUE(kube::IsApiConflict(conflict.status())) << conflict.status();
  EXPECT_EQ(conflict.status().code(), absl::StatusCode::kAborted);

  // Merge patch: null deletes a label.
  absl::StatusOr<Json> patched =
      c->MergePatch(kube::PodsResource(), ns, "p0",
                    {{"metadata", {{"labels", {{"tier", nullptr}, {"q", "a"}}}}}});
  ASSERT_TRUE(patched.ok()) << patched.status();
  EXPECT_FALSE((*patched)["metadata"]["labels"].contains("tier"));
  EXPECT_EQ((*patched)["metadata"]["labels"]["q"], "a");

  // The status subresource: a PodScheduled=False condition, as a scheduler writes it.
  absl::StatusOr<Json> status = c->MergePatch(
      kube::PodsResource(), ns, "p0",
      {{"status",
        {{"conditions",
          {{{"type", "PodScheduled"},
            {"status", "False"},
            {"reason", "Unschedulable"},
            {"message", "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."}}}}}}},
      "status");
  ASSERT_TRUE(status.ok()) << status.status();
  absl::StatusOr<kube::Pod> with_status = kube::DecodePod(*status);
  ASSERT_TRUE(with_status.ok());
  ASSERT_EQ(with_status->status.conditions.size(), 1u);
  EXPECT_EQ(with_status->status.conditions[0].reason, "Unschedulable");

  // Binding: the pod is bound once; a second binding is a Conflict; a stale uid is refused.
  ASSERT_TRUE(c->Bind({ns, "p0", pod->metadata.uid, "crud-node-1"}).ok());
  absl::StatusOr<Json> bound = c->Get(kube::PodsResource(), ns, "p0");
  ASSERT_TRUE(bound.ok());
  EXPECT_EQ((*bound)["spec"]["nodeName"], "crud-node-1");
  absl::Status again = c->Bind({ns, "p0", "", "crud-node-1"});
  EXPECT_TRUE(kube::IsApiConflict(again)) << again;
  EXPECT_NE(again.message().find("bind pods " + ns + "/p0 to node crud-node-1"),
            absl::string_view::npos)
      << again;
  ASSERT_TRUE(c->Create(kube::PodsResource(), ns, kube::EncodePod(MakePod(ns, "p1"))).ok());
  absl::Status wrong_uid = c->Bind({ns, "p1", "not-its-uid", "crud-node-1"});
  EXPECT_FALSE(wrong_uid.ok());

  // List with a selector, in pages of 2.
  for (int i = 2; i < 7; ++i) {
    ASSERT_TRUE(c->Create(kube::PodsResource(), ns,
                          kube::EncodePod(MakePod(ns, "p" + std::to_string(i), {{"app", "x"}})))
                    .ok());
  }
  kube::ListOptions lo;
  lo.label_selector = "app=x";
  lo.limit = 2;
  absl::StatusOr<Json> list = c->List(kube::PodsResource(), ns, lo);
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ((*list)["items"].size(), 6u);  // p0 and p2..p6
  EXPECT_FALSE((*list)["metadata"]["resourceVersion"].get<std::string>().empty());
  lo.label_selector = "app in (x),q=a";
  list = c->List(kube::PodsResource(), ns, lo);
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ((*list)["items"].size(), 1u);

  // Delete; then it is gone, and a second delete is NotFound.
  kube::DeleteOptions now;
  now.grace_period_seconds = 0;
  ASSERT_TRUE(c->Delete(kube::PodsResource(), ns, "p6", now).ok());
  EXPECT_TRUE(kube::IsApiNotFound(c->Get(kube::PodsResource(), ns, "p6").status()));
  absl::Status gone = c->Delete(kube::PodsResource(), ns, "p6", now);
  EXPECT_TRUE(kube::IsApiNotFound(gone)) << gone;
  EXPECT_EQ(gone.code(), absl::StatusCode::kNotFound);
}

// Sets a pod's status to Running and Ready (there is no kubelet in the bed).
void MarkRunning(RestClient& c, const std::string& ns, const std::string& name) {
  absl::StatusOr<Json> r = c.MergePatch(
      kube::PodsResource(), ns, name,
      {{"status",
        {{"phase", "Running"}, {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}},
      "status");
  ASSERT_TRUE(r.ok()) << r.status();
}

TEST(KubeClientTest, EvictionIsRefusedWhenAPodDisruptionBudgetForbidsIt) {
  KUBE_BED_OR_SKIP(bed);
  ASSERT_EQ(bed->StartControllerManager("disruption"), "");
  std::unique_ptr<RestClient> c = ClientFor(bed->admin_kubeconfig());
  ASSERT_NE(c, nullptr);
  const std::string ns = MakeNamespace(*c, "evict");
  ASSERT_TRUE(c->Create(kube::NodesResource(), "", MakeNode("evict-node-1")).ok());
  for (const char* name : {"a", "b"}) {
    ASSERT_TRUE(c->Create(kube::PodsResource(), ns,
                          kube::EncodePod(MakePod(ns, name, {{"app", "guarded"}})))
                    .ok());
    ASSERT_TRUE(c->Bind({ns, name, "", "evict-node-1"}).ok());
    MarkRunning(*c, ns, name);
  }
  kube::PodDisruptionBudget pdb;
  pdb.metadata.name = "guard";
  pdb.metadata.ns = ns;
  pdb.min_available = kube::IntOrString{false, 1, ""};
  pdb.selector = kube::LabelSelector{{{"app", "guarded"}}, {}};
  ASSERT_TRUE(
      c->Create(kube::PodDisruptionBudgetsResource(), ns, kube::EncodePodDisruptionBudget(pdb))
          .ok());
  // Wait (on watch events) for the disruption controller to allow one disruption.
  kube::ListOptions wo;
  wo.field_selector = "metadata.name=guard";
  wo.timeout_seconds = 60;
  bool allowed = false;
  absl::Status w =
      c->Watch(kube::PodDisruptionBudgetsResource(), ns, wo, [&](kube::WatchEvent&& ev) {
        absl::StatusOr<kube::PodDisruptionBudget> p = kube::DecodePodDisruptionBudget(ev.object);
        allowed = p.ok() && p->disruptions_allowed == 1;
        return !allowed;
      });
  ASSERT_TRUE(w.ok()) << w;
  ASSERT_TRUE(allowed) << "the disruption controller never allowed a disruption";

  ASSERT_TRUE(c->Evict({ns, "a", "", 0}).ok());
  absl::Status refused = c->Evict({ns, "b", "", 0});
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(kube::IsApiTooManyRequests(refused)) << refused;
  EXPECT_NE(refused.message().find("evict pods " + ns + "/b"), absl::string_view::npos) << refused;
  EXPECT_NE(refused.message().find("disruption budget"), absl::string_view::npos) << refused;
  EXPECT_TRUE(c->Get(kube::PodsResource(), ns, "b").ok());
}

TEST(KubeClientTest, AuthenticatesByTokenTokenFileClientCertAndInClusterConfig) {
  KUBE_BED_OR_SKIP(bed);
  // The client certificate (O=system:masters).
  std::unique_ptr<RestClient> cert = ClientFor(bed->cert_kubeconfig());
  ASSERT_NE(cert, nullptr);
  absl::StatusOr<Json> nodes = cert->List(kube::NodesResource(), "");
  EXPECT_TRUE(nodes.ok()) << nodes.status();

  // The user token: authenticated, but RBAC grants it nothing.
  std::unique_ptr<RestClient> user = ClientFor(bed->user_kubeconfig());
  ASSERT_NE(user, nullptr);
  absl::StatusOr<Json> denied = user->List(kube::PodsResource(), "default");
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.status().code(), absl::StatusCode::kPermissionDenied) << denied.status();
  EXPECT_EQ(kube::ApiReason(denied.status()), "Forbidden");
  EXPECT_NE(denied.status().message().find(KubeBed::kUserName), absl::string_view::npos)
      << denied.status();

  // A token file is re-read when it changes (rotation).
  const std::string token_file = bed->dir() + "/rotating.token";
  std::ofstream(token_file) << KubeBed::kAdminToken << "\n";
  const std::string kc = bed->dir() + "/tokenfile.kubeconfig";
  bed->WriteKubeconfig(kc, "tokenFile: " + token_file);
  std::unique_ptr<RestClient> rotating = ClientFor(kc);
  ASSERT_NE(rotating, nullptr);
  EXPECT_TRUE(rotating->List(kube::PodsResource(), "default").ok());
  std::ofstream(token_file + ".new") << KubeBed::kUserToken;
  std::filesystem::rename(token_file + ".new", token_file);
  EXPECT_EQ(rotating->List(kube::PodsResource(), "default").status().code(),
            absl::StatusCode::kPermissionDenied);

  // A bad token: 401.
  const std::string bad_kc = bed->dir() + "/badtoken.kubeconfig";
  bed->WriteKubeconfig(bad_kc, "token: not-a-token");
  std::unique_ptr<RestClient> bad = ClientFor(bad_kc);
  ASSERT_NE(bad, nullptr);
  EXPECT_EQ(bad->List(kube::PodsResource(), "default").status().code(),
            absl::StatusCode::kUnauthenticated);

  // In-cluster: the service-account directory and the service env variables.
  const std::string sa = bed->dir() + "/serviceaccount";
  std::filesystem::create_directories(sa);
  std::ofstream(sa + "/token") << KubeBed::kAdminToken;
  std::filesystem::copy_file(bed->ca_file(), sa + "/ca.crt");
  std::ofstream(sa + "/namespace") << "kube-system";
  const int port = bed->port();
  absl::StatusOr<kube::KubeConfig> ic = kube::InClusterConfig(
      [port](const std::string& k) -> std::optional<std::string> {
        if (k == "KUBERNETES_SERVICE_HOST") return "127.0.0.1";
        if (k == "KUBERNETES_SERVICE_PORT") return std::to_string(port);
        return std::nullopt;
      },
      sa);
  ASSERT_TRUE(ic.ok()) << ic.status();
  EXPECT_EQ(ic->ns, "kube-system");
  absl::StatusOr<std::unique_ptr<RestClient>> in_cluster = RestClient::Create(*ic);
  ASSERT_TRUE(in_cluster.ok()) << in_cluster.status();
  EXPECT_TRUE((*in_cluster)->Get(kube::NamespacesResource(), "", "kube-system").ok());
}

TEST(KubeClientTest, AWrongCertificateAuthorityGivesAClearError) {
  KUBE_BED_OR_SKIP(bed);
  ASSERT_EQ(bed->OpenSsl("req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
                         "-days 1 -subj /CN=some-other-ca -keyout other-ca.key -out other-ca.crt"),
            "");
  const std::string kc = bed->dir() + "/wrong-ca.kubeconfig";
  bed->WriteKubeconfig(kc, std::string("token: ") + KubeBed::kAdminToken,
                       "certificate-authority: " + bed->dir() + "/other-ca.crt");
  std::unique_ptr<RestClient> c = ClientFor(kc);
  ASSERT_NE(c, nullptr);
  absl::StatusOr<Json> r = c->Get(kube::NamespacesResource(), "", "default");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  const std::string msg(r.status().message());
  EXPECT_NE(msg.find("get namespaces default"), std::string::npos) << msg;
  EXPECT_NE(msg.find("the server's certificate is not trusted"), std::string::npos) << msg;
  EXPECT_NE(msg.find("certificate authority of kubeconfig " + kc), std::string::npos) << msg;

  // The system's trust store does not know the bed's CA either.
  const std::string no_ca = bed->dir() + "/no-ca.kubeconfig";
  bed->WriteKubeconfig(no_ca, std::string("token: ") + KubeBed::kAdminToken,
                       "insecure-skip-tls-verify: false");
  std::unique_ptr<RestClient> sys = ClientFor(no_ca);
  ASSERT_NE(sys, nullptr);
  r = sys->Get(kube::NamespacesResource(), "", "default");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("system's CAs"), absl::string_view::npos) << r.status();

  // insecure-skip-tls-verify talks to it anyway, as kubectl does.
  const std::string insecure = bed->dir() + "/insecure.kubeconfig";
  bed->WriteKubeconfig(insecure, std::string("token: ") + KubeBed::kAdminToken,
                       "insecure-skip-tls-verify: true");
  std::unique_ptr<RestClient> ins = ClientFor(insecure);
  ASSERT_NE(ins, nullptr);
  EXPECT_TRUE(ins->Get(kube::NamespacesResource(), "", "default").ok());

  // A CA that is not PEM is refused when the client is made, naming the kubeconfig.
  std::ofstream(bed->dir() + "/garbage.crt") << "not a certificate";
  const std::string garbage = bed->dir() + "/garbage.kubeconfig";
  bed->WriteKubeconfig(garbage, "token: x",
                       "certificate-authority: " + bed->dir() + "/garbage.crt");
  absl::StatusOr<kube::KubeConfig> gc = kube::LoadKubeconfig({garbage, "", nullptr});
  ASSERT_TRUE(gc.ok());
  absl::StatusOr<std::unique_ptr<RestClient>> gclient = RestClient::Create(*gc);
  ASSERT_FALSE(gclient.ok());
  EXPECT_NE(gclient.status().message().find("certificate authority: no PEM certificate"),
            absl::string_view::npos)
      << gclient.status();
}

}  // namespace
}  // namespace tessera::testing
