#include "agent/health_monitor.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/fake/fake_backend.h"
#include "agent/nvml/nvml_backend.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::agent {
namespace {

using ::testing::ElementsAre;

const absl::Time kStart = absl::FromUnixSeconds(1750000000);

std::unique_ptr<FakeBackend> Fake(const std::string& yaml, Clock& clock) {
  absl::StatusOr<FakeConfig> cfg = ParseFakeConfig(yaml);
  EXPECT_TRUE(cfg.ok()) << cfg.status();
  auto b = std::make_unique<FakeBackend>(*cfg, clock);
  EXPECT_TRUE(b->Init().ok());
  return b;
}

TEST(HealthMonitorTest, FeedsEventsAndMetrics) {
  ManualClock clock(kStart);
  auto b = Fake(R"(
gpus:
  - {uuid: GPU-0, metrics: {temperature_c: 40}}
  - {uuid: GPU-1, metrics: {temperature_c: 40}}
events:
  - {at: 3s, gpu: 1, type: xid, xid: 31}
  - {at: 7s, gpu: 0, type: temperature, value: 99}
  - {at: 12s, gpu: 1, type: xid, xid: 95}
  - {at: 20s, gpu: 0, type: temperature, value: 50}
)",
                clock);
  HealthTracker tracker;
  std::vector<std::string> log;
  tracker.AddListener([&](const HealthTransition& t) {
    log.push_back(absl::StrCat(absl::ToInt64Seconds(t.time - kStart), "s ", t.uuid, " ",
                               std::string(HealthName(t.to)), " ", t.reason));
  });
  std::vector<std::string> events;
  HealthMonitor monitor(*b, tracker, clock);
  monitor.SetEventCallback(
      [&](const GpuEvent& e) { events.push_back(absl::StrCat(e.gpu_uuid, " xid ", e.xid)); });
  ASSERT_TRUE(monitor.Start().ok());
  EXPECT_THAT(tracker.Uuids(), ElementsAre("GPU-0", "GPU-1"));
  monitor.RunUntil(kStart + absl::Seconds(30));
  EXPECT_EQ(clock.Now(), kStart + absl::Seconds(30));
  EXPECT_THAT(events, ElementsAre("GPU-1 xid 31", "GPU-1 xid 95"));
  // Metrics are sampled every 5 s: the 7 s temperature is seen at 10 s, the 20 s one at 20 s.
  EXPECT_THAT(log, ElementsAre("10s GPU-0 unhealthy temperature 99C at or above 95C",
                               "12s GPU-1 unhealthy XID 95: Uncontained ECC error",
                               "20s GPU-0 healthy recovered"));
}

TEST(HealthMonitorTest, LossReportedOnceWhetherByEventOrQuery) {
  ManualClock clock(kStart);
  auto b = Fake(R"(
gpus: [{uuid: GPU-0}, {uuid: GPU-1}]
events:
  - {at: 2s, gpu: 1, type: lost}
)",
                clock);
  HealthTracker tracker;
  HealthMonitor monitor(*b, tracker, clock);
  int lost_events = 0;
  monitor.SetEventCallback([&](const GpuEvent& e) {
    if (e.kind == GpuEventKind::kGpuLost) ++lost_events;
  });
  ASSERT_TRUE(monitor.Start().ok());
  monitor.RunUntil(kStart + absl::Seconds(30));
  EXPECT_EQ(lost_events, 1);
  EXPECT_FALSE(tracker.IsHealthy("GPU-0"));  // a loss taints every GPU
  EXPECT_FALSE(tracker.IsHealthy("GPU-1"));
}

TEST(HealthMonitorTest, LostGpuFoundByQueryWithNvml) {
  setenv("TESSERA_STUB_NVML_LOST_GPU", "2", 1);
  ManualClock clock(kStart);
  NvmlBackend nvml(clock, STUB_NVML_PATH);
  ASSERT_TRUE(nvml.Init().ok());
  HealthTracker tracker;
  HealthMonitor monitor(nvml, tracker, clock);
  std::vector<GpuEvent> events;
  monitor.SetEventCallback([&](const GpuEvent& e) {
    events.push_back(e);
    monitor.Stop();  // the stub's wait does not advance the manual clock: stop here
  });
  ASSERT_TRUE(monitor.Start().ok());
  EXPECT_EQ(tracker.Uuids().size(), 7u);
  monitor.RunUntil(kStart + absl::Seconds(10));
  unsetenv("TESSERA_STUB_NVML_LOST_GPU");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, GpuEventKind::kGpuLost);
  EXPECT_THAT(events[0].detail, ::testing::HasSubstr("GPU is lost"));
  EXPECT_FALSE(tracker.IsHealthy("GPU-5d1f0e2a-0000-4000-8000-000000000000"));
}

// A backend without an event API.
class NoEvents final : public GpuBackend {
 public:
  explicit NoEvents(GpuBackend& inner) : inner_(inner) {}
  absl::Status Init() override { return inner_.Init(); }
  absl::Status Shutdown() override { return inner_.Shutdown(); }
  std::string BackendName() const override { return "no-events"; }
  std::string DriverVersion() override { return ""; }
  std::string CudaDriverVersion() override { return ""; }
  absl::StatusOr<int> DeviceCount() override { return inner_.DeviceCount(); }
  absl::StatusOr<GpuInfo> GetDeviceInfo(int i) override { return inner_.GetDeviceInfo(i); }
  absl::StatusOr<GpuMetrics> GetMetrics(int i) override { return inner_.GetMetrics(i); }
  absl::StatusOr<TopologyLevel> GetTopologyLevel(int a, int b) override {
    return inner_.GetTopologyLevel(a, b);
  }
  absl::StatusOr<std::optional<GpuEvent>> WaitForEvent(absl::Duration) override {
    return absl::UnimplementedError("no events");
  }

 private:
  GpuBackend& inner_;
};

TEST(HealthMonitorTest, BackendWithoutEventsIsStillSampled) {
  ManualClock clock(kStart);
  auto b = Fake(R"(
gpus: [{uuid: GPU-0, metrics: {ecc_dbe_volatile: 0}}]
events:
  - {at: 6s, gpu: 0, type: ecc_dbe, count: 3}
)",
                clock);
  NoEvents no_events(*b);
  HealthTracker tracker;
  HealthMonitor monitor(no_events, tracker, clock);
  ASSERT_TRUE(monitor.Start().ok());
  monitor.RunUntil(kStart + absl::Seconds(12));
  EXPECT_FALSE(monitor.events_supported());
  EXPECT_EQ(clock.Now(), kStart + absl::Seconds(12));
  EXPECT_EQ(tracker.Get("GPU-0")->reason, "3 uncorrectable (volatile) ECC errors");
}

TEST(HealthMonitorTest, BacksOffAfterFailedWait) {
  ManualClock clock(kStart);
  auto b = Fake(R"(
gpus: [{uuid: GPU-0}]
events:
  - {at: 1s, type: wait_error}
)",
                clock);
  HealthTracker tracker;
  HealthMonitor::Options opts;
  opts.wait_failure_backoff = absl::Seconds(2);
  HealthMonitor monitor(*b, tracker, clock, opts);
  absl::Time after_event;
  monitor.SetEventCallback([&](const GpuEvent&) { after_event = clock.Now(); });
  ASSERT_TRUE(monitor.Start().ok());
  monitor.SetEventCallback([&](const GpuEvent&) {
    after_event = clock.Now();
    monitor.Stop();
  });
  monitor.RunUntil(kStart + absl::Seconds(30));
  EXPECT_EQ(after_event, kStart + absl::Seconds(1));
  EXPECT_EQ(clock.Now(), kStart + absl::Seconds(3));  // 1 s + the 2 s backoff
  EXPECT_FALSE(tracker.IsHealthy("GPU-0"));
}

}  // namespace
}  // namespace tessera::agent
