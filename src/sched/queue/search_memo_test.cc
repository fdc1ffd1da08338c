// The QueueManager remembers preemption searches that found no victims
// (search_memo.h): it must answer from memory only while nothing the search
// reads has changed, and search again when time makes a victim eligible or
// the cluster, queue usage or running set change.
#include "sched/queue/search_memo.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "sched/queue/queue_manager.h"
#include "sched/queue/queue_test_util.h"

namespace tessera::sched {
namespace {

using testing::GangJob;
using testing::kT0;
using testing::Q;
using testing::SmallCluster;

struct Fixture {
  std::unique_ptr<ClusterState> cs = SmallCluster(1);
  std::unique_ptr<QueueManager> qm;
  Fixture() {
    QueueManagerConfig c;
    c.tree.queues = {Q("q", "")};
    c.backfill = false;
    c.preemption.min_runtime = absl::Minutes(5);
    auto m = QueueManager::Create(c, cs.get());
    if (!m.ok()) abort();
    qm = std::move(*m);
  }
};

TEST(SearchMemo, RemembersAFailedSearchUntilAVictimReachesMinRuntime) {
  Fixture f;
  ASSERT_TRUE(f.qm->Submit(GangJob("low", "q", 1, 8, 100), {}, kT0).ok());
  f.qm->Cycle(kT0);
  ASSERT_EQ(f.qm->Phase("default/low"), JobPhase::kRunning);
  // Two high-priority jobs of one shape; "low" is too young to preempt.
  ASSERT_TRUE(f.qm->Submit(GangJob("high", "q", 1, 8, 1000), {}, kT0 + absl::Minutes(1)).ok());
  f.qm->Cycle(kT0 + absl::Minutes(1));
  EXPECT_TRUE(
      absl::StrContains(f.qm->WaitingReason("default/high"), "no running job may be preempted"))
      << f.qm->WaitingReason("default/high");
  EXPECT_EQ(f.qm->search_memo_stores(), 1);
  EXPECT_EQ(f.qm->search_memo_hits(), 0);
  // Nothing changed: answered from memory, with the same reason.
  const std::string before = f.qm->WaitingReason("default/high");
  f.qm->Cycle(kT0 + absl::Minutes(2));
  EXPECT_EQ(f.qm->search_memo_hits(), 1);
  EXPECT_EQ(f.qm->WaitingReason("default/high"), before);
  EXPECT_EQ(f.qm->Phase("default/high"), JobPhase::kPending);
  // "low" has run 5 minutes: it is a candidate now, whatever the memory says.
  CycleReport r = f.qm->Cycle(kT0 + absl::Minutes(5));
  EXPECT_EQ(f.qm->search_memo_hits(), 1);
  EXPECT_EQ(f.qm->Phase("default/high"), JobPhase::kNominated);
  ASSERT_EQ(r.preemptions, 1);
}

TEST(SearchMemo, SearchesAgainAfterTheRunningSetChanges) {
  Fixture f;
  ASSERT_TRUE(f.qm->Submit(GangJob("a", "q", 1, 4, 100), {}, kT0).ok());
  f.qm->Cycle(kT0);
  ASSERT_TRUE(f.qm->Submit(GangJob("b", "q", 1, 4, 1000), {}, kT0 + absl::Minutes(1)).ok());
  f.qm->Cycle(kT0 + absl::Minutes(1));
  ASSERT_EQ(f.qm->Phase("default/b"), JobPhase::kRunning);
  // Needs 8 GPUs: "a" (4, old enough later) and "b" (4, same priority) hold them.
  ASSERT_TRUE(f.qm->Submit(GangJob("c", "q", 1, 8, 1000), {}, kT0 + absl::Minutes(10)).ok());
  f.qm->Cycle(kT0 + absl::Minutes(10));
  EXPECT_EQ(f.qm->Phase("default/c"), JobPhase::kPending) << f.qm->WaitingReason("default/c");
  const int64_t stores = f.qm->search_memo_stores();
  EXPECT_GE(stores, 1);
  f.qm->Cycle(kT0 + absl::Minutes(11));
  EXPECT_GE(f.qm->search_memo_hits(), 1);
  // "b" ends: the cluster and the running set changed, so the search (and
  // the placement) run again; "c" now preempts "a" or fits.
  ASSERT_TRUE(f.qm->Finish("default/b", kT0 + absl::Minutes(12)).ok());
  const int64_t hits = f.qm->search_memo_hits();
  CycleReport r = f.qm->Cycle(kT0 + absl::Minutes(12));
  EXPECT_EQ(f.qm->search_memo_hits(), hits);
  EXPECT_EQ(f.qm->Phase("default/c"), JobPhase::kNominated) << f.qm->WaitingReason("default/c");
  EXPECT_EQ(r.preemptions, 1);
}

TEST(SearchMemo, StateIdIgnoresAbsorbedSpansOnly) {
  SearchMemo m;
  SearchMemo::Gens g{1, 1, 1};
  const uint64_t id = m.StateId(g);
  SearchMemo::Gens dry{2, 3, 1};  // a dry run moved the counters, changed nothing
  m.Absorb(g, dry);
  EXPECT_EQ(m.StateId(dry), id);
  // A change before the span is not absorbed by it.
  SearchMemo::Gens changed{5, 3, 1}, after{6, 3, 1};
  m.Absorb(changed, after);
  EXPECT_NE(m.StateId(after), id);
  VictimPlan plan;
  plan.reason = "none";
  const uint64_t s = m.StateId(after);
  m.Store(4, s, kT0 + absl::Minutes(1), nullptr, plan);
  ASSERT_NE(m.Find(4, s, kT0, nullptr), nullptr);
  EXPECT_EQ(m.Find(4, s, kT0, nullptr)->reason, "none");
  EXPECT_EQ(m.Find(4, s, kT0 + absl::Minutes(1), nullptr), nullptr);  // a candidate by then
  EXPECT_EQ(m.Find(5, s, kT0, nullptr), nullptr);
  EXPECT_EQ(m.Find(4, s + 1, kT0, nullptr), nullptr);
  std::vector<NodeId> reserved = {1, 2};
  m.Store(6, s, absl::InfiniteFuture(), &reserved, plan);
  EXPECT_NE(m.Find(6, s, kT0, &reserved), nullptr);
  std::vector<NodeId> other = {1, 3};
  EXPECT_EQ(m.Find(6, s, kT0, &other), nullptr);
  PreemptionPolicy capped;
  capped.max_evicted_gpus = 8;
  plan.evaluations = 3;
  EXPECT_FALSE(SearchMemo::Cacheable(plan, capped));
  EXPECT_TRUE(SearchMemo::Cacheable(plan, PreemptionPolicy{}));
  plan.evaluations = 0;
  EXPECT_TRUE(SearchMemo::Cacheable(plan, capped));
}

}  // namespace
}  // namespace tessera::sched
