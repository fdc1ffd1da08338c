#include "agent/fake/fake_backend.h"

#include <atomic>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/discovery.h"
#include "agent/fake/node_uuids.h"
#include "agent/health.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::agent {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kMiB = 1024ULL * 1024ULL;
const absl::Time kStart = absl::FromUnixSeconds(1750000000);

std::string Example(const std::string& name) {
  return std::string(TESSERA_SOURCE_DIR) + "/deploy/fake-gpus/" + name;
}

std::unique_ptr<FakeBackend> Load(const std::string& name, Clock& clock) {
  absl::StatusOr<std::unique_ptr<FakeBackend>> b = FakeBackend::FromFile(Example(name), clock);
  EXPECT_TRUE(b.ok()) << b.status();
  if (!b.ok()) return nullptr;
  EXPECT_TRUE((*b)->Init().ok());
  return *std::move(b);
}

std::unique_ptr<FakeBackend> FromYaml(const std::string& yaml, Clock& clock) {
  absl::StatusOr<FakeConfig> cfg = ParseFakeConfig(yaml);
  EXPECT_TRUE(cfg.ok()) << cfg.status();
  if (!cfg.ok()) return nullptr;
  auto b = std::make_unique<FakeBackend>(*std::move(cfg), clock);
  EXPECT_TRUE(b->Init().ok());
  return b;
}

TEST(FakeBackendTest, NodeUuidsAreDistinctPerNodeStableAndKeepTheRest) {
  ManualClock clock(kStart);
  std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/deploy/fake-gpus/up-h100-nvswitch-8.yaml");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  ASSERT_FALSE(text.empty());
  std::set<std::string> seen;
  for (const char* node : {"h100-0", "h100-1"}) {
    const std::string mine = WithNodeUuids(text, node);
    EXPECT_EQ(mine, WithNodeUuids(text, node));  // the same node, the same UUIDs
    EXPECT_EQ(mine.size(), text.size());         // only hex digits changed
    auto b = FromYaml(mine, clock);
    ASSERT_NE(b, nullptr);
    absl::StatusOr<int> n = b->DeviceCount();
    ASSERT_TRUE(n.ok());
    ASSERT_EQ(*n, 8);
    for (int i = 0; i < *n; ++i) {
      absl::StatusOr<GpuInfo> g = b->GetDeviceInfo(i);
      ASSERT_TRUE(g.ok());
      EXPECT_THAT(g->uuid, ::testing::MatchesRegex("GPU-[0-9a-f-]{36}"));
      EXPECT_TRUE(seen.insert(g->uuid).second) << node << " repeats " << g->uuid;
    }
  }
  EXPECT_EQ(seen.size(), 16u);
  // MIG UUIDs too; other text untouched.
  const std::string mig = WithNodeUuids("x: MIG-11111111-2222-3333-4444-555555555555 y", "n");
  EXPECT_THAT(mig, ::testing::MatchesRegex("x: MIG-11111111-2222-3333-4444-[0-9a-f]{12} y"));
  EXPECT_EQ(mig.find("555555555555"), std::string::npos) << mig;
}

TEST(FakeBackendTest, H100NvSwitchNodeDiscovery) {
  ManualClock clock(kStart);
  auto b = Load("h100-nvswitch-8.yaml", clock);
  ASSERT_NE(b, nullptr);
  absl::StatusOr<NodeSnapshot> snap = Discover(*b);
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ(snap->backend, "fake");
  EXPECT_EQ(snap->driver_version, "550.90.07");
  ASSERT_EQ(snap->gpus.size(), 8u);
  const GpuInfo& g3 = snap->gpus[3].info;
  EXPECT_EQ(g3.uuid, "GPU-4a8c1f36-98c1-4b7e-9d0a-1c2b3d4e5f03");
  EXPECT_EQ(g3.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(g3.pci_bus_id, "00000000:5D:00.0");
  EXPECT_EQ(g3.numa_node, 0);
  EXPECT_EQ(g3.minor, 3);
  EXPECT_EQ(g3.memory->total_bytes, 81559 * kMiB);
  EXPECT_EQ(g3.nvlinks.size(), 18u);
  EXPECT_FALSE(g3.mig_mode.has_value());
  EXPECT_EQ(snap->gpus[3].metrics.temperature_c, 33u);
  EXPECT_EQ(snap->gpus[3].metrics.sm_clock_mhz, 1980u);
  const TopologyMatrix& t = snap->topology;
  for (int a = 0; a < 8; ++a) {
    for (int c = 0; c < 8; ++c) {
      EXPECT_EQ(t.Link(a, c), a == c ? LinkClass::kSelf : LinkClass::kNvLink);
    }
  }
  EXPECT_EQ(t.Level(0, 1), TopologyLevel::kSingle);
  EXPECT_EQ(t.Level(0, 2), TopologyLevel::kNode);
  EXPECT_EQ(t.Level(3, 4), TopologyLevel::kSystem);
}

TEST(FakeBackendTest, PcieNvLinkBridgedPairs) {
  ManualClock clock(kStart);
  auto b = Load("pcie-4.yaml", clock);
  ASSERT_NE(b, nullptr);
  absl::StatusOr<NodeSnapshot> snap = Discover(*b);
  ASSERT_TRUE(snap.ok());
  const TopologyMatrix& t = snap->topology;
  EXPECT_EQ(t.Link(0, 1), LinkClass::kNvLink);
  EXPECT_EQ(t.Link(2, 3), LinkClass::kNvLink);
  EXPECT_EQ(t.Link(0, 2), LinkClass::kCrossNuma);
  EXPECT_EQ(t.Link(1, 3), LinkClass::kCrossNuma);
  EXPECT_EQ(snap->gpus[0].info.nvlinks.size(), 12u);
  EXPECT_EQ(snap->gpus[0].info.nvlinks[0].remote_pci_bus_id, "00000000:31:00.0");
}

TEST(FakeBackendTest, PcieOnlyLinkClasses) {
  ManualClock clock(kStart);
  auto b = FromYaml(R"(
gpus:
  - {numa_node: 0}
  - {numa_node: 0}
  - {numa_node: 0}
  - {numa_node: 1}
topology:
  - {gpus: [0, 1], level: MULTIPLE}
  - {gpus: [0, 2], level: HOSTBRIDGE}
)",
                    clock);
  ASSERT_NE(b, nullptr);
  absl::StatusOr<NodeSnapshot> snap = Discover(*b);
  ASSERT_TRUE(snap.ok());
  const TopologyMatrix& t = snap->topology;
  EXPECT_EQ(t.Link(0, 1), LinkClass::kPcieSwitch);
  EXPECT_EQ(t.Link(0, 2), LinkClass::kHostBridge);
  EXPECT_EQ(t.Link(1, 2), LinkClass::kHostBridge);  // NODE: same NUMA node
  EXPECT_EQ(t.Link(2, 3), LinkClass::kCrossNuma);
  EXPECT_EQ(t.Link(3, 0), LinkClass::kCrossNuma);
  // Defaults fill in identity.
  EXPECT_EQ(snap->gpus[1].info.uuid, "GPU-fa4e0000-0000-4000-8000-000000000001");
  EXPECT_EQ(snap->gpus[1].info.pci_bus_id, "00000000:28:00.0");
}

TEST(FakeBackendTest, A100MigInstances) {
  ManualClock clock(kStart);
  auto b = Load("a100-mig.yaml", clock);
  ASSERT_NE(b, nullptr);
  absl::StatusOr<GpuInfo> g0 = b->GetDeviceInfo(0);
  ASSERT_TRUE(g0.ok());
  ASSERT_TRUE(g0->mig_mode && g0->mig_mode->current);
  ASSERT_EQ(g0->mig_instances.size(), 7u);
  EXPECT_EQ(g0->mig_instances[6].profile, "1g.10gb");
  EXPECT_EQ(g0->mig_instances[6].uuid, "MIG-1d2c3b4a-0000-4000-8000-000000000006");
  absl::StatusOr<GpuInfo> g1 = b->GetDeviceInfo(1);
  ASSERT_EQ(g1->mig_instances.size(), 3u);
  EXPECT_EQ(g1->mig_instances[0].profile, "3g.40gb");
  EXPECT_EQ(g1->mig_instances[0].memory_bytes, 40192 * kMiB);
  EXPECT_EQ(g1->mig_instances[1].profile, "2g.20gb");
  absl::StatusOr<GpuInfo> g2 = b->GetDeviceInfo(2);
  ASSERT_TRUE(g2->mig_mode.has_value());
  EXPECT_FALSE(g2->mig_mode->current);
  EXPECT_TRUE(g2->mig_instances.empty());
  EXPECT_EQ(g2->name, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(*b->GetTopologyLevel(0, 1), TopologyLevel::kMultiple);
}

TEST(FakeBackendTest, ScriptPlaysOnTheInjectedClock) {
  ManualClock clock(kStart);
  auto b = Load("h100-nvswitch-8.yaml", clock);
  ASSERT_NE(b, nullptr);
  absl::StatusOr<std::optional<GpuEvent>> ev = b->WaitForEvent(absl::Seconds(5));
  ASSERT_TRUE(ev.ok());
  EXPECT_FALSE(ev->has_value());
  EXPECT_EQ(clock.Now(), kStart + absl::Seconds(5));

  ev = b->WaitForEvent(absl::Minutes(1));
  ASSERT_TRUE(ev.ok() && ev->has_value());
  EXPECT_EQ((*ev)->kind, GpuEventKind::kXid);
  EXPECT_EQ((*ev)->xid, 13u);
  EXPECT_EQ((*ev)->gpu_uuid, "GPU-4a8c1f36-98c1-4b7e-9d0a-1c2b3d4e5f01");
  EXPECT_EQ((*ev)->time, kStart + absl::Seconds(20));
  EXPECT_EQ(clock.Now(), kStart + absl::Seconds(20));
  absl::StatusOr<GpuMetrics> m0 = b->GetMetrics(0);  // the 10s metrics entry has applied
  EXPECT_EQ(m0->gpu_util_percent, 97u);
  EXPECT_EQ(m0->fb_used_bytes, 70000 * kMiB);
  EXPECT_EQ(b->GetDeviceInfo(0)->memory->used_bytes, 70000 * kMiB);

  ev = b->WaitForEvent(absl::Minutes(1));
  EXPECT_EQ((*ev)->xid, 79u);
  ev = b->WaitForEvent(absl::Minutes(1));
  EXPECT_EQ((*ev)->kind, GpuEventKind::kEccDoubleBit);
  EXPECT_EQ(b->GetMetrics(2)->ecc_dbe_volatile, 1u);
  EXPECT_EQ(b->GetMetrics(2)->ecc_dbe_aggregate, 1u);
  clock.Advance(absl::Seconds(15));  // 55s: the temperature entry applied without a wait
  EXPECT_EQ(b->GetMetrics(5)->temperature_c, 97u);
  ev = b->WaitForEvent(absl::Minutes(5));
  EXPECT_EQ((*ev)->kind, GpuEventKind::kGpuReset);
  EXPECT_EQ((*ev)->time, kStart + absl::Seconds(90));
  EXPECT_EQ(b->GetMetrics(5)->temperature_c, 60u);
  ev = b->WaitForEvent(absl::Minutes(5));
  EXPECT_FALSE(ev->has_value());
  EXPECT_EQ(clock.Now(), kStart + absl::Seconds(90) + absl::Minutes(5));
}

TEST(FakeBackendTest, EnergyGrowsWithPower) {
  ManualClock clock(kStart);
  auto b = Load("h100-nvswitch-8.yaml", clock);
  ASSERT_NE(b, nullptr);
  clock.Advance(absl::Seconds(10));
  EXPECT_EQ(b->GetMetrics(1)->total_energy_mj, 725000u);  // 72.5 W for 10 s
  clock.Advance(absl::Seconds(10));
  // GPU 0 drew 72.5 W for 10 s, then 680 W for 10 s.
  EXPECT_EQ(b->GetMetrics(0)->total_energy_mj, 725000u + 6800000u);
}

TEST(FakeBackendTest, LostGpuFailsQueriesUntilReset) {
  ManualClock clock(kStart);
  auto b = Load("pcie-4.yaml", clock);
  ASSERT_NE(b, nullptr);
  absl::StatusOr<std::optional<GpuEvent>> ev = b->WaitForEvent(absl::Minutes(1));
  ASSERT_TRUE(ev.ok() && ev->has_value());
  EXPECT_EQ((*ev)->kind, GpuEventKind::kGpuLost);
  EXPECT_EQ((*ev)->gpu_uuid, "GPU-7b2e0c11-5a3d-4f60-8e21-0a1b2c3d4e02");
  EXPECT_EQ(b->GetMetrics(2).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(b->GetTopologyLevel(2, 3).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(b->GetMetrics(3).ok());
  absl::StatusOr<NodeSnapshot> snap = Discover(*b);
  ASSERT_TRUE(snap.ok());
  EXPECT_THAT(snap->gpus[2].error, HasSubstr("is lost"));
  ev = b->WaitForEvent(absl::Minutes(1));
  EXPECT_EQ((*ev)->kind, GpuEventKind::kGpuReset);
  EXPECT_TRUE(b->GetMetrics(2).ok());
}

TEST(FakeBackendTest, DrivesHealthTrackerThroughTimeline) {
  ManualClock clock(kStart);
  auto b = Load("h100-nvswitch-8.yaml", clock);
  ASSERT_NE(b, nullptr);
  HealthTracker health;
  std::vector<std::string> log;
  health.AddListener([&log](const HealthTransition& t) {
    log.push_back(t.uuid.substr(t.uuid.size() - 2) + " " + std::string(HealthName(t.to)) + " " +
                  t.reason);
  });
  int n = *b->DeviceCount();
  std::vector<std::string> uuids;
  for (int i = 0; i < n; ++i) uuids.push_back(b->GetDeviceInfo(i)->uuid);
  // The agent's loop: wait up to 10 s for events, then sample metrics.
  for (int step = 0; step < 12; ++step) {
    absl::Time until = clock.Now() + absl::Seconds(10);
    while (clock.Now() < until) {
      absl::StatusOr<std::optional<GpuEvent>> ev = b->WaitForEvent(until - clock.Now());
      ASSERT_TRUE(ev.ok());
      if (!ev->has_value()) break;
      health.OnEvent(**ev);
    }
    for (int i = 0; i < n; ++i) {
      absl::StatusOr<GpuMetrics> m = b->GetMetrics(i);
      if (m.ok()) health.OnMetrics(uuids[i], *m, clock.Now());
    }
  }
  EXPECT_THAT(log, ::testing::ElementsAre("03 unhealthy XID 79: GPU has fallen off the bus",
                                          "02 unhealthy double-bit ECC error",
                                          "05 unhealthy temperature 97C at or above 95C",
                                          "05 healthy recovered", "03 healthy GPU reset"));
  EXPECT_FALSE(health.IsHealthy(uuids[2]));  // needs an operator or a reset
  EXPECT_TRUE(health.IsHealthy(uuids[1]));   // XID 13 is the application's fault
}

TEST(FakeBackendTest, WaitErrorEvent) {
  ManualClock clock(kStart);
  auto b = FromYaml(R"(
gpus: [{}]
events:
  - {at: 1s, type: wait_error, detail: driver crashed}
)",
                    clock);
  ASSERT_NE(b, nullptr);
  absl::StatusOr<std::optional<GpuEvent>> ev = b->WaitForEvent(absl::Seconds(2));
  ASSERT_TRUE(ev.ok() && ev->has_value());
  EXPECT_EQ((*ev)->kind, GpuEventKind::kEventWaitFailed);
  EXPECT_EQ((*ev)->detail, "driver crashed");
  EXPECT_TRUE((*ev)->gpu_uuid.empty());
}

TEST(FakeBackendTest, NotInitialized) {
  ManualClock clock(kStart);
  absl::StatusOr<FakeConfig> cfg = ParseFakeConfig("gpus: [{}]");
  ASSERT_TRUE(cfg.ok());
  FakeBackend b(*cfg, clock);
  EXPECT_EQ(b.DeviceCount().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(b.WaitForEvent(absl::Seconds(1)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(b.Init().ok());
  EXPECT_EQ(b.GetMetrics(1).status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(b.Shutdown().ok());
  EXPECT_FALSE(b.DeviceCount().ok());
}

TEST(FakeConfigTest, ErrorsNameTheField) {
  struct Case {
    const char* yaml;
    const char* message;
  };
  const Case cases[] = {
      {"gpus: [{memroy_mib: 5}]", "gpus[0].memroy_mib: unknown field"},
      {"gpus: [{}, {memory_mib: lots}]",
       "gpus[1].memory_mib: expected a non-negative integer, got 'lots'"},
      {"gpus: [{memory_mib: -4}]", "gpus[0].memory_mib: expected a non-negative integer"},
      {"gpus: []", "gpus: expected a non-empty list"},
      {"gpus: [{}]\nevents: [{at: 1s, gpu: 4, type: xid, xid: 79}]",
       "events[0].gpu: no GPU 4 (the node has 1)"},
      {"gpus: [{}]\nevents: [{at: soon, gpu: 0, type: xid, xid: 79}]",
       "events[0].at: expected a duration such as 30s, got 'soon'"},
      {"gpus: [{}]\nevents: [{at: 1s, gpu: 0, type: explode}]",
       "events[0].type: unknown event type 'explode'"},
      {"gpus: [{}]\nevents: [{at: 1s, gpu: 0, type: xid}]", "events[0].xid: required"},
      {"gpus: [{}, {}]\ntopology: [{gpus: [0, 1], level: NEAR}]",
       "topology[0].level: unknown topology level 'NEAR'"},
      {"gpus: [{}, {}]\ntopology: [{gpus: [0, 0], level: NODE}]",
       "topology[0].gpus: GPU indexes must be distinct"},
      {"gpus: [{uuid: GPU-x}, {uuid: GPU-x}]", "gpus[1].uuid: duplicate UUID GPU-x"},
      {"gpus: [{mig: {instances: [{uuid: MIG-x}]}}]", "gpus[0].mig.instances[0].profile: required"},
      {"gpus: [{metrics: {temprature_c: 3}}]", "gpus[0].metrics.temprature_c: unknown field"},
      {"gpus: [{nvlinks: 40}]", "gpus[0].nvlinks: at most 18"},
      {"gpus: [{]", "not valid YAML"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<FakeConfig> cfg = ParseFakeConfig(c.yaml);
    ASSERT_FALSE(cfg.ok()) << c.yaml;
    EXPECT_EQ(cfg.status().code(), absl::StatusCode::kInvalidArgument) << c.yaml;
    EXPECT_THAT(std::string(cfg.status().message()), HasSubstr(c.message)) << c.yaml;
  }
  EXPECT_EQ(LoadFakeConfig("/nonexistent.yaml").status().code(), absl::StatusCode::kNotFound);
}

TEST(FakeConfigTest, JsonIsAcceptedToo) {
  absl::StatusOr<FakeConfig> cfg = ParseFakeConfig(R"({
    "gpus": [{"model": "NVIDIA A100-SXM4-40GB", "memory_mib": 40960, "numa_node": 0},
             {"model": "NVIDIA A100-SXM4-40GB", "memory_mib": 40960, "numa_node": 1}],
    "events": [{"at": "2s", "gpu": 1, "type": "xid", "xid": 48}]
  })");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  ASSERT_EQ(cfg->gpus.size(), 2u);
  EXPECT_EQ(cfg->gpus[1].info.memory->total_bytes, 40960 * kMiB);
  EXPECT_EQ(cfg->levels[0][1], TopologyLevel::kSystem);
  ASSERT_EQ(cfg->events.size(), 1u);
  EXPECT_EQ(cfg->events[0].at, absl::Seconds(2));
}

TEST(FakeConfigTest, AllExamplesLoad) {
  for (const char* name : {"h100-nvswitch-8.yaml", "pcie-4.yaml", "a100-mig.yaml"}) {
    absl::StatusOr<FakeConfig> cfg = LoadFakeConfig(Example(name));
    EXPECT_TRUE(cfg.ok()) << name << ": " << cfg.status();
  }
}

}  // namespace
}  // namespace tessera::agent

namespace tessera::agent {
namespace {

TEST(FakeBackendTest, ConcurrentWaiterAndQueries) {
  ManualClock clock(kStart);
  auto b = Load("h100-nvswitch-8.yaml", clock);
  ASSERT_NE(b, nullptr);
  HealthTracker health;
  std::atomic<int> events{0};
  std::thread waiter([&] {
    while (clock.Now() < kStart + absl::Seconds(100)) {
      absl::StatusOr<std::optional<GpuEvent>> ev = b->WaitForEvent(absl::Seconds(1));
      if (ev.ok() && ev->has_value()) {
        health.OnEvent(**ev);
        ++events;
      }
    }
  });
  for (int i = 0; i < 50; ++i) {
    absl::StatusOr<NodeSnapshot> snap = Discover(*b);
    ASSERT_TRUE(snap.ok());
    for (const GpuSnapshot& g : snap->gpus) health.OnMetrics(g.info.uuid, g.metrics, clock.Now());
    (void)health.Uuids();
  }
  waiter.join();
  EXPECT_EQ(events.load(), 4);  // xid 13, xid 79, ecc, reset
}

}  // namespace
}  // namespace tessera::agent
