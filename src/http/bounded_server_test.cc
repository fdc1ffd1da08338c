#include "http/bounded_server.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "http/testing/raw_http.h"

namespace tessera::http {
namespace {

using Failure = DeadlineStream::Failure;
using SteadyClock = std::chrono::steady_clock;

// Waits (bounded) until `pred` holds: the events under test happen on the server's threads.
template <typename Pred>
bool WaitFor(Pred pred, std::chrono::milliseconds bound = std::chrono::seconds(20)) {
  const auto until = SteadyClock::now() + bound;
  while (!pred()) {
    if (SteadyClock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

template <typename S>
class Running {
 public:
  explicit Running(S& server) : server_(server) {
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    WaitFor([this] { return server_.is_running(); });
  }
  ~Running() { Stop(); }
  void Stop() {
    if (!thread_.joinable()) return;
    server_.stop();
    thread_.join();
  }
  int port() const { return port_; }

 private:
  S& server_;
  int port_ = 0;
  std::thread thread_;
};

using testing::ConnectLoopback;

// What the server answered, marked when it did not close the connection.
std::string Answer(const testing::RawReply& r) {
  return r.closed ? r.text : r.text + "<still open>";
}

// What the server answered on `fd` until it closed the connection (raw_http.h).
std::string ReadUntilClosed(int fd) {
  testing::RawReply r;
  testing::ReadReply(fd, r);
  return Answer(r);
}

ConnectionLimits Tight() {
  ConnectionLimits l;
  l.header_timeout = absl::Milliseconds(400);
  l.max_header_bytes = 8 * 1024;
  l.body_timeout = absl::Milliseconds(400);
  l.max_body_wire_bytes = 64 * 1024;
  l.io_timeout = absl::Seconds(5);
  return l;
}

void Routes(httplib::Server& s) {
  s.Get("/hi", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("hi", "text/plain");
  });
  s.Post("/echo", [](const httplib::Request& req, httplib::Response& res) {
    res.set_content(req.body, "text/plain");
  });
}

TEST(BoundedServerTest, ServesKeepAliveRequestsAndChunkedBodies) {
  BoundedServer server(Tight());
  Routes(server);
  Running run(server);
  httplib::Client cli("127.0.0.1", run.port());
  cli.set_keep_alive(true);
  for (int i = 0; i < 5; ++i) {
    auto r = cli.Get("/hi");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "hi");
  }
  std::string big(40000, 'x');
  auto r = cli.Post("/echo", big, "text/plain");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->body == big) << r->body.size() << " bytes back";

  int fd = ConnectLoopback(run.port());
  ASSERT_GE(fd, 0);
  const std::string req =
      "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
      "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
  ASSERT_EQ(send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  std::string answer = ReadUntilClosed(fd);
  close(fd);
  EXPECT_NE(answer.find("200 OK"), std::string::npos) << answer;
  EXPECT_NE(answer.find("hello world"), std::string::npos) << answer;
  for (Failure f : CutCounters::kLimits) EXPECT_EQ(server.cuts().Get(f), 0);
}

TEST(BoundedServerTest, SlowLorisIsCutAtTheHeaderTimeout) {
  BoundedServer server(Tight());
  Routes(server);
  Running run(server);
  const auto start = SteadyClock::now();
  // The request line at once, then 200 header bytes at one per 50 ms: 10 s, though each byte
  // arrives well inside the 5 s read timeout, so only the request-wide header deadline (400 ms)
  // ends it.
  const std::string headers = "X-Slow: " + std::string(200, 'a');
  testing::RawReply r = testing::Trickle(run.port(), "GET /hi HTTP/1.1\r\n", headers, 50);
  const auto took = SteadyClock::now() - start;
  const size_t sent = r.body_bytes_sent;
  const std::string answer = Answer(r);
  EXPECT_LT(sent, headers.size() / 2);
  EXPECT_NE(answer.find("400 Bad Request"), std::string::npos) << answer.substr(0, 200);
  EXPECT_GE(took, std::chrono::milliseconds(400));
  EXPECT_TRUE(WaitFor([&] { return server.cuts().Get(Failure::kHeaderTimeout) == 1; }));
}

TEST(BoundedServerTest, OversizedHeadersAreCutAtTheByteLimit) {
  BoundedServer server(Tight());
  Routes(server);
  Running run(server);
  int fd = ConnectLoopback(run.port());
  ASSERT_GE(fd, 0);
  // One header line of 32 KiB (the limit is 8 KiB for all of them), sent at once.
  std::string req = "GET /hi HTTP/1.1\r\nX-Big: " + std::string(32 * 1024, 'b') + "\r\n\r\n";
  (void)send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string answer = ReadUntilClosed(fd);
  close(fd);
  EXPECT_NE(answer.find("400 Bad Request"), std::string::npos) << answer.substr(0, 200);
  EXPECT_TRUE(WaitFor([&] { return server.cuts().Get(Failure::kHeadersTooLarge) == 1; }));
}

TEST(BoundedServerTest, SlowBodiesAndOversizedChunkFramingAreCut) {
  BoundedServer server(Tight());
  Routes(server);
  Running run(server);
  {
    const std::string head = "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n";
    testing::RawReply r = testing::Trickle(run.port(), head, std::string(100, 'z'), 50);
    const std::string answer = Answer(r);
    EXPECT_NE(answer.find("400 Bad Request"), std::string::npos) << answer;
    EXPECT_TRUE(WaitFor([&] { return server.cuts().Get(Failure::kBodyTimeout) == 1; }));
  }
  {
    // A chunk-size line of 128 KiB: the chunk decoder would buffer it whole.
    int fd = ConnectLoopback(run.port());
    ASSERT_GE(fd, 0);
    std::string req = "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
                      std::string(128 * 1024, '0');
    (void)send(fd, req.data(), req.size(), MSG_NOSIGNAL);
    std::string answer = ReadUntilClosed(fd);
    close(fd);
    EXPECT_NE(answer.find("400 Bad Request"), std::string::npos) << answer.substr(0, 200);
    EXPECT_TRUE(WaitFor([&] { return server.cuts().Get(Failure::kBodyTooLarge) == 1; }));
  }
}

TEST(BoundedServerTest, IdleConnectionsCloseAndDoNotHoldAStoppingServer) {
  BoundedServer server(Tight());
  Routes(server);
  server.set_keep_alive_timeout(1);
  Running run(server);
  int idle = ConnectLoopback(run.port());
  ASSERT_GE(idle, 0);
  std::string answer = ReadUntilClosed(idle);  // nothing sent: closed after the keep-alive wait
  close(idle);
  EXPECT_EQ(answer, "");

  // A keep-alive connection waiting for its next request while the server stops: the wait ends
  // with the server, not at its (here one hour) keep-alive timeout.
  server.set_keep_alive_timeout(3600);
  int fd = ConnectLoopback(run.port());
  ASSERT_GE(fd, 0);
  std::string req = "GET /hi HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  char buf[512];
  ASSERT_GT(recv(fd, buf, sizeof(buf), 0), 0);
  auto stopped = std::async(std::launch::async, [&run] { run.Stop(); });
  EXPECT_EQ(stopped.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  close(fd);
}

// A self-signed certificate for 127.0.0.1, made in memory.
bool SetUpTls(SSL_CTX& ctx) {
  EVP_PKEY* key = EVP_RSA_gen(2048);
  X509* cert = X509_new();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert), 0);
  X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("127.0.0.1"), -1, -1, 0);
  X509_set_issuer_name(cert, name);
  X509_sign(cert, key, EVP_sha256());
  const bool ok =
      SSL_CTX_use_certificate(&ctx, cert) == 1 && SSL_CTX_use_PrivateKey(&ctx, key) == 1;
  X509_free(cert);
  EVP_PKEY_free(key);
  return ok;
}

TEST(BoundedServerTest, TlsServesRequestsAndCutsAStalledHandshake) {
  BoundedSslServer server(Tight(), [](SSL_CTX& ctx) { return SetUpTls(ctx); });
  ASSERT_TRUE(server.is_valid());
  Routes(server);
  Running run(server);
  httplib::SSLClient cli("127.0.0.1", run.port());
  cli.enable_server_certificate_verification(false);
  cli.set_keep_alive(true);
  for (int i = 0; i < 3; ++i) {
    auto r = cli.Get("/hi");
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    EXPECT_EQ(r->body, "hi");
  }
  std::string big(50000, 'y');  // several TLS records, within the 64 KiB body limit
  auto r = cli.Post("/echo", big, "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(r->body == big) << r->body.size() << " bytes back";

  // Half a ClientHello, then nothing: the handshake has header_timeout to finish.
  int fd = ConnectLoopback(run.port());
  ASSERT_GE(fd, 0);
  const unsigned char hello[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01};
  ASSERT_EQ(send(fd, hello, sizeof(hello), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(hello)));
  EXPECT_EQ(ReadUntilClosed(fd), "");
  close(fd);
  EXPECT_TRUE(WaitFor([&] { return server.cuts().Get(Failure::kHeaderTimeout) == 1; }));
}

}  // namespace
}  // namespace tessera::http
