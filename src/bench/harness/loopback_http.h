// Raw HTTP/1.1 on non-blocking loopback sockets, for benchmarks that drive thousands of simulated
// clients (node agents) from one epoll thread instead of a thread each.
//
// Pure functions, and sockets owned by the caller; thread-compatible.
#pragma once

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace tessera::bench {

// A non-blocking TCP connection to 127.0.0.1:`port` (connect in progress), TCP_NODELAY set, or -1.
// Thousands of simulated agents share one machine: their connections are spread over
// 127.0.0.2 .. 127.0.0.201 as source addresses by `source_index`, so that they do not exhaust
// one address's ephemeral ports (real agents have their own hosts).
// -1 with errno set (socket's or connect's) when it cannot.
int ConnectLoopback(int port, int source_index);

// One request: `token` non-empty adds `Authorization: Bearer TOKEN`, `body` non-empty a JSON
// Content-Type, `close` asks the server to close after answering.
std::string HttpRequest(absl::string_view method, absl::string_view path, absl::string_view body,
                        absl::string_view token, bool close);

struct HttpResponse {
  int code = 0;
  std::string body;
};

// Takes one complete response off the front of `in` (Content-Length framing, as cpp-httplib
// answers everything but watches). False, and `in` unchanged, while it is incomplete.
bool TakeHttpResponse(std::string& in, HttpResponse& out);

// Appends everything a non-blocking socket `fd` has to `in` (reads until EAGAIN). True when the
// peer closed or the socket failed: `events` (epoll's) carries EPOLLHUP/EPOLLERR, a read
// returned 0, or one failed with anything but EAGAIN.
bool DrainSocket(int fd, uint32_t events, std::string& in);

// A simulated node's Node object: `gpus` H100s (NVSwitch links between all), rack of 32 nodes,
// block of 1,024, the agent endpoint annotation a real agent sets.
nlohmann::json SimNodeObject(const std::string& name, int index, int gpus);

}  // namespace tessera::bench
