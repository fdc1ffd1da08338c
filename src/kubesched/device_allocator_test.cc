#include "kubesched/device_allocator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "absl/strings/str_cat.h"

namespace tessera::kubesched {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

constexpr char kDriver[] = "gpu.tessera.dev";

Json GpuDevice(int index, int domain, int64_t memory_gib = 80) {
  return {{"name", absl::StrCat("gpu-", index)},
          {"attributes",
           {{"type", {{"string", "gpu"}}},
            {"uuid", {{"string", absl::StrCat("GPU-", index)}}},
            {"index", {{"int", index}}},
            {"nvlinkDomain", {{"int", domain}}}}},
          {"capacity", {{"memory", {{"value", absl::StrCat(memory_gib << 30)}}}}}};
}
Json MigDevice(int gpu, int k) {
  return {{"name", absl::StrCat("gpu-", gpu, "-mig-", k)},
          {"attributes",
           {{"type", {{"string", "mig"}}},
            {"profile", {{"string", "1g.10gb"}}},
            {"uuid", {{"string", absl::StrCat("MIG-", gpu, "-", k)}}},
            {"parentUUID", {{"string", absl::StrCat("GPU-", gpu)}}}}}};
}
Json Slice(Json devices) {
  return {{"spec",
           {{"driver", kDriver},
            {"nodeName", "n1"},
            {"pool", {{"name", "n1"}}},
            {"devices", std::move(devices)}}}};
}

kube::DeviceSelector Sel(const std::string& e) {
  auto s = kube::DeviceSelector::Parse(e);
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}
const char kWholeGpu[] =
    R"(device.driver == "gpu.tessera.dev" && device.attributes["gpu.tessera.dev"].type == "gpu")";
const char kMig[] = R"(device.attributes["gpu.tessera.dev"].type == "mig")";

ClaimSpec Gpus(int64_t count, bool one_island) {
  ClaimSpec c;
  c.requests.push_back({"gpus", {Sel(kWholeGpu)}, false, count});
  if (one_island) c.constraints.push_back({"gpu.tessera.dev/nvlinkDomain", {}});
  return c;
}

std::vector<std::string> Names(const AllocationOutcome& o) {
  std::vector<std::string> out;
  for (const DeviceAllocation& d : o.devices) out.push_back(d.device);
  return out;
}

std::string Id(const std::string& device) { return absl::StrCat(kDriver, "/n1/", device); }

TEST(DeviceAllocatorTest, MatchAttributeKeepsTheClaimInOneIsland) {
  // Two 4-GPU islands; two GPUs of the first are taken.
  Json devs = Json::array();
  for (int i = 0; i < 8; ++i) devs.push_back(GpuDevice(i, i / 4));
  std::vector<SliceDevice> d = DevicesOfSlices({Slice(devs)});
  ASSERT_EQ(d.size(), 8u);
  AllocationOutcome o = AllocateClaim(Gpus(4, true), d, {Id("gpu-0"), Id("gpu-1")});
  ASSERT_TRUE(o.fits) << o.why;
  EXPECT_EQ(Names(o), (std::vector<std::string>{"gpu-4", "gpu-5", "gpu-6", "gpu-7"}));
  // Without the constraint the four free GPUs of island 0 and 1 could be mixed; the chooser still
  // prefers one island.
  o = AllocateClaim(Gpus(4, false), d, {Id("gpu-0"), Id("gpu-1")});
  ASSERT_TRUE(o.fits) << o.why;
  EXPECT_EQ(Names(o), (std::vector<std::string>{"gpu-4", "gpu-5", "gpu-6", "gpu-7"}));
  // Five in one island: no island holds them.
  o = AllocateClaim(Gpus(5, true), d, {});
  EXPECT_FALSE(o.fits);
  EXPECT_THAT(o.why, HasSubstr("no one value of gpu.tessera.dev/nvlinkDomain"));
  // Without the constraint five fit across islands.
  EXPECT_TRUE(AllocateClaim(Gpus(5, false), d, {}).fits);
}

TEST(DeviceAllocatorTest, BestFitIslandLeavesLargerIslandsWhole) {
  // Islands of 2 (gpu-0,1), 4 (gpu-2..5) and 2 (gpu-6,7) GPUs.
  const int domain[] = {0, 0, 1, 1, 1, 1, 2, 2};
  Json devs = Json::array();
  for (int i = 0; i < 8; ++i) devs.push_back(GpuDevice(i, domain[i]));
  std::vector<SliceDevice> d = DevicesOfSlices({Slice(devs)});
  AllocationOutcome o = AllocateClaim(Gpus(2, true), d, {});
  ASSERT_TRUE(o.fits) << o.why;
  EXPECT_EQ(Names(o), (std::vector<std::string>{"gpu-0", "gpu-1"}));
}

TEST(DeviceAllocatorTest, AGpuAndItsMigInstancesExcludeEachOther) {
  Json devs = Json::array({GpuDevice(0, 0), GpuDevice(1, 1), MigDevice(1, 0), MigDevice(1, 1)});
  std::vector<SliceDevice> d = DevicesOfSlices({Slice(devs)});
  // A MIG instance of GPU 1 is allocated: GPU 1 as a whole is not available.
  AllocationOutcome o = AllocateClaim(Gpus(2, false), d, {Id("gpu-1-mig-0")});
  EXPECT_FALSE(o.fits);
  EXPECT_THAT(o.why, HasSubstr("request gpus: 1 free of 2 devices"));
  // The other instance is.
  ClaimSpec mig;
  mig.requests.push_back({"slice", {Sel(kMig)}, false, 1});
  o = AllocateClaim(mig, d, {Id("gpu-1-mig-0")});
  ASSERT_TRUE(o.fits) << o.why;
  EXPECT_EQ(Names(o), (std::vector<std::string>{"gpu-1-mig-1"}));
  // GPU 1 allocated whole: no instance of it is.
  o = AllocateClaim(mig, d, {Id("gpu-1")});
  EXPECT_FALSE(o.fits);
  // Within one claim too: a whole GPU and a slice never share a parent.
  ClaimSpec both = Gpus(2, false);
  both.requests.push_back({"slice", {Sel(kMig)}, false, 1});
  EXPECT_FALSE(AllocateClaim(both, d, {}).fits);
}

// Partitionable devices of another driver, with no uuid/parentUUID: only the shared counters,
// declared in a slice of their own, keep the whole device and its parts apart.
TEST(DeviceAllocatorTest, SharedCountersKeepAWholeDeviceAndItsPartsApart) {
  const std::string driver = "fpga.example.com";
  auto dev = [&](const std::string& name, const std::string& kind, int units) {
    return Json{{"name", name},
                {"attributes", {{"kind", {{"string", kind}}}}},
                {"consumesCounters",
                 Json::array({{{"counterSet", "board-0"},
                               {"counters", {{"units", {{"value", absl::StrCat(units)}}}}}}})}};
  };
  Json devices = Json::array({dev("whole", "whole", 8)});
  for (int i = 0; i < 4; ++i) devices.push_back(dev(absl::StrCat("part-", i), "part", 2));
  auto slice = [&](const char* field, Json items) {
    return Json{{"spec",
                 {{"driver", driver},
                  {"nodeName", "n1"},
                  {"pool", {{"name", "n1"}}},
                  {field, std::move(items)}}}};
  };
  Json counters = Json::array({{{"name", "board-0"}, {"counters", {{"units", {{"value", "8"}}}}}}});
  std::vector<SliceDevice> d =
      DevicesOfSlices({slice("devices", devices), slice("sharedCounters", counters)});
  ASSERT_EQ(d.size(), 5u);
  auto id = [&](const std::string& name) { return absl::StrCat(driver, "/n1/", name); };
  auto claim = [&](const std::string& kind, int64_t count) {
    ClaimSpec c;
    c.requests.push_back(
        {"r",
         {Sel(absl::StrCat(R"(device.attributes["fpga.example.com"].kind == ")", kind, "\""))},
         false,
         count});
    return c;
  };
  // Nothing allocated: the whole board, or all four parts.
  EXPECT_TRUE(AllocateClaim(claim("whole", 1), d, {}).fits);
  EXPECT_TRUE(AllocateClaim(claim("part", 4), d, {}).fits);
  // Within one claim: the board and a part would need 10 of 8 units.
  ClaimSpec both = claim("whole", 1);
  both.requests.push_back(claim("part", 1).requests[0]);
  EXPECT_FALSE(AllocateClaim(both, d, {}).fits);
  // A part allocated elsewhere: the board is not free, three parts are.
  EXPECT_FALSE(AllocateClaim(claim("whole", 1), d, {id("part-2")}).fits);
  AllocationOutcome o = AllocateClaim(claim("part", 3), d, {id("part-2")});
  ASSERT_TRUE(o.fits) << o.why;
  EXPECT_EQ(Names(o), (std::vector<std::string>{"part-0", "part-1", "part-3"}));
  // The board allocated: no part is.
  EXPECT_FALSE(AllocateClaim(claim("part", 1), d, {id("whole")}).fits);
  // A counter set no slice declares holds nothing: what consumes it is never allocated.
  d = DevicesOfSlices({slice("devices", devices)});
  EXPECT_FALSE(AllocateClaim(claim("part", 1), d, {}).fits);
}

TEST(DeviceAllocatorTest, AllModeTakesEveryMatchingDeviceOrNothing) {
  Json devs = Json::array({GpuDevice(0, 0), GpuDevice(1, 0, 40), GpuDevice(2, 1)});
  std::vector<SliceDevice> d = DevicesOfSlices({Slice(devs)});
  ClaimSpec all;
  all.requests.push_back(
      {"big",
       {Sel(kWholeGpu),
        Sel(R"(device.capacity["gpu.tessera.dev"].memory.compareTo(quantity("80Gi")) >= 0)")},
       true,
       0});
  AllocationOutcome o = AllocateClaim(all, d, {});
  ASSERT_TRUE(o.fits) << o.why;
  EXPECT_EQ(Names(o), (std::vector<std::string>{"gpu-0", "gpu-2"}));
  o = AllocateClaim(all, d, {Id("gpu-2")});
  EXPECT_FALSE(o.fits);
  EXPECT_THAT(o.why, HasSubstr("1 of 2 matching devices are in use"));
}

TEST(DeviceAllocatorTest, SelectorErrorsAreReportedWhenNothingFits) {
  Json devs = Json::array({MigDevice(0, 0)});
  ClaimSpec c;
  c.requests.push_back(
      {"g", {Sel(R"(device.attributes["gpu.tessera.dev"].nvlinkDomain == 0)")}, false, 1});
  AllocationOutcome o = AllocateClaim(c, DevicesOfSlices({Slice(devs)}), {});
  EXPECT_FALSE(o.fits);
  EXPECT_THAT(o.why, HasSubstr("no such key: nvlinkDomain"));
}

// Property: whatever the node and claim, an allocation is valid: each device once, none of the
// allocated ones, no GPU with its own MIG instance, every device selected by its request,
// ExactCount honoured, and one value of a matchAttribute's attribute.
TEST(DeviceAllocatorTest, EveryAllocationIsValid) {
  std::mt19937 rng(11);
  for (int round = 0; round < 300; ++round) {
    Json devs = Json::array();
    const int gpus = 1 + static_cast<int>(rng() % 8);
    for (int i = 0; i < gpus; ++i) {
      devs.push_back(GpuDevice(i, static_cast<int>(rng() % 3), rng() % 2 ? 80 : 40));
      if (rng() % 3 == 0) {
        for (int k = 0; k < 2; ++k) devs.push_back(MigDevice(i, k));
      }
    }
    std::vector<SliceDevice> d = DevicesOfSlices({Slice(devs)});
    std::set<std::string> allocated;
    for (const SliceDevice& x : d) {
      if (rng() % 4 == 0) allocated.insert(x.Id());
    }
    ClaimSpec c = Gpus(1 + static_cast<int64_t>(rng() % 4), rng() % 2);
    if (rng() % 2) c.requests.push_back({"slice", {Sel(kMig)}, false, 1});
    AllocationOutcome o = AllocateClaim(c, d, allocated);
    if (!o.fits) {
      EXPECT_FALSE(o.why.empty());
      continue;
    }
    std::set<std::string> seen, whole, parents;
    std::map<std::string, int64_t> per_request;
    std::set<int64_t> domains;
    for (const DeviceAllocation& a : o.devices) {
      const std::string id = absl::StrCat(a.driver, "/", a.pool, "/", a.device);
      ASSERT_TRUE(seen.insert(id).second) << "twice: " << id;
      ASSERT_FALSE(allocated.contains(id)) << id;
      const SliceDevice& x =
          *std::find_if(d.begin(), d.end(), [&](const SliceDevice& y) { return y.Id() == id; });
      if (x.parent_uuid.empty()) {
        whole.insert(x.uuid);
        domains.insert(*x.nvlink_domain);
      } else {
        parents.insert(x.parent_uuid);
      }
      ++per_request[a.request];
      const DeviceRequestSpec& r =
          *std::find_if(c.requests.begin(), c.requests.end(),
                        [&](const DeviceRequestSpec& q) { return q.name == a.request; });
      for (const kube::DeviceSelector& s : r.selectors) ASSERT_TRUE(*s.Matches(x.cel));
    }
    for (const std::string& u : whole) ASSERT_FALSE(parents.contains(u)) << u;
    for (const SliceDevice& x : d) {
      if (!allocated.contains(x.Id())) continue;
      const bool conflicts = x.parent_uuid.empty()
                                 ? parents.contains(x.uuid) || whole.contains(x.uuid)
                                 : whole.contains(x.parent_uuid);
      ASSERT_FALSE(conflicts) << x.Id() << " is allocated already";
    }
    for (const DeviceRequestSpec& r : c.requests) ASSERT_EQ(per_request[r.name], r.count);
    if (!c.constraints.empty()) {
      ASSERT_EQ(domains.size(), 1u);
    }
  }
}

}  // namespace
}  // namespace tessera::kubesched
