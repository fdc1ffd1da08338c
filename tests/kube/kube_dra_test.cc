// `tessera dra-driver` against a real kube-apiserver (the bed, resource.k8s.io/v1):
// - in process, on a FakeBackend of deploy/fake-gpus: the node's ResourceSlice appears with one
//   device per GPU and its attributes, loses a GPU on a hardware XID and gets it back on
//   recovery (a higher pool generation each time), and is deleted by a clean stop with
//   cleanup_on_exit;
// - deploy/kubernetes/dra (DeviceClasses with their CEL, RBAC, DaemonSet) is accepted strictly
//   and the ServiceAccount has the driver's rights and no more;
// - kubelet's side, with a client built from the stubs Kubernetes publishes in k8s.io/kubelet
//   (tests/kube/drakubelet, Go; never Tessera's copy of the protos), against a driver process:
//   registration, prepare of a claim allocated by the test as a scheduler would, a repeated
//   prepare, a restart in between, an unknown claim (a per-claim error), unprepare, and a
//   corrupted checkpoint (the driver starts, reports it, and prepares again).
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/fake/fake_backend.h"
#include "cli/yaml_json.h"
#include "common/clock.h"
#include "deviceplugin/testing/fake_nodes.h"
#include "dra/driver.h"
#include "kube/api_error.h"
#include "kube_fixtures.h"
#include "kube_test_util.h"

extern char** environ;

namespace tessera::testing {
namespace {

namespace fs = std::filesystem;
using kube::Json;
using kube::ResourceType;
using kube::RestClient;

constexpr char kDriver[] = "gpu.tessera.dev";

std::string SourcePath(const std::string& rel) {
  return (fs::path(TESSERA_SOURCE_DIR) / rel).string();
}

std::string ReadText(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string UniqueName(const std::string& base) {
  static int n = 0;
  return absl::StrCat(base, "-", getpid(), "-", ++n);
}

std::string TempDir() {
  char tmpl[] = "/tmp/tessera-kube-dra-XXXXXX";
  return mkdtemp(tmpl) == nullptr ? "" : tmpl;
}

// 4 x L40S without NVLink and without scripted events (deploy/fake-gpus' files script some).
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

// kPcieOnly4 as a file in `dir`.
std::string FakeConfigFile(const std::string& dir) {
  const std::string path = dir + "/pcie-only-4.yaml";
  std::ofstream(path) << kPcieOnly4;
  return path;
}

std::shared_ptr<RestClient> SharedClient(const std::string& kubeconfig) {
  return std::shared_ptr<RestClient>(ClientFor(kubeconfig).release());
}

// The names of the slice's devices ("" when there is no slice), and its pool generation.
std::string SliceDevices(RestClient& c, const std::string& node, int64_t* generation = nullptr) {
  absl::StatusOr<Json> s = c.Get(kube::ResourceSlicesResource(), "", dra::SliceName(kDriver, node));
  if (!s.ok()) return kube::IsApiNotFound(s.status()) ? "" : s.status().ToString();
  if (generation) *generation = (*s)["spec"]["pool"].value("generation", int64_t{-1});
  std::vector<std::string> names;
  for (const Json& d : (*s)["spec"]["devices"]) names.push_back(d["name"]);
  return absl::StrJoin(names, ",");
}

// The apiserver announces nothing the test could wait on for another client's write: poll it.
bool AwaitSlice(RestClient& c, const std::string& node, const std::string& want) {
  return PollUntil([&] { return SliceDevices(c, node) == want; }, absl::Seconds(30));
}

// A driver of `node` in the test process, its sockets and files under `dir`, deleting its slices
// when stopped.
dra::DriverOptions InProcessDriver(const std::string& dir, const std::string& node) {
  dra::DriverOptions o;
  o.node_name = node;
  o.plugin_dir = dir + "/plugin";
  o.registry_dir = dir + "/registry";
  o.cdi_dir = dir + "/cdi";
  o.cleanup_on_exit = true;
  return o;
}

TEST(KubeDraTest, SliceFollowsHealthAndIsDeletedOnCleanup) {
  KUBE_BED_OR_SKIP(bed);
  std::shared_ptr<RestClient> admin = SharedClient(bed->admin_kubeconfig());
  ASSERT_NE(admin, nullptr);
  RealClock clock;
  const std::string dir = TempDir();
  absl::StatusOr<std::unique_ptr<agent::FakeBackend>> backend =
      agent::FakeBackend::FromFile(FakeConfigFile(dir), clock);
  ASSERT_TRUE(backend.ok()) << backend.status();
  ASSERT_TRUE((*backend)->Init().ok());
  const std::string node = UniqueName("dra-node");
  dra::DriverOptions o = InProcessDriver(dir, node);
  o.metrics_every = absl::Milliseconds(200);
  dra::DraDriver driver(**backend, clock, dra::KubeClaimGetter(admin), dra::KubeSliceWriter(admin),
                        o);
  ASSERT_TRUE(driver.Start().ok());
  ASSERT_TRUE(AwaitSlice(*admin, node, "gpu-0,gpu-1,gpu-2,gpu-3")) << SliceDevices(*admin, node);
  absl::StatusOr<Json> slice =
      admin->Get(kube::ResourceSlicesResource(), "", dra::SliceName(kDriver, node));
  ASSERT_TRUE(slice.ok()) << slice.status();
  EXPECT_EQ((*slice)["spec"]["driver"], kDriver);
  EXPECT_EQ((*slice)["spec"]["nodeName"], node);
  const Json gpu2 = (*slice)["spec"]["devices"][2];
  EXPECT_EQ(gpu2["attributes"]["uuid"]["string"], "GPU-l40s-2") << gpu2.dump();
  EXPECT_EQ(gpu2["attributes"]["architecture"]["string"], "Ada Lovelace");
  EXPECT_EQ(gpu2["attributes"]["computeCapability"]["version"], "8.9.0");
  EXPECT_EQ(gpu2["attributes"]["numaNode"]["int"], 1);
  EXPECT_EQ(gpu2["attributes"]["nvlinkDomain"]["int"], 2);  // PCIe only: an island each
  EXPECT_EQ(gpu2["attributes"]["driverVersion"]["version"], "550.90.7");
  EXPECT_TRUE(gpu2["capacity"].contains("memory")) << gpu2.dump();
  int64_t gen0 = -1, gen1 = -1, gen2 = -1;
  SliceDevices(*admin, node, &gen0);

  // XID 79 (fell off the bus): GPU 2 leaves the slice.
  agent::GpuEvent xid;
  xid.kind = agent::GpuEventKind::kXid;
  xid.gpu_uuid = "GPU-l40s-2";
  xid.xid = 79;
  xid.time = clock.Now();
  driver.health().OnEvent(xid);
  ASSERT_TRUE(AwaitSlice(*admin, node, "gpu-0,gpu-1,gpu-3")) << SliceDevices(*admin, node);
  SliceDevices(*admin, node, &gen1);
  EXPECT_GT(gen1, gen0);
  // A reset: it comes back.
  ASSERT_TRUE(driver.health().MarkHealthy("GPU-l40s-2", "reset", clock.Now()).ok());
  ASSERT_TRUE(AwaitSlice(*admin, node, "gpu-0,gpu-1,gpu-2,gpu-3")) << SliceDevices(*admin, node);
  SliceDevices(*admin, node, &gen2);
  EXPECT_GT(gen2, gen1);

  driver.Stop();
  EXPECT_EQ(SliceDevices(*admin, node), "");  // deleted before Stop returned
  fs::remove_all(dir);
}

// A GPU in MIG mode on the real API server: published whole and as its instances with a counter
// set in a second slice (the bed's API server keeps sharedCounters), both slices at one pool
// generation, both deleted by a clean stop.
TEST(KubeDraTest, AMigGpuIsPublishedPartitionableWithItsCounterSet) {
  KUBE_BED_OR_SKIP(bed);
  std::shared_ptr<RestClient> admin = SharedClient(bed->admin_kubeconfig());
  ASSERT_NE(admin, nullptr);
  RealClock clock;
  const std::string dir = TempDir();
  std::ofstream(dir + "/mig.yaml") << deviceplugin::testing::kMigMixed2;
  absl::StatusOr<std::unique_ptr<agent::FakeBackend>> backend =
      agent::FakeBackend::FromFile(dir + "/mig.yaml", clock);
  ASSERT_TRUE(backend.ok()) << backend.status();
  ASSERT_TRUE((*backend)->Init().ok());
  const std::string node = UniqueName("dra-mig");
  const dra::DriverOptions o = InProcessDriver(dir, node);
  dra::DraDriver driver(**backend, clock, dra::KubeClaimGetter(admin), dra::KubeSliceWriter(admin),
                        o);
  ASSERT_TRUE(driver.Start().ok());
  ASSERT_TRUE(AwaitSlice(*admin, node, "gpu-0,gpu-0-mig-0,gpu-0-mig-1,gpu-0-mig-2,gpu-1"))
      << SliceDevices(*admin, node);
  const std::string counters = dra::CounterSliceName(kDriver, node);
  absl::StatusOr<Json> c;
  ASSERT_TRUE(PollUntil(
      [&] {
        c = admin->Get(kube::ResourceSlicesResource(), "", counters);
        return c.ok();
      },
      absl::Seconds(30)))
      << c.status();
  ASSERT_EQ((*c)["spec"]["sharedCounters"].size(), 1u) << c->dump();
  EXPECT_EQ((*c)["spec"]["sharedCounters"][0]["name"], "gpu-0");
  EXPECT_EQ((*c)["spec"]["pool"]["resourceSliceCount"], 2);
  absl::StatusOr<Json> d =
      admin->Get(kube::ResourceSlicesResource(), "", dra::SliceName(kDriver, node));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ((*d)["spec"]["pool"]["generation"], (*c)["spec"]["pool"]["generation"]);
  EXPECT_EQ((*d)["spec"]["devices"][1]["consumesCounters"][0]["counterSet"], "gpu-0") << d->dump();
  EXPECT_EQ((*d)["spec"]["devices"][0]["attributes"]["migEnabled"]["bool"], true) << d->dump();
  driver.Stop();
  EXPECT_EQ(SliceDevices(*admin, node), "");
  EXPECT_TRUE(
      kube::IsApiNotFound(admin->Get(kube::ResourceSlicesResource(), "", counters).status()));
  fs::remove_all(dir);
}

// Creates deploy/kubernetes/dra's objects once per process, strictly (fieldValidation=Strict);
// "" or what failed. An object that exists already (namespace.yaml, shared) is fine.
std::string DeployDra(RestClient& c) {
  static std::optional<std::string> result;
  if (!result)
    result = CreateManifestsStrictly(
        c, {"namespace.yaml", "dra/rbac.yaml", "dra/deviceclasses.yaml", "dra/daemonset.yaml"},
        true);
  return *result;
}

TEST(KubeDraTest, ManifestsApplyStrictlyAndGrantTheDriversRightsOnly) {
  KUBE_BED_OR_SKIP(bed);
  std::unique_ptr<RestClient> admin = ClientFor(bed->admin_kubeconfig());
  ASSERT_NE(admin, nullptr);
  ASSERT_EQ(DeployDra(*admin), "");
  for (const char* name : {"gpu.tessera.dev", "mig-gpu.gpu.tessera.dev",
                           "mig-1g.10gb.gpu.tessera.dev", "gpu-40gi.gpu.tessera.dev"}) {
    EXPECT_TRUE(admin->Get(kube::DeviceClassesResource(), "", name).ok()) << name;
  }
  const std::string g = "resource.k8s.io";
  const std::vector<Access> allowed = {{"create", g, "resourceslices", "", "", ""},
                                       {"watch", g, "resourceslices", "", "", ""},
                                       {"update", g, "resourceslices", "", "", "n-gpu"},
                                       {"delete", g, "resourceslices", "", "", "n-gpu"},
                                       {"get", g, "resourceclaims", "", "team", "c"}};
  const std::vector<Access> denied = {{"list", g, "resourceclaims", "", "", ""},
                                      {"update", g, "resourceclaims", "status", "team", "c"},
                                      {"delete", g, "deviceclasses", "", "", "gpu.tessera.dev"},
                                      {"get", "", "secrets", "", "tessera-system", "s"},
                                      {"patch", "", "nodes", "", "", "n"}};
  for (const Access& a : allowed) {
    absl::StatusOr<bool> may = ServiceAccountMay(*admin, "tessera-system", "tessera-dra-driver", a);
    ASSERT_TRUE(may.ok()) << may.status();
    EXPECT_TRUE(*may) << a.ToString();
  }
  for (const Access& a : denied) {
    absl::StatusOr<bool> may = ServiceAccountMay(*admin, "tessera-system", "tessera-dra-driver", a);
    ASSERT_TRUE(may.ok()) << may.status();
    EXPECT_FALSE(*may) << a.ToString();
  }
}

// --- kubelet's side: the upstream stubs against a driver process ------------------------------

// Runs `cmd` with the shell; its stdout, and the exit code in *rc.
std::string Shell(const std::string& cmd, int* rc) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) {
    *rc = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  *rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

// Builds tests/kube/drakubelet (Go, offline from the module cache the bed's build filled) into
// `dir`; its path, or "" with *why.
std::string BuildDraKubelet(const std::string& dir, std::string* why) {
  const std::string bin = dir + "/drakubelet";
  int rc = 0;
  const std::string out =
      Shell(absl::StrCat("cd ", SourcePath("tests/kube"), " && PATH=\"$PATH:/usr/local/go/bin\" ",
                         "GOTOOLCHAIN=local GOFLAGS='-mod=readonly -buildvcs=false' GOPROXY=off ",
                         "CGO_ENABLED=0 go build -o ", bin, " ./drakubelet 2>&1"),
            &rc);
  if (rc != 0) {
    *why = out;
    return "";
  }
  return bin;
}

class Process {
 public:
  ~Process() { Kill(); }
  bool Spawn(std::vector<std::string> args, const std::string& out) {
    out_ = out;
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    const bool ok = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ) == 0;
    posix_spawn_file_actions_destroy(&actions);
    return ok;
  }
  int Stop() {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  void Kill() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  std::string Output() const { return ReadText(out_); }

 private:
  pid_t pid_ = -1;
  std::string out_;
};

TEST(KubeDraTest, KubeletWithUpstreamStubsPreparesAndUnpreparesClaims) {
  const char* bin = getenv("TESSERA_BIN");
  if (bin == nullptr) GTEST_SKIP() << "TESSERA_BIN not set (run through ctest)";
  KUBE_BED_OR_SKIP(bed);
  const std::string dir = TempDir();
  std::string why;
  const std::string kubelet = BuildDraKubelet(dir, &why);
  if (kubelet.empty()) GTEST_SKIP() << "cannot build tests/kube/drakubelet (Go): " << why;
  std::unique_ptr<RestClient> admin = ClientFor(bed->admin_kubeconfig());
  ASSERT_NE(admin, nullptr);
  const std::string node = UniqueName("dra-kubelet");
  const std::string ns = MakeNamespace(*admin, "dra");
  const std::vector<std::string> args = {bin,
                                         "dra-driver",
                                         "--backend",
                                         "fake",
                                         "--fake-config",
                                         FakeConfigFile(dir),
                                         "--node-name",
                                         node,
                                         "--kubeconfig",
                                         bed->admin_kubeconfig(),
                                         "--plugin-dir",
                                         dir + "/plugin",
                                         "--registry-dir",
                                         dir + "/registry",
                                         "--cdi-dir",
                                         dir + "/cdi",
                                         "--metrics-interval",
                                         "200ms"};
  const std::string reg = dir + "/registry/gpu.tessera.dev-reg.sock";
  const std::string dra = dir + "/plugin/dra.sock";
  auto serving = [&] { return fs::exists(reg); };
  auto run = [&](const std::string& cmd) {
    int rc = 0;
    const std::string out = Shell(absl::StrCat(kubelet, " ", cmd), &rc);
    EXPECT_EQ(rc, 0) << cmd << ": " << out;
    const Json j = Json::parse(out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << cmd << ": " << out;
    return j;
  };
  auto cdi_files = [&] {
    int n = 0;
    std::error_code ec;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir + "/cdi", ec)) ++n;
    return n;
  };

  Process driver;
  ASSERT_TRUE(driver.Spawn(args, dir + "/out"));
  ASSERT_TRUE(PollUntil(serving, absl::Seconds(30))) << driver.Output();
  const Json info = run("info -socket " + reg);
  EXPECT_EQ(info["type"], "DRAPlugin");
  EXPECT_EQ(info["name"], "gpu.tessera.dev");
  EXPECT_EQ(info["endpoint"], dra);
  EXPECT_EQ(info["supported_versions"][0], "v1.DRAPlugin") << info.dump();

  // A claim for two GPUs, allocated by the test as a scheduler would (status.allocation).
  Json claim = {{"apiVersion", "resource.k8s.io/v1"},
                {"kind", "ResourceClaim"},
                {"metadata", {{"name", "two-gpus"}, {"namespace", ns}}},
                {"spec",
                 {{"devices",
                   {{"requests",
                     {{{"name", "gpus"},
                       {"exactly", {{"deviceClassName", "gpu.tessera.dev"}, {"count", 2}}}}}}}}}}};
  // With opaque parameters for the driver: env for the containers (claim_config.h).
  const Json config = {
      {"requests", Json::array({"gpus"})},
      {"opaque", {{"driver", kDriver}, {"parameters", {{"env", {{"TESSERA_TEST_MODE", "e2e"}}}}}}}};
  claim["spec"]["devices"]["config"] = Json::array({config});
  absl::StatusOr<Json> created = admin->Create(kube::ResourceClaimsResource(), ns, claim);
  ASSERT_TRUE(created.ok()) << created.status();
  Json status = *created;
  status["status"] = {
      {"allocation",
       {{"devices",
         {{"results",
           {{{"request", "gpus"}, {"driver", kDriver}, {"pool", node}, {"device", "gpu-2"}},
            {{"request", "gpus"}, {"driver", kDriver}, {"pool", node}, {"device", "gpu-3"}}}},
          {"config", Json::array({{{"source", "FromClaim"},
                                   {"requests", config["requests"]},
                                   {"opaque", config["opaque"]}}})}}}}}};
  absl::StatusOr<Json> allocated =
      admin->Update(kube::ResourceClaimsResource(), ns, "two-gpus", status, "status");
  ASSERT_TRUE(allocated.ok()) << allocated.status();
  const std::string uid = (*created)["metadata"]["uid"];
  const std::string ref = absl::StrCat(ns, "/two-gpus/", uid);

  const Json first = run("prepare -socket " + dra + " -claims " + ref);
  ASSERT_EQ(first[uid]["error"], "") << first.dump();
  ASSERT_EQ(first[uid]["devices"].size(), 2u) << first.dump();
  EXPECT_EQ(first[uid]["devices"][0]["device_name"], "gpu-2");
  EXPECT_EQ(first[uid]["devices"][0]["pool_name"], node);
  EXPECT_EQ(first[uid]["devices"][0]["request_names"][0], "gpus");
  EXPECT_EQ(first[uid]["devices"][1]["cdi_device_ids"][0],
            absl::StrCat("gpu.tessera.dev/claim=", uid, "-gpu-3"));
  EXPECT_EQ(cdi_files(), 2);
  const Json spec =
      Json::parse(ReadText(absl::StrCat(dir, "/cdi/gpu.tessera.dev-claim-", uid, "-gpu-3.json")),
                  nullptr, false);
  EXPECT_EQ(spec["devices"][0]["containerEdits"]["env"][0], "NVIDIA_VISIBLE_DEVICES=GPU-l40s-3")
      << spec.dump();
  EXPECT_EQ(spec["devices"][0]["containerEdits"]["env"].back(), "TESSERA_TEST_MODE=e2e")
      << spec.dump();
  // Repeated: the same answer, nothing more written.
  EXPECT_EQ(run("prepare -socket " + dra + " -claims " + ref), first);
  EXPECT_EQ(cdi_files(), 2);

  // A restart in between: the checkpoint answers, nothing doubled. An unknown claim in the same
  // call gets its own error.
  ASSERT_EQ(driver.Stop(), 0) << driver.Output();
  EXPECT_FALSE(fs::exists(reg));
  ASSERT_TRUE(driver.Spawn(args, dir + "/out"));
  ASSERT_TRUE(PollUntil(serving, absl::Seconds(30))) << driver.Output();
  const std::string unknown = absl::StrCat(ns, "/no-such-claim/0000-uid");
  const Json again = run(absl::StrCat("prepare -socket ", dra, " -claims ", ref, ",", unknown));
  EXPECT_EQ(again[uid], first[uid]) << again.dump();
  EXPECT_NE(again["0000-uid"]["error"].get<std::string>().find("no-such-claim"), std::string::npos)
      << again.dump();
  EXPECT_EQ(cdi_files(), 2);

  // Unprepare, twice (idempotent).
  EXPECT_EQ(run("unprepare -socket " + dra + " -claims " + ref)[uid]["error"], "");
  EXPECT_EQ(cdi_files(), 0);
  EXPECT_EQ(run("unprepare -socket " + dra + " -claims " + ref)[uid]["error"], "");

  // A corrupted checkpoint: reported, the driver starts, kubelet's call prepares again.
  EXPECT_EQ(run("prepare -socket " + dra + " -claims " + ref)[uid]["devices"].size(), 2u);
  ASSERT_EQ(driver.Stop(), 0) << driver.Output();
  std::ofstream(dir + "/plugin/checkpoint.json") << "{\"version\": 1, \"claims\": {\"x\"";
  ASSERT_TRUE(driver.Spawn(args, dir + "/out"));
  ASSERT_TRUE(PollUntil(serving, absl::Seconds(30))) << driver.Output();
  EXPECT_NE(driver.Output().find("checkpoint"), std::string::npos);
  EXPECT_NE(driver.Output().find("starting with no prepared claims"), std::string::npos)
      << driver.Output();
  const Json re = run("prepare -socket " + dra + " -claims " + ref);
  EXPECT_EQ(re[uid], first[uid]) << re.dump();
  EXPECT_EQ(cdi_files(), 2);
  EXPECT_EQ(run("unprepare -socket " + dra + " -claims " + ref)[uid]["error"], "");
  EXPECT_EQ(driver.Stop(), 0) << driver.Output();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tessera::testing
