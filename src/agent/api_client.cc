#include "agent/api_client.h"

#include <httplib.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/server_list.h"

namespace tessera::agent {

std::string ApiClient::NormalizeUrl(const std::string& server) {
  if (absl::StartsWith(server, "http://") || absl::StartsWith(server, "https://")) return server;
  return "http://" + server;
}

ApiClient::ApiClient(const std::string& server, std::string token, absl::Duration timeout,
                     const TlsClientOptions& tls)
    : token_(std::move(token)) {
  for (const std::string& one : SplitServerList(server)) urls_.push_back(NormalizeUrl(one));
  if (urls_.empty()) urls_.push_back(NormalizeUrl(server));
  const int64_t ms = absl::ToInt64Milliseconds(timeout);
  for (const std::string& url : urls_) {
    auto http = std::make_unique<httplib::Client>(url);
    if (!tls.ca_file.empty()) http->set_ca_cert_path(tls.ca_file.c_str());
    if (tls.insecure_skip_verify) http->enable_server_certificate_verification(false);
    http->set_connection_timeout(ms / 1000, (ms % 1000) * 1000);
    http->set_read_timeout(ms / 1000, (ms % 1000) * 1000);
    http->set_write_timeout(ms / 1000, (ms % 1000) * 1000);
    http->set_keep_alive(true);
    http->set_tcp_nodelay(true);  // headers and body go out as two writes; do not wait for ACKs
    http_.push_back(std::move(http));
  }
}

ApiClient::~ApiClient() = default;

void ApiClient::Cancel() {
  canceled_ = true;
  for (auto& http : http_) http->stop();
}

absl::StatusOr<ApiResponse> ApiClient::Do(const char* method, const std::string& path,
                                          const nlohmann::json* body) {
  httplib::Headers headers;
  if (!token_.empty()) headers.emplace("Authorization", "Bearer " + token_);
  const std::string m(method);
  canceled_ = false;
  std::string errors;
  for (size_t tried = 0; tried < http_.size(); ++tried) {
    const size_t i = current_.load() % http_.size();
    httplib::Client& http = *http_[i];
    httplib::Result res(nullptr, httplib::Error::Unknown);
    if (m == "GET") {
      res = http.Get(path, headers);
    } else if (m == "DELETE") {
      res = http.Delete(path, headers);
    } else if (m == "POST") {
      res = http.Post(path, headers, body->dump(), "application/json");
    } else {
      res = http.Put(path, headers, body->dump(), "application/json");
    }
    if (res) {
      ApiResponse out;
      out.code = res->status;
      out.body = nlohmann::json::parse(res->body, nullptr, false);
      if (out.body.is_discarded()) out.body = nlohmann::json();
      return out;
    }
    const httplib::Error err = res.error();
    absl::StrAppend(&errors, errors.empty() ? "" : "; ", urls_[i], ": ", httplib::to_string(err));
    if (canceled_ || err == httplib::Error::Canceled || http_.size() == 1) break;
    // The next request goes to the next server; this one too when it certainly never arrived.
    size_t expected = i;
    current_.compare_exchange_strong(expected, (i + 1) % http_.size());
    const bool unsent =
        err == httplib::Error::Connection || err == httplib::Error::ConnectionTimeout;
    if (!unsent && m != "GET") break;
  }
  return absl::UnavailableError(absl::StrCat(method, " ", path, ": ", errors));
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
