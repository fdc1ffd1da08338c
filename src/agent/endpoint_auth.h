// EndpointAuth: who may use the node agent's HTTP endpoint (docs/agent.md, "HTTP endpoint").
//
// Rules (a request carries `Authorization: Bearer TOKEN`):
//  - /healthz and /metrics: as /members by default (the metrics hold GPU telemetry and the
//    namespace/job on each GPU: not for every tenant); with open_metrics (an explicit flag, for a
//    Prometheus that scrapes without a token, and for probes), anyone.
//  - /logs?namespace=NS&job=JOB[&kind=...]: an agent token (the agent's own, from
//    --endpoint-token-file), or any token the server accepts for reading that job (the server
//    decides: the verifier GETs the job with the caller's token; 200 -> allowed, 401/403 ->
//    refused). So a tenant reads its own jobs' logs with the token it uses for the API, and
//    nobody reads logs without a token, even when the server runs without authentication.
//  - /members, /fake/event: an agent token, or a server admin token (verified likewise).
// Verdicts of the server are cached for `cache_ttl` (refusals for 5 s) so `tessera logs -f` on
// a 16-node gang does not turn into a stream of API calls.
// Thread safety: every method may be called from any thread.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tessera::agent {

struct EndpointRequest {
  std::string path;           // "/logs"
  std::string authorization;  // the header value
  std::string name_space;     // /logs only
  std::string job;
  std::string kind = "TrainingJob";
};

struct EndpointVerdict {
  int code = 200;  // 200, 401 or 403
  std::string message;
};

class EndpointAuth {
 public:
  // Asks the server, with the caller's token, whether it may GET the job (admin: job empty);
  // returns the HTTP status (0: the server could not be reached).
  using ServerCheck = std::function<int(const std::string& token, const std::string& kind,
                                        const std::string& ns, const std::string& job)>;
  struct Options {
    std::set<std::string> agent_tokens;
    bool open_metrics = false;
    absl::Duration cache_ttl = absl::Seconds(30);
  };
  EndpointAuth(Options options, ServerCheck check);

  EndpointVerdict Check(const EndpointRequest& req);

  // Reads agent tokens: one per line, '#' comments and blank lines ignored.
  static std::set<std::string> ParseTokens(const std::string& text);

 private:
  int AskServer(const std::string& token, const std::string& kind, const std::string& ns,
                const std::string& job);

  const Options options_;
  const ServerCheck check_;
  absl::Mutex mu_;
  // (token, kind, ns, job) -> (status, expiry).
  std::map<std::tuple<std::string, std::string, std::string, std::string>,
           std::pair<int, absl::Time>>
      cache_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::agent
