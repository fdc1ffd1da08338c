#include "api/checkpoints.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace tessera::api {
namespace {

using Json = nlohmann::json;

Json Ckpt(const std::string& name, const std::string& job, int64_t step, const std::string& phase,
          const std::string& created = "2026-01-01T00:00:00Z") {
  return {{"metadata", {{"name", name}, {"creationTimestamp", created}}},
          {"spec", {{"jobName", job}, {"step", step}, {"path", "/ckpt/" + name}}},
          {"status", {{"phase", phase}}}};
}

std::vector<const Json*> Ptrs(const std::vector<Json>& v) {
  std::vector<const Json*> out;
  for (const Json& j : v) out.push_back(&j);
  return out;
}

TEST(CheckpointsTest, NewestReadyIsTheHighestStepOfTheJobThatIsReady) {
  const std::vector<Json> cps = {
      Ckpt("a-10", "a", 10, "Ready"),  Ckpt("a-30", "a", 30, "Writing"),
      Ckpt("a-20", "a", 20, "Ready"),  Ckpt("b-99", "b", 99, "Ready"),
      Ckpt("a-25", "a", 25, "Failed"),
  };
  std::optional<CheckpointRef> r = NewestReadyCheckpoint("a", Ptrs(cps));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->name, "a-20");
  EXPECT_EQ(r->step, 20);
  EXPECT_EQ(r->path, "/ckpt/a-20");
  EXPECT_EQ(ResumePointJson(*r), Json::parse(R"({"checkpoint": "a-20", "step": 20,
                                                 "path": "/ckpt/a-20"})"));
  EXPECT_FALSE(NewestReadyCheckpoint("c", Ptrs(cps)).has_value());
  EXPECT_FALSE(NewestReadyCheckpoint("a", {}).has_value());
}

TEST(CheckpointsTest, TiesGoToTheNewerCreationThenTheName) {
  const std::vector<Json> cps = {
      Ckpt("x", "a", 5, "Ready", "2026-01-01T00:00:01Z"),
      Ckpt("y", "a", 5, "Ready", "2026-01-01T00:00:02Z"),
      Ckpt("z", "a", 5, "Ready", "2026-01-01T00:00:00Z"),
  };
  EXPECT_EQ(NewestReadyCheckpoint("a", Ptrs(cps))->name, "y");
  const std::vector<Json> same_time = {Ckpt("p", "a", 5, "Ready"), Ckpt("q", "a", 5, "Ready")};
  EXPECT_EQ(NewestReadyCheckpoint("a", Ptrs(same_time))->name, "q");
}

TEST(CheckpointsTest, MalformedAndDeletingObjectsAreIgnored) {
  Json deleting = Ckpt("a-50", "a", 50, "Ready");
  deleting["metadata"]["deletionTimestamp"] = "2026-01-02T00:00:00Z";
  Json no_step = Ckpt("a-60", "a", 60, "Ready");
  no_step["spec"].erase("step");
  Json string_step = Ckpt("a-70", "a", 70, "Ready");
  string_step["spec"]["step"] = "70";
  const std::vector<Json> cps = {deleting,
                                 no_step,
                                 string_step,
                                 Json(),
                                 Json::array(),
                                 Json::object(),
                                 Ckpt("a-1", "a", 1, "Ready")};
  std::vector<const Json*> ptrs = Ptrs(cps);
  ptrs.push_back(nullptr);
  EXPECT_EQ(NewestReadyCheckpoint("a", ptrs)->name, "a-1");
  EXPECT_TRUE(CheckpointsBeyondRetention("a", ptrs, 1).empty());
}

TEST(CheckpointsTest, RetentionKeepsTheNewestReadyAndThoseStillBeingWritten) {
  const std::vector<Json> cps = {
      Ckpt("a-10", "a", 10, "Ready"),   Ckpt("a-20", "a", 20, "Ready"),
      Ckpt("a-30", "a", 30, "Ready"),   Ckpt("a-15", "a", 15, "Failed"),
      Ckpt("a-40", "a", 40, "Writing"), Ckpt("a-5", "a", 5, "Pending"),
      Ckpt("b-1", "b", 1, "Ready"),
  };
  EXPECT_EQ(CheckpointsBeyondRetention("a", Ptrs(cps), 1),
            (std::vector<std::string>{"a-10", "a-15", "a-20", "a-5"}));
  EXPECT_EQ(CheckpointsBeyondRetention("a", Ptrs(cps), 2),
            (std::vector<std::string>{"a-10", "a-15", "a-5"}));
  EXPECT_EQ(CheckpointsBeyondRetention("a", Ptrs(cps), 3),
            (std::vector<std::string>{"a-15", "a-5"}));
  EXPECT_TRUE(CheckpointsBeyondRetention("a", Ptrs(cps), 0).empty());
  EXPECT_TRUE(CheckpointsBeyondRetention("a", Ptrs(cps), -3).empty());
  // No Ready one yet: everything may still be in progress.
  const std::vector<Json> none_ready = {Ckpt("c-1", "c", 1, "Writing"),
                                        Ckpt("c-2", "c", 2, "Failed")};
  EXPECT_TRUE(CheckpointsBeyondRetention("c", Ptrs(none_ready), 1).empty());
}

TEST(CheckpointsTest, KeepIsReadFromTheJobSpec) {
  EXPECT_EQ(CheckpointKeep(Json::parse(R"({"checkpoint": {"keep": 3}})")), 3);
  EXPECT_EQ(CheckpointKeep(Json::parse(R"({"checkpoint": {"path": "/x"}})")), 0);
  EXPECT_EQ(CheckpointKeep(Json::parse(R"({"checkpoint": {"keep": "3"}})")), 0);
  EXPECT_EQ(CheckpointKeep(Json::parse(R"({"checkpoint": {"keep": -1}})")), 0);
  EXPECT_EQ(CheckpointKeep(Json()), 0);
}

// Properties over random sets: the answer does not depend on the input's order; retention never
// names the resume point nor anything newer than it, keeps exactly min(keep, Ready) Ready ones,
// and the resume point is unchanged by applying it.
TEST(CheckpointsTest, RetentionPropertiesOverRandomSets) {
  std::mt19937_64 rng(20);
  const char* phases[] = {"Ready", "Ready", "Writing", "Failed", "Pending"};
  for (int round = 0; round < 300; ++round) {
    std::vector<Json> cps;
    const int n = static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) {
      const int64_t step = static_cast<int64_t>(rng() % 8);
      cps.push_back(Ckpt("c" + std::to_string(i), rng() % 4 == 0 ? "other" : "j", step,
                         phases[rng() % 5],
                         "2026-01-01T00:00:0" + std::to_string(rng() % 3) + "Z"));
    }
    const int keep = static_cast<int>(rng() % 4);
    std::vector<const Json*> ptrs = Ptrs(cps);
    const std::optional<CheckpointRef> newest = NewestReadyCheckpoint("j", ptrs);
    const std::vector<std::string> del = CheckpointsBeyondRetention("j", ptrs, keep);
    std::shuffle(ptrs.begin(), ptrs.end(), rng);
    ASSERT_EQ(NewestReadyCheckpoint("j", ptrs).has_value(), newest.has_value());
    if (newest) {
      EXPECT_EQ(NewestReadyCheckpoint("j", ptrs)->name, newest->name);
    }
    ASSERT_EQ(CheckpointsBeyondRetention("j", ptrs, keep), del);
    ASSERT_TRUE(std::is_sorted(del.begin(), del.end()));
    if (keep <= 0 || !newest) {
      EXPECT_TRUE(del.empty());
      continue;
    }
    int ready = 0, ready_left = 0;
    std::vector<const Json*> left;
    for (const Json& c : cps) {
      const std::string name = c["metadata"]["name"];
      const bool deleted = std::binary_search(del.begin(), del.end(), name);
      if (deleted) {
        EXPECT_EQ(c["spec"]["jobName"], "j") << name;
        EXPECT_NE(name, newest->name);
        EXPECT_LE(c["spec"]["step"].get<int64_t>(), newest->step) << name;
      } else {
        left.push_back(&c);
      }
      if (c["spec"]["jobName"] == "j" && c["status"]["phase"] == "Ready") {
        ++ready;
        if (!deleted) ++ready_left;
      }
    }
    EXPECT_EQ(ready_left, std::min(ready, keep));
    EXPECT_EQ(NewestReadyCheckpoint("j", left)->name, newest->name);
    EXPECT_TRUE(CheckpointsBeyondRetention("j", left, keep).empty()) << "not idempotent";
  }
}

}  // namespace
}  // namespace tessera::api
