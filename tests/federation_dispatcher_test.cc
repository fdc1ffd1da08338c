// The federation hub's dispatcher (src/federation/dispatcher.h) stepped by hand
// on a manual clock against member clusters that are real API servers
// in-process (HTTP on loopback, stores in memory, no scheduler: a copy stays
// unplaced until the test places it). Covers what the three-process
// federation_test cannot make happen: a member that refuses a change of a
// copy (its own admission policy), and the doubling wait between moves.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "controller/store_layout.h"
#include "federation/dispatcher.h"
#include "nlohmann/json.hpp"
#include "server/api_server.h"
#include "server/auth.h"
#include "server/dashboard.h"
#include "server/testing/http_call.h"
#include "store/memory_store.h"

namespace tessera::federation {
namespace {

using Json = nlohmann::json;
using controller::ToStoredValue;
using server::testing::HttpCall;

// A member cluster: its API and fleet summary over a store in memory. Its
// admission refuses TrainingJobs with spec.priority above 100 (a policy of
// its own, which the hub does not have).
struct Member {
  explicit Member(Clock& clock) {
    server::ApiServerOptions so;
    so.threads = 4;
    so.extra_routes = [this](httplib::Server& http) {
      server::RegisterDashboardRoutes(http, store, server::Authenticator::AllowAll());
    };
    so.admit = [](const std::string& kind, const std::string&, const Json* obj) {
      if (kind == "TrainingJob" && obj != nullptr && (*obj)["spec"].value("priority", 0) > 100) {
        return absl::InvalidArgumentError("spec.priority: above this cluster's limit of 100");
      }
      return absl::OkStatus();
    };
    api = std::make_unique<server::ApiServer>(store, clock, server::Authenticator::AllowAll(), so);
    absl::StatusOr<int> p = api->Start("127.0.0.1", 0);
    EXPECT_TRUE(p.ok()) << p.status();
    port = p.ok() ? *p : 0;
  }
  Json Get(const std::string& path) { return HttpCall(port, "GET", path, "", "").body; }
  int Code(const std::string& path) { return HttpCall(port, "GET", path, "", "").status; }

  store::MemoryStore store;
  std::unique_ptr<server::ApiServer> api;
  int port = 0;
};

constexpr char kJobKey[] = "/registry/trainingjobs/ml/j";
constexpr char kCopyPath[] = "/api/v1/namespaces/ml/trainingjobs/j";

class DispatcherTest : public ::testing::Test {
 protected:
  void AddMember(const std::string& name) {
    auto m = std::make_unique<Member>(clock_);
    Json node = {{"apiVersion", "tessera.dev/v1"},
                 {"kind", "Node"},
                 {"metadata", {{"name", name + "-1"}}},
                 {"spec", {{"gpuType", "H100"}, {"gpuCount", 8}}},
                 {"status", {{"phase", "Ready"}}}};
    // Ready as a member's controller would mark it (the API takes no status).
    ASSERT_TRUE(m->store.Create("/registry/nodes/" + name + "-1", ToStoredValue(node)).ok());
    Json c = {{"apiVersion", "tessera.dev/v1"},
              {"kind", "Cluster"},
              {"metadata", {{"name", name}}},
              {"spec", {{"server", absl::StrCat("http://127.0.0.1:", m->port)}}}};
    ASSERT_TRUE(hub_.Put("/registry/clusters/" + name, ToStoredValue(c)).ok());
    members_[name] = std::move(m);
  }
  void SubmitJob() {
    Json j = {{"apiVersion", "tessera.dev/v1"},
              {"kind", "TrainingJob"},
              {"metadata",
               {{"name", "j"},
                {"namespace", "ml"},
                {"uid", "uid-j"},
                {"creationTimestamp", controller::Timestamp(clock_.Now())}}},
              {"spec", {{"groups", {{{"name", "w"}, {"count", 1}, {"gpusPerReplica", 8}}}}}},
              {"status", {{"phase", "Pending"}}}};
    ASSERT_TRUE(hub_.Put(kJobKey, ToStoredValue(j)).ok());
  }
  Json HubJob() {
    absl::StatusOr<store::KeyValue> kv = hub_.Get(kJobKey);
    EXPECT_TRUE(kv.ok());
    return kv.ok() ? *controller::ParseStored(kv->value) : Json();
  }
  // A user's edit of the hub's job (as a PUT would store it: status kept).
  void Edit(const std::function<void(Json&)>& f) {
    Json j = HubJob();
    f(j);
    ASSERT_TRUE(hub_.Put(kJobKey, ToStoredValue(j)).ok());
  }
  std::multimap<std::string, std::string> HubEvents() {
    std::multimap<std::string, std::string> out;
    absl::StatusOr<store::ListResult> l = hub_.List(controller::kEventsPrefix, {});
    if (!l.ok()) return out;
    for (const store::KeyValue& kv : l->kvs) {
      Json e = *controller::ParseStored(kv.value);
      out.emplace(e["spec"].value("reason", ""), e["spec"].value("message", ""));
    }
    return out;
  }
  void Step() { ASSERT_TRUE(dispatcher_->Step().ok()); }
  void Start(absl::Duration requeue_after) {
    DispatcherOptions o;
    o.requeue_after = requeue_after;
    o.request_timeout = absl::Seconds(5);
    dispatcher_ = std::make_unique<Dispatcher>(hub_, clock_, o);
  }

  ManualClock clock_{absl::FromUnixSeconds(1767225600)};
  store::MemoryStore hub_;
  std::map<std::string, std::unique_ptr<Member>> members_;
  std::unique_ptr<Dispatcher> dispatcher_;
};

TEST_F(DispatcherTest, ARefusedChangeIsRecordedOnceAndTheNextChangeIsPassedOn) {
  AddMember("east");
  Start(absl::ZeroDuration());
  SubmitJob();
  Step();
  ASSERT_EQ(HubJob()["status"].value("cluster", ""), "east");
  Member& east = *members_["east"];
  ASSERT_EQ(east.Code(kCopyPath), 200);

  Edit([](Json& j) { j["spec"]["priority"] = 500; });
  Step();
  Json st = HubJob()["status"];
  ASSERT_TRUE(st.contains("specSync")) << st.dump();
  EXPECT_EQ(st["specSync"].value("state", ""), "Refused");
  const std::string msg = st["specSync"].value("message", "");
  EXPECT_NE(msg.find("cluster east refused the change of spec.priority"), std::string::npos) << msg;
  EXPECT_NE(msg.find("above this cluster's limit of 100"), std::string::npos) << msg;
  EXPECT_EQ(east.Get(kCopyPath)["spec"].value("priority", 0), 0);
  EXPECT_EQ(HubEvents().count("SpecRefused"), 1u);
  EXPECT_EQ(dispatcher_->stats().spec_refused, 1);
  // Not tried again while the hub's object stays as it is (the mirror still runs).
  for (int i = 0; i < 3; ++i) Step();
  EXPECT_EQ(dispatcher_->stats().spec_refused, 1);
  EXPECT_EQ(HubEvents().count("SpecRefused"), 1u);
  EXPECT_EQ(HubJob()["status"].value("cluster", ""), "east");  // and the job stays

  // The next change is tried (and refused again: the priority is still 500)...
  Edit([](Json& j) { j["metadata"]["annotations"] = {{"owner", "vision"}}; });
  Step();
  EXPECT_EQ(dispatcher_->stats().spec_refused, 2);
  // ...and one the member takes is passed on, the refusal forgotten.
  Edit([](Json& j) { j["spec"]["priority"] = 50; });
  Step();
  Json copy = east.Get(kCopyPath);
  EXPECT_EQ(copy["spec"].value("priority", 0), 50);
  EXPECT_EQ(copy["metadata"]["annotations"].value("owner", ""), "vision");
  EXPECT_EQ(copy["metadata"]["annotations"].value("tessera.dev/federation-origin", ""), "uid-j");
  EXPECT_EQ(copy["metadata"]["labels"].value("tessera.dev/federation-hub", ""), "hub");
  st = HubJob()["status"];
  EXPECT_EQ(st["specSync"].value("state", ""), "Synced") << st.dump();
  EXPECT_EQ(HubEvents().count("SpecUpdated"), 1u);
  EXPECT_EQ(dispatcher_->stats().spec_pushed, 1);
}

TEST_F(DispatcherTest, AnUnplacedCopyMovesAfterTheWaitWhichDoublesAndAPlacedOneStays) {
  AddMember("east");
  AddMember("west");
  Start(absl::Seconds(60));
  SubmitJob();
  Step();
  ASSERT_EQ(HubJob()["status"].value("cluster", ""), "east");  // the first of equals
  clock_.Advance(absl::Seconds(59));
  Step();
  EXPECT_EQ(HubJob()["status"].value("cluster", ""), "east");
  clock_.Advance(absl::Seconds(1));
  Step();
  Json st = HubJob()["status"];
  EXPECT_EQ(st.value("cluster", ""), "west") << st.dump();
  EXPECT_EQ(st.value("requeues", 0), 1);
  EXPECT_EQ(st.value("phase", ""), "Dispatched");
  EXPECT_EQ(members_["east"]->Code(kCopyPath), 404);
  EXPECT_EQ(members_["west"]->Code(kCopyPath), 200);
  auto ev = HubEvents();
  ASSERT_EQ(ev.count("Requeued"), 1u);
  EXPECT_NE(ev.find("Requeued")->second.find("moved from cluster east to cluster west"),
            std::string::npos)
      << ev.find("Requeued")->second;

  // Unplaced in west too: the next move waits twice as long.
  clock_.Advance(absl::Seconds(119));
  Step();
  EXPECT_EQ(HubJob()["status"].value("cluster", ""), "west");
  clock_.Advance(absl::Seconds(1));
  Step();
  EXPECT_EQ(HubJob()["status"].value("cluster", ""), "east");
  EXPECT_EQ(HubJob()["status"].value("requeues", 0), 2);
  EXPECT_EQ(dispatcher_->stats().requeued, 2);

  // east places it (as its scheduler would): it never moves again.
  Member& east = *members_["east"];
  Json copy = east.Get(kCopyPath);
  copy["status"]["phase"] = "Scheduled";
  copy["status"]["placement"] = {
      {{"group", "w"}, {"member", 0}, {"node", "east-1"}, {"gpus", {0, 1, 2, 3, 4, 5, 6, 7}}}};
  {
    absl::StatusOr<store::KeyValue> kv = east.store.Get(kJobKey);
    ASSERT_TRUE(kv.ok()) << kv.status();
    ASSERT_TRUE(east.store.Put(kJobKey, ToStoredValue(copy), kv->mod_revision).ok());
  }
  Step();
  clock_.Advance(absl::Hours(10));
  Step();
  st = HubJob()["status"];
  EXPECT_EQ(st.value("cluster", ""), "east");
  EXPECT_EQ(st.value("phase", ""), "Scheduled");
  EXPECT_EQ(st.value("requeues", 0), 2);
  // The hub's Events are collected after their hour (DispatcherOptions::event_ttl).
  EXPECT_EQ(HubEvents().count("Requeued"), 0u);
  EXPECT_GE(dispatcher_->stats().events_collected, 2);
}

TEST_F(DispatcherTest, ZeroDisablesRequeues) {
  AddMember("east");
  AddMember("west");
  Start(absl::ZeroDuration());
  SubmitJob();
  Step();
  clock_.Advance(absl::Hours(24));
  Step();
  Step();
  EXPECT_EQ(HubJob()["status"].value("cluster", ""), "east");
  EXPECT_EQ(dispatcher_->stats().requeued, 0);
}

}  // namespace
}  // namespace tessera::federation
