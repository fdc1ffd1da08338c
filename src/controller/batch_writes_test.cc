// The controller's batched writes (binding_writes.cc, admission_writes.cc, queue_cycle.cc's
// waiting reasons): a cycle's bindings, a page's admissions and new waiting reasons share store
// transactions in runs the store takes, and a conflict in a
// run costs only its own job.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "controller/controller_test_fixture.h"
#include "controller/scheduling_controller.h"
#include "store/memory_store.h"

namespace tessera::controller {
namespace {

// The batch tests' objects, written straight to `store`: an 8-GPU node gpu-0, and Pending
// one-member TrainingJobs j<first>..j<first+n-1> in team-a of `gpus` GPUs.
void PutNode(store::Store& store) {
  Json node = {{"apiVersion", kApiVersion},
               {"kind", "Node"},
               {"metadata", {{"name", "gpu-0"}, {"uid", "n0"}}},
               {"spec", {{"gpuType", "H100"}, {"gpuCount", 8}}},
               {"status", {{"phase", "Unknown"}}}};
  ASSERT_TRUE(store.Create(ObjectKey("nodes", "", "gpu-0"), ToStoredValue(node)).ok());
}
void PutJobs(store::Store& store, int n, int gpus) {
  for (int i = 0; i < n; ++i) {
    const std::string name = absl::StrCat("j", i);
    Json job = {{"apiVersion", kApiVersion},
                {"kind", "TrainingJob"},
                {"metadata", {{"name", name}, {"namespace", "team-a"}, {"uid", "u" + name}}},
                {"spec", {{"groups", {{{"name", "w"}, {"count", 1}, {"gpusPerReplica", gpus}}}}}},
                {"status", {{"phase", "Pending"}}}};
    ASSERT_TRUE(store.Create(ObjectKey("trainingjobs", "team-a", name), ToStoredValue(job)).ok());
  }
}

class EditBeforeBatchStore final : public ForwardingStore {
 public:
  EditBeforeBatchStore() : ForwardingStore(s_) {}  // s_ is only bound here, used later
  std::string edit_key;
  absl::StatusOr<int64_t> Txn(const std::vector<store::Op>& ops) override {
    if (!edit_key.empty() && ops.size() > 2) {
      const std::string k = std::exchange(edit_key, "");
      absl::StatusOr<store::KeyValue> kv = s_.Get(k);
      Json obj = *ParseStored(kv->value);
      obj["metadata"]["labels"]["edited"] = "yes";
      EXPECT_TRUE(s_.Put(k, ToStoredValue(obj), kv->mod_revision).ok());
    }
    return s_.Txn(ops);
  }

 private:
  store::MemoryStore s_;
};

// One job edited between the decision and the write: the batch falls back to one write per
// job, only the edited job's binding is undone, and the next cycle binds it at its new revision.
TEST(ControllerBatchTest, AConflictUndoesOnlyItsOwnBinding) {
  EditBeforeBatchStore store;
  ManualClock clock{absl::FromUnixSeconds(1767225600)};
  PutNode(store);
  PutJobs(store, 4, 2);
  ControllerOptions opts;
  auto ctl = SchedulingController::Create(store, clock, opts);
  ASSERT_TRUE(ctl.ok()) << ctl.status();
  ASSERT_TRUE((*ctl)->Start().ok());
  store.edit_key = ObjectKey("trainingjobs", "team-a", "j2");
  ASSERT_TRUE((*ctl)->Step().ok());
  EXPECT_TRUE(store.edit_key.empty());  // the edit happened
  auto phase = [&](const std::string& name) {
    return (*ParseStored(store.Get(ObjectKey("trainingjobs", "team-a", name))->value))["status"]
        .value("phase", "");
  };
  EXPECT_EQ(phase("j0"), "Scheduled");
  EXPECT_EQ(phase("j1"), "Scheduled");
  EXPECT_EQ(phase("j3"), "Scheduled");
  EXPECT_NE(phase("j2"), "Scheduled");
  EXPECT_EQ((*ctl)->stats().bind_batch_fallbacks, 1);
  EXPECT_EQ((*ctl)->stats().bind_conflicts, 1);
  EXPECT_TRUE((*ctl)->cluster().CheckConsistency().ok());
  EXPECT_EQ((*ctl)->cluster().allocated_milli(), 6000);
  clock.Advance(absl::Seconds(6));  // past the idle cycle, should the edit not wake one
  ASSERT_TRUE((*ctl)->Step().ok());
  EXPECT_EQ(phase("j2"), "Scheduled");
  EXPECT_EQ((*ctl)->cluster().allocated_milli(), 8000);
}

// A store counting its Txns and each key's writes; with `max_ops`, it takes at most that many
// operations per Txn (as etcd takes 127).
class CountingStore final : public ForwardingStore {
 public:
  CountingStore() : ForwardingStore(s_) {}
  size_t MaxTxnOps() const override { return max_ops > 0 ? max_ops : s_.MaxTxnOps(); }
  absl::StatusOr<int64_t> Txn(const std::vector<store::Op>& ops) override {
    if (max_ops > 0 && ops.size() > max_ops)
      return absl::InvalidArgumentError("too many operations");
    ++txns;
    if (ops.size() > 1) ++batched;
    for (const store::Op& op : ops) ++writes[op.key];
    return s_.Txn(ops);
  }
  size_t max_ops = 0;  // 0: the memory store's own limit
  int txns = 0, batched = 0;
  std::map<std::string, int> writes;

 private:
  store::MemoryStore s_;
};

// A page of new jobs is admitted, and a cycle's bindings written, in runs that fit the store's
// Txn size: neither one write per job (on etcd, 2,430 admissions written one by one held the
// first cycle ~11 s) nor one Txn the store refuses.
TEST(ControllerBatchTest, AdmissionsAndBindingsAreWrittenInRunsTheStoreTakes) {
  CountingStore store;
  store.max_ops = 4;
  ManualClock clock{absl::FromUnixSeconds(1767225600)};
  PutNode(store);
  auto ctl = SchedulingController::Create(store, clock, ControllerOptions{});
  ASSERT_TRUE(ctl.ok()) << ctl.status();
  ASSERT_TRUE((*ctl)->Start().ok());
  PutJobs(store, 8, 1);
  store.txns = store.batched = 0;
  ASSERT_TRUE((*ctl)->Step().ok());
  int admitted_events = 0;
  absl::StatusOr<store::ListResult> events = store.List("/registry/events/team-a/", {});
  ASSERT_TRUE(events.ok());
  for (const store::KeyValue& kv : events->kvs) {
    admitted_events += (*ParseStored(kv.value))["spec"]["reason"] == "Admitted";
  }
  EXPECT_EQ(admitted_events, 8) << "each admission's Event, written with it";
  for (int i = 0; i < 8; ++i) {
    Json job =
        *ParseStored(store.Get(ObjectKey("trainingjobs", "team-a", absl::StrCat("j", i)))->value);
    EXPECT_EQ(job["status"].value("phase", ""), "Scheduled") << i;
  }
  EXPECT_EQ((*ctl)->stats().bind_batch_fallbacks, 0);
  EXPECT_EQ((*ctl)->stats().admission_batch_fallbacks, 0);
  EXPECT_GE(store.batched, 4) << "runs of several admissions, then of several bindings";
  EXPECT_LE(store.txns, 8) << "not one write per job and step (16)";
  EXPECT_TRUE((*ctl)->cluster().CheckConsistency().ok());
}

// A job the cycle binds in the step it arrives is admitted and bound in one write (no read):
// both conditions, both Events (Admitted named first), one revision of the job.
TEST(ControllerBatchTest, AJobBoundWhereItArrivesIsAdmittedAndBoundInOneWrite) {
  CountingStore store;
  ManualClock clock{absl::FromUnixSeconds(1767225600)};
  PutNode(store);
  auto ctl = SchedulingController::Create(store, clock, ControllerOptions{});
  ASSERT_TRUE(ctl.ok()) << ctl.status();
  ASSERT_TRUE((*ctl)->Start().ok());
  PutJobs(store, 4, 2);
  store.writes.clear();
  ASSERT_TRUE((*ctl)->Step().ok());
  for (int i = 0; i < 4; ++i) {
    const std::string key = ObjectKey("trainingjobs", "team-a", absl::StrCat("j", i));
    EXPECT_EQ(store.writes[key], 1) << key;
    const Json st = (*ParseStored(store.Get(key)->value))["status"];
    EXPECT_EQ(st.value("phase", ""), "Scheduled") << st;
    std::map<std::string, std::string> conditions;
    for (const Json& c : st["conditions"]) conditions[c["type"]] = c["status"];
    EXPECT_EQ(conditions["Admitted"], "True") << st;
    EXPECT_EQ(conditions["Scheduled"], "True") << st;
  }
  absl::StatusOr<store::ListResult> events = store.List("/registry/events/team-a/", {});
  ASSERT_TRUE(events.ok());
  std::map<std::string, std::vector<std::string>> reasons;  // by job, in name order
  for (const store::KeyValue& kv : events->kvs) {
    const Json e = *ParseStored(kv.value);
    reasons[e["spec"]["involvedObject"]["name"]].push_back(e["spec"]["reason"]);
  }
  for (int i = 0; i < 4; ++i) {
    EXPECT_THAT(reasons[absl::StrCat("j", i)], testing::ElementsAre("Admitted", "Scheduled")) << i;
  }
  EXPECT_EQ((*ctl)->stats().bind_batch_fallbacks, 0);
  EXPECT_TRUE((*ctl)->cluster().CheckConsistency().ok());
}

// Jobs no node can hold yet: each gets its waiting reason (status.message and an Unschedulable
// Event, once) in runs the store takes too, not one commit each.
TEST(ControllerBatchTest, WaitingReasonsAreWrittenInRuns) {
  CountingStore store;
  store.max_ops = 4;
  ManualClock clock{absl::FromUnixSeconds(1767225600)};
  PutNode(store);
  auto ctl = SchedulingController::Create(store, clock, ControllerOptions{});
  ASSERT_TRUE(ctl.ok()) << ctl.status();
  ASSERT_TRUE((*ctl)->Start().ok());
  PutJobs(store, 12, 16);  // 16 GPUs on one member: more than the 8-GPU node has
  store.txns = 0;
  ASSERT_TRUE((*ctl)->Step().ok());
  for (int i = 0; i < 12; ++i) {
    Json job =
        *ParseStored(store.Get(ObjectKey("trainingjobs", "team-a", absl::StrCat("j", i)))->value);
    EXPECT_EQ(job["status"].value("phase", ""), "Queued") << i;
    EXPECT_EQ(job["status"].value("message", "").rfind("waiting: ", 0), 0u) << job["status"];
  }
  // 12 admissions and 12 waiting reasons, each with its Event: 48 operations, 12 Txns of 4 at
  // the least; one Txn per write would be 24.
  EXPECT_LE(store.txns, 14) << "one commit per waiting reason";
  int unschedulable = 0;
  absl::StatusOr<store::ListResult> events = store.List("/registry/events/team-a/", {});
  ASSERT_TRUE(events.ok());
  for (const store::KeyValue& kv : events->kvs) {
    unschedulable += (*ParseStored(kv.value))["spec"]["reason"] == "Unschedulable";
  }
  EXPECT_EQ(unschedulable, 12);
  // Nothing changed: the next steps write nothing more.
  store.txns = 0;
  clock.Advance(absl::Seconds(6));
  ASSERT_TRUE((*ctl)->Step().ok());
  EXPECT_EQ(store.txns, 0);
}

}  // namespace
}  // namespace tessera::controller
