// ApiClient: the CLI's HTTP/JSON client for the /api/v1 API, and the
// kubeconfig-like configuration that says which server, token and namespace
// to use.
//
// Configuration, lowest precedence first: the config file (default
// ~/.tessera/config, or env TESSERA_CONFIG), then env TESSERA_SERVER /
// TESSERA_TOKEN / TESSERA_NAMESPACE, then --server/--token/--namespace.
// The file is YAML:
//   current-context: prod
//   contexts:
//   - name: prod
//     server: http://10.0.0.1:7420
//     token: s3cret
//     namespace: team-a
//     certificate-authority: /etc/tessera/ca.pem   # https:// servers
//     insecure-skip-tls-verify: false
// (or the keys at top level for a single cluster).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cli/yaml_json.h"

namespace tessera::http {
class Client;
}  // namespace tessera::http

namespace tessera::cli {

struct ClientConfig {
  // The server in use; `servers` lists them all when several replicas were given
  // ("a,b,c": ResolveConfig splits and checks them, server is then the first).
  std::string server = "http://127.0.0.1:7420";
  std::vector<std::string> servers;
  std::string token;
  std::string ns = "default";
  // https:// servers: the CA bundle that signed the server's certificate
  // (empty: the system's), or no verification at all (like kubectl's
  // --insecure-skip-tls-verify).
  std::string ca_file;
  bool insecure_skip_tls_verify = false;
};

struct ConfigFlags {
  std::string config_file;  // empty: TESSERA_CONFIG or ~/.tessera/config
  std::string server, token, ns, context, ca_file;
  bool insecure_skip_tls_verify = false;
};

// Resolves the configuration; InvalidArgument naming the file and key when
// the file is malformed. A missing default file is not an error.
absl::StatusOr<ClientConfig> ResolveConfig(const ConfigFlags& flags);

// The implicit noexcept moves call nlohmann::json's move, which only asserts;
// clang-tidy cannot see that it never throws.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct Response {
  int code = 0;
  Json body;  // parsed JSON, or a string when the body is not JSON
};

// One keep-alive connection to the server, reused by every Do (a command that lists, reads
// and writes pays for one TCP and TLS handshake); reconnected transparently when the server
// closed it. With several servers (replicas) it moves to the next on a transport failure: a GET
// or a request that never left is retried there at once; another write that failed in transit is
// Unavailable (it may have been applied). Not thread-safe: one client per thread.
class ApiClient {
 public:
  explicit ApiClient(ClientConfig config);
  ApiClient(ApiClient&&) noexcept;
  ApiClient& operator=(ApiClient&&) noexcept;
  ~ApiClient();

  // Sends METHOD path (under the server's base URL) with an optional JSON
  // body, and `accept` as the Accept header when not empty. Errors only for transport failures
  // (Unavailable); HTTP error codes come back in the Response.
  absl::StatusOr<Response> Do(const std::string& method, const std::string& path,
                              const Json* body = nullptr, const std::string& accept = "");
  // GET path as a stream of lines (a watch: one JSON event per line), each passed to `on_line`
  // until it returns false, the server ends the response or `timeout` (0: none) passes. Returns
  // the HTTP status (a non-200 answer's body comes back in `error_body`); Unavailable when the
  // server cannot be reached. Uses a connection of its own.
  absl::StatusOr<int> Stream(const std::string& path,
                             const std::function<bool(const std::string& line)>& on_line,
                             absl::Duration timeout, std::string* error_body);
  const ClientConfig& config() const { return config_; }

 private:
  void Next();  // moves to the next server
  ClientConfig config_;
  size_t current_ = 0;
  std::unique_ptr<http::Client> http_;
};

// Where a token comes from, said with every 401.
inline constexpr char kTokenHint[] =
    "Give a token with --token, env TESSERA_TOKEN, or token: in a context of ~/.tessera/config. "
    "A server started without --tokens-file keeps its admin token in DATA_DIR/admin-token on "
    "its host (TESSERA_TOKEN=$(cat DATA_DIR/admin-token)); `tessera up` prints its token.";

// The message of a failed response ("NotFound: trainingjobs \"x\" not found"); a 401 adds
// kTokenHint.
std::string ErrorText(const Response& r);

}  // namespace tessera::cli
