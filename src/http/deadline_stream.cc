#include "http/deadline_stream.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <openssl/err.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace tessera::http {
namespace {

using SteadyClock = std::chrono::steady_clock;

SteadyClock::time_point After(absl::Duration d) {
  if (d <= absl::ZeroDuration()) return SteadyClock::time_point::max();
  return SteadyClock::now() + absl::ToChronoNanoseconds(d);
}

void AddressOf(int sock, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  int rc = peer ? getpeername(sock, reinterpret_cast<sockaddr*>(&addr), &len)
                : getsockname(sock, reinterpret_cast<sockaddr*>(&addr), &len);
  if (rc != 0) return;
  char host[NI_MAXHOST];
  if (getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof(host), nullptr, 0,
                  NI_NUMERICHOST) == 0) {
    ip = host;
  }
  if (addr.ss_family == AF_INET) {
    port = ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    port = ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  }
}

}  // namespace

DeadlineStream::DeadlineStream(int sock, SSL* ssl, const ConnectionLimits& limits)
    : sock_(sock), ssl_(ssl), limits_(limits) {
  int flags = fcntl(sock_, F_GETFL, 0);
  if (flags >= 0) fcntl(sock_, F_SETFL, flags | O_NONBLOCK);
}

bool DeadlineStream::Wait(short events, SteadyTime until) const {
  while (true) {
    const auto now = SteadyClock::now();
    if (now >= until) return false;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count();
    pollfd p{sock_, events, 0};
    const int rc = poll(&p, 1, static_cast<int>(std::min<int64_t>(left + 1, 1 << 30)));
    if (rc > 0) return true;  // ready, or an error/hang-up the next recv/send reports
    if (rc < 0 && errno != EINTR) return false;
  }
}

DeadlineStream::SteadyTime DeadlineStream::IoDeadline() const {
  return std::min(After(limits_.io_timeout), phase_deadline_);
}

bool DeadlineStream::Buffered() const {
  return buf_begin_ < buf_end_ || (ssl_ != nullptr && SSL_pending(ssl_) > 0);
}

bool DeadlineStream::WaitSlice(absl::Duration slice) { return Wait(POLLIN, After(slice)); }

bool DeadlineStream::AcceptTls() {
  if (ssl_ == nullptr) return true;
  const SteadyTime until = After(limits_.header_timeout);
  SSL_set_fd(ssl_, sock_);
  while (true) {
    ERR_clear_error();
    const int rc = SSL_accept(ssl_);
    if (rc == 1) return true;
    const int err = SSL_get_error(ssl_, rc);
    if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
      failure_ = Failure::kError;
      return false;
    }
    if (!Wait(err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, until)) {
      failure_ = Failure::kHeaderTimeout;
      return false;
    }
  }
}

void DeadlineStream::BeginRequest() {
  phase_ = Phase::kHeaders;
  phase_deadline_ = After(limits_.header_timeout);
  phase_bytes_ = 0;
  phase_budget_ = std::max<int64_t>(limits_.max_header_bytes, 0);
  failure_ = Failure::kNone;
}

void DeadlineStream::HeadersDone() {
  phase_ = Phase::kBody;
  phase_deadline_ = After(limits_.body_timeout);
  phase_bytes_ = 0;
  phase_budget_ = std::max<int64_t>(limits_.max_body_wire_bytes, 0);
}

bool DeadlineStream::Fill() {
  buf_begin_ = buf_end_ = 0;
  const SteadyTime until = IoDeadline();
  while (true) {
    ssize_t n = 0;
    bool want_write = false;
    if (ssl_ != nullptr) {
      ERR_clear_error();
      const int rc = SSL_read(ssl_, buf_, sizeof(buf_));
      if (rc > 0) {
        n = rc;
      } else {
        const int err = SSL_get_error(ssl_, rc);
        if (err == SSL_ERROR_ZERO_RETURN) {
          failure_ = Failure::kClosed;
          return false;
        }
        if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
          failure_ = Failure::kError;
          return false;
        }
        want_write = err == SSL_ERROR_WANT_WRITE;
        n = -1;
        errno = EAGAIN;
      }
    } else {
      n = recv(sock_, buf_, sizeof(buf_), 0);
      if (n == 0) {
        failure_ = Failure::kClosed;
        return false;
      }
    }
    if (n > 0) {
      buf_end_ = static_cast<size_t>(n);
      return true;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      failure_ = Failure::kError;
      return false;
    }
    if (!Wait(want_write ? POLLOUT : POLLIN, until)) {
      failure_ = SteadyClock::now() < phase_deadline_ ? Failure::kIoTimeout
                 : phase_ == Phase::kHeaders          ? Failure::kHeaderTimeout
                                                      : Failure::kBodyTimeout;
      return false;
    }
  }
}

ssize_t DeadlineStream::read(char* ptr, size_t size) {
  if (size == 0) return 0;
  if (phase_budget_ > 0) {
    const int64_t left = phase_budget_ - phase_bytes_;
    if (left <= 0) {
      failure_ = phase_ == Phase::kHeaders ? Failure::kHeadersTooLarge : Failure::kBodyTooLarge;
      return -1;
    }
    size = std::min<size_t>(size, static_cast<size_t>(left));
  }
  if (buf_begin_ == buf_end_) {
    if (SteadyClock::now() >= phase_deadline_) {
      failure_ = phase_ == Phase::kHeaders ? Failure::kHeaderTimeout : Failure::kBodyTimeout;
      return -1;
    }
    if (!Fill()) return -1;
  }
  const size_t n = std::min(size, buf_end_ - buf_begin_);
  std::memcpy(ptr, buf_ + buf_begin_, n);
  buf_begin_ += n;
  phase_bytes_ += static_cast<int64_t>(n);
  return static_cast<ssize_t>(n);
}

ssize_t DeadlineStream::write(const char* ptr, size_t size) {
  const SteadyTime until = After(limits_.io_timeout);
  size_t done = 0;
  while (done < size) {
    bool want_read = false;
    ssize_t n = 0;
    if (ssl_ != nullptr) {
      ERR_clear_error();
      const int chunk = static_cast<int>(std::min<size_t>(size - done, 1 << 30));
      const int rc = SSL_write(ssl_, ptr + done, chunk);
      if (rc > 0) {
        n = rc;
      } else {
        const int err = SSL_get_error(ssl_, rc);
        if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) return -1;
        want_read = err == SSL_ERROR_WANT_READ;
        n = -1;
        errno = EAGAIN;
      }
    } else {
      n = send(sock_, ptr + done, size - done, MSG_NOSIGNAL);
    }
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return -1;
    if (!Wait(want_read ? POLLIN : POLLOUT, until)) return -1;
  }
  return static_cast<ssize_t>(done);
}

bool DeadlineStream::is_readable() const { return Buffered() || Wait(POLLIN, IoDeadline()); }

bool DeadlineStream::is_writable() const { return Wait(POLLOUT, After(limits_.io_timeout)); }

void DeadlineStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  AddressOf(sock_, true, ip, port);
}

void DeadlineStream::get_local_ip_and_port(std::string& ip, int& port) const {
  AddressOf(sock_, false, ip, port);
}

const char* DeadlineStream::FailureName(Failure f) {
  switch (f) {
    case Failure::kNone:
      return "none";
    case Failure::kClosed:
      return "closed";
    case Failure::kError:
      return "error";
    case Failure::kIoTimeout:
      return "io_timeout";
    case Failure::kHeaderTimeout:
      return "header_timeout";
    case Failure::kHeadersTooLarge:
      return "headers_too_large";
    case Failure::kBodyTimeout:
      return "body_timeout";
    case Failure::kBodyTooLarge:
      return "body_too_large";
  }
  return "unknown";
}

}  // namespace tessera::http
