#include "agent/endpoint_auth.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace tessera::agent {

EndpointAuth::EndpointAuth(Options options, ServerCheck check)
    : options_(std::move(options)), check_(std::move(check)) {}

std::set<std::string> EndpointAuth::ParseTokens(const std::string& text) {
  std::set<std::string> out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || absl::StartsWith(line, "#")) continue;
    out.insert(std::string(line));
  }
  return out;
}

int EndpointAuth::AskServer(const std::string& token, const std::string& kind,
                            const std::string& ns, const std::string& job) {
  const auto key = std::make_tuple(token, kind, ns, job);
  const absl::Time now = absl::Now();
  {
    absl::MutexLock l(&mu_);
    auto it = cache_.find(key);
    if (it != cache_.end() && it->second.second > now) return it->second.first;
  }
  const int code = check_ ? check_(token, kind, ns, job) : 0;
  if (code == 0) return 0;  // not an answer: do not remember
  absl::MutexLock l(&mu_);
  if (cache_.size() > 10000) cache_.clear();  // bounded: tokens are few, jobs come and go
  cache_[key] = {code, now + (code == 200 ? options_.cache_ttl : absl::Seconds(5))};
  return code;
}

EndpointVerdict EndpointAuth::Check(const EndpointRequest& req) {
  if ((req.path == "/healthz" || req.path == "/metrics") && options_.open_metrics) return {};
  absl::string_view header = req.authorization;
  if (!absl::ConsumePrefix(&header, "Bearer ") || header.empty()) {
    return {401, "a bearer token is required (tessera logs --token, or the agent's token)"};
  }
  const std::string token(header);
  if (options_.agent_tokens.contains(token)) return {};
  const bool logs = req.path == "/logs";
  const int code =
      logs ? AskServer(token, req.kind, req.name_space, req.job) : AskServer(token, "", "", "");
  if (code == 200) return {};
  if (code == 0) return {503, "cannot reach the server to check the token"};
  if (code == 401) return {401, "the server does not know this token"};
  return {403, logs ? "this token may not read " + req.name_space + "/" + req.job
                    : "only the agent's token or a server admin token may use " + req.path};
}

}  // namespace tessera::agent
