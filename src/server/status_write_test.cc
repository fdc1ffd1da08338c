// Status ownership through the real API (server/status_write.h): creates and updates ignore
// the status they carry, the server records who submitted a job, users may only cancel, nodes
// report only on their own members, admins may end a job but not place it.
#include "server/status_write.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "server/testing/api_server_fixture.h"

namespace tessera::server {
namespace {

using Json = nlohmann::json;
using testing::ApiServerTest;
using ::testing::HasSubstr;
using testing::Job;
using testing::kAdmin;
using testing::kJobs;
using testing::kNode1;
using testing::kTeamA;
using testing::kTeamB;
using testing::Node;
using testing::Resp;

class StatusOwnershipTest : public ApiServerTest {
 protected:
  // Binds job `name` to `node` at `generation` as the controller does: straight in the store.
  void Bind(const std::string& name, const std::string& node, int64_t generation = 1) {
    const std::string key = absl::StrCat("/registry/trainingjobs/team-a/", name);
    absl::StatusOr<store::KeyValue> kv = store_->Get(key);
    ASSERT_TRUE(kv.ok()) << kv.status();
    Json obj = Json::parse(kv->value);
    obj["status"] = {{"phase", "Scheduled"},
                     {"generation", generation},
                     {"placement",
                      {{{"group", "workers"},
                        {"member", 0},
                        {"node", node},
                        {"gpus", {0}},
                        {"generation", generation}},
                       {{"group", "workers"},
                        {"member", 1},
                        {"node", "gpu-02"},
                        {"gpus", {0}},
                        {"generation", generation}}}}};
    ASSERT_TRUE(store_->Put(key, obj.dump(), kv->mod_revision).ok());
  }
  static Json Report(const std::string& member, int64_t generation, const std::string& state,
                     int exit_code = 0) {
    Json e = {{"member", member}, {"generation", generation}, {"state", state}};
    if (state == "Exited" || state == "Failed") e["exitCode"] = exit_code;
    return e;
  }
  std::string JobPath(const std::string& name) { return absl::StrCat(kJobs, "/", name); }
};

TEST_F(StatusOwnershipTest, CreatesAndUpdatesIgnoreTheStatusTheyCarry) {
  // A user who writes a placement of their own on create gets a job that waits like any other.
  Json forged = Job("forged");
  forged["status"] = {
      {"phase", "Scheduled"},
      {"generation", 1},
      {"placement", {{{"group", "workers"}, {"member", 0}, {"node", "gpu-01"}, {"gpus", {0, 1}}}}}};
  Resp c = Do("POST", kJobs, forged, kTeamA);
  ASSERT_EQ(c.status, 201) << c.body.dump();
  EXPECT_EQ(c.body["status"], Json({{"phase", "Pending"}}));
  // ... and on update, and in a batch.
  c.body["status"] = forged["status"];
  ASSERT_EQ(Do("PUT", JobPath("forged"), c.body, kTeamA).status, 200);
  EXPECT_EQ(Do("GET", JobPath("forged")).body["status"], Json({{"phase", "Pending"}}));
  Json batched = Job("batched");
  batched["metadata"]["namespace"] = "team-a";
  batched["status"] = forged["status"];
  ASSERT_EQ(Do("POST", "/api/v1/batch", {{"items", {batched}}}, kTeamA).status, 201);
  EXPECT_EQ(Do("GET", JobPath("batched")).body["status"], Json({{"phase", "Pending"}}));
  // A status the schema would refuse does not matter either: it is dropped, not validated.
  Json odd = Job("odd");
  odd["status"] = {{"phase", "Nonsense"}};
  EXPECT_EQ(Do("POST", kJobs, odd, kTeamA).status, 201);
}

TEST_F(StatusOwnershipTest, TheServerRecordsWhoSubmittedAJob) {
  Json j = Job("j");
  j["metadata"]["annotations"] = {{"tessera.dev/submitted-by", "someone-else"}, {"keep", "me"}};
  Resp r = Do("POST", kJobs, j, kTeamA);
  ASSERT_EQ(r.status, 201) << r.body.dump();
  EXPECT_EQ(r.body["metadata"]["annotations"]["tessera.dev/submitted-by"], "team-a");
  EXPECT_EQ(r.body["metadata"]["annotations"]["keep"], "me");
  // An update cannot change or drop it.
  Json edit = r.body;
  edit["metadata"].erase("annotations");
  edit["metadata"].erase("resourceVersion");
  r = Do("PUT", JobPath("j"), edit, kTeamA);
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(r.body["metadata"]["annotations"]["tessera.dev/submitted-by"], "team-a");
  edit["metadata"]["annotations"] = {{"tessera.dev/submitted-by", "mallory"}};
  r = Do("PUT", JobPath("j"), edit, kAdmin);
  EXPECT_EQ(r.body["metadata"]["annotations"]["tessera.dev/submitted-by"], "team-a");
  // A batch stamps its jobs too; other kinds carry nothing.
  Json b = Job("b");
  b["metadata"]["namespace"] = "team-a";
  ASSERT_EQ(Do("POST", "/api/v1/batch", {{"items", {b}}}, kAdmin).status, 201);
  EXPECT_EQ(Do("GET", JobPath("b")).body["metadata"]["annotations"]["tessera.dev/submitted-by"],
            "admin");
}

TEST_F(StatusOwnershipTest, UsersMayOnlyCancelTheirJobs) {
  ASSERT_EQ(Do("POST", kJobs, Job("j"), kTeamA).status, 201);
  Bind("j", "gpu-01");
  Resp r = Do("PUT", JobPath("j") + "/status",
              {{"status", {{"members", {Report("workers-0", 1, "Running")}}}}}, kTeamA);
  EXPECT_EQ(r.status, 403);
  EXPECT_THAT(r.body["message"].get<std::string>(), HasSubstr("written by the control plane"));
  Json forged = Do("GET", JobPath("j")).body["status"];
  forged["placement"][0]["node"] = "gpu-02";
  forged["phase"] = "Failed";
  r = Do("PUT", JobPath("j") + "/status", {{"status", forged}}, kTeamA);
  EXPECT_EQ(r.status, 403) << r.body.dump();
  r = Do("PUT", JobPath("j") + "/status", {{"status", {{"phase", "Succeeded"}}}}, kTeamA);
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(Do("GET", JobPath("j")).body["status"]["phase"], "Scheduled");
  EXPECT_EQ(Do("PUT", JobPath("j") + "/status", {{"status", {{"phase", "Failed"}}}}, kTeamB).status,
            403);
  // A cancellation: the stored status PUT back with phase Failed.
  Json mine = Do("GET", JobPath("j"), nullptr, kTeamA).body;
  mine["status"]["phase"] = "Failed";
  mine["status"]["message"] = "wrong dataset";
  r = Do("PUT", JobPath("j") + "/status", mine, kTeamA);
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(r.body["status"]["reason"], "Cancelled");
  EXPECT_EQ(r.body["status"]["message"], "cancelled by team-a: wrong dataset");
  // A finished job stays finished.
  r = Do("PUT", JobPath("j") + "/status", {{"status", {{"phase", "Failed"}}}}, kTeamA);
  EXPECT_EQ(r.status, 200);  // nothing new
  EXPECT_EQ(Do("GET", JobPath("j")).body["status"]["phase"], "Failed");
  // Reading it through the subresource is a read of the job.
  EXPECT_EQ(Do("GET", JobPath("j") + "/status", nullptr, kTeamA).status, 200);
  EXPECT_EQ(Do("GET", JobPath("j") + "/status", nullptr, kTeamB).status, 403);
}

TEST_F(StatusOwnershipTest, ANodeReportsOnlyItsOwnMembersAndNeverRebinds) {
  ASSERT_EQ(Do("POST", kJobs, Job("bound")).status, 201);
  ASSERT_EQ(Do("POST", kJobs, Job("elsewhere")).status, 201);
  Bind("bound", "gpu-01", 3);
  Bind("elsewhere", "gpu-02", 1);
  // It reads the jobs it runs members of, not the others.
  EXPECT_EQ(Do("GET", JobPath("bound"), nullptr, kNode1).status, 200);
  Resp other = Do("GET", JobPath("elsewhere"), nullptr, kNode1);
  EXPECT_EQ(other.status, 403);
  EXPECT_THAT(other.body["message"].get<std::string>(), HasSubstr("bound to it"));
  // The main resource is not its to write at all.
  Json whole = Do("GET", JobPath("bound")).body;
  EXPECT_EQ(Do("PUT", JobPath("bound"), whole, kNode1).status, 403);

  // Its member's report is merged, stamped with its node; a rebinding in the same body is not.
  Json body = whole;
  body["status"]["phase"] = "Running";
  body["status"]["generation"] = 9;
  body["status"]["placement"][1]["node"] = "gpu-01";
  body["status"]["members"] = {Report("workers-0", 3, "Failed", 3)};
  body["status"]["members"][0]["node"] = "somewhere-else";
  Resp put = Do("PUT", JobPath("bound") + "/status", body, kNode1);
  ASSERT_EQ(put.status, 200) << put.body.dump();
  Json st = Do("GET", JobPath("bound")).body["status"];
  EXPECT_EQ(st["phase"], "Scheduled");
  EXPECT_EQ(st["generation"], 3);
  EXPECT_EQ(st["placement"][1]["node"], "gpu-02");
  ASSERT_EQ(st["members"].size(), 1u);
  EXPECT_EQ(st["members"][0]["state"], "Failed");
  EXPECT_EQ(st["members"][0]["exitCode"], 3);
  EXPECT_EQ(st["members"][0]["node"], "gpu-01");
  EXPECT_TRUE(st["members"][0].contains("time"));

  // A member bound to another node: 403 naming it, nothing written.
  const int64_t before = store_->CurrentRevision();
  Resp foreign = Do("PUT", JobPath("bound") + "/status",
                    {{"status", {{"members", {Report("workers-1", 3, "Exited")}}}}}, kNode1);
  EXPECT_EQ(foreign.status, 403);
  EXPECT_EQ(foreign.body["details"]["causes"][0]["field"], "status.members[0].member");
  Resp cross = Do("PUT", JobPath("elsewhere") + "/status",
                  {{"status", {{"members", {Report("workers-0", 1, "Exited")}}}}}, kNode1);
  EXPECT_EQ(cross.status, 403);
  EXPECT_EQ(store_->CurrentRevision(), before);
  // A report of a superseded generation says nothing now: accepted, not written.
  Resp stale = Do("PUT", JobPath("bound") + "/status",
                  {{"status", {{"members", {Report("workers-1", 2, "Exited")}}}}}, kNode1);
  EXPECT_EQ(stale.status, 200);
  EXPECT_EQ(store_->CurrentRevision(), before);
  // One from the future is invalid.
  EXPECT_EQ(Do("PUT", JobPath("bound") + "/status",
               {{"status", {{"members", {Report("workers-0", 4, "Running")}}}}}, kNode1)
                .status,
            422);
  // Another node's Node status is not its to write either.
  ASSERT_EQ(Do("POST", "/api/v1/nodes", Node("gpu-02")).status, 201);
  EXPECT_EQ(
      Do("PUT", "/api/v1/nodes/gpu-02/status", {{"status", {{"gpus", Json::array()}}}}, kNode1)
          .status,
      403);
}

TEST_F(StatusOwnershipTest, AnAdminMayEndAJobButNotPlaceIt) {
  ASSERT_EQ(Do("POST", kJobs, Job("j")).status, 201);
  Bind("j", "gpu-01");
  Resp r = Do("PUT", JobPath("j") + "/status", {{"status", {{"phase", "Running"}}}});
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(r.body["details"]["causes"][0]["field"], "status.phase");
  Json body = Do("GET", JobPath("j")).body;
  body["status"]["phase"] = "Failed";
  body["status"]["message"] = "ended by an operator";
  body["status"]["placement"][0]["gpus"] = {5};
  r = Do("PUT", JobPath("j") + "/status", body);
  ASSERT_EQ(r.status, 200) << r.body.dump();
  Json st = Do("GET", JobPath("j")).body["status"];
  EXPECT_EQ(st["phase"], "Failed");
  EXPECT_EQ(st["message"], "cancelled by admin: ended by an operator");
  EXPECT_EQ(st["reason"], "Cancelled");
  EXPECT_EQ(st["placement"][0]["gpus"], Json({0}));
  // A stale resourceVersion is a conflict, as for any write.
  body["metadata"]["resourceVersion"] = "1";
  EXPECT_EQ(Do("PUT", JobPath("j") + "/status", body).status, 409);
}

TEST_F(StatusOwnershipTest, ANodeKeepsWhatAnAdminOwnsOfItsNode) {
  Json node = Node("gpu-01");
  node["spec"]["cpuMilli"] = 64000;
  ASSERT_EQ(Do("POST", "/api/v1/nodes", node, kNode1).status, 201);
  // The admin cordons and taints it.
  Json cordoned = Do("GET", "/api/v1/nodes/gpu-01").body;
  cordoned["spec"]["unschedulable"] = true;
  cordoned["spec"]["taints"] = {{{"key", "maintenance"}, {"effect", "NoSchedule"}}};
  ASSERT_EQ(Do("PUT", "/api/v1/nodes/gpu-01", cordoned).status, 200);
  // The agent re-registers without them: they stay.
  Json again = Do("GET", "/api/v1/nodes/gpu-01", nullptr, kNode1).body;
  again["spec"].erase("unschedulable");
  again["spec"].erase("taints");
  ASSERT_EQ(Do("PUT", "/api/v1/nodes/gpu-01", again, kNode1).status, 200);
  Json spec = Do("GET", "/api/v1/nodes/gpu-01").body["spec"];
  EXPECT_EQ(spec["unschedulable"], true);
  EXPECT_EQ(spec["taints"].size(), 1u);
  // It may not declare more than it has.
  again["spec"]["gpuCount"] = 16;
  Resp more = Do("PUT", "/api/v1/nodes/gpu-01", again, kNode1);
  EXPECT_EQ(more.status, 403);
  EXPECT_THAT(more.body["message"].get<std::string>(), HasSubstr("more GPUs (16) than it has (8)"));
  again["spec"]["gpuCount"] = 8;
  again["spec"]["cpuMilli"] = 128000;
  EXPECT_EQ(Do("PUT", "/api/v1/nodes/gpu-01", again, kNode1).status, 403);
  // Its status: GPU health and heartbeat time, never its phase.
  Resp st = Do("PUT", "/api/v1/nodes/gpu-01/status",
               {{"status",
                 {{"phase", "Ready"},
                  {"gpus", {{{"index", 0}, {"health", "Unhealthy"}, {"message", "XID 79"}}}}}}},
               kNode1);
  ASSERT_EQ(st.status, 200) << st.body.dump();
  Json stored = Do("GET", "/api/v1/nodes/gpu-01").body["status"];
  EXPECT_EQ(stored["phase"], "Unknown");
  EXPECT_EQ(stored["gpus"][0]["health"], "Unhealthy");
}

}  // namespace
}  // namespace tessera::server
