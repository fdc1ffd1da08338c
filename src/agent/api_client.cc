#include "agent/api_client.h"

#include <httplib.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tessera::agent {

std::string ApiClient::NormalizeUrl(const std::string& server) {
  if (absl::StartsWith(server, "http://") || absl::StartsWith(server, "https://")) return server;
  return "http://" + server;
}

ApiClient::ApiClient(const std::string& server, std::string token, absl::Duration timeout,
                     const TlsClientOptions& tls)
    : http_(std::make_unique<httplib::Client>(NormalizeUrl(server))), token_(std::move(token)) {
  if (!tls.ca_file.empty()) http_->set_ca_cert_path(tls.ca_file.c_str());
  if (tls.insecure_skip_verify) http_->enable_server_certificate_verification(false);
  const int64_t ms = absl::ToInt64Milliseconds(timeout);
  http_->set_connection_timeout(ms / 1000, (ms % 1000) * 1000);
  http_->set_read_timeout(ms / 1000, (ms % 1000) * 1000);
  http_->set_write_timeout(ms / 1000, (ms % 1000) * 1000);
  http_->set_keep_alive(true);
  http_->set_tcp_nodelay(true);  // headers and body go out as two writes; do not wait for ACKs
}

ApiClient::~ApiClient() = default;

void ApiClient::Cancel() { http_->stop(); }

absl::StatusOr<ApiResponse> ApiClient::Do(const char* method, const std::string& path,
                                          const nlohmann::json* body) {
  httplib::Headers headers;
  if (!token_.empty()) headers.emplace("Authorization", "Bearer " + token_);
  httplib::Result res(nullptr, httplib::Error::Unknown);
  const std::string m(method);
  if (m == "GET") {
    res = http_->Get(path, headers);
  } else if (m == "DELETE") {
    res = http_->Delete(path, headers);
  } else if (m == "POST") {
    res = http_->Post(path, headers, body->dump(), "application/json");
  } else {
    res = http_->Put(path, headers, body->dump(), "application/json");
  }
  if (!res) {
    return absl::UnavailableError(
        absl::StrCat(method, " ", path, ": ", httplib::to_string(res.error())));
  }
  ApiResponse out;
  out.code = res->status;
  out.body = nlohmann::json::parse(res->body, nullptr, false);
  if (out.body.is_discarded()) out.body = nlohmann::json();
  return out;
}

absl::StatusOr<ApiResponse> ApiClient::Get(const std::string& path) {
  return Do("GET", path, nullptr);
}
absl::StatusOr<ApiResponse> ApiClient::Post(const std::string& path, const nlohmann::json& body) {
  return Do("POST", path, &body);
}
absl::StatusOr<ApiResponse> ApiClient::Put(const std::string& path, const nlohmann::json& body) {
  return Do("PUT", path, &body);
}
absl::StatusOr<ApiResponse> ApiClient::Delete(const std::string& path) {
  return Do("DELETE", path, nullptr);
}

std::string ApiError(const ApiResponse& r) {
  if (r.body.is_object() && r.body.contains("message") && r.body["message"].is_string()) {
    return absl::StrCat("HTTP ", r.code, ": ", r.body["message"].get<std::string>());
  }
  return absl::StrCat("HTTP ", r.code);
}

std::string ObjectPath(absl::string_view plural, absl::string_view ns, absl::string_view name) {
  return absl::StrCat("/api/v1/namespaces/", ns, "/", plural, "/", name);
}

}  // namespace tessera::agent
