#include "api/job_accounting.h"

#include <gtest/gtest.h>

#include "api/store_layout.h"

namespace tessera::api {
namespace {

using Json = nlohmann::json;

const absl::Time kT0 = absl::FromUnixSeconds(1767225600);

Json Bound(absl::Time at, Json placement) {
  return {{"phase", "Running"}, {"scheduledTime", Timestamp(at)}, {"placement", placement}};
}

const Json kTwoWholeOneShared = Json::parse(R"([
  {"group": "w", "member": 0, "node": "a", "gpus": [0, 1]},
  {"group": "w", "member": 1, "node": "b", "gpus": [3], "gpuMilli": 250}
])");

TEST(JobAccountingTest, GpusCountSharedOnesByTheirShare) {
  EXPECT_DOUBLE_EQ(PlacementGpus(kTwoWholeOneShared), 2.25);
  EXPECT_DOUBLE_EQ(PlacementGpus(Json::array()), 0);
  EXPECT_DOUBLE_EQ(PlacementGpus(Json()), 0);
}

TEST(JobAccountingTest, EveryBindingIsCountedOnceAcrossReplacementsAndRelease) {
  Json st = Bound(kT0, kTwoWholeOneShared);
  StampStart(st, kT0);
  EXPECT_DOUBLE_EQ(GpuSecondsUsed(st, kT0 + absl::Seconds(100)), 225);
  // Replaced in place at 100 s (a resize to one whole GPU): the old one is counted up to then.
  AccrueOpenBinding(st, kT0 + absl::Seconds(100));
  st["placement"] = Json::parse(R"([{"group": "w", "member": 0, "node": "a", "gpus": [0]}])");
  EXPECT_DOUBLE_EQ(GpuSecondsUsed(st, kT0 + absl::Seconds(150)), 275);
  // Released at 200 s (requeued): closed, and the placement gone.
  ReleasePlacement(st, kT0 + absl::Seconds(200));
  EXPECT_FALSE(st.contains("placement"));
  EXPECT_FALSE(st.contains("accountedTime"));
  EXPECT_DOUBLE_EQ(st["gpuSeconds"].get<double>(), 325);
  EXPECT_DOUBLE_EQ(GpuSecondsUsed(st, kT0 + absl::Seconds(1000)), 325);
  ReleasePlacement(st, kT0 + absl::Seconds(300));  // nothing open: no change
  EXPECT_DOUBLE_EQ(st["gpuSeconds"].get<double>(), 325);
  // Bound again at 400 s, finished at 410 s with the placement kept: counted to completionTime.
  st["placement"] = kTwoWholeOneShared;
  st["scheduledTime"] = Timestamp(kT0 + absl::Seconds(400));
  StampStart(st, kT0 + absl::Seconds(400));
  EXPECT_EQ(st["startTime"], Timestamp(kT0));  // the first binding's
  StampCompletion(st, kT0 + absl::Seconds(410));
  StampCompletion(st, kT0 + absl::Seconds(999));
  EXPECT_EQ(st["completionTime"], Timestamp(kT0 + absl::Seconds(410)));
  EXPECT_DOUBLE_EQ(GpuSecondsUsed(st, kT0 + absl::Seconds(5000)), 325 + 22.5);
}

}  // namespace
}  // namespace tessera::api
