// BoundedServer: cpp-httplib's HTTP server (or its TLS server) with every connection read
// through a DeadlineStream, so that no client holds a connection thread longer than the
// limits say, whatever it sends and however slowly.
//
// How: cpp-httplib calls the virtual process_and_close_socket() for each accepted connection on
// a thread of its task queue; this class overrides it with ServeConnection(), which runs the
// keep-alive loop itself (the TLS handshake first, for SslServer) and hands each request to
// cpp-httplib's request parser and router (Server::process_request) over a DeadlineStream. Routes,
// handlers, pre-routing handlers and responses are cpp-httplib's, unchanged.
//
// Per connection: the TLS handshake and each request's headers within `header_timeout` and
// `max_header_bytes`, the body within `body_timeout` and `max_body_wire_bytes`, at most
// keep_alive_timeout (set_keep_alive_timeout) idle between requests, `keep_alive_max_count`
// requests. A request cut by a limit gets cpp-httplib's 400 (when anything can still be written)
// and its connection is closed; cuts() counts them by cause.
//
// Thread safety: as httplib::Server (configure, then listen; stop() from any thread).
#pragma once

#include <httplib.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <type_traits>
#include <utility>

#include "absl/functional/function_ref.h"
#include "http/deadline_stream.h"

namespace tessera::http {

// Connections closed by each limit since start, indexed by DeadlineStream::Failure.
class CutCounters {
 public:
  void Add(DeadlineStream::Failure f) { counts_[static_cast<size_t>(f)].fetch_add(1); }
  int64_t Get(DeadlineStream::Failure f) const { return counts_[static_cast<size_t>(f)].load(); }
  // The failures that are limits (not a peer closing or a socket error), for metrics.
  static constexpr std::array<DeadlineStream::Failure, 5> kLimits = {
      DeadlineStream::Failure::kIoTimeout, DeadlineStream::Failure::kHeaderTimeout,
      DeadlineStream::Failure::kHeadersTooLarge, DeadlineStream::Failure::kBodyTimeout,
      DeadlineStream::Failure::kBodyTooLarge};

 private:
  std::array<std::atomic<int64_t>, 8> counts_{};
};

// One request: cpp-httplib's process_request over `stream`, which must call
// stream.HeadersDone() once the headers are parsed (from cpp-httplib's setup_request hook).
using ProcessRequestFn = absl::FunctionRef<bool(DeadlineStream& stream, bool close_connection,
                                                bool& connection_closed, SSL* ssl)>;

// Serves one accepted connection until it closes, a limit cuts it, `keep_alive_max` requests
// were served or `listening` turns invalid (the server stops); then shuts down and closes `sock`.
// `ctx` non-null: TLS. `on_cut` is told of each limit that cut the connection. Returns whether
// the last request was served.
bool ServeConnection(int sock, SSL_CTX* ctx, const ConnectionLimits& limits, size_t keep_alive_max,
                     absl::Duration keep_alive_timeout, const std::atomic<::socket_t>& listening,
                     absl::FunctionRef<void(DeadlineStream::Failure)> on_cut,
                     ProcessRequestFn process);

template <typename Base>
class Bounded final : public Base {
  static_assert(std::is_base_of_v<httplib::Server, Base>);

 public:
  // `args` go to Base's constructor (SSLServer's TLS context set-up).
  template <typename... Args>
  explicit Bounded(const ConnectionLimits& limits, Args&&... args)
      : Base(std::forward<Args>(args)...), limits_(limits) {}

  const ConnectionLimits& limits() const { return limits_; }
  const CutCounters& cuts() const { return cuts_; }
  // Called (on the connection's thread) each time a limit cuts a connection, e.g. to count it in
  // a metrics registry. Set before listening.
  void set_cut_handler(std::function<void(DeadlineStream::Failure)> h) { on_cut_ = std::move(h); }

 private:
  bool process_and_close_socket(::socket_t sock) override {
    SSL_CTX* ctx = nullptr;
    if constexpr (std::is_base_of_v<httplib::SSLServer, Base>) ctx = this->ssl_context();
    return ServeConnection(
        sock, ctx, limits_, this->keep_alive_max_count_,
        absl::Seconds(this->keep_alive_timeout_sec_), this->svr_sock_,
        [this](DeadlineStream::Failure f) {
          cuts_.Add(f);
          if (on_cut_) on_cut_(f);
        },
        [this](DeadlineStream& stream, bool close_connection, bool& connection_closed, SSL* ssl) {
          return this->process_request(stream, close_connection, connection_closed,
                                       [&stream, ssl](httplib::Request& req) {
                                         stream.HeadersDone();
                                         req.ssl = ssl;
                                       });
        });
  }

  ConnectionLimits limits_;
  CutCounters cuts_;
  std::function<void(DeadlineStream::Failure)> on_cut_;
};

using BoundedServer = Bounded<httplib::Server>;
using BoundedSslServer = Bounded<httplib::SSLServer>;

}  // namespace tessera::http
