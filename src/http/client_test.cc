// http::Client against a real HTTP server on loopback (cpp-httplib's): requests and answers,
// keep-alive, a connection the server closed, refused connections, streamed bodies. TLS is
// exercised end to end through the CLI by tests/server_tls_test.
#include "http/client.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"

namespace tessera::http {
namespace {

// A TCP socket bound to a free loopback port (listening when asked); its port in `port`.
int BindLoopback(bool listen, int* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || (listen && ::listen(fd, 4)) ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    return -1;
  }
  *port = ntohs(a.sin_port);
  return fd;
}

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.Get("/hello", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(absl::StrCat("hello ", req.get_header_value("Authorization"), " from port ",
                                   req.remote_port),
                      "text/plain");
    });
    server_.Post("/echo", [](const httplib::Request& req, httplib::Response& res) {
      res.status = 201;
      res.set_content(absl::StrCat(req.get_header_value("Content-Type"), " ", req.body),
                      "text/plain");
    });
    server_.Get("/big", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(std::string(20 << 20, 'x'), "text/plain");
    });
    server_.Get("/missing", [](const httplib::Request&, httplib::Response& res) {
      res.status = 404;
      res.set_content("{\"reason\":\"NotFound\"}", "application/json");
    });
    // Two lines, the second only after the client has seen the first.
    server_.Get("/lines", [this](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("text/plain", [this](size_t, httplib::DataSink& sink) {
        sink.write("one\n", 4);
        first_seen_.WaitForNotificationWithTimeout(absl::Seconds(30));
        sink.write("two\n", 4);
        sink.done();
        return true;
      });
    });
    // Answers only once the test lets it (after the client gave up).
    server_.Get("/slow", [this](const httplib::Request&, httplib::Response& res) {
      slow_arrived_.Notify();
      slow_release_.WaitForNotificationWithTimeout(absl::Seconds(30));
      res.set_content("late", "text/plain");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // Bound and listening already: connections wait in the backlog until the loop accepts.
  }
  void TearDown() override {
    if (!first_seen_.HasBeenNotified()) first_seen_.Notify();
    if (!slow_release_.HasBeenNotified()) slow_release_.Notify();
    server_.stop();
    thread_.join();
  }
  std::string Url() const { return absl::StrCat("http://127.0.0.1:", port_); }

  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  absl::Notification first_seen_;
  absl::Notification slow_arrived_, slow_release_;
};

TEST_F(ClientTest, CancelFromAnotherThreadEndsTheRequestInFlightOnly) {
  Client c(Url(), {});
  c.Cancel();  // nothing in flight: no effect on what follows
  ASSERT_EQ(c.Do("GET", "/hello").status, 200);
  std::thread canceler([&] {
    if (slow_arrived_.WaitForNotificationWithTimeout(absl::Seconds(30))) c.Cancel();
  });
  ClientResponse r = c.Do("GET", "/slow");  // would wait 60 s for its answer
  canceler.join();
  EXPECT_EQ(r.error, ClientError::kRead) << r.detail;
  slow_release_.Notify();
  ClientResponse again = c.Do("GET", "/hello");
  EXPECT_EQ(again.status, 200) << ToString(again.error) << ": " << again.detail;
}

TEST_F(ClientTest, SendsRequestsAndKeepsTheConnection) {
  ClientOptions o;
  o.bearer_token = "s3cret";
  Client c(Url() + "/", o);
  ClientResponse a = c.Do("GET", "/hello");
  ASSERT_TRUE(a.ok()) << ToString(a.error) << ": " << a.detail;
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(a.body.rfind("hello Bearer s3cret from port ", 0), 0u) << a.body;
  ClientResponse b = c.Do("GET", "/hello");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a.body, b.body);  // the same client port: one connection for both

  ClientResponse p = c.Do("POST", "/echo", "{\"x\":1}", "application/json");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p.status, 201);
  EXPECT_EQ(p.body, "application/json {\"x\":1}");
  ClientResponse m = c.Do("GET", "/missing");
  ASSERT_TRUE(m.ok());  // an HTTP error is an answer, not a failure
  EXPECT_EQ(m.status, 404);
  EXPECT_EQ(m.body, "{\"reason\":\"NotFound\"}");
}

TEST_F(ClientTest, AConnectionTheServerClosedIsReplacedBeforeTheNextRequest) {
  server_.set_keep_alive_max_count(1);  // the server closes after each answer
  Client c(Url(), {});
  for (int i = 0; i < 5; ++i) {
    ClientResponse p = c.Do("POST", "/echo", absl::StrCat(i), "text/plain");
    ASSERT_TRUE(p.ok()) << i << ": " << ToString(p.error) << ": " << p.detail;
    EXPECT_EQ(p.body, absl::StrCat("text/plain ", i));
  }
}

// A server that answers with keep-alive and then closes the idle connection (as servers do
// after their idle timeout): the client notices before writing the next request and opens a new
// connection, so the request is not lost in transit.
TEST(ClientIdle, AnIdleConnectionTheServerClosedIsNotWrittenTo) {
  int port = 0;
  const int lfd = BindLoopback(/*listen=*/true, &port);
  ASSERT_GE(lfd, 0);
  absl::Notification closed;
  std::atomic<int> served{0};
  std::thread server([&] {
    for (int i = 0; i < 2; ++i) {
      const int fd = ::accept(lfd, nullptr, nullptr);
      if (fd < 0) return;
      std::string req;
      char buf[4096];
      while (req.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n <= 0) break;
        req.append(buf, static_cast<size_t>(n));
      }
      const std::string res = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
      if (::write(fd, res.data(), res.size()) == static_cast<ssize_t>(res.size())) ++served;
      ::close(fd);  // idle: closed without a word
      if (i == 0) closed.Notify();
    }
  });
  Client c(absl::StrCat("http://127.0.0.1:", port), {});
  ClientResponse first = c.Do("POST", "/x", "1", "text/plain");
  ASSERT_TRUE(first.ok()) << first.detail;
  ASSERT_TRUE(closed.WaitForNotificationWithTimeout(absl::Seconds(30)));
  ClientResponse second = c.Do("POST", "/x", "2", "text/plain");
  EXPECT_TRUE(second.ok()) << ToString(second.error) << ": " << second.detail;
  EXPECT_EQ(second.body, "ok");
  ::shutdown(lfd, SHUT_RDWR);  // wakes an accept still waiting (when the client failed)
  server.join();
  ::close(lfd);
  EXPECT_EQ(served.load(), 2);
}

TEST_F(ClientTest, LargeBodiesAreReadWhole) {
  Client c(Url(), {});
  ClientResponse r = c.Do("GET", "/big");
  ASSERT_TRUE(r.ok()) << r.detail;
  EXPECT_EQ(r.body.size(), size_t{20} << 20);
}

TEST_F(ClientTest, StreamsABodyAsItArrivesAndStopsWhenAsked) {
  Client c(Url(), {});
  std::string got;
  int status = 0;
  ClientResponse r = c.Stream(
      "/lines", {}, [&](int s) { status = s; },
      [&](std::string_view data) {
        got.append(data);
        if (got == "one\n")
          first_seen_.Notify();  // once: "one\ntwo\n" never equals it  // only now does the server
                                 // send "two"
        return true;
      });
  ASSERT_TRUE(r.ok()) << ToString(r.error) << ": " << r.detail;
  EXPECT_EQ(status, 200);
  EXPECT_EQ(got, "one\ntwo\n");

  Client stopper(Url(), {});
  std::string first;
  ClientResponse s = stopper.Stream("/lines", {}, nullptr, [&](std::string_view data) {
    first.append(data);
    return false;
  });
  EXPECT_EQ(s.error, ClientError::kCanceled);
  EXPECT_EQ(first, "one\n");
  // The stopped client still works: a new connection.
  ClientResponse again = stopper.Do("GET", "/hello");
  EXPECT_EQ(again.status, 200) << ToString(again.error) << ": " << again.detail;
}

TEST(ClientErrors, RefusedAndBadUrlsSayNothingWasSent) {
  // A port nobody listens on: one bound, never listened on, then closed.
  int port = 0;
  const int fd = BindLoopback(/*listen=*/false, &port);
  ASSERT_GE(fd, 0);
  ::close(fd);
  Client refused(absl::StrCat("http://127.0.0.1:", port), {});
  ClientResponse r = refused.Do("POST", "/x", "{}", "application/json");
  EXPECT_EQ(r.error, ClientError::kConnection) << r.detail;
  EXPECT_TRUE(Unsent(r.error));
  for (const char* bad : {"127.0.0.1:80", "ftp://h", "http://", "http://h:0", "http://h:99999",
                          "http://h/path", "https://[::1"}) {
    Client c(bad, {});
    EXPECT_EQ(c.Do("GET", "/").error, ClientError::kBadUrl) << bad;
  }
  EXPECT_FALSE(Unsent(ClientError::kRead));
  EXPECT_FALSE(Unsent(ClientError::kWrite));
}

}  // namespace
}  // namespace tessera::http
