// The device plugin's Node annotation against a real kube-apiserver (the bed):
// - NodeAnnotator (in process, on a FakeBackend of deploy/fake-gpus) writes
//   tessera.dev/nvlink-domains onto a Node, and the scheduler's NodeFromKube reads the same
//   islands back from that Node: the contract between `tessera device-plugin` and
//   `tessera scheduler` (an island of one GPU means what -1 means);
// - deploy/kubernetes's device plugin manifests are accepted strictly, and the plugin's
//   ServiceAccount may get and patch Nodes and nothing else (SubjectAccessReviews);
// - a `tessera device-plugin` process (env TESSERA_BIN) with a token of that ServiceAccount
//   (--kubeconfig) annotates the Node named by --node-name, also one created after it started
//   (the patch is retried).
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/discovery.h"
#include "agent/fake/fake_backend.h"
#include "agent/fake/fake_config.h"
#include "cli/yaml_json.h"
#include "common/clock.h"
#include "deviceplugin/inventory.h"
#include "deviceplugin/node_annotator.h"
#include "kube/codec.h"
#include "kube_fixtures.h"
#include "kube_test_util.h"
#include "kubesched/translate.h"

extern char** environ;

namespace tessera::testing {
namespace {

using kube::Json;
using kube::ResourceType;
using kube::RestClient;

constexpr char kNamespace[] = "tessera-system";

std::string SourcePath(const std::string& rel) {
  return (std::filesystem::path(TESSERA_SOURCE_DIR) / rel).string();
}

std::string ReadText(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// A Node as kubelet leaves it once the device plugin registered `gpus` GPUs (no kubelet runs on
// the bed).
Json NodeJson(const std::string& name, int gpus) {
  const kube::Json resources = {{"nvidia.com/gpu", std::to_string(gpus)},
                                {"cpu", "64"},
                                {"memory", "512Gi"},
                                {"pods", "110"}};
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}}},
          {"status",
           {{"capacity", resources},
            {"allocatable", resources},
            {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

std::string UniqueName(const std::string& base) {
  static int n = 0;
  return absl::StrCat(base, "-", getpid(), "-", ++n);
}

// Polls the Node every 100 ms until its annotation is `want` (no event announces a patch that the
// test did not make itself); the annotation last seen otherwise.
std::string AwaitAnnotation(RestClient& c, const std::string& node, const std::string& want,
                            absl::Duration timeout = absl::Seconds(30)) {
  const absl::Time deadline = absl::Now() + timeout;
  std::string seen = "(none)";
  while (absl::Now() < deadline) {
    absl::StatusOr<Json> n = c.Get(kube::NodesResource(), "", node);
    if (n.ok()) {
      const Json a = (*n)["metadata"].value("annotations", Json::object());
      if (a.contains(deviceplugin::kNvlinkDomainsAnnotation)) {
        seen = a[deviceplugin::kNvlinkDomainsAnnotation].get<std::string>();
        if (seen == want) return seen;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return seen;
}

// The scheduler's view of the Node as the apiserver has it now.
absl::StatusOr<model::Node> SchedulerNode(RestClient& c, const std::string& node) {
  absl::StatusOr<Json> j = c.Get(kube::NodesResource(), "", node);
  if (!j.ok()) return j.status();
  absl::StatusOr<kube::Node> n = kube::DecodeNode(*j);
  if (!n.ok()) return n.status();
  return kubesched::NodeFromKube(*n, kubesched::TopologyLabels{});
}

std::string Domains(const model::NodeTopology& t) {
  std::vector<int> d;
  for (int i = 0; i < t.num_gpus(); ++i) d.push_back(t.domain(i));
  return absl::StrJoin(d, ",");
}

// NVLink pairs as the scheduler sees them ("0-1 2-3").
std::string NvLinkPairs(const model::NodeTopology& t) {
  std::vector<std::string> pairs;
  for (int a = 0; a < t.num_gpus(); ++a) {
    for (int b = a + 1; b < t.num_gpus(); ++b) {
      if (t.link(a, b) == model::LinkClass::kNvLink) pairs.push_back(absl::StrCat(a, "-", b));
    }
  }
  return absl::StrJoin(pairs, " ");
}

// 4 x L40S without NVLink.
constexpr char kPcieOnly4[] = R"(
driver_version: "550.90.07"
defaults: {model: NVIDIA L40S, memory_mib: 46068}
gpus:
  - {uuid: GPU-l40s-0, pci_bus_id: "00000000:17:00.0", numa_node: 0}
  - {uuid: GPU-l40s-1, pci_bus_id: "00000000:31:00.0", numa_node: 0}
  - {uuid: GPU-l40s-2, pci_bus_id: "00000000:B1:00.0", numa_node: 1}
  - {uuid: GPU-l40s-3, pci_bus_id: "00000000:CA:00.0", numa_node: 1}
topology:
  - {gpus: [0, 1], level: SINGLE}
  - {gpus: [2, 3], level: SINGLE}
)";

TEST(KubeDevicePluginTest, AnnotatorWritesTheIslandsTheSchedulerReadsBack) {
  KUBE_BED_OR_SKIP(bed);
  std::unique_ptr<RestClient> admin = ClientFor(bed->admin_kubeconfig());
  ASSERT_NE(admin, nullptr);
  struct Case {
    std::string what, yaml;  // yaml: a FakeBackend description
    int gpus;
    std::string value, domains, nvlink_pairs;
  };
  const std::vector<Case> cases = {
      {"deploy/fake-gpus/h100-nvswitch-8.yaml",
       ReadText(SourcePath("deploy/fake-gpus/h100-nvswitch-8.yaml")), 8, "0,0,0,0,0,0,0,0",
       "0,0,0,0,0,0,0,0",
       "0-1 0-2 0-3 0-4 0-5 0-6 0-7 1-2 1-3 1-4 1-5 1-6 1-7 2-3 2-4 2-5 2-6 2-7 3-4 3-5 3-6 3-7 "
       "4-5 4-6 4-7 5-6 5-7 6-7"},
      {"deploy/fake-gpus/pcie-4.yaml", ReadText(SourcePath("deploy/fake-gpus/pcie-4.yaml")), 4,
       "0,0,1,1", "0,0,1,1", "0-1 2-3"},
      {"PCIe only", kPcieOnly4, 4, "0,1,2,3", "0,1,2,3", ""},
  };
  absl::StatusOr<std::shared_ptr<RestClient>> api =
      deviceplugin::NodeApiClient(bed->admin_kubeconfig());
  ASSERT_TRUE(api.ok()) << api.status();
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    ASSERT_FALSE(c.yaml.empty());
    const std::string node = UniqueName("dp-node");
    ASSERT_TRUE(admin->Create(kube::NodesResource(), "", NodeJson(node, c.gpus)).ok());

    // The plugin's discovery, on the fake backend (a manual clock: no scripted event fires).
    absl::StatusOr<agent::FakeConfig> config = agent::ParseFakeConfig(c.yaml);
    ASSERT_TRUE(config.ok()) << config.status();
    ManualClock backend_clock;
    agent::FakeBackend backend(*std::move(config), backend_clock);
    ASSERT_TRUE(backend.Init().ok());
    absl::StatusOr<agent::NodeSnapshot> snap = agent::Discover(backend);
    ASSERT_TRUE(snap.ok()) << snap.status();
    const std::vector<deviceplugin::Resource> resources =
        deviceplugin::BuildInventory(*snap, deviceplugin::MigStrategy::kMixed);
    const deviceplugin::NvLinkDomains domains = deviceplugin::NvLinkDomainsOf(*snap, resources);
    EXPECT_EQ(domains.value, c.value);
    EXPECT_TRUE(domains.complete);

    RealClock clock;
    deviceplugin::NodeAnnotatorOptions opts;
    opts.node_name = node;
    deviceplugin::NodeAnnotator annotator(deviceplugin::KubeNodePatcher(*api, node), clock, opts);
    annotator.Start();
    annotator.Set(domains);
    EXPECT_EQ(AwaitAnnotation(*admin, node, c.value), c.value);
    annotator.Stop();
    EXPECT_EQ(annotator.attempts(), 1);

    absl::StatusOr<model::Node> m = SchedulerNode(*admin, node);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(static_cast<int>(m->gpus.size()), c.gpus);
    EXPECT_EQ(Domains(m->topology), c.domains);
    EXPECT_EQ(NvLinkPairs(m->topology), c.nvlink_pairs);
    // An island of one GPU means to the scheduler exactly what -1 ("none") means.
    kube::Node minus = *kube::DecodeNode(*admin->Get(kube::NodesResource(), "", node));
    std::vector<std::string> ids = absl::StrSplit(c.value, ',');
    for (std::string& id : ids) {
      if (std::count(ids.begin(), ids.end(), id) == 1) id = "-1";
    }
    minus.metadata.annotations[kubesched::kNvlinkDomainsAnnotation] = absl::StrJoin(ids, ",");
    absl::StatusOr<model::Node> m2 = kubesched::NodeFromKube(minus, {});
    ASSERT_TRUE(m2.ok()) << m2.status();
    EXPECT_EQ(m2->topology, m->topology) << absl::StrJoin(ids, ",");
    backend.Shutdown().IgnoreError();
  }
  // Both sides name the same annotation.
  EXPECT_STREQ(deviceplugin::kNvlinkDomainsAnnotation, kubesched::kNvlinkDomainsAnnotation);
}

TEST(KubeDevicePluginTest, NoWholeGpuRemovesTheAnnotation) {
  KUBE_BED_OR_SKIP(bed);
  std::unique_ptr<RestClient> admin = ClientFor(bed->admin_kubeconfig());
  ASSERT_NE(admin, nullptr);
  const std::string node = UniqueName("dp-mig");
  Json n = NodeJson(node, 0);
  n["metadata"]["annotations"] = {{deviceplugin::kNvlinkDomainsAnnotation, "0,0"},
                                  {"other", "kept"}};
  ASSERT_TRUE(admin->Create(kube::NodesResource(), "", n).ok());
  absl::StatusOr<std::shared_ptr<RestClient>> api =
      deviceplugin::NodeApiClient(bed->admin_kubeconfig());
  ASSERT_TRUE(api.ok()) << api.status();
  ASSERT_TRUE(deviceplugin::KubeNodePatcher(*api, node)("").ok());
  absl::StatusOr<Json> got = admin->Get(kube::NodesResource(), "", node);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)["metadata"]["annotations"], Json({{"other", "kept"}}));
}

// --- The manifests and the ServiceAccount's rights --------------------------------------------

// Creates the device plugin's manifests once per process, strictly (fieldValidation=Strict, as
// kubectl does: an unknown field fails rather than being pruned); "" or what failed.
std::string DeployDevicePlugin(RestClient& c) {
  static std::optional<std::string> result;
  if (!result)
    result = CreateManifestsStrictly(c,
                                     {"namespace.yaml", "rbac.yaml", "device-plugin-daemonset.yaml",
                                      "device-plugin-fake-daemonset.yaml"},
                                     false);
  return *result;
}

absl::StatusOr<bool> PluginMay(RestClient& admin, const std::string& verb,
                               const std::string& resource, const std::string& subresource = "",
                               const std::string& ns = "", const std::string& name = "") {
  return ServiceAccountMay(admin, "tessera-system", "tessera-device-plugin",
                           {verb, "", resource, subresource, ns, name});
}

TEST(KubeDevicePluginTest, ServiceAccountMayGetAndPatchNodesAndNothingElse) {
  KUBE_BED_OR_SKIP(bed);
  std::unique_ptr<RestClient> admin = ClientFor(bed->admin_kubeconfig());
  ASSERT_NE(admin, nullptr);
  ASSERT_EQ(DeployDevicePlugin(*admin), "");
  absl::StatusOr<Json> ds = admin->Get({"apps", "v1", "daemonsets", "DaemonSet", true}, kNamespace,
                                       "tessera-device-plugin");
  ASSERT_TRUE(ds.ok()) << ds.status();
  const Json pod = (*ds)["spec"]["template"]["spec"];
  EXPECT_EQ(pod["automountServiceAccountToken"], true);
  EXPECT_EQ(pod["containers"][0]["env"].dump().find("\"fieldPath\":\"spec.nodeName\"") !=
                std::string::npos,
            true)
      << pod.dump();
  struct Access {
    std::string verb, resource, subresource, ns, name;
  };
  const std::vector<Access> allowed = {{"get", "nodes", "", "", "gpu-1"},
                                       {"patch", "nodes", "", "", "gpu-1"}};
  const std::vector<Access> denied = {
      {"list", "nodes", "", "", ""},           {"watch", "nodes", "", "", ""},
      {"update", "nodes", "", "", "gpu-1"},    {"delete", "nodes", "", "", "gpu-1"},
      {"create", "nodes", "", "", ""},         {"patch", "nodes", "status", "", "gpu-1"},
      {"get", "pods", "", "default", "p"},     {"list", "pods", "", "", ""},
      {"get", "secrets", "", kNamespace, "s"},
  };
  for (const Access& a : allowed) {
    absl::StatusOr<bool> may = PluginMay(*admin, a.verb, a.resource, a.subresource, a.ns, a.name);
    ASSERT_TRUE(may.ok()) << may.status();
    EXPECT_TRUE(*may) << a.verb << " " << a.resource << "/" << a.subresource;
  }
  for (const Access& a : denied) {
    absl::StatusOr<bool> may = PluginMay(*admin, a.verb, a.resource, a.subresource, a.ns, a.name);
    ASSERT_TRUE(may.ok()) << may.status();
    EXPECT_FALSE(*may) << a.verb << " " << a.resource << "/" << a.subresource;
  }
}

// --- The `tessera device-plugin` process ------------------------------------------------------

class DevicePluginProcess {
 public:
  ~DevicePluginProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  bool Spawn(std::vector<std::string> args, const std::string& out) {
    out_ = out;
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    const bool ok = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ) == 0;
    posix_spawn_file_actions_destroy(&actions);
    return ok;
  }
  // SIGTERM, then the exit code (-1: killed by a signal).
  int Stop() {
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::string Output() const { return ReadText(out_); }

 private:
  pid_t pid_ = -1;
  std::string out_;
};

TEST(KubeDevicePluginTest, DevicePluginProcessAnnotatesItsNodeWithTheServiceAccountsToken) {
  const char* bin = getenv("TESSERA_BIN");
  if (bin == nullptr) GTEST_SKIP() << "TESSERA_BIN not set (run through ctest)";
  KUBE_BED_OR_SKIP(bed);
  std::unique_ptr<RestClient> admin = ClientFor(bed->admin_kubeconfig());
  ASSERT_NE(admin, nullptr);
  ASSERT_EQ(DeployDevicePlugin(*admin), "");
  // A token of the ServiceAccount, as the kubelet projects it into the plugin's Pod.
  absl::StatusOr<Json> tr =
      admin->PostSubresource({"", "v1", "serviceaccounts", "ServiceAccount", true}, kNamespace,
                             "tessera-device-plugin", "token",
                             {{"apiVersion", "authentication.k8s.io/v1"},
                              {"kind", "TokenRequest"},
                              {"spec", {{"expirationSeconds", 3600}}}});
  ASSERT_TRUE(tr.ok()) << tr.status();
  char tmpl[] = "/tmp/tessera-kube-dp-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string kubeconfig = dir + "/device-plugin.kubeconfig";
  bed->WriteKubeconfig(kubeconfig, "token: " + (*tr)["status"]["token"].get<std::string>());

  // The Node exists before the plugin starts ...
  const std::string node = UniqueName("dp-proc");
  ASSERT_TRUE(admin->Create(kube::NodesResource(), "", NodeJson(node, 4)).ok());
  DevicePluginProcess p;
  ASSERT_TRUE(
      p.Spawn({bin, "device-plugin", "--backend", "fake", "--fake-config",
               SourcePath("deploy/fake-gpus/pcie-4.yaml"), "--plugin-dir", dir,
               "--metrics-interval", "200ms", "--kubeconfig", kubeconfig, "--node-name", node},
              dir + "/out"));
  EXPECT_EQ(AwaitAnnotation(*admin, node, "0,0,1,1"), "0,0,1,1") << p.Output();
  absl::StatusOr<model::Node> m = SchedulerNode(*admin, node);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(NvLinkPairs(m->topology), "0-1 2-3");
  EXPECT_EQ(p.Stop(), 0) << p.Output();
  EXPECT_NE(p.Output().find("tessera.dev/nvlink-domains=0,0,1,1"), std::string::npos) << p.Output();

  // ... and one created after it started (kubelet registers its Node when it likes): the patch
  // fails (NotFound) and is retried.
  const std::string late = UniqueName("dp-late");
  DevicePluginProcess q;
  ASSERT_TRUE(
      q.Spawn({bin, "device-plugin", "--backend", "fake", "--fake-config",
               SourcePath("deploy/fake-gpus/h100-nvswitch-8.yaml"), "--plugin-dir", dir,
               "--metrics-interval", "200ms", "--kubeconfig", kubeconfig, "--node-name", late},
              dir + "/out2"));
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  // The annotator's NotFound (the kubelet-socket wait also says "retrying in", so wait for it).
  while (q.Output().find("not found") == std::string::npos && absl::Now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_NE(q.Output().find("not found"), std::string::npos) << q.Output();
  ASSERT_TRUE(admin->Create(kube::NodesResource(), "", NodeJson(late, 8)).ok());
  EXPECT_EQ(AwaitAnnotation(*admin, late, "0,0,0,0,0,0,0,0"), "0,0,0,0,0,0,0,0") << q.Output();
  EXPECT_EQ(q.Stop(), 0) << q.Output();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessera::testing
