#include "http/bounded_server.h"

#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

namespace tessera::http {

bool ServeConnection(int sock, SSL_CTX* ctx, const ConnectionLimits& limits, size_t keep_alive_max,
                     absl::Duration keep_alive_timeout, const std::atomic<::socket_t>& listening,
                     absl::FunctionRef<void(DeadlineStream::Failure)> on_cut,
                     ProcessRequestFn process) {
  // SSL_new on a shared SSL_CTX is thread-safe (OpenSSL >= 1.1); the context is not changed
  // after the server starts, so cpp-httplib's context mutex is not needed here.
  SSL* ssl = ctx != nullptr ? SSL_new(ctx) : nullptr;
  bool ok = false;
  bool tls_up = false;
  {
    DeadlineStream stream(sock, ssl, limits);
    const bool usable = ctx == nullptr || (ssl != nullptr && (tls_up = stream.AcceptTls()));
    if (ctx != nullptr && !tls_up && stream.failure() == DeadlineStream::Failure::kHeaderTimeout) {
      on_cut(DeadlineStream::Failure::kHeaderTimeout);
    }
    auto stopping = [&listening] { return listening.load() == INVALID_SOCKET; };
    for (size_t left = keep_alive_max; usable && left > 0; --left) {
      if (!stream.WaitForRequest(keep_alive_timeout, stopping)) break;
      stream.BeginRequest();
      bool closed = false;
      ok = process(stream, left == 1, closed, ssl);
      const DeadlineStream::Failure why = stream.failure();
      if (why != DeadlineStream::Failure::kNone && why != DeadlineStream::Failure::kClosed &&
          why != DeadlineStream::Failure::kError) {
        on_cut(why);
        break;  // the request was cut mid-way: what follows on the wire is not a request
      }
      if (!ok || closed) break;
    }
  }
  if (ssl != nullptr) {
    if (tls_up && ok) SSL_shutdown(ssl);  // one close_notify, not waiting for the peer's
    SSL_free(ssl);
  }
  shutdown(sock, SHUT_RDWR);
  close(sock);
  return ok;
}

}  // namespace tessera::http
