// ApiClient with several servers: a server that refuses connections gives way to the next at
// once, and the client stays on the one that answered; HTTP error codes never move it.
#include "agent/api_client.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "common/server_list.h"
#include "common/testing/child_process.h"

namespace tessera::agent {
namespace {

TEST(SplitServerListTest, TrimsAndDropsEmptyParts) {
  EXPECT_EQ(SplitServerList(" a:1, http://b:2 ,,c:3 "),
            (std::vector<std::string>{"a:1", "http://b:2", "c:3"}));
  EXPECT_TRUE(SplitServerList("").empty());
}

TEST(ApiClientFailoverTest, MovesToTheNextServerOnRefusedConnections) {
  httplib::Server live;
  int hits = 0;
  live.Get("/x", [&](const httplib::Request&, httplib::Response& res) {
    ++hits;
    res.set_content(R"({"ok": true})", "application/json");
  });
  live.Post("/missing", [](const httplib::Request&, httplib::Response& res) { res.status = 404; });
  live.set_keep_alive_timeout(1);  // stop() waits for idle keep-alive connections
  const int port = live.bind_to_any_port("127.0.0.1");
  // Bound and listening already: connections queue until the thread accepts them.
  std::thread t([&] { live.listen_after_bind(); });
  const int dead = testing::FreeLoopbackPort();  // nothing listens there
  ApiClient client(absl::StrCat("127.0.0.1:", dead, ",http://127.0.0.1:", port), "",
                   absl::Seconds(2));
  absl::StatusOr<ApiResponse> r = client.Get("/x");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 200);
  EXPECT_EQ(client.server(), absl::StrCat("http://127.0.0.1:", port));
  // A write that never left the dead server would go on too; an HTTP error does not move it.
  r = client.Post("/missing", nlohmann::json::object());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 404);
  EXPECT_EQ(client.server(), absl::StrCat("http://127.0.0.1:", port));
  // Only dead servers: Unavailable naming each.
  ApiClient none(absl::StrCat("127.0.0.1:", dead, ",127.0.0.1:", dead), "", absl::Seconds(1));
  r = none.Get("/x");
  EXPECT_TRUE(absl::IsUnavailable(r.status())) << r.status();
  live.stop();
  t.join();
  EXPECT_EQ(hits, 1);
}

}  // namespace
}  // namespace tessera::agent
