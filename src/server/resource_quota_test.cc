// ResourceQuota through the real API: who may set one, what it refuses (create and batch), and
// that concurrent creates cannot overshoot it.
#include "server/resource_quota.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

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
using testing::kTeamB;
using testing::Resp;

constexpr char kQuotas[] = "/api/v1/namespaces/team-a/resourcequotas";

Json Quota(const std::string& name, Json hard) {
  return {{"apiVersion", "tessera.dev/v1"},
          {"kind", "ResourceQuota"},
          {"metadata", {{"name", name}}},
          {"spec", {{"hard", std::move(hard)}}}};
}

using ResourceQuotaTest = ApiServerTest;

TEST_F(ResourceQuotaTest, OnlyAdminsSetQuotasAndKeysMustNameACountedKind) {
  Resp r = Do("POST", kQuotas, Quota("q", {{"count/trainingjobs", 2}}), kTeamA);
  EXPECT_EQ(r.status, 403) << r.body.dump();
  EXPECT_THAT(r.body["message"].get<std::string>(), HasSubstr("only admins"));
  r = Do("POST", kQuotas, Quota("bad", {{"count/pods", 1}, {"count/events", 1}, {"cpu", 1}}));
  ASSERT_EQ(r.status, 422) << r.body.dump();
  EXPECT_EQ(r.body["details"]["causes"].size(), 3u) << r.body.dump();
  EXPECT_THAT(r.body.dump(), HasSubstr("spec.hard[\\\"count/pods\\\"]"));
  EXPECT_EQ(Do("POST", kQuotas, Quota("q", {{"count/trainingjobs", -1}})).status, 422);
  ASSERT_EQ(Do("POST", kQuotas, Quota("q", {{"count/trainingjobs", 2}})).status, 201);
  EXPECT_EQ(Do("GET", std::string(kQuotas) + "/q", nullptr, kTeamA).status, 200);
  EXPECT_EQ(Do("DELETE", std::string(kQuotas) + "/q", nullptr, kTeamA).status, 403);
  EXPECT_EQ(Do("GET", "/api/v1/namespaces/team-b/resourcequotas/q", nullptr, kTeamB).status, 404);
}

TEST_F(ResourceQuotaTest, CreatesPastTheQuotaAreRefusedAndChangeNothing) {
  ASSERT_EQ(Do("POST", kQuotas, Quota("jobs", {{"count/trainingjobs", 2}})).status, 201);
  EXPECT_EQ(Do("POST", kJobs, Job("a"), kTeamA).status, 201);
  EXPECT_EQ(Do("POST", kJobs, Job("b"), kTeamA).status, 201);
  Resp r = Do("POST", kJobs, Job("c"), kTeamA);
  ASSERT_EQ(r.status, 403) << r.body.dump();
  EXPECT_THAT(r.body["message"].get<std::string>(),
              HasSubstr("exceeded quota: jobs, requested: count/trainingjobs=1, used: "
                        "count/trainingjobs=2, limited: count/trainingjobs=2"));
  EXPECT_EQ(Do("GET", std::string(kJobs) + "/c", nullptr, kTeamA).status, 404);
  // Another namespace, and another kind in this one, are not counted.
  EXPECT_EQ(Do("POST", "/api/v1/namespaces/team-b/trainingjobs", Job("c"), kTeamB).status, 201);
  // A batch that would overshoot is refused whole.
  ASSERT_EQ(Do("DELETE", std::string(kJobs) + "/a", nullptr, kTeamA).status, 200);
  Json x = Job("x"), y = Job("y");
  x["metadata"]["namespace"] = "team-a";
  y["metadata"]["namespace"] = "team-a";
  r = Do("POST", "/api/v1/batch", {{"items", {x, y}}}, kAdmin);
  ASSERT_EQ(r.status, 403) << r.body.dump();
  EXPECT_THAT(r.body["message"].get<std::string>(), HasSubstr("requested: count/trainingjobs=2"));
  EXPECT_EQ(Do("GET", std::string(kJobs) + "/x", nullptr, kTeamA).status, 404);
  r = Do("POST", "/api/v1/batch", {{"items", {x}}}, kAdmin);
  EXPECT_EQ(r.status, 201) << r.body.dump();
  // Raising the quota lets creates through again.
  Resp q = Do("GET", std::string(kQuotas) + "/jobs");
  q.body["spec"]["hard"]["count/trainingjobs"] = 3;
  ASSERT_EQ(Do("PUT", std::string(kQuotas) + "/jobs", q.body).status, 200);
  EXPECT_EQ(Do("POST", kJobs, Job("d"), kTeamA).status, 201);
  EXPECT_EQ(Do("POST", kJobs, Job("e"), kTeamA).status, 403);
}

TEST_F(ResourceQuotaTest, ConcurrentCreatesDoNotOvershoot) {
  ASSERT_EQ(Do("POST", kQuotas, Quota("jobs", {{"count/trainingjobs", 5}})).status, 201);
  std::atomic<int> created{0}, refused{0}, other{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&, c] {
      for (int i = 0; i < 6; ++i) {
        const int status = Do("POST", kJobs, Job(absl::StrCat("j", c, "-", i)), kTeamA).status;
        (status == 201 ? created : status == 403 ? refused : other)++;
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(created.load(), 5);
  EXPECT_EQ(refused.load(), 19);
  EXPECT_EQ(other.load(), 0);
  Resp list = Do("GET", kJobs, nullptr, kTeamA);
  EXPECT_EQ(list.body["items"].size(), 5u);
}

}  // namespace
}  // namespace tessera::server
