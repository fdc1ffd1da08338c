// The "GPUs per member within the fleet's largest node" limit through the real API: refused
// with every offending field named, nothing stored, and the limit following the fleet as nodes
// are added, grown, shrunk and deleted.
#include "server/largest_node.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/testing/api_server_fixture.h"

namespace tessera::server {
namespace {

using testing::ApiServerTest;
using ::testing::HasSubstr;
using testing::Job;
using testing::Json;
using testing::kAdmin;
using testing::kJobs;
using testing::kTeamA;
using testing::Node;
using testing::Resp;

Json SizedNode(const std::string& name, int gpus) {
  Json n = Node(name);
  n["spec"]["gpuCount"] = gpus;
  return n;
}

Json Gang(const std::string& name, int workers_gpus, int ps_gpus) {
  Json j = Job(name);
  j["spec"]["groups"] = {{{"name", "workers"}, {"count", 2}, {"gpusPerReplica", workers_gpus}},
                         {{"name", "ps"}, {"count", 1}, {"gpusPerReplica", ps_gpus}}};
  return j;
}

std::vector<std::string> Fields(const Resp& r) {
  std::vector<std::string> out;
  for (const Json& c : r.body["details"]["causes"]) out.push_back(c["field"]);
  return out;
}

using LargestNodeTest = ApiServerTest;

TEST_F(LargestNodeTest, WithoutNodesOnlyTheStaticLimitApplies) {
  EXPECT_EQ(Do("POST", kJobs, Gang("early", 16, 12), kTeamA).status, 201);
  EXPECT_EQ(Do("POST", kJobs, Gang("huge", 17, 1), kTeamA).status, 422);
}

TEST_F(LargestNodeTest, MembersLargerThanEveryNodeAreRefusedNamingEachField) {
  ASSERT_EQ(Do("POST", "/api/v1/nodes", SizedNode("small", 4)).status, 201);
  ASSERT_EQ(Do("POST", "/api/v1/nodes", SizedNode("big", 8)).status, 201);
  Resp r = Do("POST", kJobs, Gang("too-big", 12, 9), kTeamA);
  ASSERT_EQ(r.status, 422) << r.body.dump();
  EXPECT_THAT(Fields(r), ::testing::ElementsAre("spec.groups[0].gpusPerReplica",
                                                "spec.groups[1].gpusPerReplica"));
  EXPECT_THAT(r.body["message"].get<std::string>(),
              HasSubstr("must be <= 8, the most GPUs of any node in the fleet (node big)"));
  EXPECT_EQ(Do("GET", std::string(kJobs) + "/too-big", nullptr, kTeamA).status, 404);
  EXPECT_EQ(Do("POST", kJobs, Gang("fits", 8, 4), kTeamA).status, 201);

  // An update past the fleet is refused too, and keeps what is stored.
  Resp got = Do("GET", std::string(kJobs) + "/fits", nullptr, kTeamA);
  Json edit = got.body;
  edit["spec"]["groups"][1]["gpusPerReplica"] = 10;
  r = Do("PUT", std::string(kJobs) + "/fits", edit, kTeamA);
  ASSERT_EQ(r.status, 422) << r.body.dump();
  EXPECT_THAT(Fields(r), ::testing::ElementsAre("spec.groups[1].gpusPerReplica"));
  got = Do("GET", std::string(kJobs) + "/fits", nullptr, kTeamA);
  EXPECT_EQ(got.body["spec"]["groups"][1]["gpusPerReplica"], 4);

  // An InferenceService's replicas likewise.
  Json svc = {
      {"apiVersion", "tessera.dev/v1"},
      {"kind", "InferenceService"},
      {"metadata", {{"name", "svc"}}},
      {"spec",
       {{"modelVersion", "m1"}, {"replicas", {{"min", 1}, {"max", 2}}}, {"gpusPerReplica", 9}}}};
  r = Do("POST", "/api/v1/namespaces/team-a/inferenceservices", svc, kTeamA);
  ASSERT_EQ(r.status, 422) << r.body.dump();
  EXPECT_THAT(Fields(r), ::testing::ElementsAre("spec.gpusPerReplica"));
}

TEST_F(LargestNodeTest, ABatchWithOneTooLargeMemberStoresNothing) {
  ASSERT_EQ(Do("POST", "/api/v1/nodes", SizedNode("n1", 8)).status, 201);
  Json a = Gang("a", 8, 1), b = Gang("b", 2, 16);
  for (Json* j : {&a, &b}) j->at("metadata")["namespace"] = "team-a";
  Resp r = Do("POST", "/api/v1/batch", Json{{"items", {a, b}}}, kTeamA);
  ASSERT_EQ(r.status, 422) << r.body.dump();
  EXPECT_THAT(Fields(r), ::testing::ElementsAre("items[1].spec.groups[1].gpusPerReplica"));
  EXPECT_EQ(Do("GET", std::string(kJobs) + "/a", nullptr, kTeamA).status, 404);
}

TEST_F(LargestNodeTest, TheLimitFollowsTheFleet) {
  ASSERT_EQ(Do("POST", "/api/v1/nodes", SizedNode("n1", 8)).status, 201);
  EXPECT_EQ(Do("POST", kJobs, Gang("j1", 12, 1), kTeamA).status, 422);
  // A larger node registered in a batch raises it.
  Json big = SizedNode("n2", 16);
  ASSERT_EQ(Do("POST", "/api/v1/batch", Json{{"items", {big}}}).status, 201);
  EXPECT_EQ(Do("POST", kJobs, Gang("j2", 12, 1), kTeamA).status, 201);
  // The largest node shrinking lowers it again to the next largest...
  Json n2 = Do("GET", "/api/v1/nodes/n2").body;
  n2["spec"]["gpuCount"] = 10;
  ASSERT_EQ(Do("PUT", "/api/v1/nodes/n2", n2).status, 200);
  Resp r = Do("POST", kJobs, Gang("j3", 12, 1), kTeamA);
  ASSERT_EQ(r.status, 422) << r.body.dump();
  EXPECT_THAT(r.body["message"].get<std::string>(), HasSubstr("must be <= 10"));
  // ...and deleting it, to what remains.
  ASSERT_EQ(Do("DELETE", "/api/v1/nodes/n2").status, 200);
  r = Do("POST", kJobs, Gang("j4", 9, 1), kTeamA);
  ASSERT_EQ(r.status, 422) << r.body.dump();
  EXPECT_THAT(r.body["message"].get<std::string>(), HasSubstr("must be <= 8"));
  EXPECT_EQ(Do("POST", kJobs, Gang("j5", 8, 1), kTeamA).status, 201);
}

}  // namespace
}  // namespace tessera::server
