// The DRA driver's parts without an API server: devices and the ResourceSlice, CDI specs, the
// checkpoint (corruption included), ClaimPreparer (idempotence, restart, per-claim errors) and
// the kubelet-facing gRPC server over a Unix socket (v1 and v1beta1).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "agent/fake/fake_backend.h"
#include "common/clock.h"
#include "deviceplugin/testing/fake_nodes.h"
#include "dra/cdi.h"
#include "dra/checkpoint.h"
#include "dra/devices.h"
#include "dra/driver.h"
#include "dra/kubelet_server.h"
#include "dra/pluginregistration/v1/api.grpc.pb.h"
#include "dra/preparer.h"
#include "dra/v1/api.grpc.pb.h"
#include "dra/v1beta1/api.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace tessera::dra {
namespace {

namespace fs = std::filesystem;
using kube::Json;
namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;
namespace drav1beta1 = ::k8s::io::kubelet::pkg::apis::dra::v1beta1;

std::vector<DraDevice> Devices(const char* yaml) {
  absl::StatusOr<agent::NodeSnapshot> node = deviceplugin::testing::DiscoverYaml(yaml);
  EXPECT_TRUE(node.ok()) << node.status();
  return node.ok() ? BuildDraDevices(*node) : std::vector<DraDevice>{};
}

std::string TempDir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / absl::StrCat("dra_test_", getpid(), "_", name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

TEST(DraDevices, WholeGpusCarryTopologyAttributes) {
  const std::vector<DraDevice> d = Devices(deviceplugin::testing::kPciePairs4);
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[0].name, "gpu-0");
  EXPECT_EQ(d[3].name, "gpu-3");
  EXPECT_EQ(d[0].attributes["type"]["string"], "gpu");
  EXPECT_EQ(d[0].attributes["uuid"]["string"], "GPU-pcie-0");
  EXPECT_EQ(d[0].attributes["architecture"]["string"], "Ampere");
  EXPECT_EQ(d[0].attributes["computeCapability"]["version"], "8.0.0");
  EXPECT_EQ(d[2].attributes["numaNode"]["int"], 1);
  // NVLink-bridged pairs: islands 0,0,1,1 as the device plugin's annotation has them.
  EXPECT_EQ(d[0].attributes["nvlinkDomain"]["int"], 0);
  EXPECT_EQ(d[1].attributes["nvlinkDomain"]["int"], 0);
  EXPECT_EQ(d[2].attributes["nvlinkDomain"]["int"], 1);
  EXPECT_EQ(d[3].attributes["nvlinkDomain"]["int"], 1);
  EXPECT_TRUE(d[0].attributes.contains("pciBusID"));
  EXPECT_TRUE(d[0].memory_bytes.has_value());
}

TEST(DraDevices, MigGpuIsPublishedWholeAndAsItsInstancesWithCounters) {
  const std::vector<DraDevice> d = Devices(deviceplugin::testing::kMigMixed2);
  std::vector<std::string> names;
  for (const DraDevice& x : d) names.push_back(x.name);
  EXPECT_EQ(names, (std::vector<std::string>{"gpu-0", "gpu-0-mig-0", "gpu-0-mig-1", "gpu-0-mig-2",
                                             "gpu-1"}));
  // The whole GPU in MIG mode: all its memory from its counter set.
  EXPECT_TRUE(d[0].mig_parent);
  EXPECT_EQ(d[0].attributes["type"]["string"], "gpu");
  EXPECT_EQ(d[0].attributes["migEnabled"]["bool"], true);
  EXPECT_EQ(d[0].attributes["uuid"]["string"], "GPU-mig-0");
  EXPECT_FALSE(d[0].attributes.contains("parentUUID"));
  EXPECT_EQ(d[0].counter_set, "gpu-0");
  EXPECT_EQ(d[0].consumes, int64_t{81920} << 20);
  // Its instances: their own memory from the same set.
  EXPECT_EQ(d[1].attributes["type"]["string"], "mig");
  EXPECT_EQ(d[1].attributes["parentUUID"]["string"], "GPU-mig-0");
  EXPECT_EQ(d[1].gpu_uuid, "GPU-mig-0");
  EXPECT_EQ(d[1].counter_set, "gpu-0");
  EXPECT_EQ(d[1].consumes, int64_t{9856} << 20);
  EXPECT_EQ(d[4].counter_set, "");  // not in MIG mode: nothing shared
  EXPECT_FALSE(d[4].mig_parent);
}

TEST(DraDevices, CounterSetsGoInASecondSliceOfThePool) {
  const std::vector<DraDevice> d = Devices(deviceplugin::testing::kMigMixed2);
  auto all = [](const std::string&) { return true; };
  std::vector<Json> s = ResourceSlicesJson("gpu.tessera.dev", "n1", d, all, 2, true);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0]["metadata"]["name"], "n1-gpu-tessera-dev");
  EXPECT_EQ(s[1]["metadata"]["name"], "n1-gpu-tessera-dev-counters");
  for (const Json& x : s) {
    EXPECT_EQ(x["spec"]["pool"]["resourceSliceCount"], 2);
    EXPECT_EQ(x["spec"]["pool"]["generation"], 2);
  }
  EXPECT_FALSE(s[1]["spec"].contains("devices"));
  ASSERT_EQ(s[1]["spec"]["sharedCounters"].size(), 1u);
  EXPECT_EQ(s[1]["spec"]["sharedCounters"][0]["name"], "gpu-0");
  EXPECT_EQ(s[1]["spec"]["sharedCounters"][0]["counters"]["memory"]["value"],
            absl::StrCat(int64_t{81920} << 20));
  ASSERT_EQ(s[0]["spec"]["devices"].size(), 5u);
  EXPECT_EQ(s[0]["spec"]["devices"][1]["consumesCounters"][0]["counterSet"], "gpu-0");
  EXPECT_FALSE(s[0]["spec"]["devices"][4].contains("consumesCounters"));
  // Without partitionable devices: the instances only, one slice, no counters.
  s = ResourceSlicesJson("gpu.tessera.dev", "n1", d, all, 2, false);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0]["spec"]["pool"]["resourceSliceCount"], 1);
  ASSERT_EQ(s[0]["spec"]["devices"].size(), 4u);
  EXPECT_EQ(s[0]["spec"]["devices"][0]["name"], "gpu-0-mig-0");
  EXPECT_FALSE(s[0]["spec"]["devices"][0].contains("consumesCounters"));
}

// An API server that drops spec.sharedCounters (DRAPartitionableDevices off): the driver stops
// publishing the whole MIG GPU and its counters, and its instances alone remain, in one slice.
TEST(DraDriverTest, WithoutSharedCountersTheMigGpuIsPublishedAsItsInstancesOnly) {
  const std::string dir = TempDir("nocounters");
  std::ofstream(dir + "/mig.yaml") << deviceplugin::testing::kMigMixed2;
  ManualClock clock;
  absl::StatusOr<std::unique_ptr<agent::FakeBackend>> backend =
      agent::FakeBackend::FromFile(dir + "/mig.yaml", clock);
  ASSERT_TRUE(backend.ok()) << backend.status();
  ASSERT_TRUE((*backend)->Init().ok());
  absl::Mutex mu;
  std::map<std::string, Json> stored;  // the "API server's" slices
  SliceWriter write = [&](const std::string& name, const Json* slice) -> absl::Status {
    absl::MutexLock l(&mu);
    if (slice == nullptr) {
      stored.erase(name);
      return absl::OkStatus();
    }
    Json kept = *slice;
    kept["spec"].erase("sharedCounters");
    stored[name] = kept;
    if (slice->at("spec").contains("sharedCounters")) {
      return absl::FailedPreconditionError("the API server dropped spec.sharedCounters");
    }
    return absl::OkStatus();
  };
  DriverOptions o;
  o.node_name = "n1";
  o.plugin_dir = dir + "/plugin";
  o.registry_dir = dir + "/registry";
  o.cdi_dir = dir + "/cdi";
  o.publish.retry_initial = absl::Milliseconds(1);
  o.log = [](absl::string_view) {};
  DraDriver driver(**backend, clock, nullptr, write, o);
  ASSERT_TRUE(driver.Start().ok());
  // Written once the retry after the refusal ran: one slice, the instances, no counters left.
  auto published = [&] {
    auto it = stored.find("n1-gpu-tessera-dev");
    return stored.size() == 1 && it != stored.end() && it->second["spec"]["devices"].size() == 4u &&
           it->second["spec"]["pool"]["resourceSliceCount"] == 1;
  };
  {
    absl::MutexLock l(&mu);
    mu.AwaitWithTimeout(absl::Condition(&published), absl::Seconds(30));
    ASSERT_TRUE(published()) << Json(stored).dump();
    EXPECT_EQ(stored["n1-gpu-tessera-dev"]["spec"]["devices"][0]["name"], "gpu-0-mig-0");
  }
  EXPECT_EQ(driver.slices().size(), 1u);
  driver.Stop();
  fs::remove_all(dir);
}

TEST(DraDevices, VersionsAndArchitectures) {
  EXPECT_EQ(SemverOf("550.90.07"), "550.90.7");
  EXPECT_EQ(SemverOf("535.183"), "535.183.0");
  EXPECT_EQ(SemverOf("r550"), std::nullopt);
  EXPECT_EQ(ArchitectureOf("NVIDIA H100 80GB HBM3")->name, "Hopper");
  EXPECT_EQ(ArchitectureOf("NVIDIA L40S")->compute_capability, "8.9.0");
  EXPECT_EQ(ArchitectureOf("NVIDIA A100-SXM4-80GB")->compute_capability, "8.0.0");
  EXPECT_EQ(ArchitectureOf("Some GPU"), std::nullopt);
}

TEST(DraDevices, SliceLeavesOutUnhealthyGpus) {
  const std::vector<DraDevice> d = Devices(deviceplugin::testing::kMigMixed2);
  const std::vector<Json> all = ResourceSlicesJson(
      "gpu.tessera.dev", "n1", d, [](const std::string& u) { return u != "GPU-mig-0"; }, 3, true);
  ASSERT_EQ(all.size(), 1u);  // the MIG GPU is gone, and with it the only counter set
  const Json& s = all[0];
  EXPECT_EQ(s["metadata"]["name"], "n1-gpu-tessera-dev");
  EXPECT_EQ(s["spec"]["pool"]["name"], "n1");
  EXPECT_EQ(s["spec"]["pool"]["generation"], 3);
  ASSERT_EQ(s["spec"]["devices"].size(), 1u);
  EXPECT_EQ(s["spec"]["devices"][0]["name"], "gpu-1");
}

TEST(Cdi, SpecHasDeviceNodesAndVisibleDevices) {
  const std::vector<DraDevice> d = Devices(deviceplugin::testing::kPciePairs4);
  const CdiClaim c{"gpu.tessera.dev", "uid-1", "ns", "c"};
  const Json spec = CdiSpecJson(c, d[1], "/run/nvidia/driver");
  EXPECT_EQ(spec["cdiVersion"], kCdiVersion);
  EXPECT_EQ(spec["kind"], "gpu.tessera.dev/claim");
  EXPECT_EQ(spec["devices"][0]["name"], "uid-1-gpu-1");
  const Json edits = spec["devices"][0]["containerEdits"];
  EXPECT_EQ(edits["env"][0], "NVIDIA_VISIBLE_DEVICES=GPU-pcie-1");
  EXPECT_EQ(edits["deviceNodes"][1]["path"], "/dev/nvidiactl");
  EXPECT_EQ(edits["deviceNodes"][1]["hostPath"], "/run/nvidia/driver/dev/nvidiactl");
  EXPECT_EQ(CdiDeviceId(c, d[1]), "gpu.tessera.dev/claim=uid-1-gpu-1");
}

TEST(Checkpoint, RoundTripAndCorruption) {
  const std::string dir = TempDir("ckpt");
  const std::string path = dir + "/checkpoint.json";
  EXPECT_TRUE(LoadCheckpoint(path)->empty());  // none yet
  PreparedClaims claims;
  claims["u1"] = {"ns", "c", {{{"r"}, "n1", "gpu-0", {"x/claim=u1-gpu-0"}}}, {"/f"}};
  ASSERT_TRUE(SaveCheckpoint(path, claims).ok());
  EXPECT_EQ(*LoadCheckpoint(path), claims);
  // Flip the device's name without fixing the checksum.
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  text.replace(text.find("gpu-0"), 5, "gpu-7");
  std::ofstream(path) << text;
  EXPECT_EQ(LoadCheckpoint(path).status().code(), absl::StatusCode::kDataLoss);
  std::ofstream(path) << "{\"version\": 1, \"claims\": [tru";
  EXPECT_EQ(LoadCheckpoint(path).status().code(), absl::StatusCode::kDataLoss);
}

// A ResourceClaim as the scheduler leaves it: allocated on `devices` of pool `pool`.
Json Claim(const std::string& uid, const std::vector<std::string>& devices,
           const std::string& pool = "n1") {
  Json results = Json::array();
  for (const std::string& d : devices) {
    results.push_back(
        {{"request", "gpus"}, {"driver", "gpu.tessera.dev"}, {"pool", pool}, {"device", d}});
  }
  return {{"metadata", {{"uid", uid}, {"namespace", "ns"}, {"name", "c-" + uid}}},
          {"status", {{"allocation", {{"devices", {{"results", results}}}}}}}};
}

class PreparerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    devices_ = Devices(deviceplugin::testing::kPciePairs4);
  }
  std::unique_ptr<ClaimPreparer> Make() {
    PreparerOptions o;
    o.pool = "n1";
    o.cdi_dir = dir_ + "/cdi";
    o.checkpoint_path = dir_ + "/checkpoint.json";
    o.log = [](absl::string_view) {};
    return std::make_unique<ClaimPreparer>(
        [this](const std::string& ns, const std::string& name) -> absl::StatusOr<Json> {
          ++gets_;
          auto it = claims_.find(ns + "/" + name);
          if (it == claims_.end()) return absl::NotFoundError("resourceclaims not found");
          return it->second;
        },
        devices_, o);
  }
  int CdiFiles() const {
    int n = 0;
    std::error_code ec;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_ + "/cdi", ec)) ++n;
    return n;
  }
  std::string dir_;
  std::vector<DraDevice> devices_;
  std::map<std::string, Json> claims_;
  int gets_ = 0;
};

TEST_F(PreparerTest, PrepareIsIdempotentAndSurvivesRestart) {
  claims_["ns/c-u1"] = Claim("u1", {"gpu-0", "gpu-1"});
  auto p = Make();
  ASSERT_TRUE(p->Load().ok());
  absl::StatusOr<std::vector<PreparedDevice>> first = p->Prepare({"ns", "c-u1", "u1"});
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->size(), 2u);
  EXPECT_EQ((*first)[1].device_name, "gpu-1");
  EXPECT_EQ((*first)[1].request_names, std::vector<std::string>{"gpus"});
  EXPECT_EQ((*first)[1].cdi_device_ids, std::vector<std::string>{"gpu.tessera.dev/claim=u1-gpu-1"});
  EXPECT_EQ(CdiFiles(), 2);
  EXPECT_EQ(*p->Prepare({"ns", "c-u1", "u1"}), *first);  // repeated: same answer
  EXPECT_EQ(gets_, 1);
  p.reset();
  auto restarted = Make();
  ASSERT_TRUE(restarted->Load().ok());
  EXPECT_EQ(*restarted->Prepare({"ns", "c-u1", "u1"}), *first);
  EXPECT_EQ(gets_, 1);  // from the checkpoint, not prepared again
  EXPECT_EQ(CdiFiles(), 2);
  ASSERT_TRUE(restarted->Unprepare({"ns", "c-u1", "u1"}).ok());
  EXPECT_EQ(CdiFiles(), 0);
  EXPECT_TRUE(restarted->Unprepare({"ns", "c-u1", "u1"}).ok());  // idempotent
  EXPECT_TRUE(restarted->prepared().empty());
}

// The claim's opaque configuration, as the scheduler copies it into the allocation (the class's
// first, then the claim's): its env reaches each device's CDI spec; bad parameters are a per-claim
// error naming every field, and nothing is written.
TEST_F(PreparerTest, ClaimConfigEnvReachesTheCdiSpec) {
  Json c = Claim("u6", {"gpu-0"});
  c["status"]["allocation"]["devices"]["config"] = Json::array(
      {{{"source", "FromClass"},
        {"requests", Json::array({"gpus"})},
        {"opaque",
         {{"driver", "gpu.tessera.dev"}, {"parameters", {{"env", {{"A", "class"}, {"B", "b"}}}}}}}},
       {{"source", "FromClaim"},
        {"opaque", {{"driver", "other.example.com"}, {"parameters", {{"whatever", 1}}}}}},
       {{"source", "FromClaim"},
        {"requests", Json::array({"other-request"})},
        {"opaque", {{"driver", "gpu.tessera.dev"}, {"parameters", {{"env", {{"C", "no"}}}}}}}},
       {{"source", "FromClaim"},
        {"opaque", {{"driver", "gpu.tessera.dev"}, {"parameters", {{"env", {{"A", "claim"}}}}}}}}});
  claims_["ns/c-u6"] = c;
  auto p = Make();
  ASSERT_TRUE(p->Load().ok());
  absl::StatusOr<std::vector<PreparedDevice>> prepared = p->Prepare({"ns", "c-u6", "u6"});
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  std::ifstream in(dir_ + "/cdi/gpu.tessera.dev-claim-u6-gpu-0.json");
  const Json spec = Json::parse(in);
  const Json env = spec["devices"][0]["containerEdits"]["env"];
  EXPECT_EQ(env, Json::array({"NVIDIA_VISIBLE_DEVICES=GPU-pcie-0", "TESSERA_DRA_CLAIM=ns/c-u6",
                              "A=claim", "B=b"}));
  // Parameters this driver does not take.
  Json bad = Claim("u7", {"gpu-1"});
  bad["status"]["allocation"]["devices"]["config"] =
      Json::array({{{"opaque",
                     {{"driver", "gpu.tessera.dev"},
                      {"parameters",
                       {{"env", {{"9X", "v"}, {"NVIDIA_VISIBLE_DEVICES", "all"}, {"N", 3}}},
                        {"mps", true}}}}}}});
  claims_["ns/c-u7"] = bad;
  absl::StatusOr<std::vector<PreparedDevice>> refused = p->Prepare({"ns", "c-u7", "u7"});
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
  for (const char* field : {"parameters.env.9X: not an environment variable name",
                            "parameters.env.NVIDIA_VISIBLE_DEVICES: set by the driver",
                            "parameters.env.N: not a string", "parameters.mps: unknown"}) {
    EXPECT_THAT(std::string(refused.status().message()), ::testing::HasSubstr(field));
  }
  EXPECT_EQ(CdiFiles(), 1);  // u6's only
}

TEST_F(PreparerTest, PerClaimErrorsLeaveNothingBehind) {
  claims_["ns/c-u2"] = Claim("u2", {"gpu-0", "gpu-9"});
  claims_["ns/c-u3"] = Claim("u3", {"gpu-0"}, "other-node");
  claims_["ns/c-u4"] = Claim("other-uid", {"gpu-0"});
  claims_["ns/c-u5"] = {{"metadata", {{"uid", "u5"}}}};
  auto p = Make();
  ASSERT_TRUE(p->Load().ok());
  EXPECT_EQ(p->Prepare({"ns", "missing", "u0"}).status().code(), absl::StatusCode::kNotFound);
  absl::Status unknown_device = p->Prepare({"ns", "c-u2", "u2"}).status();
  EXPECT_EQ(unknown_device.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(unknown_device.message().find("gpu-9"), absl::string_view::npos) << unknown_device;
  EXPECT_NE(p->Prepare({"ns", "c-u3", "u3"}).status().message().find("other-node"),
            absl::string_view::npos);
  EXPECT_NE(p->Prepare({"ns", "c-u4", "u4"}).status().message().find("other-uid"),
            absl::string_view::npos);
  EXPECT_NE(p->Prepare({"ns", "c-u5", "u5"}).status().message().find("not allocated"),
            absl::string_view::npos);
  EXPECT_EQ(p->Prepare({"", "c", "u6"}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CdiFiles(), 0);
  EXPECT_TRUE(p->prepared().empty());
}

TEST_F(PreparerTest, CorruptedCheckpointIsReportedAndClaimsPrepareAgain) {
  claims_["ns/c-u1"] = Claim("u1", {"gpu-2"});
  {
    auto p = Make();
    ASSERT_TRUE(p->Load().ok());
    ASSERT_TRUE(p->Prepare({"ns", "c-u1", "u1"}).ok());
  }
  std::ofstream(dir_ + "/checkpoint.json") << "garbage";
  auto p = Make();
  EXPECT_EQ(p->Load().code(), absl::StatusCode::kDataLoss);
  absl::StatusOr<std::vector<PreparedDevice>> again = p->Prepare({"ns", "c-u1", "u1"});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)[0].device_name, "gpu-2");
  EXPECT_EQ(CdiFiles(), 1);  // rewritten under the same name, not doubled
  EXPECT_EQ(gets_, 2);
}

TEST_F(PreparerTest, KubeletServerAnswersPerClaimOnV1AndV1beta1) {
  claims_["ns/c-u1"] = Claim("u1", {"gpu-3"});
  auto p = Make();
  ASSERT_TRUE(p->Load().ok());
  KubeletServerOptions so;
  so.plugin_dir = dir_ + "/plugin";
  so.registry_dir = dir_ + "/registry";
  so.log = [](absl::string_view) {};
  KubeletServer server(*p, so);
  ASSERT_TRUE(server.Start().ok());
  auto channel = grpc::CreateChannel("unix:" + server.registration_socket(),
                                     grpc::InsecureChannelCredentials());
  {
    grpc::ClientContext ctx;
    ::pluginregistration::PluginInfo info;
    ASSERT_TRUE(
        ::pluginregistration::Registration::NewStub(channel)->GetInfo(&ctx, {}, &info).ok());
    EXPECT_EQ(info.type(), "DRAPlugin");
    EXPECT_EQ(info.name(), "gpu.tessera.dev");
    EXPECT_EQ(info.endpoint(), server.dra_socket());
    ASSERT_GE(info.supported_versions_size(), 1);
    EXPECT_EQ(info.supported_versions(0), "v1.DRAPlugin");
  }
  auto dra = grpc::CreateChannel("unix:" + server.dra_socket(), grpc::InsecureChannelCredentials());
  {
    drav1::NodePrepareResourcesRequest req;
    auto* c = req.add_claims();
    c->set_namespace_("ns");
    c->set_name("c-u1");
    c->set_uid("u1");
    auto* bad = req.add_claims();
    bad->set_namespace_("ns");
    bad->set_name("nope");
    bad->set_uid("u9");
    drav1::NodePrepareResourcesResponse resp;
    grpc::ClientContext ctx;
    ASSERT_TRUE(drav1::DRAPlugin::NewStub(dra)->NodePrepareResources(&ctx, req, &resp).ok());
    ASSERT_EQ(resp.claims().size(), 2u);
    EXPECT_EQ(resp.claims().at("u1").error(), "");
    ASSERT_EQ(resp.claims().at("u1").devices_size(), 1);
    EXPECT_EQ(resp.claims().at("u1").devices(0).device_name(), "gpu-3");
    EXPECT_NE(resp.claims().at("u9").error(), "");
  }
  {
    drav1beta1::NodePrepareResourcesRequest req;
    auto* c = req.add_claims();
    c->set_namespace_("ns");
    c->set_name("c-u1");
    c->set_uid("u1");
    drav1beta1::NodePrepareResourcesResponse resp;
    grpc::ClientContext ctx;
    ASSERT_TRUE(drav1beta1::DRAPlugin::NewStub(dra)->NodePrepareResources(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.claims().at("u1").devices(0).cdi_device_ids(0),
              "gpu.tessera.dev/claim=u1-gpu-3");
    drav1beta1::NodeUnprepareResourcesRequest ureq;
    *ureq.add_claims() = *c;
    drav1beta1::NodeUnprepareResourcesResponse uresp;
    grpc::ClientContext uctx;
    ASSERT_TRUE(
        drav1beta1::DRAPlugin::NewStub(dra)->NodeUnprepareResources(&uctx, ureq, &uresp).ok());
    EXPECT_EQ(uresp.claims().at("u1").error(), "");
  }
  EXPECT_EQ(CdiFiles(), 0);
  server.Stop();
  EXPECT_FALSE(fs::exists(server.dra_socket()));
}

}  // namespace
}  // namespace tessera::dra
