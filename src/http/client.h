// http::Client: a blocking HTTP/1.1 client on Boost.Beast, for command-line tools.
//
// Why not cpp-httplib's client: Debian's libcpp-httplib.so initializes OpenSSL from its static
// constructor (every error string, every cipher name) in each process that links it, TLS used
// or not: about half of the `tessera` CLI's start. Here OpenSSL is touched only when an https://
// URL is used.
//
// One connection per Client, kept alive across requests when the server allows it; a connection
// the server closed meanwhile is noticed before a request is written (the socket is readable)
// and replaced, so such a request is never lost in transit. TCP_NODELAY is set: a request's
// headers and body go out at once. TLS verifies the server's certificate against `ca_file` (or
// the system's CAs) and its name (a DNS name or an IP address, as in the URL) unless
// `insecure_skip_verify`.
//
// Errors are returned, never thrown. ClientError says whether the request may have reached the
// server: kConnection and kConnectionTimeout mean it certainly did not (a caller may retry it
// elsewhere); kWrite and kRead mean it may have.
//
// Thread safety: one thread at a time, except Cancel (any thread). A Client must not move while
// another thread may Cancel it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/time/time.h"

namespace tessera::http {

struct ClientOptions {
  absl::Duration connect_timeout = absl::Seconds(5);  // TCP connect and TLS handshake
  absl::Duration read_timeout = absl::Seconds(60);    // each wait for the server's bytes
  absl::Duration write_timeout = absl::Seconds(60);
  bool keep_alive = true;
  std::string bearer_token;  // sent as "Authorization: Bearer ..." when not empty
  // https:// only: the PEM bundle the server's certificate must chain to (empty: the system's
  // CAs), or no verification at all.
  std::string ca_file;
  bool insecure_skip_verify = false;
};

enum class ClientError {
  kNone,
  kBadUrl,             // not http(s)://HOST[:PORT]
  kConnection,         // no connection (refused, no route, name not resolved): nothing was sent
  kConnectionTimeout,  // the connection or TLS handshake did not complete in time: nothing sent
  kTls,                // the TLS handshake failed (nothing sent)
  kTlsVerify,          // the server's certificate was not trusted (nothing sent)
  kWrite,              // the request could not be written completely
  kRead,               // no complete answer (closed, timed out, malformed)
  kCanceled,           // the body callback stopped the read
};
// A short English phrase for messages ("timed out connecting").
std::string ToString(ClientError e);
// True when the request certainly did not reach a server.
inline bool Unsent(ClientError e) {
  return e == ClientError::kConnection || e == ClientError::kConnectionTimeout ||
         e == ClientError::kTls || e == ClientError::kTlsVerify || e == ClientError::kBadUrl;
}

struct ClientResponse {
  int status = 0;
  std::string body;
  ClientError error = ClientError::kNone;
  std::string detail;  // the system's or OpenSSL's words for `error`, when there are any
  bool ok() const { return error == ClientError::kNone; }
  // ToString(error), then the detail when there is one.
  std::string ErrorText() const;
};

using Headers = std::vector<std::pair<std::string, std::string>>;

class Client {
 public:
  // `base_url`: http://HOST[:PORT] or https://HOST[:PORT] (a trailing "/" is ignored). A bad URL
  // makes every request fail with kBadUrl.
  Client(std::string base_url, ClientOptions options);
  ~Client();
  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;

  // METHOD target (a path with its query) with `body` as `content_type` when not empty.
  ClientResponse Do(std::string_view method, std::string_view target, std::string_view body = {},
                    std::string_view content_type = {}, const Headers& headers = {});

  // GET target, its body handed to `on_data` as it arrives (chunked or not) once the status is
  // known (`on_status`, before any data). `on_data` returning false stops the read (kCanceled).
  // The read timeout applies to each wait for data.
  ClientResponse Stream(std::string_view target, const Headers& headers,
                        const std::function<void(int status)>& on_status,
                        const std::function<bool(std::string_view data)>& on_data);

  // Closes the connection (the next request opens one).
  void Close();

  // From any thread: makes the request in flight, if any, fail now (with the error of the step
  // it was at) by closing its connection. No effect on requests that start after it returns.
  void Cancel();

  const std::string& base_url() const { return base_url_; }
  ClientOptions& options() { return options_; }

 private:
  class Conn;
  // Connects when needed and writes the request; kNone once it is sent.
  ClientError Send(std::string_view method, std::string_view target, std::string_view body,
                   std::string_view content_type, const Headers& headers, std::string* detail);
  std::string base_url_;
  ClientOptions options_;
  std::unique_ptr<Conn> conn_;
};

}  // namespace tessera::http
