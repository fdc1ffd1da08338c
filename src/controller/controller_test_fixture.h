// The controller tests' fixture: a SchedulingController on a MemoryStore
// with a ManualClock (deterministic), and helpers that write objects as the
// API server, a user or an agent would.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "api/member_status.h"
#include "controller/scheduling_controller.h"
#include "store/memory_store.h"

namespace tessera::controller {

// A store that passes every call to `inner`; tests derive from it to step in on some calls.
class ForwardingStore : public store::Store {
 public:
  explicit ForwardingStore(store::Store& inner) : inner_(inner) {}
  absl::StatusOr<store::KeyValue> Get(std::string_view key) override { return inner_.Get(key); }
  absl::StatusOr<store::ListResult> List(std::string_view prefix,
                                         const store::ListOptions& options) override {
    return inner_.List(prefix, options);
  }
  absl::StatusOr<int64_t> Txn(const std::vector<store::Op>& ops) override {
    return inner_.Txn(ops);
  }
  absl::StatusOr<store::EventsResult> Events(std::string_view prefix, int64_t since,
                                             int64_t limit) override {
    return inner_.Events(prefix, since, limit);
  }
  absl::Status WaitForRevision(int64_t revision, absl::Time deadline) override {
    return inner_.WaitForRevision(revision, deadline);
  }
  int64_t CurrentRevision() override { return inner_.CurrentRevision(); }
  int64_t CompactedRevision() override { return inner_.CompactedRevision(); }
  absl::Status Compact(int64_t revision) override { return inner_.Compact(revision); }
  size_t MaxTxnOps() const override { return inner_.MaxTxnOps(); }

 protected:
  store::Store& inner_;
};

class ControllerTest : public ::testing::Test {
 protected:
  ControllerOptions base_options_;
  void SetUp() override { Restart(); }

  void Restart() { Restart(base_options_); }
  void Restart(ControllerOptions opts) {
    ctl_.reset();
    opts.node_grace = absl::Seconds(10);
    opts.eviction_delay = absl::Seconds(60);
    auto c = SchedulingController::Create(store_, clock_, opts);
    ASSERT_TRUE(c.ok()) << c.status();
    ctl_ = *std::move(c);
    ASSERT_TRUE(ctl_->Start().ok());
  }

  void Step() { ASSERT_TRUE(ctl_->Step().ok()); }

  static std::string Key(const std::string& plural, const std::string& ns, const std::string& n) {
    return ObjectKey(plural, ns, n);
  }

  void Create(const std::string& plural, const std::string& ns, Json obj) {
    obj["apiVersion"] = kApiVersion;
    if (!ns.empty()) obj["metadata"]["namespace"] = ns;
    obj["metadata"]["uid"] = "uid-" + obj["metadata"]["name"].get<std::string>();
    if (!obj.contains("status"))
      obj["status"] = {{"phase", plural == "nodes" ? "Unknown" : "Pending"}};
    std::string name = obj["metadata"]["name"];
    ASSERT_TRUE(store_.Create(Key(plural, ns, name), ToStoredValue(obj)).ok());
  }

  Json Get(const std::string& plural, const std::string& ns, const std::string& name) {
    absl::StatusOr<store::KeyValue> kv = store_.Get(Key(plural, ns, name));
    EXPECT_TRUE(kv.ok()) << kv.status();
    if (!kv.ok()) return Json();
    return *ParseStored(kv->value);
  }

  // Read-modify-write, as an agent or a user would.
  void Modify(const std::string& plural, const std::string& ns, const std::string& name,
              const std::function<void(Json&)>& f) {
    absl::StatusOr<store::KeyValue> kv = store_.Get(Key(plural, ns, name));
    ASSERT_TRUE(kv.ok());
    Json obj = *ParseStored(kv->value);
    f(obj);
    ASSERT_TRUE(store_.Put(kv->key, ToStoredValue(obj), kv->mod_revision).ok());
  }

  // Every placed member of a job reports `state` (and `exit_code` once finished) at its
  // binding's generation, as its node agent would (status.members[], api/member_status.h).
  // `only`: just these members ("<group>-<index>"); empty: all.
  void Report(const std::string& plural, const std::string& ns, const std::string& name,
              api::MemberState state, int exit_code = 0, const std::set<std::string>& only = {}) {
    Modify(plural, ns, name, [&](Json& o) {
      Json& st = o["status"];
      std::vector<api::MemberStatus> members = api::MembersOf(st);
      const int64_t job_gen = st.value("generation", int64_t{0});
      for (const Json& m : st.value("placement", Json::array())) {
        api::MemberStatus r;
        r.member = m["group"].get<std::string>() + "-" + std::to_string(m["member"].get<int>());
        if (!only.empty() && !only.contains(r.member)) continue;
        r.generation = m.value("generation", job_gen);
        r.state = state;
        r.node = m["node"].get<std::string>();
        if (api::Finished(state)) {
          r.exit_code = exit_code;
          r.reason = api::ExitReason(exit_code);
        }
        std::erase_if(members, [&](const api::MemberStatus& x) { return x.member == r.member; });
        members.push_back(r);
      }
      Json list = Json::array();
      for (const api::MemberStatus& m : members) list.push_back(api::ToJson(m));
      st["members"] = list;
    });
  }
  void ReportJob(const std::string& name, api::MemberState state, int exit_code = 0) {
    Report("trainingjobs", "team-a", name, state, exit_code);
  }

  void AddNode(const std::string& name, int gpus, const std::string& rack = "r1") {
    Create("nodes", "",
           {{"kind", "Node"},
            {"metadata", {{"name", name}}},
            {"spec", {{"gpuType", "H100"}, {"gpuCount", gpus}, {"rack", rack}}}});
  }

  void AddJob(const std::string& name, int members, int gpus, Json extra = Json::object()) {
    Json spec = {{"groups", {{{"name", "worker"}, {"count", members}, {"gpusPerReplica", gpus}}}}};
    for (auto& [k, v] : extra.items()) spec[k] = v;
    Create("trainingjobs", "team-a",
           {{"kind", "TrainingJob"}, {"metadata", {{"name", name}}}, {"spec", spec}});
  }

  Json Job(const std::string& name) { return Get("trainingjobs", "team-a", name); }

  std::vector<std::string> EventReasons(const std::string& involved) {
    std::vector<std::string> out;
    absl::StatusOr<store::ListResult> l = store_.List(kEventsPrefix, {});
    for (const store::KeyValue& kv : l->kvs) {
      Json e = *ParseStored(kv.value);
      if (e["spec"]["involvedObject"]["name"] == involved) out.push_back(e["spec"]["reason"]);
    }
    return out;
  }

  void Heartbeat(const std::string& node) {
    Modify("nodes", "", node,
           [&](Json& o) { o["status"]["lastHeartbeatTime"] = Timestamp(clock_.Now()); });
  }

  // Every (node, GPU) bound by some job in the store, checking none twice.
  int BoundGpus() {
    std::set<std::pair<std::string, int>> seen;
    absl::StatusOr<store::ListResult> l = store_.List(kTrainingJobsPrefix, {});
    for (const store::KeyValue& kv : l->kvs) {
      Json j = *ParseStored(kv.value);
      if (!j["status"].contains("placement")) continue;
      for (const Json& m : j["status"]["placement"]) {
        for (const Json& g : m["gpus"]) {
          EXPECT_TRUE(seen.insert({m["node"], g.get<int>()}).second)
              << "GPU bound twice: " << m["node"] << " " << g;
        }
      }
    }
    return static_cast<int>(seen.size());
  }

  store::MemoryStore store_;
  ManualClock clock_{absl::FromUnixSeconds(1767225600)};
  std::unique_ptr<SchedulingController> ctl_;
};

}  // namespace tessera::controller
