// Backfill loans (QueueManagerConfig::lend_reserved): a job that checkpoints
// may start on room a reservation holds, though it would still run at the
// reservation's start; when its loan ends the reserved job preempts it,
// whatever their priorities, and starts on time.
#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "sched/queue/queue_manager.h"
#include "sched/queue/queue_test_util.h"

namespace tessera::sched {
namespace {

using testing::GangJob;
using testing::kT0;
using testing::Q;
using testing::SmallCluster;

bool Has(const CycleReport& rep, QueueEvent::Kind kind, const std::string& job,
         const std::string& other = "") {
  for (const QueueEvent& e : rep.events) {
    if (e.kind == kind && e.job == job && (other.empty() || e.other == other)) return true;
  }
  return false;
}

class BackfillLoan : public ::testing::Test {
 protected:
  // Two 8-GPU nodes; "long" holds node 1 for 10 h; "head" (both nodes) waits,
  // reserved from +10 h. `lend`: backfill.lendReserved.
  void SetUpFleet(bool lend) {
    cs_ = SmallCluster(2, 8);
    QueueManagerConfig c;
    c.tree.queues = {Q("q", "")};
    c.lend_reserved = lend;
    auto m = QueueManager::Create(std::move(c), cs_.get());
    ASSERT_TRUE(m.ok()) << m.status();
    qm_ = std::move(*m);
    ASSERT_TRUE(
        qm_->Submit(GangJob("long", "q", 1, 8), {.expected_runtime = absl::Hours(10)}, kT0).ok());
    qm_->Cycle(kT0);
    ASSERT_TRUE(qm_->Submit(GangJob("head", "q", 2, 8), {}, kT0 + absl::Seconds(1)).ok());
  }
  std::unique_ptr<ClusterState> cs_;
  std::unique_ptr<QueueManager> qm_;
};

TEST_F(BackfillLoan, ACheckpointingJobBorrowsTheReservedRoomAndGivesItBackOnTime) {
  SetUpFleet(true);
  // Both would run past the reservation (+20 h); only one checkpoints.
  ASSERT_TRUE(qm_->Submit(GangJob("borrower", "q", 1, 8),
                          {.expected_runtime = absl::Hours(20), .checkpoints = true},
                          kT0 + absl::Seconds(2))
                  .ok());
  ASSERT_TRUE(qm_->Submit(GangJob("plain", "q", 1, 4), {.expected_runtime = absl::Hours(20)},
                          kT0 + absl::Seconds(3))
                  .ok());
  CycleReport rep = qm_->Cycle(kT0 + absl::Seconds(5));
  ASSERT_EQ(qm_->reservations().size(), 1u);
  const absl::Time start = kT0 + absl::Hours(10);
  EXPECT_EQ(qm_->reservations()[0].start, start);
  EXPECT_EQ(qm_->Phase("default/borrower"), JobPhase::kRunning);
  EXPECT_EQ(rep.loans, 1);
  EXPECT_EQ(qm_->Phase("default/plain"), JobPhase::kPending);
  // The loan ends a grace period (30 s) before the reservation; the caller cycles then.
  const absl::Time until = start - absl::Seconds(30);
  EXPECT_EQ(qm_->NextLoanEnd(kT0 + absl::Seconds(5)), until);
  // The borrower does not push the reservation back: it leaves when its loan's grace ends.
  qm_->Cycle(kT0 + absl::Hours(1));
  ASSERT_EQ(qm_->reservations().size(), 1u);
  EXPECT_EQ(qm_->reservations()[0].start, start);
  // "long" ends on time; at the loan's end "head" takes its room back, although the borrower
  // has the same priority (no priority preemption could).
  ASSERT_TRUE(qm_->Finish("default/long", until - absl::Seconds(1)).ok());
  rep = qm_->Cycle(until);
  EXPECT_TRUE(Has(rep, QueueEvent::Kind::kCheckpointSignal, "default/borrower", "default/head"));
  EXPECT_EQ(qm_->Phase("default/head"), JobPhase::kNominated);
  rep = qm_->Cycle(start);
  EXPECT_TRUE(Has(rep, QueueEvent::Kind::kKilled, "default/borrower"));
  EXPECT_TRUE(Has(rep, QueueEvent::Kind::kStarted, "default/head"));
  EXPECT_EQ(qm_->Phase("default/borrower"), JobPhase::kPending);
  EXPECT_EQ(qm_->NextLoanEnd(start), absl::InfiniteFuture());
  EXPECT_TRUE(cs_->CheckConsistency().ok());
}

// Without lendReserved the same job waits, as a job that does not checkpoint does.
TEST_F(BackfillLoan, NothingIsLentUnlessConfigured) {
  SetUpFleet(false);
  ASSERT_TRUE(qm_->Submit(GangJob("borrower", "q", 1, 8),
                          {.expected_runtime = absl::Hours(20), .checkpoints = true},
                          kT0 + absl::Seconds(2))
                  .ok());
  CycleReport rep = qm_->Cycle(kT0 + absl::Seconds(5));
  EXPECT_EQ(qm_->Phase("default/borrower"), JobPhase::kPending);
  EXPECT_EQ(rep.loans, 0);
}

// A loan shorter than minLoan (30 min by default; it is past the 5 min minimum runtime) is not
// made: the run would not be worth its restart.
TEST_F(BackfillLoan, NoLoanShorterThanMinLoan) {
  SetUpFleet(true);
  const absl::Time late = kT0 + absl::Hours(10) - absl::Minutes(20);
  ASSERT_TRUE(qm_->Submit(GangJob("borrower", "q", 1, 8),
                          {.expected_runtime = absl::Hours(20), .checkpoints = true}, late)
                  .ok());
  CycleReport rep = qm_->Cycle(late);
  EXPECT_EQ(qm_->Phase("default/borrower"), JobPhase::kPending);
  EXPECT_EQ(rep.loans, 0);
}

// A lender that goes away (deleted, say) ends its loans: the borrower runs on and no one may
// preempt it for that reservation any more.
TEST_F(BackfillLoan, ALoanEndsWithItsLender) {
  SetUpFleet(true);
  ASSERT_TRUE(qm_->Submit(GangJob("borrower", "q", 1, 4),
                          {.expected_runtime = absl::Hours(20), .checkpoints = true},
                          kT0 + absl::Seconds(2))
                  .ok());
  qm_->Cycle(kT0 + absl::Seconds(5));
  ASSERT_EQ(qm_->Phase("default/borrower"), JobPhase::kRunning);
  ASSERT_TRUE(qm_->Finish("default/head", kT0 + absl::Hours(1)).ok());
  EXPECT_EQ(qm_->NextLoanEnd(kT0 + absl::Hours(1)), absl::InfiniteFuture());
  // A new 16-GPU job waits for the borrower like for any job of its priority.
  ASSERT_TRUE(qm_->Finish("default/long", kT0 + absl::Hours(1)).ok());
  ASSERT_TRUE(qm_->Submit(GangJob("next", "q", 2, 8), {}, kT0 + absl::Hours(11)).ok());
  CycleReport rep = qm_->Cycle(kT0 + absl::Hours(11));
  EXPECT_EQ(qm_->Phase("default/borrower"), JobPhase::kRunning);
  EXPECT_EQ(qm_->Phase("default/next"), JobPhase::kPending);
  EXPECT_FALSE(Has(rep, QueueEvent::Kind::kCheckpointSignal, "default/borrower"));
}

}  // namespace
}  // namespace tessera::sched
