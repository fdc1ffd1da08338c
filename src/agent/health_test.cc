#include "agent/health.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kA[] = "GPU-a";
constexpr char kB[] = "GPU-b";

GpuEvent Xid(const std::string& uuid, uint64_t xid, absl::Time t = absl::UnixEpoch()) {
  GpuEvent e;
  e.kind = GpuEventKind::kXid;
  e.gpu_uuid = uuid;
  e.xid = xid;
  e.time = t;
  return e;
}

GpuEvent Event(GpuEventKind kind, const std::string& uuid = "") {
  GpuEvent e;
  e.kind = kind;
  e.gpu_uuid = uuid;
  e.time = absl::FromUnixSeconds(100);
  return e;
}

class HealthTrackerTest : public ::testing::Test {
 protected:
  explicit HealthTrackerTest(HealthPolicy policy = {}) : tracker_(std::move(policy)) {
    tracker_.AddGpu(kA);
    tracker_.AddGpu(kB);
    tracker_.AddListener([this](const HealthTransition& t) { transitions_.push_back(t); });
  }
  HealthTracker tracker_;
  std::vector<HealthTransition> transitions_;
};

TEST(ClassifyXidTest, DefaultClasses) {
  HealthPolicy p;
  for (uint64_t xid : {13, 31, 43, 45, 68, 109}) {
    EXPECT_EQ(ClassifyXid(xid, p), XidClass::kApplication) << xid;
  }
  for (uint64_t xid : {48, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140, 1, 999}) {
    EXPECT_EQ(ClassifyXid(xid, p), XidClass::kHardware) << xid;
  }
  p.ignored_xids = {79, 13};
  EXPECT_EQ(ClassifyXid(79, p), XidClass::kIgnored);
  EXPECT_EQ(ClassifyXid(13, p), XidClass::kIgnored);
  EXPECT_EQ(XidDescription(79), "GPU has fallen off the bus");
  EXPECT_EQ(XidDescription(4242), "unknown XID");
}

TEST_F(HealthTrackerTest, ApplicationXidsLeaveGpuHealthy) {
  EXPECT_EQ(tracker_.Get(kA)->last_xid, 0u);
  for (uint64_t xid : {13, 31, 43, 45, 68, 109}) tracker_.OnEvent(Xid(kA, xid));
  EXPECT_TRUE(tracker_.IsHealthy(kA));
  EXPECT_TRUE(transitions_.empty());
  EXPECT_EQ(tracker_.Get(kA)->last_xid, 109u);
}

TEST_F(HealthTrackerTest, HardwareXidsMarkUnhealthyWithReason) {
  for (uint64_t xid : {48, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140, 57}) {
    HealthTracker t;
    t.AddGpu(kA);
    t.OnEvent(Xid(kA, xid));
    EXPECT_FALSE(t.IsHealthy(kA)) << xid;
  }
  tracker_.OnEvent(Xid(kA, 79, absl::FromUnixSeconds(5)));
  tracker_.OnEvent(Xid(kA, 48));  // already unhealthy: no second transition
  ASSERT_EQ(transitions_.size(), 1u);
  EXPECT_EQ(transitions_[0].uuid, kA);
  EXPECT_EQ(transitions_[0].from, Health::kHealthy);
  EXPECT_EQ(transitions_[0].to, Health::kUnhealthy);
  EXPECT_EQ(transitions_[0].reason, "XID 79: GPU has fallen off the bus");
  EXPECT_EQ(transitions_[0].time, absl::FromUnixSeconds(5));
  absl::StatusOr<GpuHealth> h = tracker_.Get(kA);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->reason, "XID 79: GPU has fallen off the bus");
  EXPECT_EQ(h->since, absl::FromUnixSeconds(5));
  EXPECT_TRUE(tracker_.IsHealthy(kB));
}

TEST_F(HealthTrackerTest, RecoversAfterResetOrOperatorAction) {
  tracker_.OnEvent(Xid(kA, 79));
  tracker_.OnEvent(Event(GpuEventKind::kGpuReset, kA));
  EXPECT_TRUE(tracker_.IsHealthy(kA));
  tracker_.OnEvent(Xid(kB, 94));
  ASSERT_TRUE(
      tracker_.MarkHealthy(kB, "operator drained and reset", absl::FromUnixSeconds(7)).ok());
  EXPECT_TRUE(tracker_.IsHealthy(kB));
  ASSERT_EQ(transitions_.size(), 4u);
  EXPECT_EQ(transitions_[1].to, Health::kHealthy);
  EXPECT_EQ(transitions_[1].reason, "GPU reset");
  EXPECT_EQ(transitions_[3].reason, "operator drained and reset");
  EXPECT_EQ(tracker_.MarkHealthy("GPU-nope", "x", absl::UnixEpoch()).code(),
            absl::StatusCode::kNotFound);
}

TEST_F(HealthTrackerTest, LostGpuOrFailingWaitMarksAllUnhealthy) {
  tracker_.OnEvent(Event(GpuEventKind::kGpuLost, kA));
  EXPECT_FALSE(tracker_.IsHealthy(kA));
  EXPECT_FALSE(tracker_.IsHealthy(kB));
  EXPECT_THAT(tracker_.Get(kB)->reason, HasSubstr("GPU-a was lost"));
  tracker_.OnEvent(Event(GpuEventKind::kGpuReset, kA));
  tracker_.OnEvent(Event(GpuEventKind::kGpuReset, kB));
  EXPECT_TRUE(tracker_.IsHealthy(kA) && tracker_.IsHealthy(kB));

  GpuEvent failed = Event(GpuEventKind::kEventWaitFailed);
  failed.detail = "nvmlEventSetWait: Unknown Error (nvml 999)";
  tracker_.OnEvent(failed);
  EXPECT_FALSE(tracker_.IsHealthy(kA));
  EXPECT_FALSE(tracker_.IsHealthy(kB));
  EXPECT_EQ(tracker_.Get(kA)->reason,
            "GPU event wait failed: nvmlEventSetWait: Unknown Error (nvml 999)");
}

TEST_F(HealthTrackerTest, UnattributedHardwareXidMarksAll) {
  tracker_.OnEvent(Xid("", 79));
  EXPECT_FALSE(tracker_.IsHealthy(kA));
  EXPECT_FALSE(tracker_.IsHealthy(kB));
}

TEST_F(HealthTrackerTest, DoubleBitEccEventMarksUnhealthy) {
  tracker_.OnEvent(Event(GpuEventKind::kEccDoubleBit, kB));
  EXPECT_FALSE(tracker_.IsHealthy(kB));
  EXPECT_EQ(tracker_.Get(kB)->reason, "double-bit ECC error");
}

TEST_F(HealthTrackerTest, UnknownUuidIsRegisteredOnFirstEvent) {
  tracker_.OnEvent(Xid("GPU-new", 79));
  EXPECT_FALSE(tracker_.IsHealthy("GPU-new"));
  EXPECT_THAT(tracker_.Uuids(), ElementsAre(kA, kB, "GPU-new"));
}

TEST_F(HealthTrackerTest, ThermalThresholdWithHysteresis) {
  GpuMetrics m;
  m.temperature_c = 96;
  tracker_.OnMetrics(kA, m, absl::FromUnixSeconds(1));
  EXPECT_FALSE(tracker_.IsHealthy(kA));
  EXPECT_EQ(tracker_.Get(kA)->reason, "temperature 96C at or above 95C");
  m.temperature_c = 92;  // below the limit but within the hysteresis band
  tracker_.OnMetrics(kA, m, absl::FromUnixSeconds(2));
  EXPECT_FALSE(tracker_.IsHealthy(kA));
  m.temperature_c = 80;
  tracker_.OnMetrics(kA, m, absl::FromUnixSeconds(3));
  EXPECT_TRUE(tracker_.IsHealthy(kA));
  ASSERT_EQ(transitions_.size(), 2u);
  EXPECT_EQ(transitions_[1].reason, "recovered");
}

TEST_F(HealthTrackerTest, UncorrectableEccThreshold) {
  GpuMetrics m;
  m.ecc_dbe_volatile = 0;
  tracker_.OnMetrics(kA, m, absl::UnixEpoch());
  EXPECT_TRUE(tracker_.IsHealthy(kA));
  m.ecc_dbe_volatile = 2;
  tracker_.OnMetrics(kA, m, absl::UnixEpoch());
  EXPECT_FALSE(tracker_.IsHealthy(kA));
  EXPECT_EQ(tracker_.Get(kA)->reason, "2 uncorrectable (volatile) ECC errors");
  // A reading without ECC counters does not clear the condition.
  tracker_.OnMetrics(kA, GpuMetrics{}, absl::UnixEpoch());
  EXPECT_FALSE(tracker_.IsHealthy(kA));
  m.ecc_dbe_volatile = 0;  // counters reset by a GPU reset
  tracker_.OnMetrics(kA, m, absl::UnixEpoch());
  EXPECT_TRUE(tracker_.IsHealthy(kA));
  GpuMetrics remap;
  remap.row_remap_failure = true;
  tracker_.OnMetrics(kB, remap, absl::UnixEpoch());
  EXPECT_EQ(tracker_.Get(kB)->reason, "row remapping failed");
}

class IgnoreListTest : public HealthTrackerTest {
 protected:
  static HealthPolicy Policy() {
    HealthPolicy p;
    p.ignored_xids = {74, 92};
    p.max_temperature_c.reset();
    return p;
  }
  IgnoreListTest() : HealthTrackerTest(Policy()) {}
};

TEST_F(IgnoreListTest, IgnoredXidsChangeNothing) {
  tracker_.OnEvent(Xid(kA, 74));
  tracker_.OnEvent(Xid(kA, 92));
  EXPECT_TRUE(tracker_.IsHealthy(kA));
  GpuMetrics hot;
  hot.temperature_c = 120;  // thermal check disabled
  tracker_.OnMetrics(kA, hot, absl::UnixEpoch());
  EXPECT_TRUE(tracker_.IsHealthy(kA));
  tracker_.OnEvent(Xid(kA, 79));
  EXPECT_FALSE(tracker_.IsHealthy(kA));
}

TEST_F(HealthTrackerTest, StickyCauseOutlivesClearedCondition) {
  GpuMetrics hot;
  hot.temperature_c = 99;
  tracker_.OnMetrics(kA, hot, absl::UnixEpoch());
  tracker_.OnEvent(Xid(kA, 79));
  GpuMetrics cool;
  cool.temperature_c = 50;
  tracker_.OnMetrics(kA, cool, absl::UnixEpoch());
  EXPECT_FALSE(tracker_.IsHealthy(kA));
  EXPECT_EQ(tracker_.Get(kA)->reason, "XID 79: GPU has fallen off the bus");
}

}  // namespace
}  // namespace tessera::agent
