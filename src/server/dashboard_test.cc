// The dashboard routes and GET /api/v1/fleet over real HTTP on loopback
// (ApiServer with the dashboard registered, as `tessera server` does).
#include "server/dashboard.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "controller/node_leases.h"
#include "nlohmann/json.hpp"
#include "server/api_server.h"
#include "server/testing/http_call.h"
#include "store/sqlite_store.h"

namespace tessera::server {
namespace {

using Json = nlohmann::json;
using ::testing::HasSubstr;

constexpr char kAdmin[] = "admin-token";
constexpr char kTeamA[] = "team-a-token";
constexpr char kNode1[] = "node-1-token";

using Resp = testing::HttpResp;

Json Node(const std::string& name, const std::string& rack, const std::string& layout) {
  return {{"apiVersion", "tessera.dev/v1"},
          {"kind", "Node"},
          {"metadata",
           {{"name", name}, {"annotations", {{"tessera.dev/agent-endpoint", "http://x:1"}}}}},
          {"spec",
           {{"gpuType", "H100"},
            {"gpuCount", 8},
            {"layout", layout},
            {"rack", rack},
            {"block", "b0"}}}};
}

Json Job(const std::string& ns, const std::string& name) {
  return {{"apiVersion", "tessera.dev/v1"},
          {"kind", "TrainingJob"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec",
           {{"queue", "research"},
            {"groups", {{{"name", "w"}, {"count", 2}, {"gpusPerReplica", 4}}}}}}};
}

class DashboardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = getenv("TMPDIR");
    std::string tmpl = absl::StrCat(tmp ? tmp : "/tmp", "/tessera_dash_XXXXXX");
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    auto store = store::SqliteStore::Open(dir_ + "/data");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    auto auth = Authenticator::Parse(
        absl::StrCat(kAdmin, " * admin\n", kTeamA, " team-a user\n", kNode1, " - node:n1\n"));
    ASSERT_TRUE(auth.ok()) << auth.status();
    ApiServerOptions opts;
    opts.threads = 8;
    opts.node_leases = &leases_;
    opts.gpu_samples = &samples_;
    Authenticator copy = *auth;
    opts.extra_routes = [this, copy](httplib::Server& http) {
      RegisterDashboardRoutes(http, *store_, copy, &samples_, absl::Seconds(30), /*max_waits=*/4,
                              /*max_waits_per_token=*/1);
    };
    server_ = std::make_unique<ApiServer>(*store_, clock_, *std::move(auth), opts);
    auto port = server_->Start("127.0.0.1", 0);
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
  }
  void TearDown() override {
    server_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  Resp Do(const std::string& method, const std::string& path, const Json& body = nullptr,
          const std::string& token = kAdmin) {
    return testing::HttpCall(port_, method, path, body.is_null() ? "" : body.dump(), token,
                             /*read_timeout_s=*/15);
  }

  // Creates the object, then writes `status` onto it straight in the store, as the controller
  // does (status is the control plane's: the API would not take a placement).
  void CreateWithStatus(const std::string& collection, Json obj, const Json& status) {
    Resp c = Do("POST", collection, obj);
    ASSERT_EQ(c.status, 201) << c.text;
    if (status.is_null()) return;
    StoreStatus(collection, c.body["metadata"]["name"].get<std::string>(), status);
  }
  // Replaces the stored status of `name` in API collection path `collection`.
  void StoreStatus(const std::string& collection, const std::string& name, const Json& status) {
    // "/api/v1/namespaces/NS/PLURAL" -> "/registry/PLURAL/NS/NAME"; "/api/v1/PLURAL" ->
    // "/registry/PLURAL/NAME".
    std::vector<std::string> parts = absl::StrSplit(collection, '/');
    const std::string key = parts.size() == 6
                                ? absl::StrCat("/registry/", parts[5], "/", parts[4], "/", name)
                                : absl::StrCat("/registry/", parts[3], "/", name);
    absl::StatusOr<store::KeyValue> kv = store_->Get(key);
    ASSERT_TRUE(kv.ok()) << key << ": " << kv.status();
    Json stored = Json::parse(kv->value);
    stored["status"] = status;
    ASSERT_TRUE(store_->Put(key, stored.dump(), kv->mod_revision).ok());
  }

  static const Json* FindRow(const Json& rows, size_t col, const std::string& value) {
    for (const Json& r : rows) {
      if (r[col] == value) return &r;
    }
    return nullptr;
  }

  std::string dir_;
  ManualClock clock_{absl::FromUnixSeconds(1767225600)};
  controller::NodeLeases leases_;
  GpuSamples samples_;
  std::unique_ptr<store::SqliteStore> store_;
  std::unique_ptr<ApiServer> server_;
  int port_ = 0;
};

TEST_F(DashboardTest, ServesThePageFromTheBinary) {
  Resp root = Do("GET", "/", nullptr, "");
  EXPECT_EQ(root.status, 302);
  EXPECT_EQ(root.location, "/ui/");
  Resp page = Do("GET", "/ui/", nullptr, "");
  ASSERT_EQ(page.status, 200);
  EXPECT_THAT(page.text, HasSubstr("<canvas id=\"fleet\""));
  EXPECT_THAT(page.text, HasSubstr("/ui/app.js"));
  Resp js = Do("GET", "/ui/app.js", nullptr, "");
  ASSERT_EQ(js.status, 200);
  EXPECT_THAT(js.text, HasSubstr("/api/v1/fleet"));
  EXPECT_EQ(Do("GET", "/ui/style.css", nullptr, "").status, 200);
  EXPECT_EQ(Do("GET", "/ui/missing.js", nullptr, "").status, 404);
}

TEST_F(DashboardTest, FullSummaryHasNodesGpusJobsAndQueues) {
  CreateWithStatus("/api/v1/nodes", Node("n1", "r1", "nvlink-pairs"),
                   {{"phase", "Ready"},
                    {"gpus",
                     {{{"index", 0}, {"health", "Healthy"}, {"utilization", 97}},
                      {{"index", 3}, {"health", "Unhealthy"}, {"message", "XID 79"}},
                      {{"index", 5}, {"health", "Healthy"}, {"utilization", 0}}}}});
  CreateWithStatus("/api/v1/nodes", Node("n2", "r2", "nvswitch"), nullptr);
  CreateWithStatus("/api/v1/namespaces/team-a/trainingjobs", Job("team-a", "train"),
                   {{"phase", "Running"},
                    {"placement",
                     {{{"group", "w"}, {"member", 0}, {"node", "n1"}, {"gpus", {0, 1, 2, 4}}},
                      {{"group", "w"}, {"member", 1}, {"node", "n2"}, {"gpus", {0, 1, 2, 3}}}}}});
  CreateWithStatus("/api/v1/namespaces/team-b/trainingjobs", Job("team-b", "other"), nullptr);
  CreateWithStatus("/api/v1/queues",
                   {{"apiVersion", "tessera.dev/v1"},
                    {"kind", "Queue"},
                    {"metadata", {{"name", "research"}}},
                    {"spec", {{"weight", 2}, {"gpuQuota", {{"H100", 16}}}}}},
                   nullptr);

  Resp r = Do("GET", "/api/v1/fleet");
  ASSERT_EQ(r.status, 200) << r.text;
  const Json& f = r.body;
  EXPECT_TRUE(f["full"].get<bool>());
  EXPECT_GT(std::stoll(f["resourceVersion"].get<std::string>()), 0);
  ASSERT_EQ(f["nodes"].size(), 2u);
  const Json* n1 = FindRow(f["nodes"], 0, "n1");
  ASSERT_NE(n1, nullptr);
  EXPECT_EQ((*n1)[1], "r1");
  EXPECT_EQ((*n1)[2], "b0");
  EXPECT_EQ((*n1)[3], "Ready");
  EXPECT_EQ((*n1)[4], "H100");
  EXPECT_EQ((*n1)[6], Json({0, 0, 1, 1, 2, 2, 3, 3}));  // NVLink pairs
  EXPECT_EQ((*n1)[7], "HHHUHHHH");
  EXPECT_EQ((*n1)[8], "http://x:1");
  // Measured utilization as the agent reported it; -1 for GPUs it reported none for.
  EXPECT_EQ((*n1)[9], Json({97, -1, -1, -1, -1, 0, -1, -1}));
  const Json* n2 = FindRow(f["nodes"], 0, "n2");
  ASSERT_NE(n2, nullptr);
  EXPECT_EQ((*n2)[6], Json({0, 0, 0, 0, 0, 0, 0, 0}));  // one NVSwitch domain
  EXPECT_EQ((*n2)[7], "HHHHHHHH");
  EXPECT_EQ((*n2)[9], Json::array({-1, -1, -1, -1, -1, -1, -1, -1}));

  ASSERT_EQ(f["jobs"].size(), 2u);
  const Json* train = FindRow(f["jobs"], 2, "train");
  ASSERT_NE(train, nullptr);
  EXPECT_EQ((*train)[0], "T");
  EXPECT_EQ((*train)[1], "team-a");
  EXPECT_EQ((*train)[3], "Running");
  EXPECT_EQ((*train)[4], "research");
  EXPECT_EQ((*train)[5], 8.0);
  EXPECT_EQ((*train)[7], Json({{"n1", {0, 1, 2, 4}, 1000.0}, {"n2", {0, 1, 2, 3}, 1000.0}}));
  ASSERT_EQ(f["queues"].size(), 1u);
  EXPECT_EQ(f["queues"][0]["spec"]["gpuQuota"]["H100"], 16);

  // A tenant sees its own jobs only; a node token may not list the fleet.
  Resp a = Do("GET", "/api/v1/fleet", nullptr, kTeamA);
  ASSERT_EQ(a.status, 200);
  ASSERT_EQ(a.body["jobs"].size(), 1u);
  EXPECT_EQ(a.body["jobs"][0][1], "team-a");
  EXPECT_EQ(a.body["nodes"].size(), 2u);
  EXPECT_EQ(Do("GET", "/api/v1/fleet", nullptr, kNode1).status, 403);
  EXPECT_EQ(Do("GET", "/api/v1/fleet", nullptr, "").status, 401);
  EXPECT_EQ(Do("GET", "/api/v1/fleet", nullptr, "bogus").status, 401);
  EXPECT_EQ(Do("GET", "/api/v1/fleet?resourceVersion=abc").status, 400);
  EXPECT_EQ(Do("GET", "/api/v1/fleet?resourceVersion=999999").status, 400);
  EXPECT_EQ(Do("GET", "/api/v1/fleet?waitSeconds=-1").status, 400);
  // The API's own routes still answer beside the fleet route.
  EXPECT_EQ(Do("GET", "/api/v1/nodes/n1").status, 200);
}

TEST_F(DashboardTest, ChangeSetsCarryOnlyWhatChangedAfterTheRevision) {
  CreateWithStatus("/api/v1/nodes", Node("n1", "r1", "nvswitch"), nullptr);
  CreateWithStatus("/api/v1/nodes", Node("n2", "r1", "nvswitch"), nullptr);
  CreateWithStatus("/api/v1/namespaces/team-a/trainingjobs", Job("team-a", "train"), nullptr);
  Resp full = Do("GET", "/api/v1/fleet");
  ASSERT_EQ(full.status, 200);
  const std::string rv = full.body["resourceVersion"];

  // Nothing changed: an empty change set at the same revision.
  Resp same = Do("GET", "/api/v1/fleet?resourceVersion=" + rv);
  ASSERT_EQ(same.status, 200);
  EXPECT_FALSE(same.body["full"].get<bool>());
  EXPECT_TRUE(same.body["nodes"].empty());
  EXPECT_TRUE(same.body["jobs"].empty());
  EXPECT_EQ(same.body["resourceVersion"], rv);

  // GPU 5 of n2 turns unhealthy (twice: the last write wins); the job goes.
  Resp n2 = Do("GET", "/api/v1/nodes/n2");
  Json obj = n2.body;
  obj["status"] = {{"gpus", {{{"index", 5}, {"health", "Unhealthy"}}}}};
  ASSERT_EQ(Do("PUT", "/api/v1/nodes/n2/status", obj).status, 200);
  obj["status"]["gpus"][0]["index"] = 6;
  obj["status"]["gpus"][0]["utilization"] = 55;  // a heartbeat's measured sample
  obj["metadata"].erase("resourceVersion");
  ASSERT_EQ(Do("PUT", "/api/v1/nodes/n2/status", obj).status, 200);
  ASSERT_EQ(Do("DELETE", "/api/v1/namespaces/team-a/trainingjobs/train").status, 200);

  Resp d = Do("GET", "/api/v1/fleet?resourceVersion=" + rv);
  ASSERT_EQ(d.status, 200) << d.text;
  EXPECT_FALSE(d.body["full"].get<bool>());
  ASSERT_EQ(d.body["nodes"].size(), 1u);
  EXPECT_EQ(d.body["nodes"][0][0], "n2");
  EXPECT_EQ(d.body["nodes"][0][7], "HHHHHHUH");
  EXPECT_EQ(d.body["nodes"][0][9], Json({-1, -1, -1, -1, -1, -1, 55, -1}));
  EXPECT_TRUE(d.body["jobs"].empty());
  EXPECT_EQ(d.body["deletedJobs"], Json({{"T", "team-a", "train"}}));
  EXPECT_GT(std::stoll(d.body["resourceVersion"].get<std::string>()), std::stoll(rv));

  // A node deletion.
  const std::string rv2 = d.body["resourceVersion"];
  ASSERT_EQ(Do("DELETE", "/api/v1/nodes/n1").status, 200);
  Resp d2 = Do("GET", "/api/v1/fleet?resourceVersion=" + rv2);
  EXPECT_EQ(d2.body["deletedNodes"], Json({"n1"}));
}

TEST_F(DashboardTest, NvLinkDomainsComeFromTheLinksWhenTheAgentNamesNone) {
  Json node = {{"apiVersion", "tessera.dev/v1"},
               {"kind", "Node"},
               {"metadata", {{"name", "agent-node"}}},
               {"spec",
                {{"gpus", Json::array()},
                 {"links",
                  {{"X", "NVLINK", "PIX", "PIX"},
                   {"NVLINK", "X", "PIX", "PIX"},
                   {"PIX", "PIX", "X", "NVLINK"},
                   {"PIX", "PIX", "NVLINK", "X"}}}}}};
  for (int i = 0; i < 4; ++i) {
    node["spec"]["gpus"].push_back({{"index", i}, {"model", "A100"}});
  }
  CreateWithStatus("/api/v1/nodes", node, nullptr);
  Resp r = Do("GET", "/api/v1/fleet");
  ASSERT_EQ(r.status, 200) << r.text;
  ASSERT_EQ(r.body["nodes"].size(), 1u);
  EXPECT_EQ(r.body["nodes"][0][4], "A100");
  EXPECT_EQ(r.body["nodes"][0][6], Json({0, 0, 1, 1}));
}

// Each long-poll holds a request thread: one token cannot hold more than its share of them.
TEST_F(DashboardTest, LongPollsAreSharedFairlyBetweenTokens) {
  CreateWithStatus("/api/v1/nodes", Node("n0", "r1", "nvswitch"), nullptr);
  const std::string rv = Do("GET", "/api/v1/fleet").body["resourceVersion"];
  const std::string wait = "/api/v1/fleet?waitSeconds=5&resourceVersion=" + rv;
  // A waits (again, if it lost the race for the slot) until the write below ends its wait.
  std::atomic<bool> done{false};
  std::thread a([&] {
    while (!done && Do("GET", wait).status == 429) {
    }
  });
  Resp refused;
  for (int i = 0; i < 100 && refused.status != 429; ++i) {
    refused = Do("GET", "/api/v1/fleet?waitSeconds=0.2&resourceVersion=" + rv);
  }
  EXPECT_EQ(refused.status, 429);
  EXPECT_THAT(refused.text, HasSubstr("at most 1 per token"));
  // Another token still gets a slot (its wait ends with the write).
  Resp other;
  std::thread b([&] { other = Do("GET", wait, nullptr, kTeamA); });
  done = true;
  CreateWithStatus("/api/v1/nodes", Node("n1", "r1", "nvswitch"), nullptr);
  a.join();
  b.join();
  EXPECT_EQ(other.status, 200) << other.text;
}

TEST_F(DashboardTest, LongPollReturnsTheChangeThatEndsTheWait) {
  CreateWithStatus("/api/v1/nodes", Node("n1", "r1", "nvswitch"), nullptr);
  Resp full = Do("GET", "/api/v1/fleet");
  const std::string rv = full.body["resourceVersion"];
  std::thread writer([this] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    CreateWithStatus("/api/v1/nodes", Node("late", "r9", "pcie"), nullptr);
  });
  Resp d = Do("GET", "/api/v1/fleet?waitSeconds=5&resourceVersion=" + rv);
  writer.join();
  ASSERT_EQ(d.status, 200) << d.text;
  ASSERT_EQ(d.body["nodes"].size(), 1u);
  EXPECT_EQ(d.body["nodes"][0][0], "late");
  EXPECT_EQ(d.body["nodes"][0][6], Json({0, 1, 2, 3, 4, 5, 6, 7}));  // PCIe: no NVLink
}

// Heartbeats are leases: after the first, a heartbeat that only brings new
// utilization samples is not written to the store. The fleet summary still
// shows the newest samples: in its node rows, and as "samples" rows in a
// change set (the long poll ends on one) for a caller that follows them.
TEST_F(DashboardTest, UtilizationSamplesAreLiveWithoutAStoreWrite) {
  CreateWithStatus("/api/v1/nodes", Node("n1", "r1", "nvswitch"), nullptr);
  CreateWithStatus("/api/v1/nodes", Node("n2", "r1", "nvswitch"), nullptr);
  auto beat = [this](const std::string& node, int gpu, int util) {
    Json gpus = Json::array();
    for (int i = 0; i < 8; ++i) {
      gpus.push_back({{"index", i}, {"health", "Healthy"}, {"utilization", i == gpu ? util : 0}});
    }
    return Do("POST", "/api/v1/nodes/" + node + "/heartbeat", {{"gpus", gpus}});
  };
  Resp b = beat("n1", 3, 10);
  ASSERT_EQ(b.status, 200) << b.text;
  EXPECT_TRUE(b.body["written"].get<bool>());  // the first: no stored heartbeat yet
  Resp full = Do("GET", "/api/v1/fleet");
  ASSERT_EQ(full.status, 200) << full.text;
  const std::string rv = full.body["resourceVersion"];
  const std::string sv = full.body["samplesVersion"];
  EXPECT_TRUE(full.body["samples"].empty());

  b = beat("n1", 3, 85);
  ASSERT_EQ(b.status, 200) << b.text;
  EXPECT_FALSE(b.body["written"].get<bool>());  // a lease renewal: the store is unchanged
  EXPECT_EQ(Do("GET", "/api/v1/fleet?resourceVersion=" + rv).body["nodes"].size(), 0u);

  // A full snapshot's node row has the new sample, not the stored one.
  Resp again = Do("GET", "/api/v1/fleet");
  const Json* row = FindRow(again.body["nodes"], 0, "n1");
  ASSERT_NE(row, nullptr);
  EXPECT_EQ((*row)[9], Json({0, 0, 0, 85, 0, 0, 0, 0}));
  row = FindRow(again.body["nodes"], 0, "n2");
  ASSERT_NE(row, nullptr);
  EXPECT_EQ((*row)[9], Json({-1, -1, -1, -1, -1, -1, -1, -1}));  // never reported

  // A caller that follows samples gets a samples row, and the store revision stays.
  Resp d = Do("GET", "/api/v1/fleet?resourceVersion=" + rv + "&samplesVersion=" + sv);
  ASSERT_EQ(d.status, 200) << d.text;
  EXPECT_EQ(d.body["resourceVersion"], rv);
  EXPECT_TRUE(d.body["nodes"].empty());
  ASSERT_EQ(d.body["samples"].size(), 1u) << d.text;
  EXPECT_EQ(d.body["samples"][0], Json({"n1", {0, 0, 0, 85, 0, 0, 0, 0}}));
  const std::string sv2 = d.body["samplesVersion"];
  EXPECT_GT(std::stoll(sv2), std::stoll(sv));
  // The same samples again are no change.
  EXPECT_EQ(beat("n1", 3, 85).status, 200);
  EXPECT_TRUE(Do("GET", "/api/v1/fleet?resourceVersion=" + rv + "&samplesVersion=" + sv2)
                  .body["samples"]
                  .empty());

  // The long poll ends on a sample-only change.
  std::thread beater([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    beat("n2", 0, 40);
  });
  Resp w =
      Do("GET", "/api/v1/fleet?waitSeconds=5&resourceVersion=" + rv + "&samplesVersion=" + sv2);
  beater.join();
  ASSERT_EQ(w.status, 200) << w.text;
  ASSERT_EQ(w.body["samples"].size(), 1u) << w.text;
  EXPECT_EQ(w.body["samples"][0][0], "n2");
  EXPECT_EQ(w.body["samples"][0][1][0], 40);
  // A version from another server process (larger than this one's) gets every node.
  Resp all = Do("GET", "/api/v1/fleet?resourceVersion=" + rv + "&samplesVersion=999999");
  EXPECT_EQ(all.body["samples"].size(), 2u) << all.text;
  EXPECT_EQ(Do("GET", "/api/v1/fleet?samplesVersion=-2").status, 400);
}

// An autoscaled service's row ends with its replicas bound of desired and the
// mean p99 of its fresh readings against the target; a federation hub's jobs
// name their member cluster; Cluster objects have rows of their own. Each
// change reaches a long poll that waits on the revision before it.
TEST_F(DashboardTest, AutoscaledServicesAndMemberClustersHaveTheirFields) {
  auto at = [](absl::Duration ago) {
    return absl::FormatTime(absl::RFC3339_sec, absl::Now() - ago, absl::UTCTimeZone());
  };
  Json isvc = {{"apiVersion", "tessera.dev/v1"},
               {"kind", "InferenceService"},
               {"metadata", {{"name", "chat"}, {"namespace", "team-a"}}},
               {"spec",
                {{"modelVersion", "llama"},
                 {"replicas", {{"min", 2}, {"max", 4}}},
                 {"gpusPerReplica", 1},
                 {"slo", {{"p99LatencyMs", 250}, {"minThroughputRps", 10}}}}}};
  const std::string isvcs = "/api/v1/namespaces/team-a/inferenceservices";
  // Two fresh readings (mean 180 ms) and a stale one that must not count.
  CreateWithStatus(
      isvcs, isvc,
      {{"phase", "Running"},
       {"replicas", 2},
       {"desiredReplicas", 4},
       {"replicaMetrics",
        {{"replica-0", {{"p99LatencyMs", 160}, {"rps", 5}, {"time", at(absl::Seconds(2))}}},
         {"replica-1", {{"p99LatencyMs", 200}, {"rps", 5}, {"time", at(absl::Seconds(3))}}},
         {"replica-2", {{"p99LatencyMs", 900}, {"rps", 5}, {"time", at(absl::Minutes(10))}}}}}});
  // A plain service and a plain job keep their 9-element rows.
  Json plain = isvc;
  plain["metadata"]["name"] = "plain";
  plain["spec"].erase("slo");
  CreateWithStatus(isvcs, plain, nullptr);
  CreateWithStatus("/api/v1/namespaces/team-a/trainingjobs", Job("team-a", "train"),
                   {{"phase", "Running"}, {"cluster", "east"}, {"requeues", 1}, {"failovers", 0}});
  Json cluster = {{"apiVersion", "tessera.dev/v1"},
                  {"kind", "Cluster"},
                  {"metadata", {{"name", "east"}}},
                  {"spec", {{"server", "http://east:8080"}}}};
  CreateWithStatus("/api/v1/clusters", cluster,
                   {{"phase", "Ready"}, {"gpus", 64}, {"freeGpus", 24}, {"message", "ok"}});

  Resp r = Do("GET", "/api/v1/fleet");
  ASSERT_EQ(r.status, 200) << r.text;
  const Json* chat = FindRow(r.body["jobs"], 2, "chat");
  ASSERT_NE(chat, nullptr);
  ASSERT_EQ(chat->size(), 10u) << chat->dump();
  EXPECT_EQ((*chat)[0], "I");
  // [bound, desired, min, max, slo p99, mean p99 of the fresh readings, fresh readings]
  EXPECT_EQ((*chat)[9]["scale"], Json({2, 4, 2, 4, 250, 180.0, 2})) << chat->dump();
  const Json* plain_row = FindRow(r.body["jobs"], 2, "plain");
  ASSERT_NE(plain_row, nullptr);
  ASSERT_EQ(plain_row->size(), 10u) << plain_row->dump();
  EXPECT_EQ((*plain_row)[9], Json({{"created", "2026-01-01T00:00:00Z"}}))
      << "a plain job's row carries only its creation time";
  const Json* train = FindRow(r.body["jobs"], 2, "train");
  ASSERT_NE(train, nullptr);
  ASSERT_EQ(train->size(), 10u);
  EXPECT_EQ((*train)[9],
            Json({{"cluster", "east"}, {"created", "2026-01-01T00:00:00Z"}, {"requeues", 1}}))
      << "no zero failovers";
  ASSERT_EQ(r.body["clusters"].size(), 1u);
  EXPECT_EQ(r.body["clusters"][0], Json({"east", "Ready", 64, 24, "ok"}));
  EXPECT_TRUE(r.body["deletedClusters"].empty());
  const std::string rv = r.body["resourceVersion"];

  // The autoscaler writes a new desired count and fresh readings: a waiting poll wakes
  // with the new row.
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    Json st = Do("GET", isvcs + "/chat").body["status"];
    st["desiredReplicas"] = 3;
    st["replicaMetrics"]["replica-0"] = {
        {"p99LatencyMs", 300}, {"rps", 5}, {"time", at(absl::Seconds(1))}};
    st["replicaMetrics"]["replica-1"] = {
        {"p99LatencyMs", 320}, {"rps", 5}, {"time", at(absl::Seconds(1))}};
    StoreStatus(isvcs, "chat", st);
  });
  Resp w = Do("GET", "/api/v1/fleet?waitSeconds=5&resourceVersion=" + rv);
  writer.join();
  ASSERT_EQ(w.status, 200) << w.text;
  ASSERT_EQ(w.body["jobs"].size(), 1u) << w.text;
  EXPECT_EQ(w.body["jobs"][0][9]["scale"], Json({2, 3, 2, 4, 250, 310.0, 2}));

  // A member turns unreachable, then is deleted: each is a change set of its own.
  const std::string rv2 = w.body["resourceVersion"];
  Json c = Do("GET", "/api/v1/clusters/east").body;
  c["status"] = {{"phase", "Unreachable"}, {"gpus", 64}, {"freeGpus", 0}, {"message", "timeout"}};
  ASSERT_EQ(Do("PUT", "/api/v1/clusters/east/status", c).status, 200);
  Resp d = Do("GET", "/api/v1/fleet?waitSeconds=5&resourceVersion=" + rv2);
  ASSERT_EQ(d.status, 200);
  EXPECT_EQ(d.body["clusters"], Json({{"east", "Unreachable", 64, 0, "timeout"}}));
  EXPECT_TRUE(d.body["jobs"].empty());
  const std::string rv3 = d.body["resourceVersion"];
  ASSERT_EQ(Do("DELETE", "/api/v1/clusters/east").status, 200);
  Resp d2 = Do("GET", "/api/v1/fleet?waitSeconds=5&resourceVersion=" + rv3);
  EXPECT_EQ(d2.body["deletedClusters"], Json({"east"}));
  EXPECT_TRUE(d2.body["clusters"].empty());
}

}  // namespace
}  // namespace tessera::server
