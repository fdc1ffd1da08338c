#include "bench/harness/loopback_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tessera::bench {

int ConnectLoopback(int port, int source_index) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  // The port is picked at connect time, per (source, destination) pair.
  setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
  sockaddr_in src{};
  src.sin_family = AF_INET;
  src.sin_addr.s_addr = htonl(INADDR_LOOPBACK + 1 + (source_index % 200 + 200) % 200);
  // Best effort: on failure the kernel picks the source address at connect().
  (void)bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof src);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 && errno != EINPROGRESS) {
    const int err = errno;
    close(fd);
    errno = err;  // connect's, for the caller to report
    return -1;
  }
  return fd;
}

std::string HttpRequest(absl::string_view method, absl::string_view path, absl::string_view body,
                        absl::string_view token, bool close) {
  return absl::StrCat(method, " ", path, " HTTP/1.1\r\nHost: 127.0.0.1\r\n",
                      token.empty() ? "" : absl::StrCat("Authorization: Bearer ", token, "\r\n"),
                      body.empty() ? "" : "Content-Type: application/json\r\n",
                      "Content-Length: ", body.size(), "\r\n", close ? "Connection: close\r\n" : "",
                      "\r\n", body);
}

bool TakeHttpResponse(std::string& in, HttpResponse& out) {
  size_t head_end = in.find("\r\n\r\n");
  if (head_end == std::string::npos) return false;
  std::string head = absl::AsciiStrToLower(absl::string_view(in).substr(0, head_end));
  size_t len = 0;
  size_t cl = head.find("content-length:");
  if (cl != std::string::npos) {
    size_t eol = head.find('\r', cl);
    (void)absl::SimpleAtoi(
        absl::StripAsciiWhitespace(absl::string_view(head).substr(cl + 15, eol - cl - 15)), &len);
  }
  if (in.size() < head_end + 4 + len) return false;
  out.code = 0;
  if (head_end > 12) (void)absl::SimpleAtoi(absl::string_view(in).substr(9, 3), &out.code);
  out.body = in.substr(head_end + 4, len);
  in.erase(0, head_end + 4 + len);
  return true;
}

nlohmann::json SimNodeObject(const std::string& name, int index, int gpus) {
  using Json = nlohmann::json;
  Json list = Json::array(), links = Json::array();
  for (int g = 0; g < gpus; ++g) {
    list.push_back({{"index", g},
                    {"uuid", absl::StrCat("GPU-", name, "-", g)},
                    {"model", "NVIDIA H100 80GB HBM3"},
                    {"memoryMiB", 81559}});
    Json row = Json::array();
    for (int h = 0; h < gpus; ++h) row.push_back(g == h ? "X" : "NVSWITCH");
    links.push_back(row);
  }
  return {
      {"apiVersion", "tessera.dev/v1"},
      {"kind", "Node"},
      {"metadata",
       {{"name", name}, {"annotations", {{"tessera.dev/agent-endpoint", "http://127.0.0.1:9"}}}}},
      {"spec",
       {{"gpus", list},
        {"links", links},
        {"rack", absl::StrCat("rack-", index / 32)},
        {"block", absl::StrCat("block-", index / 1024)}}}};
}

bool DrainSocket(int fd, uint32_t events, std::string& in) {
  char buf[65536];
  bool eof = (events & (EPOLLHUP | EPOLLERR)) != 0;
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      in.append(buf, n);
      continue;
    }
    if (n == 0 || errno != EAGAIN) eof = true;
    return eof;
  }
}

}  // namespace tessera::bench
