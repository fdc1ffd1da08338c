// libFuzzer target: the server's request edge. Bytes arrive on a socket and are parsed the way
// `tessera server` parses them: through http::DeadlineStream (header and body byte budgets),
// cpp-httplib's request parser (request line, headers, chunked and length-delimited bodies,
// pipelining), ReadBoundedBody (the API's body limit, with its drain) and api::ParseBody. Any
// input must end in responses and a closed connection, never a crash, a hang or a sanitizer
// report. (cpp-httplib is Debian's compiled library: not instrumented, so coverage guides by our
// code; ASan still sees every buffer our code and its callbacks touch.) Built by scripts/fuzz.sh.
#include <httplib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "api/object_codec.h"
#include "http/deadline_stream.h"
#include "server/request_body.h"

namespace {

// Exposes cpp-httplib's per-request parser and router (protected) to the fuzzer.
class Parser : public httplib::Server {
 public:
  Parser() {
    Post("/b", [](const httplib::Request& req, httplib::Response& res,
                  const httplib::ContentReader& reader) {
      std::string body;
      const auto read = tessera::server::ReadBoundedBody(req, reader, 1024, body);
      if (read != tessera::server::BodyRead::kComplete) {
        tessera::server::RefuseAndClose(res, 413, "RequestEntityTooLarge", "too large");
        return;
      }
      auto parsed = tessera::api::ParseBody(body);
      res.set_content(parsed.ok() ? "ok" : "bad", "text/plain");
    });
    Get("/g", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(req.get_param_value("x"), "text/plain");
    });
  }
  bool One(tessera::http::DeadlineStream& s, bool& closed) {
    return process_request(s, false, closed, [&s](httplib::Request&) { s.HeadersDone(); });
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Parser* parser = new Parser();  // routes only: no state kept between inputs
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return 0;
  // The whole input is on the wire, then the client half-closes: the server sees EOF after it.
  size_t off = 0;
  while (off < size) {
    ssize_t n = write(fds[1], data + off, size - off);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  shutdown(fds[1], SHUT_WR);
  tessera::http::ConnectionLimits limits;
  limits.header_timeout = absl::Seconds(2);
  limits.max_header_bytes = 2048;
  limits.body_timeout = absl::Seconds(2);
  limits.max_body_wire_bytes = 4096;
  limits.io_timeout = absl::Seconds(2);
  {
    tessera::http::DeadlineStream stream(fds[0], nullptr, limits);
    for (int i = 0; i < 64; ++i) {
      if (!stream.WaitForRequest(absl::Milliseconds(1), [] { return false; })) break;
      stream.BeginRequest();
      bool closed = false;
      if (!parser->One(stream, closed) || closed) break;
      if (stream.failure() != tessera::http::DeadlineStream::Failure::kNone) break;
      char sink[4096];  // drain the answers so the server's writes never block
      while (recv(fds[1], sink, sizeof(sink), MSG_DONTWAIT) > 0) {
      }
    }
  }
  close(fds[0]);
  close(fds[1]);
  return 0;
}
