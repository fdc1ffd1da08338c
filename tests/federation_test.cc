// A federation of three real `tessera server` processes on loopback: two
// member clusters (east: 2 x 8 H100, west: 1 x 8 H100) and a hub
// (`--federation`) that hands jobs to them (src/federation/dispatcher.h).
// Jobs go where they fit, with the most free GPUs; a job that fits nowhere
// waits in the hub; deleting it in the hub deletes its copy; a member that
// stops answering loses its jobs to the other, and its stale copy is deleted
// when it answers again. A job its member accepts but cannot place (east's
// nodes have too few cores for it, which the hub's GPU fit does not see) moves
// to the other member; a change of a job's spec or metadata in the hub reaches
// its copy.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include "nlohmann/json.hpp"
#include "server_process.h"

namespace tessera::testing {
namespace {

using Json = nlohmann::json;

class FederationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (TesseraBin().empty()) GTEST_SKIP() << "TESSERA_BIN is not set";
    dir_ = MakeTempDir("tessera_federation");
    ASSERT_FALSE(dir_.empty());
    for (auto [proc, name] : {std::pair{&east_, "east"}, std::pair{&west_, "west"}}) {
      proc->set_stderr_path(dir_ + "/" + name + ".log");
      ASSERT_GT(proc->Start({"--data-dir", dir_ + "/" + name, "--node-grace-seconds", "0",
                             "--insecure-no-auth"}),
                0)
          << proc->error();
    }
    hub_.set_stderr_path(dir_ + "/hub.log");
    ASSERT_GT(
        hub_.Start({"--data-dir", dir_ + "/hub", "--insecure-no-auth", "--federation",
                    "--federation-failover-seconds", "2", "--federation-requeue-seconds", "2"}),
        0)
        << hub_.error();
    // 16 cores per east node: the hub's fit counts GPUs only (member_capacity.h).
    for (const char* n : {"e1", "e2"}) {
      Json node = Node(n);
      node["spec"]["cpuMilli"] = 16000;
      ASSERT_EQ(Post(east_, "/api/v1/nodes", node), 201);
    }
    ASSERT_EQ(Post(west_, "/api/v1/nodes", Node("w1")), 201);
    for (auto [proc, name] : {std::pair{&east_, "east"}, std::pair{&west_, "west"}}) {
      Json c = {{"apiVersion", "tessera.dev/v1"},
                {"kind", "Cluster"},
                {"metadata", {{"name", name}}},
                {"spec", {{"server", "http://127.0.0.1:" + std::to_string(proc->port())}}}};
      ASSERT_EQ(Post(hub_, "/api/v1/clusters", c), 201);
    }
    WaitFor(hub_, "/api/v1/clusters/east",
            [](const Json& c) { return c["status"].value("freeGpus", 0) == 16; });
    WaitFor(hub_, "/api/v1/clusters/west",
            [](const Json& c) { return c["status"].value("freeGpus", 0) == 8; });
  }
  void TearDown() override {
    kill(west_.pid(), SIGCONT);
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  static Json Node(const std::string& name) {
    return {{"apiVersion", "tessera.dev/v1"},
            {"kind", "Node"},
            {"metadata", {{"name", name}}},
            {"spec", {{"gpuType", "H100"}, {"gpuCount", 8}}}};
  }
  static Json Job(const std::string& name, int members) {
    return {{"apiVersion", "tessera.dev/v1"},
            {"kind", "TrainingJob"},
            {"metadata", {{"name", name}, {"namespace", "ml"}}},
            {"spec", {{"groups", {{{"name", "w"}, {"count", members}, {"gpusPerReplica", 8}}}}}}};
  }

  static Json Get(ServerProcess& p, const std::string& path, int* code = nullptr) {
    httplib::Client c("127.0.0.1", p.port());
    c.set_read_timeout(10, 0);
    auto r = c.Get(path);
    if (code != nullptr) *code = r ? r->status : 0;
    if (!r || r->status != 200) return Json();
    return Json::parse(r->body, nullptr, false);
  }
  static int Post(ServerProcess& p, const std::string& path, const Json& body) {
    httplib::Client c("127.0.0.1", p.port());
    auto r = c.Post(path, body.dump(), "application/json");
    return r ? r->status : 0;
  }
  static int Put(ServerProcess& p, const std::string& path, const Json& body) {
    httplib::Client c("127.0.0.1", p.port());
    auto r = c.Put(path, body.dump(), "application/json");
    return r ? r->status : 0;
  }
  static int Delete(ServerProcess& p, const std::string& path) {
    httplib::Client c("127.0.0.1", p.port());
    auto r = c.Delete(path);
    return r ? r->status : 0;
  }

  // Polls GET `path` on `p` until `pred` holds (30 s at most).
  Json WaitFor(ServerProcess& p, const std::string& path,
               const std::function<bool(const Json&)>& pred) {
    Json last;
    for (int i = 0; i < 300; ++i) {
      last = Get(p, path);
      if (last.is_object() && pred(last)) return last;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "timed out waiting on " << path << ": " << last.dump();
    return last;
  }
  static std::string JobPath(const std::string& name) {
    return "/api/v1/namespaces/ml/trainingjobs/" + name;
  }
  static std::function<bool(const Json&)> On(const std::string& cluster, const std::string& phase) {
    return [=](const Json& j) {
      return j["status"].value("cluster", "") == cluster && j["status"].value("phase", "") == phase;
    };
  }

  // The hub's Events about job `name`: reason -> messages.
  std::multimap<std::string, std::string> Events(const std::string& name) {
    Json l = Get(hub_, "/api/v1/namespaces/ml/events?labelSelector=involved-name%3D" + name);
    std::multimap<std::string, std::string> out;
    if (!l.is_object() || !l["items"].is_array()) return out;
    for (const Json& e : l["items"]) {
      out.emplace(e["spec"].value("reason", ""), e["spec"].value("message", ""));
    }
    return out;
  }
  void WaitGone(ServerProcess& p, const std::string& path) {
    int code = 0;
    for (int i = 0; i < 100 && code != 404; ++i) {
      Get(p, path, &code);
      if (code != 404) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_EQ(code, 404) << path;
  }

  std::string dir_;
  ServerProcess east_, west_, hub_;
};

TEST_F(FederationTest, JobsGoWhereTheyFitAndMoveOffALostMember) {
  // 16 GPUs fit only in east; it is Scheduled there by east's own scheduler, mirrored in the hub.
  ASSERT_EQ(Post(hub_, "/api/v1/namespaces/ml/trainingjobs", Job("big", 2)), 201);
  Json big = WaitFor(hub_, JobPath("big"), On("east", "Scheduled"));
  EXPECT_EQ(big["status"]["placement"].size(), 2u) << big.dump();
  Json copy = Get(east_, JobPath("big"));
  ASSERT_TRUE(copy.is_object());
  EXPECT_EQ(copy["metadata"]["labels"]["tessera.dev/federation-hub"], "hub");
  EXPECT_EQ(copy["metadata"]["annotations"]["tessera.dev/federation-origin"],
            big["metadata"]["uid"]);
  // east is full: the next 8 GPUs go west.
  ASSERT_EQ(Post(hub_, "/api/v1/namespaces/ml/trainingjobs", Job("small", 1)), 201);
  WaitFor(hub_, JobPath("small"), On("west", "Scheduled"));
  // 24 GPUs fit nowhere: the hub keeps it, saying why.
  ASSERT_EQ(Post(hub_, "/api/v1/namespaces/ml/trainingjobs", Job("huge", 3)), 201);
  Json huge = WaitFor(hub_, JobPath("huge"), [](const Json& j) {
    return j["status"].value("message", "").find("no member cluster has room for 24 GPUs") !=
           std::string::npos;
  });
  EXPECT_EQ(huge["status"].value("phase", ""), "Pending");
  EXPECT_FALSE(huge["status"].contains("cluster"));

  // Deleted in the hub: its copy in east goes too.
  ASSERT_EQ(Delete(hub_, JobPath("big")), 200);
  int code = 0;
  for (int i = 0; i < 100 && code != 404; ++i) {
    Get(east_, JobPath("big"), &code);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(code, 404);

  // west stops answering (paused): after 2 s its job moves to east, which has room again.
  ASSERT_EQ(kill(west_.pid(), SIGSTOP), 0);
  Json small = WaitFor(hub_, JobPath("small"), On("east", "Scheduled"));
  EXPECT_EQ(small["status"].value("failovers", 0), 1);
  EXPECT_TRUE(Get(east_, JobPath("small")).is_object());
  Json west = Get(hub_, "/api/v1/clusters/west");
  EXPECT_EQ(west["status"].value("phase", ""), "Unreachable") << west.dump();
  // west answers again: its stale copy is deleted, so the job never runs twice for long.
  ASSERT_EQ(kill(west_.pid(), SIGCONT), 0);
  code = 0;
  for (int i = 0; i < 200 && code != 404; ++i) {
    Get(west_, JobPath("small"), &code);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(code, 404);
  WaitFor(hub_, "/api/v1/clusters/west",
          [](const Json& c) { return c["status"].value("phase", "") == "Ready"; });
  // Still one copy, in east, and the hub says so.
  EXPECT_EQ(Get(hub_, JobPath("small"))["status"].value("cluster", ""), "east");
  // kubectl's habit: the members as the hub sees them.
  CliResult get =
      RunTessera("get clusters --server http://127.0.0.1:" + std::to_string(hub_.port()));
  EXPECT_EQ(get.rc, 0) << get.out;
  EXPECT_NE(get.out.find("FREE"), std::string::npos) << get.out;
  EXPECT_NE(get.out.find("Ready"), std::string::npos) << get.out;
  // The hub's series.
  httplib::Client c("127.0.0.1", hub_.port());
  auto m = c.Get("/metrics");
  ASSERT_TRUE(m && m->status == 200);
  EXPECT_NE(m->body.find("tessera_federation_failovers_total{cluster=\"west\"} 1"),
            std::string::npos)
      << m->body;
  EXPECT_NE(m->body.find("tessera_federation_dispatches_total{cluster=\"east\"} 2"),
            std::string::npos);
  EXPECT_NE(m->body.find("tessera_federation_cluster_ready{cluster=\"west\"} 1"),
            std::string::npos);
}

TEST_F(FederationTest, AnUnplacedJobMovesAndSpecChangesReachTheCopy) {
  // 8 GPUs and 32 cores: the hub sends it to east (16 free GPUs against
  // west's 8), whose nodes have 16 cores each, so east cannot place it.
  Json job = Job("cores", 1);
  job["spec"]["groups"][0]["resources"] = {{"cpu", 32}};
  ASSERT_EQ(Post(hub_, "/api/v1/namespaces/ml/trainingjobs", job), 201);
  WaitFor(hub_, JobPath("cores"),
          [](const Json& j) { return j["status"].value("cluster", "") == "east"; });
  Json stuck = Get(east_, JobPath("cores"));
  ASSERT_TRUE(stuck.is_object());
  EXPECT_FALSE(stuck["status"].contains("placement") && !stuck["status"]["placement"].empty())
      << stuck.dump();
  // Unplaced in east for 2 s while west has room: moved there, and placed.
  Json moved = WaitFor(hub_, JobPath("cores"), On("west", "Scheduled"));
  EXPECT_EQ(moved["status"].value("requeues", 0), 1) << moved.dump();
  EXPECT_EQ(moved["status"].value("failovers", 0), 0);
  EXPECT_TRUE(moved["status"].contains("lastRequeueTime"));
  WaitGone(east_, JobPath("cores"));
  auto events = Events("cores");
  ASSERT_EQ(events.count("Requeued"), 1u);
  EXPECT_NE(events.find("Requeued")->second.find("from cluster east to cluster west"),
            std::string::npos)
      << events.find("Requeued")->second;
  {
    httplib::Client c("127.0.0.1", hub_.port());
    auto m = c.Get("/metrics");
    ASSERT_TRUE(m && m->status == 200);
    EXPECT_NE(m->body.find("tessera_federation_requeues_total{cluster=\"east\"} 1"),
              std::string::npos)
        << m->body;
  }
  // A job placed in its member stays, however long: 16 GPUs in east.
  ASSERT_EQ(Post(hub_, "/api/v1/namespaces/ml/trainingjobs", Job("placed", 2)), 201);
  WaitFor(hub_, JobPath("placed"), On("east", "Scheduled"));

  // A change in the hub (an annotation, a label, the priority) reaches the copy,
  // which keeps the hub's label and origin.
  Json edit = Get(hub_, JobPath("cores"));
  const std::string uid = edit["metadata"].value("uid", "");
  edit.erase("status");
  edit["metadata"]["annotations"]["owner"] = "vision";
  edit["metadata"]["labels"]["tier"] = "gold";
  edit["spec"]["priority"] = 7;
  ASSERT_EQ(Put(hub_, JobPath("cores"), edit), 200);
  Json copy = WaitFor(west_, JobPath("cores"), [](const Json& c) {
    return c["metadata"].value("annotations", Json::object()).value("owner", "") == "vision";
  });
  EXPECT_EQ(copy["spec"].value("priority", 0), 7) << copy.dump();
  EXPECT_EQ(copy["metadata"]["labels"].value("tier", ""), "gold");
  EXPECT_EQ(copy["metadata"]["labels"].value("tessera.dev/federation-hub", ""), "hub");
  EXPECT_EQ(copy["metadata"]["annotations"].value("tessera.dev/federation-origin", ""), uid);
  EXPECT_EQ(copy["status"].value("phase", ""), "Scheduled");  // the member kept its status
  // Placed in west: the new priority applies when it is placed next, and the hub says so.
  Json synced = WaitFor(hub_, JobPath("cores"), [](const Json& j) {
    return j["status"].value("specSync", Json::object()).value("state", "") == "Deferred";
  });
  EXPECT_NE(synced["status"]["specSync"].value("message", "").find("spec.priority"),
            std::string::npos)
      << synced.dump();
  CliResult described = RunTessera("describe job cores -n ml --server http://127.0.0.1:" +
                                   std::to_string(hub_.port()));
  EXPECT_NE(described.out.find("west (failovers 0, requeues 1)"), std::string::npos)
      << described.out;
  EXPECT_NE(described.out.find("Spec sync:"), std::string::npos) << described.out;
  // Once per change: the mirror's status writes in the hub do not push it again.
  const std::string rv = copy["metadata"].value("resourceVersion", "");
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  EXPECT_EQ(Get(west_, JobPath("cores"))["metadata"].value("resourceVersion", ""), rv);
  EXPECT_EQ(Events("cores").count("SpecUpdated"), 1u);
  // The placed job in east was never moved.
  Json placed = Get(hub_, JobPath("placed"));
  EXPECT_EQ(placed["status"].value("cluster", ""), "east");
  EXPECT_EQ(placed["status"].value("requeues", 0), 0);
}

}  // namespace
}  // namespace tessera::testing
