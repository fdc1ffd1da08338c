// EventServer: the API's HTTP/1.1 front end, event-driven (Boost.Asio + Boost.Beast's parser),
// with cpp-httplib's router and handlers unchanged behind it.
//
// Why Beast/Asio: Debian 12 ships it (header-only, libboost-dev), it parses HTTP/1.1 with limits
// on headers and bodies, does TLS through OpenSSL (asio::ssl, on the SSL_CTX tls_policy.h builds),
// and its completion model lets an idle keep-alive connection or a parked long-poll cost a socket,
// a timer and a buffer instead of a thread. cpp-httplib (the previous front end, bounded_server.h)
// holds a thread per connection for the connection's whole life.
//
// How a request goes:
//   1. I/O threads (`io_threads`, default 2) accept, do the TLS handshake, and read each request
//      with Beast's parser: nothing of a request before `keep_alive_idle` of silence between
//      requests closes the connection quietly; its headers within `header_timeout` of its first
//      byte and `max_header_bytes`; its body within `body_timeout` and `max_body_wire_bytes`. A
//      limit that cuts a request is answered by `cut_response` (400/413 by default) and closes the
//      connection; `on_cut` counts it.
//   2. `screen` sees the headers before any body is read (e.g. refuse an unauthenticated upload
//      without reading it; the connection is then closed).
//   3. A request matching a deferred route (AddDeferred) goes to its handler on a worker thread
//      with a Responder, which answers later from any thread: a long-poll parks without holding
//      any thread. Every other request is replayed, bytes as read, into cpp-httplib's own
//      process_request (routes, pre-routing, error and exception handlers, logger as registered
//      on this object) on a worker thread (`worker_threads`), or, when `is_stream(req)` says so
//      (watches), on `stream_executor` (which may hold a thread per stream). The response goes out
//      as the handler writes it (chunked streams included), at most `max_pending_bytes` buffered
//      per connection: a slow reader blocks its writer, and a write stuck `io_timeout` closes.
//   4. Keep-alive: the next request is read after the response is out, up to `keep_alive_max`.
//      Pipelined requests wait in the connection's buffer and are served in order.
//
// More than `max_connections` open connections: a new one is answered 503 and closed. More than
// `max_queued` requests waiting for a worker: 503 with Retry-After.
//
// Thread safety: configure (routes, options) before Start(); Stop() from any thread, once the
// server started (idempotent; joins every thread it started). Responder methods from any thread.
#pragma once

#include <httplib.h>
#include <openssl/ssl.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "http/deadline_stream.h"

namespace tessera::http {

struct EventServerOptions {
  ConnectionLimits limits;
  absl::Duration keep_alive_idle = absl::Seconds(5);
  size_t keep_alive_max = 100000;
  int io_threads = 2;
  int worker_threads = 8;
  int max_connections = 100000;
  int max_queued = 10000;
  size_t max_pending_bytes = 4 << 20;
  // Requests run on stream_executor instead of a worker (long-lived streams). Both or neither.
  std::function<bool(const httplib::Request& head)> is_stream;
  std::function<void(std::function<void()>)> stream_executor;
  // Called on an I/O thread with a request's method, target, path and headers (no params, no
  // body): return true with `res` filled to answer it without reading its body (the connection
  // is closed after). Must be quick: no I/O.
  std::function<bool(const httplib::Request& head, httplib::Response& res)> screen;
  // The answer to a request a limit cut (default: 400, or 413 for kBodyTooLarge), given how
  // many body bytes (decoded) had arrived.
  std::function<void(DeadlineStream::Failure, uint64_t body_bytes, httplib::Response& res)>
      cut_response;
  // Told of each limit that cut a connection (any thread).
  std::function<void(DeadlineStream::Failure)> on_cut;
  // TLS: takes ownership. Null: plain TCP.
  SSL_CTX* tls = nullptr;
};

// Answers one deferred request, once, from any thread. Dropping the last reference without
// answering closes the connection.
class Responder {
 public:
  virtual ~Responder() = default;
  // Sends `res` (status, headers, body; Content-Length is set here). Only the first call counts.
  virtual void Send(httplib::Response res) = 0;
  // Runs `fn` on a worker thread (e.g. to build the answer after a wake-up from another thread).
  virtual void Post(std::function<void()> fn) = 0;
  // Runs `fn` on a worker thread at `deadline` (unless the server stops first). One timer per
  // responder; a second call replaces the first.
  virtual void RunAt(absl::Time deadline, std::function<void()> fn) = 0;
};

class EventServer final : public httplib::Server {
 public:
  using DeferredHandler =
      std::function<void(const httplib::Request& req, std::shared_ptr<Responder> responder)>;

  explicit EventServer(EventServerOptions options);
  ~EventServer() override;
  EventServer(const EventServer&) = delete;
  EventServer& operator=(const EventServer&) = delete;

  // `method` requests whose path matches `path` (whole) go to `handler` on a worker thread, with
  // params, headers and body decoded as cpp-httplib would (matches filled).
  void AddDeferred(const std::string& method, const std::string& path, DeferredHandler handler);

  // Binds host:port (0: any free port) and starts the threads. Returns the bound port.
  absl::StatusOr<int> Start(const std::string& host, int port);
  // Stops accepting, closes every connection, joins the threads. Idempotent.
  void Stop();

  // Gauges and counters, for metrics and tests.
  int open_connections() const;
  int parked() const;  // deferred requests not answered yet
  int queued() const;  // requests read, waiting for a worker
  int64_t refused_connections() const;
  int64_t refused_requests() const;
  int threads() const;  // I/O and worker threads (not stream_executor's)

  struct Impl;  // event_server.cc

 private:
  friend struct Impl;
  // cpp-httplib's request processing over `stream` (protected in httplib::Server).
  bool Process(httplib::Stream& stream, bool close, bool& closed, const SSL* ssl);

  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::http
