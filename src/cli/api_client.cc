#include "cli/api_client.h"

#include <stdlib.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/server_list.h"
#include "common/suggest.h"
#include "http/client.h"

namespace tessera::cli {
namespace {

std::string Env(const char* name) {
  const char* v = getenv(name);
  return v ? v : "";
}

// The keys a config file may have, at the top and in a context: anything else is a typo that
// would otherwise be ignored silently (a misspelt `token:` sends no token).
const std::vector<std::string>& ContextKeys() {
  static const std::vector<std::string> keys = {
      "name", "server", "token", "namespace", "certificate-authority", "insecure-skip-tls-verify"};
  return keys;
}

absl::Status CheckKeys(const YAML::Node& node, const std::vector<std::string>& allowed,
                       const std::string& where) {
  if (!node.IsMap()) return absl::OkStatus();
  std::vector<std::string> unknown;
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      unknown.push_back(absl::StrCat("unknown key \"", key, "\"", DidYouMean(key, allowed)));
    }
  }
  if (unknown.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", absl::StrJoin(unknown, "; ")));
}

// Why a request got no answer, in words; an untrusted certificate says where a CA is given.
std::string Unreachable(const http::ClientResponse& r) {
  if (r.error != http::ClientError::kTlsVerify) return r.ErrorText();
  std::string why = absl::StrCat(http::ToString(r.error),
                                 " (give its CA with --ca-file or certificate-authority in the "
                                 "config)");
  if (!r.detail.empty()) absl::StrAppend(&why, ": ", r.detail);
  return why;
}

}  // namespace

absl::StatusOr<ClientConfig> ResolveConfig(const ConfigFlags& flags) {
  ClientConfig c;
  std::string path = flags.config_file;
  bool explicit_path = !path.empty();
  if (path.empty()) path = Env("TESSERA_CONFIG");
  explicit_path = explicit_path || !path.empty();
  if (path.empty() && !Env("HOME").empty()) path = Env("HOME") + "/.tessera/config";
  std::ifstream in(path);
  if (!in && explicit_path) {
    return absl::NotFoundError(absl::StrCat("config file ", path, ": cannot be read"));
  }
  if (in) {
    std::stringstream ss;
    ss << in.rdbuf();
    try {
      YAML::Node root = YAML::Load(ss.str());
      std::vector<std::string> top = ContextKeys();
      top.erase(top.begin());  // "name" is a context's
      top.push_back("current-context");
      top.push_back("contexts");
      if (absl::Status s = CheckKeys(root, top, absl::StrCat("config file ", path)); !s.ok()) {
        return s;
      }
      if (root["contexts"] && root["contexts"].IsSequence()) {
        int i = 0;
        for (const YAML::Node& n : root["contexts"]) {
          if (absl::Status s = CheckKeys(n, ContextKeys(),
                                         absl::StrCat("config file ", path, ": contexts[", i, "]"));
              !s.ok()) {
            return s;
          }
          ++i;
        }
      }
      YAML::Node ctx = root;
      std::string want = flags.context;
      if (want.empty() && root["current-context"]) want = root["current-context"].as<std::string>();
      if (root["contexts"]) {
        if (!root["contexts"].IsSequence()) {
          return absl::InvalidArgumentError(
              absl::StrCat("config file ", path, ": contexts: must be a list"));
        }
        bool found = want.empty();
        for (const YAML::Node& n : root["contexts"]) {
          if (n["name"] && n["name"].as<std::string>() == want) {
            ctx = n;
            found = true;
          }
        }
        if (!found) {
          return absl::InvalidArgumentError(
              absl::StrCat("config file ", path, ": no context named \"", want, "\""));
        }
      }
      if (ctx["server"]) c.server = ctx["server"].as<std::string>();
      if (ctx["token"]) c.token = ctx["token"].as<std::string>();
      if (ctx["certificate-authority"]) c.ca_file = ctx["certificate-authority"].as<std::string>();
      if (ctx["insecure-skip-tls-verify"]) {
        c.insecure_skip_tls_verify = ctx["insecure-skip-tls-verify"].as<bool>();
      }
      if (ctx["namespace"]) c.ns = ctx["namespace"].as<std::string>();
    } catch (const YAML::Exception& e) {
      return absl::InvalidArgumentError(absl::StrCat("config file ", path, ": ", e.what()));
    }
  }
  if (!Env("TESSERA_SERVER").empty()) c.server = Env("TESSERA_SERVER");
  if (!Env("TESSERA_TOKEN").empty()) c.token = Env("TESSERA_TOKEN");
  if (!Env("TESSERA_NAMESPACE").empty()) c.ns = Env("TESSERA_NAMESPACE");
  if (!flags.server.empty()) c.server = flags.server;
  if (!flags.token.empty()) c.token = flags.token;
  if (!flags.ns.empty()) c.ns = flags.ns;
  if (!flags.ca_file.empty()) c.ca_file = flags.ca_file;
  if (flags.insecure_skip_tls_verify) c.insecure_skip_tls_verify = true;
  // Several servers (replicas, "a,b,c"): each is checked; the client moves along them.
  c.servers.clear();
  for (std::string one : SplitServerList(c.server)) {
    if (!absl::StartsWith(one, "http://") && !absl::StartsWith(one, "https://")) {
      if (absl::StrContains(one, "://")) {
        return absl::InvalidArgumentError(absl::StrCat(
            "server \"", one, "\": the scheme must be http:// or https:// (or none: http)"));
      }
      one.insert(0, "http://");
    }
    const absl::string_view host = absl::string_view(one).substr(one.find("://") + 3);
    if (host.empty() || host.front() == ':' || host.front() == '/') {
      return absl::InvalidArgumentError(
          absl::StrCat("server \"", one, "\": expected http(s)://HOST[:PORT]"));
    }
    c.servers.push_back(std::move(one));
  }
  if (c.servers.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("server \"", c.server, "\": expected http(s)://HOST[:PORT][,...]"));
  }
  c.server = c.servers.front();
  return c;
}

namespace {

std::unique_ptr<http::Client> Connect(const ClientConfig& config, const std::string& server) {
  http::ClientOptions o;
  o.connect_timeout = absl::Seconds(5);
  o.read_timeout = absl::Seconds(60);
  o.ca_file = config.ca_file;
  o.insecure_skip_verify = config.insecure_skip_tls_verify;
  o.bearer_token = config.token;
  return std::make_unique<http::Client>(server, std::move(o));
}

}  // namespace

ApiClient::ApiClient(ClientConfig config) : config_(std::move(config)) {
  if (config_.servers.empty()) config_.servers.push_back(config_.server);
  http_ = Connect(config_, config_.servers[current_]);
}

void ApiClient::Next() {
  current_ = (current_ + 1) % config_.servers.size();
  config_.server = config_.servers[current_];
  http_ = Connect(config_, config_.server);
}
ApiClient::ApiClient(ApiClient&&) noexcept = default;
ApiClient& ApiClient::operator=(ApiClient&&) noexcept = default;
ApiClient::~ApiClient() = default;

absl::StatusOr<Response> ApiClient::Do(const std::string& method, const std::string& path,
                                       const Json* body, const std::string& accept) {
  if (method != "GET" && method != "POST" && method != "PUT" && method != "DELETE") {
    return absl::InvalidArgumentError(absl::StrCat("unsupported method ", method));
  }
  const std::string payload = body ? body->dump() : "";
  http::Headers headers;
  if (!accept.empty()) headers.emplace_back("Accept", accept);
  auto send = [&] {
    return http_->Do(method, path, payload, body ? "application/json" : "", headers);
  };
  // A kept-alive connection the server closed is replaced before a request is written; a GET
  // that broke in transit anyway is sent once more on a fresh connection.
  // With several servers, a failure moves to the next: at once for a GET or a request that never
  // left (no connection), for the next request otherwise (this one may have been applied).
  http::ClientResponse res = send();
  if (!res.ok() &&
      (res.error == http::ClientError::kWrite || res.error == http::ClientError::kRead) &&
      method == "GET") {
    http_->Close();
    res = send();
  }
  std::string errors;
  for (size_t tried = 1; !res.ok(); ++tried) {
    absl::StrAppend(&errors, errors.empty() ? "" : "; ", config_.server, ": ", Unreachable(res));
    const bool unsent = http::Unsent(res.error);
    if (config_.servers.size() > 1) Next();
    if (tried >= config_.servers.size() || (!unsent && method != "GET")) {
      return absl::UnavailableError(absl::StrCat("cannot reach ", errors));
    }
    res = send();
  }
  Response r;
  r.code = res.status;
  r.body = Json::parse(res.body, nullptr, /*allow_exceptions=*/false);
  if (r.body.is_discarded()) r.body = std::move(res.body);
  return r;
}

absl::StatusOr<int> ApiClient::Stream(const std::string& path,
                                      const std::function<bool(const std::string&)>& on_line,
                                      absl::Duration timeout, std::string* error_body) {
  // A watch is a GET: a server that cannot be reached gives way to the next.
  for (size_t tried = 1; tried < config_.servers.size(); ++tried) {
    std::unique_ptr<http::Client> probe = Connect(config_, config_.server);
    probe->options().connect_timeout = absl::Seconds(2);
    http::ClientResponse r = probe->Do("GET", "/healthz");
    if (!r.ok() && http::Unsent(r.error)) {
      Next();
    } else {
      break;
    }
  }
  std::unique_ptr<http::Client> http = Connect(config_, config_.server);
  http->options().keep_alive = false;
  const absl::Time deadline =
      timeout > absl::ZeroDuration() ? absl::Now() + timeout : absl::InfiniteFuture();
  // A quiet stream ends at the deadline at the latest (a watch also sends a keep-alive line
  // every few seconds).
  http->options().read_timeout =
      timeout > absl::ZeroDuration() ? absl::Ceil(timeout, absl::Seconds(1)) : absl::Hours(1);
  int status = 0;
  std::string buf;
  http::ClientResponse res = http->Stream(
      path, {}, [&](int s) { status = s; },
      [&](std::string_view data) {
        if (status != 200) {
          if (error_body != nullptr) error_body->append(data);
          return true;
        }
        buf.append(data);
        size_t nl;
        while ((nl = buf.find('\n')) != std::string::npos) {
          std::string line = buf.substr(0, nl);
          buf.erase(0, nl + 1);
          if (!on_line(line)) return false;
        }
        return absl::Now() < deadline;
      });
  if (res.ok() || res.error == http::ClientError::kCanceled || status != 0) return status;
  return absl::UnavailableError(
      absl::StrCat("cannot reach ", config_.server, ": ", Unreachable(res)));
}

std::string ErrorText(const Response& r) {
  std::string text = absl::StrCat("Error from server: HTTP ", r.code);
  if (r.body.is_object() && r.body.contains("message") && r.body["message"].is_string()) {
    text = absl::StrCat("Error from server (", r.body.value("reason", std::to_string(r.code)),
                        "): ", r.body["message"].get<std::string>());
  }
  if (r.code == 401) absl::StrAppend(&text, "\n", kTokenHint);
  return text;
}

}  // namespace tessera::cli
