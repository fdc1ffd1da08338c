// The per-node bindings view over real HTTP: GET /api/v1/nodes/NAME/bindings served from the
// NodeBindingIndex, its long-poll (resumable from a resourceVersion), and who may read it.
#include "server/node_bindings.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "nlohmann/json.hpp"
#include "server/api_server.h"
#include "server/elastic_pool.h"
#include "server/testing/http_call.h"
#include "store/memory_store.h"

namespace tessera::server {
namespace {

using Json = nlohmann::json;

constexpr char kAdmin[] = "admin-token";
constexpr char kUser[] = "user-token";
constexpr char kNodeA[] = "node-a-token";
constexpr char kNodeB[] = "node-b-token";
constexpr char kJobs[] = "/api/v1/namespaces/team/trainingjobs";

using Resp = testing::HttpResp;

class NodeBindingsTest : public ::testing::Test {
 protected:
  void SetUp() override { StartServer(); }
  void StartServer() {
    auto auth =
        Authenticator::Parse(absl::StrCat(kAdmin, " * admin\n", kUser, " team user\n", kNodeA,
                                          " - node:node-a\n", kNodeB, " - node:node-b\n"));
    ASSERT_TRUE(auth.ok()) << auth.status();
    ApiServerOptions opts;
    opts.threads = 4;  // long-polls beyond this must not starve other requests
    server_ = std::make_unique<ApiServer>(store_, clock_, *std::move(auth), opts);
    auto port = server_->Start("127.0.0.1", 0);
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
  }

  Resp Do(const std::string& method, const std::string& path, const Json& body = nullptr,
          const std::string& token = kAdmin) {
    return testing::HttpCall(port_, method, path, body.is_null() ? "" : body.dump(), token);
  }

  // Creates a job and binds it (as the scheduler does) to `nodes` with `generation`.
  void Bind(const std::string& name, const std::vector<std::string>& nodes, int generation = 1,
            const std::string& phase = "Scheduled") {
    Resp got = Do("GET", absl::StrCat(kJobs, "/", name));
    Json job =
        got.status == 200
            ? got.body
            : Json{{"apiVersion", "tessera.dev/v1"},
                   {"kind", "TrainingJob"},
                   {"metadata", {{"name", name}}},
                   {"spec", {{"groups", {{{"name", "w"}, {"count", 2}, {"gpusPerReplica", 1}}}}}}};
    if (got.status != 200) {
      ASSERT_EQ(Do("POST", kJobs, job).status, 201);
      job = Do("GET", absl::StrCat(kJobs, "/", name)).body;
    }
    Json placement = Json::array();
    for (size_t i = 0; i < nodes.size(); ++i) {
      placement.push_back({{"group", "w"},
                           {"member", i},
                           {"node", nodes[i]},
                           {"gpus", {0}},
                           {"generation", generation}});
    }
    // Straight in the store, as the controller writes a binding (the API takes no placement).
    const std::string key = absl::StrCat("/registry/trainingjobs/team/", name);
    absl::StatusOr<store::KeyValue> kv = store_.Get(key);
    ASSERT_TRUE(kv.ok()) << kv.status();
    Json stored = Json::parse(kv->value);
    stored["status"] = {{"phase", phase}, {"generation", generation}, {"placement", placement}};
    ASSERT_TRUE(store_.Put(key, stored.dump(), kv->mod_revision).ok());
  }

  static std::vector<std::string> Names(const Json& list) {
    std::vector<std::string> out;
    for (const Json& j : list["items"]) out.push_back(j["metadata"]["name"]);
    return out;
  }
  static int64_t Rv(const Json& list) {
    return std::stoll(list["metadata"]["resourceVersion"].get<std::string>());
  }

  store::MemoryStore store_;
  ManualClock clock_{absl::FromUnixSeconds(1767225600)};
  std::unique_ptr<ApiServer> server_;
  int port_ = 0;
};

TEST_F(NodeBindingsTest, ListsOnlyTheNodesOwnBoundJobsAmongAThousand) {
  // 1,000 jobs elsewhere: bound to other nodes, or pending with no placement.
  for (int i = 0; i < 1000; ++i) {
    if (i % 2 == 0) {
      Bind(absl::StrCat("other-", i), {absl::StrCat("node-x", i % 7)});
    } else {
      ASSERT_EQ(Do("POST", kJobs,
                   {{"apiVersion", "tessera.dev/v1"},
                    {"kind", "TrainingJob"},
                    {"metadata", {{"name", absl::StrCat("pending-", i)}}},
                    {"spec", {{"groups", {{{"name", "w"}, {"count", 1}, {"gpusPerReplica", 1}}}}}}})
                    .status,
                201);
    }
  }
  Bind("gang", {"node-a", "node-b"});
  Bind("solo", {"node-a"});
  Bind("done", {"node-a"}, 1, "Succeeded");  // not a bound phase
  Resp r = Do("GET", "/api/v1/nodes/node-a/bindings", nullptr, kNodeA);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["kind"], "NodeBindingList");
  EXPECT_EQ(Names(r.body), (std::vector<std::string>{"gang", "solo"}));
  EXPECT_EQ(Rv(r.body), store_.CurrentRevision());
  // Whole job objects: what the agent needs to run its members.
  EXPECT_EQ(r.body["items"][0]["status"]["placement"].size(), 2u);
  EXPECT_EQ(Names(Do("GET", "/api/v1/nodes/node-b/bindings", nullptr, kNodeB).body),
            (std::vector<std::string>{"gang"}));
  EXPECT_TRUE(Do("GET", "/api/v1/nodes/node-none/bindings").body["items"].empty());
}

// The answer is spliced from stored text only for a job whose stored revision is the one the
// index saw bound to the node; any later write (here: the job moved) is checked by parsing.
TEST_F(NodeBindingsTest, SnapshotsCarryTheRevisionEachJobWasSeenBoundAt) {
  NodeBindingIndex index(store_);
  ASSERT_TRUE(index.Start().ok());
  Bind("solo", {"node-a"});
  const std::string key = "/registry/trainingjobs/team/solo";
  ASSERT_TRUE(index.CatchUp().ok());
  NodeBindingIndex::Snapshot snap = index.Wait("node-a", 0, absl::InfinitePast());
  ASSERT_EQ(snap.jobs, std::vector<std::string>{key});
  const int64_t bound_at = store_.Get(key)->mod_revision;
  EXPECT_EQ(snap.revisions, std::vector<int64_t>{bound_at});
  Resp r = Do("GET", "/api/v1/nodes/node-a/bindings", nullptr, kNodeA);
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(Names(r.body), std::vector<std::string>{"solo"});
  EXPECT_EQ(r.body["items"][0]["metadata"]["resourceVersion"], std::to_string(bound_at));
  EXPECT_EQ(r.body["items"][0]["status"]["placement"][0]["node"], "node-a");

  Bind("solo", {"node-b"}, 2);  // moved: node-a's old snapshot no longer matches the store
  EXPECT_NE(store_.Get(key)->mod_revision, snap.revisions[0]);
  EXPECT_TRUE(Do("GET", "/api/v1/nodes/node-a/bindings", nullptr, kNodeA).body["items"].empty());
  EXPECT_EQ(Names(Do("GET", "/api/v1/nodes/node-b/bindings", nullptr, kNodeB).body),
            std::vector<std::string>{"solo"});
  ASSERT_TRUE(index.CatchUp().ok());
  EXPECT_TRUE(index.Wait("node-a", 0, absl::InfinitePast()).jobs.empty());
  index.Stop();
}

TEST_F(NodeBindingsTest, NodesSeeOnlyTheirOwnBindings) {
  Bind("solo", {"node-a"});
  EXPECT_EQ(Do("GET", "/api/v1/nodes/node-a/bindings", nullptr, kNodeA).status, 200);
  EXPECT_EQ(Do("GET", "/api/v1/nodes/node-a/bindings", nullptr, kNodeB).status, 403);
  EXPECT_EQ(Do("GET", "/api/v1/nodes/node-a/bindings", nullptr, kUser).status, 403);
  EXPECT_EQ(Do("GET", "/api/v1/nodes/node-a/bindings", nullptr, "nope").status, 401);
  EXPECT_EQ(Do("GET", "/api/v1/nodes/node-a/bindings", nullptr, kAdmin).status, 200);
  // And no node may list or watch every job any more.
  EXPECT_EQ(Do("GET", kJobs, nullptr, kNodeA).status, 403);
  EXPECT_EQ(Do("GET", "/api/v1/trainingjobs?watch=true", nullptr, kNodeA).status, 403);
  EXPECT_EQ(Do("PUT", "/api/v1/nodes/node-a/bindings", Json::object(), kNodeA).status, 405);
  EXPECT_EQ(Do("GET", "/api/v1/nodes/node-a/bindings?resourceVersion=x", nullptr, kNodeA).status,
            400);
}

TEST_F(NodeBindingsTest, LongPollWakesOnItsOwnChangeOnly) {
  Bind("solo", {"node-a"});
  Resp first = Do("GET", "/api/v1/nodes/node-a/bindings", nullptr, kNodeA);
  const int64_t rv = Rv(first.body);
  // Nothing for node-a: the poll times out with `unchanged`, even though node-b's jobs change.
  std::atomic<bool> done{false};
  std::thread noise([&] {
    for (int i = 0; !done; ++i) {
      Bind("bee", {"node-b"}, i + 1);
      absl::SleepFor(absl::Milliseconds(50));
    }
  });
  Resp idle =
      Do("GET",
         absl::StrCat("/api/v1/nodes/node-a/bindings?resourceVersion=", rv, "&timeoutSeconds=1"),
         nullptr, kNodeA);
  done = true;
  noise.join();
  ASSERT_EQ(idle.status, 200);
  EXPECT_EQ(idle.body["metadata"]["unchanged"], true);
  EXPECT_FALSE(idle.body.contains("items"));
  EXPECT_GT(Rv(idle.body), rv);  // the index moved on

  // A new binding for node-a wakes a waiting poll, long before its timeout.
  absl::Notification polling;
  Resp woke;
  absl::Time t0;
  std::thread poller([&] {
    polling.Notify();
    woke = Do("GET",
              absl::StrCat("/api/v1/nodes/node-a/bindings?resourceVersion=", Rv(idle.body),
                           "&timeoutSeconds=20"),
              nullptr, kNodeA);
  });
  polling.WaitForNotification();
  absl::SleepFor(absl::Milliseconds(200));
  t0 = absl::Now();
  Bind("gang", {"node-a", "node-b"});
  poller.join();
  ASSERT_EQ(woke.status, 200);
  EXPECT_LT(absl::Now() - t0, absl::Seconds(10));  // woken by the change, not the 20 s timeout
  EXPECT_FALSE(woke.body["metadata"].contains("unchanged"));
  EXPECT_EQ(Names(woke.body), (std::vector<std::string>{"gang", "solo"}));
}

TEST_F(NodeBindingsTest, ResumesFromAResourceVersionAndSeesEveryKindOfChange) {
  Bind("solo", {"node-a"});
  int64_t rv = Rv(Do("GET", "/api/v1/nodes/node-a/bindings", nullptr, kNodeA).body);
  auto poll = [&](int64_t since) {
    return Do("GET",
              absl::StrCat("/api/v1/nodes/node-a/bindings?resourceVersion=", since,
                           "&timeoutSeconds=5"),
              nullptr, kNodeA)
        .body;
  };
  // A change made while the agent was not polling is returned at once on its next poll.
  Bind("solo", {"node-a"}, 2);  // new fencing generation, same node
  Json r = poll(rv);
  ASSERT_EQ(Names(r), (std::vector<std::string>{"solo"}));
  EXPECT_EQ(r["items"][0]["status"]["generation"], 2);
  rv = Rv(r);
  // Moved to another node: gone from node-a.
  Bind("solo", {"node-b"}, 3);
  r = poll(rv);
  EXPECT_TRUE(r["items"].empty());
  EXPECT_EQ(Names(Do("GET", "/api/v1/nodes/node-b/bindings", nullptr, kNodeB).body),
            (std::vector<std::string>{"solo"}));
  rv = Rv(r);
  // Preempted (placement kept, phase not bound) and deleted.
  Bind("x", {"node-a"});
  rv = Rv(poll(rv));
  Bind("x", {"node-a"}, 1, "Preempted");
  r = poll(rv);
  EXPECT_TRUE(r["items"].empty());
  rv = Rv(r);
  Bind("y", {"node-a"});
  rv = Rv(poll(rv));
  ASSERT_EQ(Do("DELETE", absl::StrCat(kJobs, "/y")).status, 200);
  r = poll(rv);
  EXPECT_FALSE(r["metadata"].contains("unchanged"));
  EXPECT_TRUE(r["items"].empty());
}

TEST_F(NodeBindingsTest, ARestartedServerWakesEveryWaiter) {
  Bind("solo", {"node-a"});
  const int64_t rv = Rv(Do("GET", "/api/v1/nodes/node-a/bindings", nullptr, kNodeA).body);
  server_.reset();
  // While no server ran, the job left node-a (written straight to the store).
  StartServer();
  Bind("solo", {"node-b"}, 2);
  server_.reset();
  StartServer();
  Json r =
      Do("GET",
         absl::StrCat("/api/v1/nodes/node-a/bindings?resourceVersion=", rv, "&timeoutSeconds=5"),
         nullptr, kNodeA)
          .body;
  EXPECT_FALSE(r["metadata"].contains("unchanged"));
  EXPECT_TRUE(r["items"].empty());
  // A resourceVersion from another store (newer than ours) gets the full answer, not a wait.
  r = Do("GET", "/api/v1/nodes/node-b/bindings?resourceVersion=999999&timeoutSeconds=5", nullptr,
         kNodeB)
          .body;
  EXPECT_EQ(Names(r), (std::vector<std::string>{"solo"}));
}

TEST_F(NodeBindingsTest, ManyWaitingAgentsDoNotStarveOtherRequests) {
  // 4 request threads are kept; 40 long-polls are open at once and a write still goes through.
  Bind("solo", {"node-a"});
  const int64_t rv = store_.CurrentRevision();
  std::vector<std::thread> polls;
  std::atomic<int> woken{0};
  for (int i = 0; i < 40; ++i) {
    polls.emplace_back([&, i] {
      Resp r = Do("GET",
                  absl::StrCat("/api/v1/nodes/node-", i % 2 ? "a" : "b",
                               "/bindings?resourceVersion=", rv, "&timeoutSeconds=20"),
                  nullptr, kAdmin);
      if (r.status == 200 && !r.body["metadata"].contains("unchanged")) ++woken;
    });
  }
  absl::SleepFor(absl::Milliseconds(500));
  Bind("gang", {"node-a", "node-b"});  // goes through while 40 threads wait, wakes all 40
  for (std::thread& t : polls) t.join();
  EXPECT_EQ(woken.load(), 40);
  Resp m = Do("GET", "/metrics");
  EXPECT_NE(m.status, 0);
}

TEST(ElasticPoolTest, GrowsForBlockedTasksAndShrinksBack) {
  ElasticPoolOptions o;
  o.min_threads = 2;
  o.max_threads = 100;
  o.idle_exit = absl::Milliseconds(100);
  ElasticPool pool(o);
  absl::Notification release;
  std::atomic<int> running{0};
  for (int i = 0; i < 50; ++i) {
    pool.enqueue([&] {
      ++running;
      release.WaitForNotification();
    });
  }
  // All 50 run at once although only 2 threads were kept.
  for (int i = 0; i < 500 && running.load() < 50; ++i) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(running.load(), 50);
  EXPECT_GE(pool.peak_threads(), 50);
  release.Notify();
  for (int i = 0; i < 500 && pool.threads() > 2; ++i) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(pool.threads(), 2);
  pool.shutdown();
  EXPECT_EQ(pool.threads(), 0);
}

}  // namespace
}  // namespace tessera::server
