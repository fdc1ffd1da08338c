// ApiClient: a minimal JSON client for `tessera server`'s /api/v1 (docs/api.md), used by the
// node agent, `tessera logs`, `tessera up` and the federation hub's dispatcher (its own library,
// tessera_api_client). Its transport is http::Client (src/http/client.h), as the CLI's.
// Several servers (replicas of one control plane, docs/control-plane.md "Replicas"): `server` may
// list them with commas; the client talks to one and moves to the next on a transport failure.
// A request that certainly never reached a server (no connection) is retried on each other
// server at once; a GET is retried whatever the failure; any other request that failed in
// transit (it may have been applied) is answered Unavailable and the next request goes to the
// next server. HTTP error codes never move it.
// Thread safety: one ApiClient per thread (it holds one keep-alive connection); Cancel from any.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace tessera::http {
class Client;
}  // namespace tessera::http

namespace tessera::agent {

// The implicit noexcept moves call nlohmann::json's move, which only asserts;
// clang-tidy cannot see that it never throws.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct ApiResponse {
  int code = 0;  // HTTP status
  nlohmann::json body;
};

// How an https:// server's certificate is checked (kubectl's habits): against `ca_file` (PEM),
// else the system's CAs; `insecure_skip_verify` turns the check off. Ignored for http://.
struct TlsClientOptions {
  std::string ca_file;
  bool insecure_skip_verify = false;
};

class ApiClient {
 public:
  // `server`: "http://HOST:PORT", "https://HOST:PORT" (or "HOST:PORT"), or several of them
  // separated by commas; `token` may be empty (no Authorization).
  ApiClient(const std::string& server, std::string token,
            absl::Duration timeout = absl::Seconds(10), const TlsClientOptions& tls = {});
  ~ApiClient();

  // Unavailable when no HTTP exchange happened (connection refused, timeout); otherwise the
  // response, whatever its status code.
  absl::StatusOr<ApiResponse> Get(const std::string& path);
  absl::StatusOr<ApiResponse> Post(const std::string& path, const nlohmann::json& body);
  absl::StatusOr<ApiResponse> Put(const std::string& path, const nlohmann::json& body);
  absl::StatusOr<ApiResponse> Delete(const std::string& path);

  // Aborts a request in flight (from another thread): it fails with Unavailable.
  void Cancel();

  // "HOST:PORT" -> "http://HOST:PORT"; a URL with a scheme is kept.
  static std::string NormalizeUrl(const std::string& server);
  // The server in use now (normalized).
  const std::string& server() const { return urls_[current_.load() % urls_.size()]; }

 private:
  absl::StatusOr<ApiResponse> Do(const char* method, const std::string& path,
                                 const nlohmann::json* body);
  std::vector<std::string> urls_;
  // One client per server, all made up front (Cancel may run concurrently with a move).
  std::vector<std::unique_ptr<http::Client>> http_;
  std::atomic<size_t> current_{0};
  std::atomic<bool> canceled_{false};
  std::string token_;
};

// "a message naming the code": the Status body's message, or the HTTP code.
std::string ApiError(const ApiResponse& r);

// The API path of a namespaced object: /api/v1/namespaces/NS/PLURAL/NAME.
std::string ObjectPath(absl::string_view plural, absl::string_view ns, absl::string_view name);

}  // namespace tessera::agent
