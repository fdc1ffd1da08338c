// The phases agents' member reports call for (member_reports.cc): a page of reports is written
// in one store transaction, and when a job changed under that transaction each is written on its
// own, losing nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "controller/controller_test_fixture.h"

namespace tessera::controller {
namespace {

// Forwards to a store; before the first transaction that writes more than one job, writes
// `victim` itself (an agent's report arriving between the controller's read and its commit).
class InterleavingStore : public ForwardingStore {
 public:
  InterleavingStore(store::Store& inner, std::string victim)
      : ForwardingStore(inner), victim_(std::move(victim)) {}
  absl::StatusOr<int64_t> Txn(const std::vector<store::Op>& ops) override {
    const auto jobs = std::count_if(ops.begin(), ops.end(), [](const store::Op& op) {
      return op.key.rfind(kTrainingJobsPrefix, 0) == 0;
    });
    if (jobs > 1 && !interleaved) {
      interleaved = true;
      absl::StatusOr<store::KeyValue> kv = inner_.Get(victim_);
      if (kv.ok()) {
        Json obj = *ParseStored(kv->value);
        obj["metadata"]["labels"]["touched"] = "yes";
        (void)inner_.Put(victim_, ToStoredValue(obj), kv->mod_revision);
      }
    }
    return inner_.Txn(ops);
  }

  bool interleaved = false;

 private:
  std::string victim_;
};

class MemberReportsTest : public ControllerTest {
 protected:
  // Three one-node jobs bound on three nodes.
  void BindThree() {
    for (const char* n : {"gpu-0", "gpu-1", "gpu-2"}) AddNode(n, 8);
    for (const char* j : {"a", "b", "c"}) AddJob(j, 1, 8);
    Step();
    for (const char* j : {"a", "b", "c"}) ASSERT_EQ(Job(j)["status"]["phase"], "Scheduled");
  }
};

TEST_F(MemberReportsTest, APageOfReportsIsOneTransaction) {
  BindThree();
  const int64_t before = ctl_->stats().phase_batches;
  for (const char* j : {"a", "b", "c"}) ReportJob(j, api::MemberState::kRunning);
  const int64_t rev = store_.CurrentRevision();
  Step();
  for (const char* j : {"a", "b", "c"}) {
    const Json job = Job(j);
    EXPECT_EQ(job["status"]["phase"], "Running") << j;
    EXPECT_EQ(job["status"]["reason"], "Started") << j;
    const std::vector<std::string> reasons = EventReasons(j);
    EXPECT_EQ(std::count(reasons.begin(), reasons.end(), "Started"), 1) << j;
  }
  EXPECT_EQ(ctl_->stats().phase_batches, before + 1);
  EXPECT_EQ(ctl_->stats().phase_batch_fallbacks, 0);
  EXPECT_EQ(store_.CurrentRevision(), rev + 1);  // three jobs and their Events: one commit
  // Two finish, one fails: both kinds in one transaction, the GPUs back in memory.
  ReportJob("a", api::MemberState::kExited, 0);
  ReportJob("b", api::MemberState::kExited, 0);
  ReportJob("c", api::MemberState::kFailed, 3);
  Step();
  EXPECT_EQ(Job("a")["status"]["phase"], "Succeeded");
  EXPECT_EQ(Job("b")["status"]["phase"], "Succeeded");
  EXPECT_EQ(Job("c")["status"]["phase"], "Failed");
  EXPECT_EQ(Job("c")["status"]["reason"], "Error");
  for (const char* j : {"a", "b", "c"}) EXPECT_FALSE(Job(j)["status"].contains("placement"));
  EXPECT_EQ(ctl_->stats().phase_batches, before + 2);
  EXPECT_EQ(BoundGpus(), 0);
  EXPECT_TRUE(ctl_->cluster().CheckConsistency().ok());
}

// Heartbeats arrive between a busy fleet's member reports all the time; they requeue nothing,
// so they do not cut the reports' phases into a commit each.
TEST_F(MemberReportsTest, HeartbeatsBetweenReportsDoNotSplitTheTransaction) {
  BindThree();
  const int64_t before = ctl_->stats().phase_batches;
  ReportJob("a", api::MemberState::kRunning);
  Heartbeat("gpu-0");
  ReportJob("b", api::MemberState::kRunning);
  Heartbeat("gpu-1");
  ReportJob("c", api::MemberState::kRunning);
  const int64_t rev = store_.CurrentRevision();
  Step();
  for (const char* j : {"a", "b", "c"}) EXPECT_EQ(Job(j)["status"]["phase"], "Running") << j;
  EXPECT_EQ(ctl_->stats().phase_batches, before + 1);
  EXPECT_EQ(store_.CurrentRevision(), rev + 1);
}

// A GPU failure does requeue: a job that finished before it is written Succeeded first, not
// requeued as lost.
TEST_F(MemberReportsTest, AFinishBeforeAGpuFailureIsWrittenBeforeTheFailureIsApplied) {
  BindThree();
  ReportJob("b", api::MemberState::kRunning);
  Step();
  ReportJob("a", api::MemberState::kExited, 0);
  ReportJob("b", api::MemberState::kExited, 0);
  Modify("nodes", "", "gpu-0", [](Json& o) {
    o["status"]["gpus"] = {{{"index", 0}, {"health", "Unhealthy"}, {"message", "XID 79"}}};
  });
  Step();
  EXPECT_EQ(Job("a")["status"]["phase"], "Succeeded");
  EXPECT_EQ(Job("b")["status"]["phase"], "Succeeded");
  EXPECT_EQ(Job("c")["status"]["phase"], "Scheduled");
  EXPECT_EQ(BoundGpus(), 8);
  EXPECT_TRUE(ctl_->cluster().CheckConsistency().ok());
}

TEST_F(MemberReportsTest, AJobChangedUnderTheTransactionIsWrittenOnItsOwn) {
  BindThree();
  InterleavingStore store(store_, Key("trainingjobs", "team-a", "b"));
  ControllerOptions opts = base_options_;
  opts.node_grace = absl::Seconds(10);
  opts.eviction_delay = absl::Seconds(60);
  auto c = SchedulingController::Create(store, clock_, opts);
  ASSERT_TRUE(c.ok()) << c.status();
  ctl_ = *std::move(c);
  ASSERT_TRUE(ctl_->Start().ok());
  Step();
  for (const char* j : {"a", "b", "c"}) ReportJob(j, api::MemberState::kRunning);
  Step();
  ASSERT_TRUE(store.interleaved);
  EXPECT_EQ(ctl_->stats().phase_batch_fallbacks, 1);
  for (const char* j : {"a", "b", "c"}) {
    const Json job = Job(j);
    EXPECT_EQ(job["status"]["phase"], "Running") << j;
    const std::vector<std::string> reasons = EventReasons(j);
    EXPECT_EQ(std::count(reasons.begin(), reasons.end(), "Started"), 1) << j;
  }
  // The write that came in between is kept.
  EXPECT_EQ(Job("b")["metadata"]["labels"]["touched"], "yes");
}

}  // namespace
}  // namespace tessera::controller
