#include "agent/endpoint_auth.h"

#include "gtest/gtest.h"

namespace tessera::agent {
namespace {

// The server's answers, as `tessera server` gives them: an admin reads everything, a tenant
// only its namespace, an unknown token is 401.
int ServerAnswer(const std::string& token, const std::string&, const std::string& ns,
                 const std::string& job) {
  if (token == "admin") return 200;
  if (token == "team-a" && !job.empty()) return ns == "a" ? 200 : 403;
  if (token == "team-a") return 403;  // /metrics: admins only
  return 401;
}

EndpointRequest Req(const std::string& path, const std::string& auth, const std::string& ns = "",
                    const std::string& job = "") {
  EndpointRequest r;
  r.path = path;
  r.authorization = auth;
  r.name_space = ns;
  r.job = job;
  return r;
}

TEST(EndpointAuthTest, LogsNeedAnAgentTokenOrAServerTokenThatMayReadTheJob) {
  int calls = 0;
  EndpointAuth::Options o;
  o.agent_tokens = EndpointAuth::ParseTokens("# agent tokens\nlocal-secret\n\n");
  EndpointAuth auth(o, [&](const std::string& t, const std::string& k, const std::string& n,
                           const std::string& j) {
    ++calls;
    return ServerAnswer(t, k, n, j);
  });
  EXPECT_EQ(auth.Check(Req("/logs", "", "a", "train")).code, 401);
  EXPECT_EQ(auth.Check(Req("/logs", "Basic abc", "a", "train")).code, 401);
  EXPECT_EQ(auth.Check(Req("/logs", "Bearer ", "a", "train")).code, 401);
  EXPECT_EQ(auth.Check(Req("/logs", "Bearer local-secret", "a", "train")).code, 200);
  EXPECT_EQ(calls, 0);  // the agent's own token needs no server
  EXPECT_EQ(auth.Check(Req("/logs", "Bearer team-a", "a", "train")).code, 200);
  EXPECT_EQ(auth.Check(Req("/logs", "Bearer team-a", "b", "train")).code, 403);
  EXPECT_EQ(auth.Check(Req("/logs", "Bearer stranger", "a", "train")).code, 401);
  EXPECT_EQ(auth.Check(Req("/logs", "Bearer admin", "b", "x")).code, 200);
  // Verdicts are cached: `tessera logs -f` does not ask the server on every request.
  const int asked = calls;
  EXPECT_EQ(auth.Check(Req("/logs", "Bearer team-a", "a", "train")).code, 200);
  EXPECT_EQ(auth.Check(Req("/logs", "Bearer team-a", "b", "train")).code, 403);
  EXPECT_EQ(calls, asked);
  // /members and /fake/event: the agent's token or a server admin.
  EXPECT_EQ(auth.Check(Req("/members", "Bearer team-a")).code, 403);
  EXPECT_EQ(auth.Check(Req("/members", "Bearer admin")).code, 200);
  EXPECT_EQ(auth.Check(Req("/fake/event", "Bearer local-secret")).code, 200);
  EXPECT_EQ(auth.Check(Req("/fake/event", "")).code, 401);
  // /metrics and /healthz need a token too by default (secure by default).
  EXPECT_EQ(auth.Check(Req("/metrics", "")).code, 401);
  EXPECT_EQ(auth.Check(Req("/healthz", "")).code, 401);
}

TEST(EndpointAuthTest, MetricsOpenOnlyByChoiceAndAnUnreachableServerIsNotAYes) {
  EndpointAuth::Options o;
  EndpointAuth auth(o, [](const std::string&, const std::string&, const std::string&,
                          const std::string&) { return 0; });
  EXPECT_EQ(auth.Check(Req("/metrics", "")).code, 401);
  EXPECT_EQ(auth.Check(Req("/metrics", "Bearer admin")).code, 503);
  EXPECT_EQ(auth.Check(Req("/logs", "Bearer admin", "a", "j")).code, 503);
  EXPECT_EQ(auth.Check(Req("/healthz", "")).code, 401);
  o.open_metrics = true;
  EndpointAuth open(o, nullptr);
  EXPECT_EQ(open.Check(Req("/metrics", "")).code, 200);
  EXPECT_EQ(open.Check(Req("/healthz", "")).code, 200);
  EXPECT_EQ(open.Check(Req("/members", "")).code, 401);
}

}  // namespace
}  // namespace tessera::agent
