// Test helper: HTTP requests written byte by byte on a raw socket, for what a well-behaved client
// library never sends (chunked bodies past the limit, bodies that never end).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tessera::http::testing {

// What a raw exchange got back.
struct RawReply {
  std::string text;            // everything read until the server closed (or 10 s passed)
  size_t body_bytes_sent = 0;  // body (Trickle: request) bytes sent before the server stopped
  bool closed = false;         // the server ended the connection
};

// A TCP connection to 127.0.0.1:`port`, or -1.
inline int ConnectLoopback(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Reads what the server sends on `fd` into out.text until it closes the connection
// (out.closed) or 10 s pass without a byte. The caller closes `fd`.
inline void ReadReply(int fd, RawReply& out) {
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char buf[4096];
  while (true) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) out.closed = true;
    if (n <= 0) break;
    out.text.append(buf, static_cast<size_t>(n));
  }
}

// Sends `head` (request line and headers, ending in an empty line), then `body_bytes` of body in
// chunked encoding (64 KiB chunks of 'x'), never sending the terminating chunk: the server must
// answer without the body's end. Sends stop at the first error (the server closed) and each send
// or read waits at most 10 s. Then reads the reply until the server closes the connection.
inline RawReply SendUnendingChunkedBody(int port, const std::string& head, size_t body_bytes) {
  RawReply out;
  int fd = ConnectLoopback(port);
  if (fd < 0) return out;
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  auto send_all = [&](const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  };
  if (send_all(head)) {
    const std::string chunk = absl::StrFormat("%x\r\n", 65536) + std::string(65536, 'x') + "\r\n";
    while (out.body_bytes_sent < body_bytes && send_all(chunk)) out.body_bytes_sent += 65536;
  }
  ReadReply(fd, out);
  close(fd);
  return out;
}

// Sends `prefix` at once, then `text` one byte every `gap_ms` (a slow-loris client), stopping
// when the server answers or closes; then reads the reply until the server closes the connection
// (at most 10 s more). body_bytes_sent counts the bytes of `text` sent.
inline RawReply Trickle(int port, const std::string& prefix, const std::string& text, int gap_ms) {
  RawReply out;
  int fd = ConnectLoopback(port);
  if (fd < 0) return out;
  if (send(fd, prefix.data(), prefix.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(prefix.size())) {
    close(fd);
    return out;
  }
  for (char c : text) {
    if (send(fd, &c, 1, MSG_NOSIGNAL) != 1) break;
    ++out.body_bytes_sent;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, gap_ms) > 0) break;  // answered or closed
  }
  ReadReply(fd, out);
  close(fd);
  return out;
}

// A chunked POST's request line and headers; `token` empty: no Authorization header.
inline std::string ChunkedPostHead(const std::string& path, const std::string& token) {
  return absl::StrCat("POST ", path, " HTTP/1.1\r\nHost: x\r\n",
                      token.empty() ? "" : absl::StrCat("Authorization: Bearer ", token, "\r\n"),
                      "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n");
}

}  // namespace tessera::http::testing
