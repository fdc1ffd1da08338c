#include "agent/api_client.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/server_list.h"
#include "http/client.h"

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
  for (const std::string& url : urls_) {
    http::ClientOptions o;
    o.connect_timeout = timeout;
    o.read_timeout = timeout;
    o.write_timeout = timeout;
    o.keep_alive = true;
    o.bearer_token = token_;
    o.ca_file = tls.ca_file;
    o.insecure_skip_verify = tls.insecure_skip_verify;
    http_.push_back(std::make_unique<http::Client>(url, std::move(o)));
  }
}

ApiClient::~ApiClient() = default;

void ApiClient::Cancel() {
  canceled_ = true;
  for (auto& http : http_) http->Cancel();
}

absl::StatusOr<ApiResponse> ApiClient::Do(const char* method, const std::string& path,
                                          const nlohmann::json* body) {
  const std::string m(method);
  const std::string payload = body != nullptr ? body->dump() : "";
  canceled_ = false;
  std::string errors;
  for (size_t tried = 0; tried < http_.size(); ++tried) {
    const size_t i = current_.load() % http_.size();
    http::ClientResponse res =
        http_[i]->Do(m, path, payload, body != nullptr ? "application/json" : "");
    if (res.ok()) {
      ApiResponse out;
      out.code = res.status;
      out.body = nlohmann::json::parse(res.body, nullptr, false);
      if (out.body.is_discarded()) out.body = nlohmann::json();
      return out;
    }
    absl::StrAppend(&errors, errors.empty() ? "" : "; ", urls_[i], ": ", res.ErrorText());
    if (canceled_ || http_.size() == 1) break;
    // The next request goes to the next server; this one too when it certainly never arrived.
    size_t expected = i;
    current_.compare_exchange_strong(expected, (i + 1) % http_.size());
    if (!http::Unsent(res.error) && m != "GET") break;
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
