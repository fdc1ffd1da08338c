#include "http/event_server.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "http/testing/raw_http.h"

namespace tessera::http {
namespace {

using Failure = DeadlineStream::Failure;

// Waits (bounded) until `pred` holds: what is awaited happens on the server's threads.
template <typename Pred>
bool WaitFor(Pred pred, std::chrono::milliseconds bound = std::chrono::seconds(20)) {
  const auto until = std::chrono::steady_clock::now() + bound;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

EventServerOptions SmallOptions() {
  EventServerOptions o;
  o.io_threads = 1;
  o.worker_threads = 2;
  return o;
}

std::string Raw(int port, const std::string& request) {
  int fd = testing::ConnectLoopback(port);
  EXPECT_GE(fd, 0);
  if (fd < 0) return "";
  EXPECT_EQ(send(fd, request.data(), request.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(request.size()));
  testing::RawReply r;
  testing::ReadReply(fd, r);
  close(fd);
  return r.text;
}

TEST(EventServerTest, ServesCppHttplibRoutesOverOneKeepAliveConnection) {
  EventServer server(SmallOptions());
  server.Get("/hello/(\\w+)", [](const httplib::Request& req, httplib::Response& res) {
    res.set_content("hi " + req.matches[1].str() + " " + req.get_param_value("x"), "text/plain");
  });
  server.Post("/echo", [](const httplib::Request& req, httplib::Response& res) {
    res.set_content(req.body, "text/plain");
  });
  absl::StatusOr<int> port = server.Start("127.0.0.1", 0);
  ASSERT_TRUE(port.ok()) << port.status();
  httplib::Client cli("127.0.0.1", *port);
  cli.set_keep_alive(true);
  for (int i = 0; i < 50; ++i) {
    auto r = cli.Get("/hello/ann?x=" + std::to_string(i));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "hi ann " + std::to_string(i));
  }
  auto p = cli.Post("/echo", std::string(100000, 'z'), "text/plain");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->body.size(), 100000u);
  EXPECT_EQ(server.open_connections(), 1);
  auto missing = cli.Get("/nope");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  // Two pipelined requests in one write, a chunked body among them: answered in order.
  const std::string two =
      "GET /hello/a HTTP/1.1\r\nHost: x\r\n\r\n"
      "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
      "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
  std::string text = Raw(*port, two);
  size_t first = text.find("hi a");
  size_t second = text.find("abcde");
  EXPECT_NE(first, std::string::npos) << text;
  EXPECT_NE(second, std::string::npos) << text;
  EXPECT_LT(first, second);
}

TEST(EventServerTest, ChunkedStreamsGoOutAsWritten) {
  EventServerOptions o = SmallOptions();
  o.is_stream = [](const httplib::Request& head) { return head.path == "/stream"; };
  std::vector<std::thread> threads;
  std::mutex mu;
  o.stream_executor = [&](std::function<void()> fn) {
    std::lock_guard l(mu);
    threads.emplace_back(std::move(fn));
  };
  std::atomic<bool> release{false};
  EventServer server(std::move(o));
  server.Get("/stream", [&](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("text/plain",
                                     [&, n = 0](size_t, httplib::DataSink& sink) mutable {
                                       if (n == 2) {
                                         sink.done();
                                         return true;
                                       }
                                       std::string line = "line " + std::to_string(n++) + "\n";
                                       sink.write(line.data(), line.size());
                                       if (n == 1) WaitFor([&] { return release.load(); });
                                       return true;
                                     });
  });
  absl::StatusOr<int> port = server.Start("127.0.0.1", 0);
  ASSERT_TRUE(port.ok());
  httplib::Client cli("127.0.0.1", *port);
  std::string got;
  std::atomic<bool> first{false};
  auto done = std::async(std::launch::async, [&] {
    return cli.Get("/stream", [&](const char* d, size_t n) {
      got.append(d, n);
      first = true;
      return true;
    });
  });
  // The first line arrives while the handler still holds the stream open.
  EXPECT_TRUE(WaitFor([&] { return first.load(); }));
  release = true;
  auto r = done.get();
  ASSERT_TRUE(r);
  EXPECT_EQ(got, "line 0\nline 1\n");
  server.Stop();
  for (std::thread& t : threads) t.join();
}

// Deferred requests wait without a thread: far more of them than workers are parked at once,
// and each is answered later from another thread.
TEST(EventServerTest, DeferredRequestsParkWithoutHoldingThreads) {
  EventServer server(SmallOptions());
  std::mutex mu;
  std::vector<std::shared_ptr<Responder>> waiting;
  server.AddDeferred("GET", "/wait/(\\d+)",
                     [&](const httplib::Request& req, std::shared_ptr<Responder> r) {
                       if (req.get_param_value("now") == "1") {
                         httplib::Response res;
                         res.set_content("now " + req.matches[1].str(), "text/plain");
                         return r->Send(std::move(res));
                       }
                       std::lock_guard l(mu);
                       waiting.push_back(std::move(r));
                     });
  server.AddDeferred("GET", "/timer",
                     [&](const httplib::Request&, const std::shared_ptr<Responder>& r) {
                       r->RunAt(absl::Now() + absl::Milliseconds(50), [r] {
                         httplib::Response res;
                         res.status = 204;
                         r->Send(std::move(res));
                       });
                     });
  // A deadline already past runs at once (it once read as "no limit" and never ran).
  server.AddDeferred("GET", "/late-timer",
                     [&](const httplib::Request&, const std::shared_ptr<Responder>& r) {
                       r->RunAt(absl::Now() - absl::Seconds(1), [r] {
                         httplib::Response res;
                         res.status = 204;
                         r->Send(std::move(res));
                       });
                     });
  absl::StatusOr<int> port = server.Start("127.0.0.1", 0);
  ASSERT_TRUE(port.ok());
  EXPECT_NE(Raw(*port, "GET /wait/7?now=1 HTTP/1.1\r\nConnection: close\r\n\r\n").find("now 7"),
            std::string::npos);
  EXPECT_NE(Raw(*port, "GET /late-timer HTTP/1.1\r\nConnection: close\r\n\r\n").find("204"),
            std::string::npos);
  constexpr int kWaiters = 40;  // 20x the workers
  std::vector<std::future<std::string>> replies;
  replies.reserve(kWaiters);
  for (int i = 0; i < kWaiters; ++i) {
    replies.push_back(std::async(std::launch::async, [&, i] {
      return Raw(*port,
                 "GET /wait/" + std::to_string(i) + " HTTP/1.1\r\nConnection: close\r\n\r\n");
    }));
  }
  ASSERT_TRUE(WaitFor([&] { return server.parked() == kWaiters; })) << server.parked();
  EXPECT_EQ(server.threads(), 3);  // one I/O thread, two workers
  // Other requests are served meanwhile.
  EXPECT_NE(Raw(*port, "GET /timer HTTP/1.1\r\nConnection: close\r\n\r\n").find("204"),
            std::string::npos);
  {
    std::lock_guard l(mu);
    for (auto& r : waiting) {
      httplib::Response res;
      res.set_content("done", "text/plain");
      res.set_header("X-Test", "1");
      r->Send(res);
      r->Send(res);  // only the first counts
    }
    waiting.clear();
  }
  for (auto& f : replies) {
    std::string text = f.get();
    EXPECT_NE(text.find("HTTP/1.1 200"), std::string::npos) << text;
    EXPECT_NE(text.find("X-Test: 1"), std::string::npos) << text;
    EXPECT_EQ(text.find("done"), text.size() - 4) << text;
  }
  EXPECT_EQ(server.parked(), 0);
}

TEST(EventServerTest, LimitsCutRequestsAndConnections) {
  EventServerOptions o = SmallOptions();
  o.limits.header_timeout = absl::Milliseconds(300);
  o.limits.io_timeout = absl::Seconds(5);
  o.limits.max_header_bytes = 2048;
  o.limits.max_body_wire_bytes = 1000;
  o.max_connections = 3;
  std::mutex mu;
  std::vector<Failure> cuts;
  o.on_cut = [&](Failure f) {
    std::lock_guard l(mu);
    cuts.push_back(f);
  };
  EventServer server(std::move(o));
  server.Post("/in", [](const httplib::Request& req, httplib::Response& res) {
    res.set_content(std::to_string(req.body.size()), "text/plain");
  });
  absl::StatusOr<int> port = server.Start("127.0.0.1", 0);
  ASSERT_TRUE(port.ok());
  // Headers trickled past the header timeout: 400 and closed.
  testing::RawReply slow =
      testing::Trickle(*port, "GET / HTTP/1.1\r\n", "X-Slow: " + std::string(100, 'a'), 50);
  EXPECT_NE(slow.text.find("HTTP/1.1 400"), std::string::npos) << slow.text;
  EXPECT_TRUE(slow.closed);
  // Headers over the limit, a body over it: 400 and 413.
  EXPECT_NE(Raw(*port, "GET / HTTP/1.1\r\nX-Big: " + std::string(4096, 'b') + "\r\n\r\n")
                .find("HTTP/1.1 400"),
            std::string::npos);
  EXPECT_NE(Raw(*port, "POST /in HTTP/1.1\r\nContent-Length: 5000\r\n\r\n").find("HTTP/1.1 413"),
            std::string::npos);
  EXPECT_NE(Raw(*port, "POST /in HTTP/1.1\r\nContent-Length: 10\r\nConnection: close\r\n\r\n" +
                           std::string(10, 'x'))
                .find("\r\n\r\n10"),
            std::string::npos);
  {
    std::lock_guard l(mu);
    EXPECT_EQ(cuts, (std::vector<Failure>{Failure::kHeaderTimeout, Failure::kHeadersTooLarge,
                                          Failure::kBodyTooLarge}));
  }
  // Connections past the cap: 503 at once.
  std::vector<int> idle;
  idle.reserve(3);
  for (int i = 0; i < 3; ++i) idle.push_back(testing::ConnectLoopback(*port));
  ASSERT_TRUE(WaitFor([&] { return server.open_connections() == 3; }));
  EXPECT_NE(Raw(*port, "GET / HTTP/1.1\r\n\r\n").find("HTTP/1.1 503"), std::string::npos);
  EXPECT_EQ(server.refused_connections(), 1);
  for (int fd : idle) close(fd);
  EXPECT_TRUE(WaitFor([&] { return server.open_connections() == 0; }));
}

}  // namespace
}  // namespace tessera::http
