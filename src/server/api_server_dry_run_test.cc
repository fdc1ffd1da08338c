// Server-side dry run (?dryRun=All): every check runs and is answered as it would be, nothing
// is stored and no revision is used.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/testing/api_server_fixture.h"

namespace tessera::server {
namespace {

using testing::ApiServerTest;
using ::testing::HasSubstr;
using testing::Job;
using testing::Json;
using testing::kJobs;
using testing::kTeamA;
using testing::Resp;

using DryRunTest = ApiServerTest;

std::string Revision(const Resp& list) { return list.body["metadata"]["resourceVersion"]; }

TEST_F(DryRunTest, WritesAreCheckedAndAnsweredButNothingIsStored) {
  ASSERT_EQ(Do("POST", kJobs, Job("kept"), kTeamA).status, 201);
  const std::string rev = Revision(Do("GET", kJobs));
  const std::string dry = "?dryRun=All";

  Resp r = Do("POST", std::string(kJobs) + dry, Job("new"), kTeamA);
  ASSERT_EQ(r.status, 201) << r.body.dump();
  EXPECT_EQ(r.body["metadata"]["name"], "new");
  EXPECT_EQ(r.body["status"]["phase"], "Pending");
  EXPECT_EQ(Do("GET", std::string(kJobs) + "/new", nullptr, kTeamA).status, 404);
  // A name taken and an invalid object are refused as without dry run.
  EXPECT_EQ(Do("POST", std::string(kJobs) + dry, Job("kept"), kTeamA).status, 409);
  Json bad = Job("bad");
  bad["spec"]["groups"][0]["count"] = 0;
  EXPECT_EQ(Do("POST", std::string(kJobs) + dry, bad, kTeamA).status, 422);

  Json edit = Do("GET", std::string(kJobs) + "/kept", nullptr, kTeamA).body;
  edit["spec"]["groups"][0]["count"] = 5;
  r = Do("PUT", std::string(kJobs) + "/kept" + dry, edit, kTeamA);
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(r.body["spec"]["groups"][0]["count"], 5);
  edit["metadata"]["resourceVersion"] = "999";
  EXPECT_EQ(Do("PUT", std::string(kJobs) + "/kept" + dry, edit, kTeamA).status, 409);

  r = Do("DELETE", std::string(kJobs) + "/kept" + dry, nullptr, kTeamA);
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(r.body["metadata"]["name"], "kept");
  EXPECT_EQ(Do("DELETE", std::string(kJobs) + "/none" + dry, nullptr, kTeamA).status, 404);

  Json a = Job("a"), b = Job("b");
  for (Json* j : {&a, &b}) (*j)["metadata"]["namespace"] = "team-a";
  r = Do("POST", "/api/v1/batch" + dry, Json{{"items", {a, b}}}, kTeamA);
  ASSERT_EQ(r.status, 201) << r.body.dump();
  Json kept = Job("kept");
  kept["metadata"]["namespace"] = "team-a";
  EXPECT_EQ(Do("POST", "/api/v1/batch" + dry, Json{{"items", {a, kept}}}, kTeamA).status, 409);

  r = Do("PUT", std::string(kJobs) + "/kept/status" + dry,
         Json{{"status", {{"phase", "Succeeded"}}}});
  EXPECT_EQ(r.status, 200) << r.body.dump();

  // Nothing of the above was stored: the revision and the objects are as they were.
  Resp list = Do("GET", kJobs);
  EXPECT_EQ(Revision(list), rev);
  ASSERT_EQ(list.body["items"].size(), 1u);
  EXPECT_EQ(list.body["items"][0]["spec"]["groups"][0]["count"], 2);
  EXPECT_EQ(list.body["items"][0]["status"]["phase"], "Pending");
}

TEST_F(DryRunTest, QuotasApplyAndOtherValuesAreRefused) {
  ASSERT_EQ(Do("POST", "/api/v1/namespaces/team-a/resourcequotas",
               Json{{"apiVersion", "tessera.dev/v1"},
                    {"kind", "ResourceQuota"},
                    {"metadata", {{"name", "q"}}},
                    {"spec", {{"hard", {{"count/trainingjobs", 1}}}}}})
                .status,
            201);
  ASSERT_EQ(Do("POST", kJobs, Job("one"), kTeamA).status, 201);
  Resp r = Do("POST", std::string(kJobs) + "?dryRun=All", Job("two"), kTeamA);
  EXPECT_EQ(r.status, 403) << r.body.dump();
  EXPECT_THAT(r.body["message"].get<std::string>(), HasSubstr("exceeded quota"));
  r = Do("POST", std::string(kJobs) + "?dryRun=Client", Job("two"), kTeamA);
  EXPECT_EQ(r.status, 400) << r.body.dump();
  EXPECT_THAT(r.body["message"].get<std::string>(), HasSubstr("dryRun"));
  EXPECT_EQ(Do("GET", std::string(kJobs) + "/two", nullptr, kTeamA).status, 404);
}

}  // namespace
}  // namespace tessera::server
