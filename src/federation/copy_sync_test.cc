// What the hub's copy carries and when a change in the hub is pushed to it.
#include "federation/copy_sync.h"

#include <gtest/gtest.h>

namespace tessera::federation {
namespace {

Json HubJob() {
  return {{"apiVersion", "tessera.dev/v1"},
          {"kind", "TrainingJob"},
          {"metadata",
           {{"name", "j"},
            {"namespace", "ml"},
            {"uid", "u-1"},
            {"resourceVersion", "42"},
            {"creationTimestamp", "2026-01-01T00:00:00Z"},
            {"labels", {{"team", "a"}}},
            {"annotations", {{"note", "x"}}}}},
          {"spec", {{"priority", 1}, {"groups", {{{"name", "w"}, {"count", 1}}}}}},
          {"status", {{"phase", "Dispatched"}, {"cluster", "east"}}}};
}

TEST(CopySyncTest, CopyCarriesTheHubsIdentityAndADigestButNoStatusOrServerFields) {
  const Json c = CopyOf(HubJob(), "hub", "u-1");
  EXPECT_EQ(c["metadata"]["labels"]["team"], "a");
  EXPECT_EQ(c["metadata"]["labels"][kHubLabel], "hub");
  EXPECT_EQ(c["metadata"]["annotations"]["note"], "x");
  EXPECT_EQ(OriginOf(c), "u-1");
  EXPECT_EQ(SpecHashOf(c).size(), 16u);
  EXPECT_FALSE(c.contains("status"));
  EXPECT_FALSE(c["metadata"].contains("uid"));
  EXPECT_FALSE(c["metadata"].contains("resourceVersion"));
  EXPECT_FALSE(c["metadata"].contains("creationTimestamp"));
  EXPECT_EQ(c["spec"], HubJob()["spec"]);
}

TEST(CopySyncTest, DigestFollowsSpecAndMetadataNotStatusOrRevision) {
  const std::string h = SpecHashOf(CopyOf(HubJob(), "hub", "u-1"));
  Json j = HubJob();
  j["status"]["phase"] = "Running";  // the mirror's writes
  j["metadata"]["resourceVersion"] = "43";
  EXPECT_EQ(SpecHashOf(CopyOf(j, "hub", "u-1")), h);
  for (auto edit : {+[](Json& o) { o["spec"]["priority"] = 2; },
                    +[](Json& o) { o["metadata"]["labels"]["team"] = "b"; },
                    +[](Json& o) { o["metadata"]["annotations"].erase("note"); }}) {
    Json e = HubJob();
    edit(e);
    EXPECT_NE(SpecHashOf(CopyOf(e, "hub", "u-1")), h) << e.dump();
  }
  // The digest annotation of an older copy does not feed into the new one.
  Json e = HubJob();
  e["metadata"]["annotations"][kSpecHashAnnotation] = "stale";
  EXPECT_EQ(SpecHashOf(CopyOf(e, "hub", "u-1")), h);
}

TEST(CopySyncTest, PushesOncePerChangeAndNotARefusedChangeAgain) {
  Json j = HubJob();
  const Json copy = CopyOf(j, "hub", "u-1");  // the member's copy, as created
  Json want = CopyOf(j, "hub", "u-1");
  EXPECT_FALSE(PlanSync(want, copy, j["status"]).push);

  j["spec"]["priority"] = 5;
  want = CopyOf(j, "hub", "u-1");
  EXPECT_TRUE(PlanSync(want, copy, j["status"]).push);
  // Refused: not again for this version...
  j["status"]["specSync"] = {{"hash", SpecHashOf(want)}, {"state", "Refused"}};
  EXPECT_FALSE(PlanSync(want, copy, j["status"]).push);
  // ...but for the next change.
  j["metadata"]["annotations"]["retry"] = "1";
  Json next = CopyOf(j, "hub", "u-1");
  EXPECT_TRUE(PlanSync(next, copy, j["status"]).push);
  // A copy pushed earlier (Synced record of the same version): nothing to do.
  Json status = {{"specSync", {{"hash", SpecHashOf(next)}, {"state", "Synced"}}}};
  SyncPlan p = PlanSync(next, next, status);
  EXPECT_FALSE(p.push);
  EXPECT_FALSE(p.clear_record);
  // Reverted to what the copy has: in step, the refusal record is stale.
  p = PlanSync(copy, copy, j["status"]);
  EXPECT_FALSE(p.push);
  EXPECT_TRUE(p.clear_record);
  // A copy created before digests: pushed once.
  Json old = copy;
  old["metadata"]["annotations"].erase(kSpecHashAnnotation);
  EXPECT_TRUE(PlanSync(CopyOf(HubJob(), "hub", "u-1"), old, Json()).push);
}

TEST(CopySyncTest, ChangedFieldsAndWhatABoundCopyDefers) {
  Json j = HubJob();
  const Json copy = CopyOf(j, "hub", "u-1");
  EXPECT_TRUE(ChangedFields(copy, CopyOf(j, "hub", "u-1")).empty());
  j["spec"]["priority"] = 3;
  j["spec"]["suspend"] = true;
  j["spec"].erase("groups");
  j["metadata"]["annotations"]["a"] = "b";
  const std::vector<std::string> changed = ChangedFields(copy, CopyOf(j, "hub", "u-1"));
  EXPECT_EQ(changed, (std::vector<std::string>{"metadata.annotations", "spec.groups",
                                               "spec.priority", "spec.suspend"}));
  EXPECT_EQ(DeferredWhileBound(changed),
            (std::vector<std::string>{"spec.groups", "spec.priority"}));
  EXPECT_TRUE(DeferredWhileBound({"metadata.labels", "spec.suspend"}).empty());
}

}  // namespace
}  // namespace tessera::federation
