#include "cli/api_client.h"

#include <httplib.h>
#include <stdlib.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tessera::cli {
namespace {

std::string Env(const char* name) {
  const char* v = getenv(name);
  return v ? v : "";
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
  if (!absl::StartsWith(c.server, "http://") && !absl::StartsWith(c.server, "https://")) {
    c.server = "http://" + c.server;
  }
  return c;
}

ApiClient::ApiClient(ClientConfig config) : config_(std::move(config)) {}
ApiClient::~ApiClient() = default;

absl::StatusOr<Response> ApiClient::Do(const std::string& method, const std::string& path,
                                       const Json* body) {
  httplib::Client http(config_.server);
  http.set_connection_timeout(5);
  http.set_read_timeout(60);
  if (!config_.ca_file.empty()) http.set_ca_cert_path(config_.ca_file.c_str());
  if (config_.insecure_skip_tls_verify) http.enable_server_certificate_verification(false);
  httplib::Headers headers;
  if (!config_.token.empty()) headers.emplace("Authorization", "Bearer " + config_.token);
  const std::string payload = body ? body->dump() : "";
  auto send = [&]() -> httplib::Result {
    if (method == "GET") return http.Get(path, headers);
    if (method == "POST") return http.Post(path, headers, payload, "application/json");
    if (method == "PUT") return http.Put(path, headers, payload, "application/json");
    return http.Delete(path, headers);
  };
  if (method != "GET" && method != "POST" && method != "PUT" && method != "DELETE") {
    return absl::InvalidArgumentError(absl::StrCat("unsupported method ", method));
  }
  httplib::Result res = send();
  if (!res) {
    return absl::UnavailableError(
        absl::StrCat("cannot reach ", config_.server, ": ", httplib::to_string(res.error())));
  }
  Response r;
  r.code = res->status;
  r.body = Json::parse(res->body, nullptr, /*allow_exceptions=*/false);
  if (r.body.is_discarded()) r.body = res->body;
  return r;
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
