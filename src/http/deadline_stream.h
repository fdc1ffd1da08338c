// DeadlineStream: the byte stream of one server connection (plain TCP or TLS) that cpp-httplib
// parses requests from, with the limits cpp-httplib 0.11 does not have.
//
// cpp-httplib reads a request through its Stream interface, and its own socket stream bounds
// each read only (the read timeout restarts with every byte), so a client trickling one header
// byte every few seconds held a thread for as long as it liked (slow-loris), and a request line or
// header line was buffered whole however long it was. This stream bounds a request as a whole:
//
//   * header phase (BeginRequest() .. HeadersDone()): every read must finish before
//     `header_timeout` after the request began, and at most `max_header_bytes` may be read (the
//     request line and every header line together). Past either, read() fails; cpp-httplib then
//     answers 400 and closes the connection.
//   * body phase (HeadersDone() .. the next BeginRequest()): reads must finish before
//     `body_timeout` after the headers ended, at most `max_body_wire_bytes` in all (chunk
//     framing included). The API's own body limit (request_body.h) counts decoded bytes; this one
//     bounds what the chunk decoder may buffer (a chunk-size line is a line too).
//   * each read or write waits at most `io_timeout` for the peer (as cpp-httplib's own).
//
// The socket is switched to non-blocking: every wait is a poll() with the time left, never a
// blocking recv/SSL_read that a half-sent TLS record could stretch.
//
// Time here is the kernel's monotonic clock, not an injected Clock: these are socket timeouts,
// which no test fakes.
//
// Thread safety: one connection, one thread (the one cpp-httplib serves it on).
// Ownership: borrows the socket and the SSL object; the caller closes them.
#pragma once

#include <httplib.h>
#include <openssl/ssl.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "absl/time/time.h"

namespace tessera::http {

// Per-connection limits (see the file comment). Zero or negative durations and sizes mean
// "no limit" for that bound, which only tests use.
struct ConnectionLimits {
  absl::Duration header_timeout = absl::Seconds(10);
  int64_t max_header_bytes = int64_t{64} * 1024;
  absl::Duration body_timeout = absl::Seconds(60);
  int64_t max_body_wire_bytes = 16 << 20;
  absl::Duration io_timeout = absl::Seconds(5);
};

class DeadlineStream final : public httplib::Stream {
 public:
  // `ssl` null: plain TCP. Sets O_NONBLOCK on `sock`.
  DeadlineStream(int sock, SSL* ssl, const ConnectionLimits& limits);

  // The TLS handshake (server side), within header_timeout. False if it failed (failure():
  // kError) or timed out (kHeaderTimeout).
  bool AcceptTls();
  // Waits up to `idle` for the first byte of another request; false when the peer closed, the
  // wait ran out, or `stop()` turned true (checked every 100 ms, so a stopping server is not held
  // by idle keep-alive connections).
  template <typename StopFn>
  bool WaitForRequest(absl::Duration idle, StopFn stop);
  // Starts the header phase of the next request.
  void BeginRequest();
  // Starts the body phase (called once cpp-httplib has parsed the headers).
  void HeadersDone();
  // Why the last read failed (kNone when none did since BeginRequest).
  enum class Failure {
    kNone,
    kClosed,
    kError,
    kIoTimeout,
    kHeaderTimeout,
    kHeadersTooLarge,
    kBodyTimeout,
    kBodyTooLarge
  };
  Failure failure() const { return failure_; }
  static const char* FailureName(Failure f);

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  ::socket_t socket() const override { return sock_; }

 private:
  using SteadyTime = std::chrono::steady_clock::time_point;
  enum class Phase { kIdle, kHeaders, kBody };

  // Fills buf_ with at least one byte; false on EOF, error or deadline (failure_ says which).
  bool Fill();
  // Waits for `events` (POLLIN/POLLOUT) until `until`; false on timeout or error.
  bool Wait(short events, SteadyTime until) const;
  SteadyTime IoDeadline() const;
  bool Buffered() const;
  bool WaitSlice(absl::Duration slice);

  int sock_;
  SSL* ssl_;
  ConnectionLimits limits_;
  Phase phase_ = Phase::kIdle;
  SteadyTime phase_deadline_{};  // max() when the phase has no time limit
  int64_t phase_bytes_ = 0;      // bytes handed to the parser in this phase
  int64_t phase_budget_ = 0;     // 0: no byte limit
  Failure failure_ = Failure::kNone;
  char buf_[16384];
  size_t buf_begin_ = 0;
  size_t buf_end_ = 0;
};

template <typename StopFn>
bool DeadlineStream::WaitForRequest(absl::Duration idle, StopFn stop) {
  const absl::Duration slice = absl::Milliseconds(100);
  for (absl::Duration left = idle; left > absl::ZeroDuration(); left -= slice) {
    if (stop()) return false;
    if (Buffered() || WaitSlice(std::min(slice, left))) return !stop();
  }
  return false;
}

}  // namespace tessera::http
