#include "kubesched/claims.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "kubesched/dra_view.h"

namespace tessera::kubesched {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

Json Device(int index, int domain) {
  return {{"name", absl::StrCat("gpu-", index)},
          {"attributes",
           {{"type", {{"string", "gpu"}}},
            {"index", {{"int", index}}},
            {"productName", {{"string", "NVIDIA H100 80GB HBM3"}}},
            {"nvlinkDomain", {{"int", domain}}}}},
          {"capacity", {{"memory", {{"value", "80Gi"}}}}}};
}
Json Slice(Json devices) {
  return {{"spec",
           {{"driver", kDraDriver},
            {"nodeName", "n1"},
            {"pool", {{"name", "n1"}}},
            {"devices", std::move(devices)}}}};
}
std::map<std::string, Json> Classes() {
  return {{"gpu",
           {{"spec",
             {{"selectors",
               Json::array({{{"cel",
                              {{"expression",
                                R"(device.attributes["gpu.tessera.dev"].type == "gpu")"}}}}})}}}}}};
}
Json ClaimJson(int count, const std::string& cls = "gpu", const std::string& mode = "ExactCount") {
  return {
      {"metadata", {{"name", "c"}, {"uid", "u"}}},
      {"spec",
       {{"devices",
         {{"requests",
           Json::array(
               {{{"name", "gpus"},
                 {"exactly",
                  {{"deviceClassName", cls}, {"allocationMode", mode}, {"count", count}}}}})},
          {"constraints", Json::array({{{"requests", Json::array({"gpus"})},
                                        {"matchAttribute", "gpu.tessera.dev/nvlinkDomain"}}})}}}}}};
}

TEST(ClaimsTest, SliceGpusAreTheNodesGpusWithIslandsAndGapsUnhealthy) {
  // GPU 2 left the slice (unhealthy).
  std::vector<SliceDevice> d =
      DevicesOfSlices({Slice(Json::array({Device(0, 0), Device(1, 0), Device(3, 1)}))});
  std::vector<int> domains;
  std::vector<model::Gpu> gpus = SliceGpus(d, "n1", &domains);
  ASSERT_EQ(gpus.size(), 4u);
  EXPECT_EQ(domains, (std::vector<int>{0, 0, -1, 1}));
  EXPECT_EQ(gpus[0].model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(gpus[0].memory_mib, 80 * 1024);
  EXPECT_EQ(gpus[2].health, model::GpuHealth::kUnhealthy);
  EXPECT_EQ(gpus[2].model, gpus[0].model);  // a node's GPUs are one model
  EXPECT_EQ(gpus[2].memory_mib, gpus[0].memory_mib);
  EXPECT_EQ(gpus[3].health, model::GpuHealth::kHealthy);
}

TEST(ClaimsTest, ClaimOfReadsRequestsAndConstraintsAndNamesWhatItCannotPlace) {
  absl::StatusOr<PlacedClaim> c = ClaimOf(ClaimJson(4), Classes());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->gpus, 4);
  ASSERT_EQ(c->spec.constraints.size(), 1u);
  EXPECT_EQ(c->spec.constraints[0].attribute, "gpu.tessera.dev/nvlinkDomain");
  EXPECT_THAT(ClaimOf(ClaimJson(1, "nope"), Classes()).status().message(),
              HasSubstr("spec.devices.requests[0].exactly.deviceClassName: no DeviceClass"));
  absl::StatusOr<PlacedClaim> all = ClaimOf(ClaimJson(1, "gpu", "All"), Classes());
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_TRUE(all->spec.requests[0].all);
  EXPECT_EQ(all->gpus, 0);  // a node's count, known where it goes
  EXPECT_THAT(ClaimOf(ClaimJson(1, "gpu", "Some"), Classes()).status().message(),
              HasSubstr("allocationMode: Some is not ExactCount or All"));
}

Json Mig(int parent, int k, const std::string& profile) {
  return {{"name", absl::StrCat("gpu-", parent, "-mig-", k)},
          {"attributes",
           {{"type", {{"string", "mig"}}},
            {"index", {{"int", parent}}},
            {"profile", {{"string", profile}}},
            {"uuid", {{"string", absl::StrCat("MIG-", parent, "-", k)}}},
            {"parentUUID", {{"string", absl::StrCat("GPU-", parent)}}},
            {"nvlinkDomain", {{"int", parent}}}}}};
}
std::map<std::string, Json> MigClasses() {
  std::map<std::string, Json> c = Classes();
  c["mig-1g"] = {
      {"spec",
       {{"selectors",
         Json::array(
             {{{"cel", {{"expression", R"(device.attributes["gpu.tessera.dev"].type == "mig" &&
device.attributes["gpu.tessera.dev"].profile == "1g.10gb")"}}}}})}}}};
  c["any"] = {{"spec", Json::object()}};
  return c;
}
Json MigClaim(int count, const std::string& cls = "mig-1g") {
  return {{"metadata", {{"name", "m"}, {"uid", "mu"}}},
          {"spec",
           {{"devices",
             {{"requests",
               Json::array({{{"name", "slices"},
                             {"exactly", {{"deviceClassName", cls}, {"count", count}}}}})}}}}}};
}

// A node whose GPU 0 is whole and GPU 1 in MIG mode, published as its instances only: two
// 1g.10gb and a 3g.40gb.
std::vector<SliceDevice> MigNodeDevices() {
  return DevicesOfSlices({Slice(Json::array(
      {Device(0, 0), Mig(1, 0, "1g.10gb"), Mig(1, 1, "1g.10gb"), Mig(1, 2, "3g.40gb")}))});
}

// The claim's first alternative classified and chosen, as PlaceClaims does.
absl::Status Classify(const std::vector<SliceDevice>& cluster, PlacedClaim* claim) {
  absl::StatusOr<ClaimKind> kind = KindOf(cluster, claim->alternatives[0], claim->name);
  if (!kind.ok()) return kind.status();
  claim->Choose(0, *kind);
  return absl::OkStatus();
}

TEST(ClaimsTest, AClaimTakesWholeGpusOrOtherDevicesByWhatItsSelectorsMatch) {
  std::vector<SliceDevice> d = MigNodeDevices();
  absl::StatusOr<PlacedClaim> gpus = ClaimOf(ClaimJson(1), MigClasses());
  ASSERT_TRUE(gpus.ok());
  ASSERT_TRUE(Classify(d, &*gpus).ok());
  EXPECT_EQ(gpus->kind, ClaimKind::kGpus);
  EXPECT_EQ(gpus->gpus, 1);
  absl::StatusOr<PlacedClaim> mig = ClaimOf(MigClaim(2), MigClasses());
  ASSERT_TRUE(mig.ok()) << mig.status();
  ASSERT_TRUE(Classify(d, &*mig).ok());
  EXPECT_EQ(mig->kind, ClaimKind::kDevices);
  EXPECT_EQ(mig->gpus, 0);  // the core places no GPU for it
  // A request whose selectors match a whole GPU takes whole GPUs (the core counts them).
  absl::StatusOr<PlacedClaim> any = ClaimOf(MigClaim(1, "any"), MigClasses());
  ASSERT_TRUE(any.ok());
  ASSERT_TRUE(Classify(d, &*any).ok());
  EXPECT_EQ(any->kind, ClaimKind::kGpus);
  // Whole GPUs and MIG instances in one claim: named, not placed.
  Json mixed = MigClaim(1);
  mixed["spec"]["devices"]["requests"].push_back(
      {{"name", "whole"}, {"exactly", {{"deviceClassName", "gpu"}}}});
  absl::StatusOr<PlacedClaim> m = ClaimOf(mixed, MigClasses());
  ASSERT_TRUE(m.ok());
  absl::Status s = Classify(d, &*m);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("whole GPUs (request whole) and other devices (request "
                                     "slices)"));
  // Nothing published matches yet: it waits.
  EXPECT_EQ(Classify({d[0]}, &*mig).code(), absl::StatusCode::kUnavailable);
}

TEST(ClaimsTest, OtherDevicesComeFromWhatIsFreeAndNeverTwice) {
  std::vector<SliceDevice> d = MigNodeDevices();
  absl::StatusOr<PlacedClaim> mig = ClaimOf(MigClaim(1), MigClasses());
  ASSERT_TRUE(mig.ok());
  ASSERT_TRUE(Classify(d, &*mig).ok());
  std::set<std::string> allocated = {d[1].Id()};  // another claim holds gpu-1-mig-0
  std::string why;
  auto first = ClaimShares({*mig}, {}, d, &allocated, &why);
  ASSERT_TRUE(first.has_value()) << why;
  ASSERT_EQ((*first)[0].size(), 1u);
  EXPECT_EQ((*first)[0][0].device, "gpu-1-mig-1");
  EXPECT_TRUE(allocated.contains(d[2].Id()));
  // Both 1g slices are held now: the next claim for one is refused, saying so.
  EXPECT_FALSE(ClaimShares({*mig}, {}, d, &allocated, &why).has_value());
  EXPECT_THAT(why, HasSubstr("the node's free devices do not satisfy it"));
  // The allocation's device ids, as AllocatedDevices reads them back from the claim.
  Json claim = {{"status", AllocationStatus((*first)[0], "n1", "p", "pu")}};
  EXPECT_EQ(AllocatedDeviceIds(claim), std::vector<std::string>{d[2].Id()});
}

// The class's opaque config (FromClass, naming the request) then the claim's (FromClaim), copied
// into the allocation as kube-scheduler copies them, for the driver to apply.
TEST(ClaimsTest, ClassAndClaimConfigGoIntoTheAllocation) {
  std::map<std::string, Json> classes = Classes();
  classes["gpu"]["spec"]["config"] = Json::array(
      {{{"opaque", {{"driver", kDraDriver}, {"parameters", {{"env", {{"A", "1"}}}}}}}}});
  Json claim = ClaimJson(1);
  claim["spec"]["devices"]["config"] = Json::array(
      {{{"requests", Json::array({"gpus"})},
        {"opaque", {{"driver", kDraDriver}, {"parameters", {{"env", {{"A", "2"}}}}}}}}});
  absl::StatusOr<PlacedClaim> c = ClaimOf(claim, classes);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->config.size(), 2u);
  EXPECT_EQ(c->config[0]["source"], "FromClass");
  EXPECT_EQ(c->config[0]["requests"], Json::array({"gpus"}));
  EXPECT_EQ(c->config[1]["source"], "FromClaim");
  EXPECT_EQ(c->config[1]["opaque"]["parameters"]["env"]["A"], "2");
  Json st = AllocationStatus({{"gpus", kDraDriver, "n1", "gpu-0"}}, "n1", "p", "pu", c->config);
  EXPECT_EQ(st["allocation"]["devices"]["config"], c->config);
}

// firstAvailable: the alternatives in order of preference, results named "<request>/<sub>", a
// constraint on the request applying to whichever subrequest is chosen.
TEST(ClaimsTest, FirstAvailableGivesTheAlternativesInOrder) {
  std::map<std::string, Json> classes = MigClasses();
  Json claim = {
      {"metadata", {{"name", "fa"}, {"uid", "u"}}},
      {"spec",
       {{"devices",
         {{"requests",
           Json::array({{{"name", "gpus"},
                         {"firstAvailable",
                          Json::array({{{"name", "four"}, {"deviceClassName", "gpu"}, {"count", 4}},
                                       {{"name", "slice"}, {"deviceClassName", "mig-1g"}}})}}})},
          {"constraints", Json::array({{{"requests", Json::array({"gpus"})},
                                        {"matchAttribute", "gpu.tessera.dev/nvlinkDomain"}}})}}}}}};
  absl::StatusOr<PlacedClaim> c = ClaimOf(claim, classes);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->alternatives.size(), 2u);
  EXPECT_EQ(c->alternatives[0].requests[0].name, "gpus/four");
  EXPECT_EQ(c->alternatives[0].requests[0].count, 4);
  EXPECT_EQ(c->alternatives[1].requests[0].name, "gpus/slice");
  ASSERT_EQ(c->alternatives[1].constraints.size(), 1u);
  EXPECT_EQ(c->alternatives[1].constraints[0].requests, std::vector<std::string>{"gpus/slice"});
  EXPECT_EQ(c->spec.requests[0].name, "gpus/four");  // the first until placed
  EXPECT_EQ(c->gpus, 4);
  // A node with one whole GPU and MIG slices: the first alternative does not fit there, the
  // second does; chosen, it takes no GPU of the core.
  std::vector<SliceDevice> d =
      DevicesOfSlices({Slice(Json::array({Device(0, 0), Mig(1, 0, "1g.10gb")}))});
  EXPECT_EQ(*KindOf(d, c->alternatives[0], "fa"), ClaimKind::kGpus);
  EXPECT_EQ(*KindOf(d, c->alternatives[1], "fa"), ClaimKind::kDevices);
  EXPECT_FALSE(AllocateClaim(c->alternatives[0], d, {}).fits);
  AllocationOutcome o = AllocateClaim(c->alternatives[1], d, {});
  ASSERT_TRUE(o.fits) << o.why;
  EXPECT_EQ(o.devices[0].request, "gpus/slice");
  c->Choose(1, ClaimKind::kDevices);
  EXPECT_EQ(c->spec.requests[0].name, "gpus/slice");
  EXPECT_EQ(c->gpus, 0);
  // Neither exactly nor firstAvailable: named.
  claim["spec"]["devices"]["requests"][0] = {{"name", "x"}, {"firstAvailable", Json::array()}};
  EXPECT_THAT(ClaimOf(claim, classes).status().message(),
              HasSubstr("spec.devices.requests[0]: needs `exactly` or a non-empty "
                        "`firstAvailable`"));
}

TEST(ClaimsTest, ClaimSharesSplitTheChosenGpusOrSayWhyNot) {
  std::vector<SliceDevice> d = DevicesOfSlices(
      {Slice(Json::array({Device(0, 0), Device(1, 0), Device(2, 1), Device(3, 1)}))});
  absl::StatusOr<PlacedClaim> two = ClaimOf(ClaimJson(2), Classes());
  ASSERT_TRUE(two.ok());
  std::string why;
  std::set<std::string> allocated;
  auto shares = ClaimShares({*two, *two}, d, d, &allocated, &why);
  ASSERT_TRUE(shares.has_value()) << why;
  ASSERT_EQ(shares->size(), 2u);
  EXPECT_EQ((*shares)[0].size(), 2u);
  // Chosen across islands: a one-island claim of 2 out of {0, 2} cannot be satisfied.
  std::vector<SliceDevice> split = {d[0], d[2]};
  EXPECT_FALSE(ClaimShares({*two}, split, d, &allocated, &why).has_value());
  EXPECT_TRUE(allocated.empty());  // whole GPUs are the core's to count
  EXPECT_THAT(why, HasSubstr("the GPUs chosen do not satisfy it"));
  Json st = AllocationStatus((*shares)[0], "n1", "p", "pu");
  EXPECT_EQ(st["reservedFor"][0]["uid"], "pu");
  EXPECT_FALSE(st["allocation"]["devices"].contains("config"));
  EXPECT_EQ(st["allocation"]["devices"]["results"].size(), 2u);
  Json claim = {{"status", st}};
  EXPECT_EQ(AllocatedDeviceIds(claim).size(), 2u);
}

}  // namespace
}  // namespace tessera::kubesched

namespace tessera::kubesched {
namespace {

TEST(DraViewTest, ShowsEachGpuWithItsIslandClaimAndTheUnhealthyGap) {
  Json slice = Slice(Json::array({Device(0, 0), Device(1, 0), Device(3, 1)}));
  slice["spec"]["pool"]["name"] = "n1";
  Json claim = {{"metadata", {{"namespace", "team-a"}, {"name", "c"}}},
                {"status",
                 {{"allocation",
                   {{"devices",
                     {{"results", Json::array({{{"request", "gpus"},
                                                {"driver", kDraDriver},
                                                {"pool", "n1"},
                                                {"device", "gpu-1"}}})}}}}},
                  {"reservedFor", Json::array({{{"name", "p"}}})}}}};
  const std::string out = RenderDraView({slice}, {claim}, "");
  EXPECT_THAT(out, HasSubstr("gpu-1"));
  EXPECT_THAT(out, HasSubstr("team-a/c (p)"));
  EXPECT_THAT(out, HasSubstr("(not in the slice: unhealthy)"));
  EXPECT_THAT(out, HasSubstr("80Gi"));
  EXPECT_THAT(RenderDraView({slice}, {claim}, "other"),
              HasSubstr("no ResourceSlices of node other"));
}

}  // namespace
}  // namespace tessera::kubesched
