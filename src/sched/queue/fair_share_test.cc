// Fair share: two equal-weight teams saturating the fleet converge to equal
// dominant shares; a team idle for a while bursts above its share, bounded by
// its credit. Simulations of a few simulated hours (label slow: skipped in
// the sanitizer run).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "absl/strings/str_cat.h"
#include "sched/queue/queue_manager.h"
#include "sched/queue/queue_test_util.h"

namespace tessera::sched {
namespace {

using testing::GangJob;
using testing::kT0;
using testing::Q;
using testing::SmallCluster;

std::unique_ptr<QueueManager> Make(ClusterState* cs, QueueManagerConfig c) {
  auto m = QueueManager::Create(std::move(c), cs);
  EXPECT_TRUE(m.ok()) << m.status();
  return std::move(*m);
}

// A tiny simulation: jobs of two teams, exact runtimes, one cycle a minute.
struct Sim {
  std::unique_ptr<ClusterState> cs;
  std::unique_ptr<QueueManager> qm;
  std::multimap<absl::Time, std::string> ends;
  std::map<std::string, absl::Duration> runtime;
  absl::Time now = kT0;

  void Submit(const std::string& name, const std::string& team, int gpus, absl::Duration rt) {
    ASSERT_TRUE(qm->Submit(GangJob(name, team, 1, gpus), {.expected_runtime = rt}, now).ok());
    runtime[absl::StrCat("default/", name)] = rt;
  }
  CycleReport Step(absl::Duration dt) {
    now += dt;
    while (!ends.empty() && ends.begin()->first <= now) {
      (void)qm->Finish(ends.begin()->second, now);
      ends.erase(ends.begin());
    }
    CycleReport r = qm->Cycle(now);
    if (getenv("TRACE2")) {
      for (const QueueEvent& e : r.events)
        printf("%s %d %s | ", e.job.c_str(), (int)e.kind, e.message.c_str());
      if (!r.reservations.empty()) printf(" res=%s", r.reservations[0].job.c_str());
      printf("\n");
    }
    for (const QueueEvent& e : r.events) {
      if (e.kind == QueueEvent::Kind::kStarted) ends.insert({now + runtime[e.job], e.job});
    }
    return r;
  }
  double Share(const std::string& q) { return qm->Queue(q)->usage; }
};

TEST(FairShare, EqualTeamsConvergeToEqualDominantShares) {
  Sim s;
  s.cs = SmallCluster(16, 8);  // 128 GPUs
  QueueManagerConfig c;
  c.tree.half_life = absl::Minutes(20);
  c.tree.queues = {Q("team-a", ""), Q("team-b", "")};
  c.tree.queues[0].quotas["gpu/H100"] = {};
  s.qm = Make(s.cs.get(), c);
  std::mt19937_64 rng(7);
  // team-a floods first; team-b arrives a little later. Both keep a backlog.
  for (int i = 0; i < 400; ++i) {
    s.Submit(absl::StrCat("a", i), "team-a", 8,
             absl::Minutes(std::uniform_int_distribution<int>(10, 30)(rng)));
  }
  s.Step(absl::Minutes(1));
  for (int i = 0; i < 400; ++i) {
    s.Submit(absl::StrCat("b", i), "team-b", 8,
             absl::Minutes(std::uniform_int_distribution<int>(10, 30)(rng)));
  }
  double sum_a = 0, sum_b = 0;
  int n = 0;
  for (int m = 0; m < 600; ++m) {
    s.Step(absl::Minutes(1));
    if (m % 30 == 0 && getenv("TRACE")) {
      auto a = *s.qm->Queue("team-a");
      auto b = *s.qm->Queue("team-b");
      printf("m=%d a: s=%.3f d=%.3f c=%.1f  b: s=%.3f d=%.3f c=%.1f\n", m, a.usage, a.decayed_usage,
             a.credit, b.usage, b.decayed_usage, b.credit);
    }
    if (m >= 300) {
      sum_a += s.Share("team-a");
      sum_b += s.Share("team-b");
      ++n;
    }
  }
  EXPECT_NEAR(sum_a / n + sum_b / n, 1.0, 0.02);  // saturated
  EXPECT_NEAR(sum_a / n, sum_b / n, 0.05) << sum_a / n << " vs " << sum_b / n;
}

TEST(FairShare, IdleTeamBurstsAboveItsShareBoundedByCredit) {
  Sim s;
  s.cs = SmallCluster(16, 8);
  QueueManagerConfig c;
  c.tree.half_life = absl::Minutes(30);
  c.tree.queues = {Q("team-a", ""), Q("team-b", "")};
  c.tree.queues[0].quotas["gpu/H100"] = {};
  s.qm = Make(s.cs.get(), c);
  std::mt19937_64 rng(11);
  for (int i = 0; i < 2000; ++i) {
    s.Submit(absl::StrCat("b", i), "team-b", 8,
             absl::Minutes(std::uniform_int_distribution<int>(5, 15)(rng)));
  }
  for (int m = 0; m < 180; ++m) s.Step(absl::Minutes(1));  // team-a idle for 3 h
  double credit0 = s.qm->Queue("team-a")->credit;
  EXPECT_NEAR(credit0, 0.5 * 1800 / std::log(2.0), 1e-6);  // full bucket
  for (int i = 0; i < 600; ++i) {
    s.Submit(absl::StrCat("a", i), "team-a", 8,
             absl::Minutes(std::uniform_int_distribution<int>(5, 15)(rng)));
  }
  // The burst: from team-a's arrival until its share first falls back to
  // its entitlement.
  double burst_excess = 0, peak = 0, tail = 0;
  bool bursting = true, above = false;
  int tail_n = 0;
  for (int m = 0; m < 240; ++m) {
    double before = s.qm->Queue("team-a")->credit;
    CycleReport r = s.Step(absl::Minutes(1));
    double share = s.Share("team-a");
    peak = std::max(peak, share);
    if (share > 0.5) above = true;
    if (bursting && above && share <= 0.5) bursting = false;
    if (bursting) burst_excess += (share - 0.5) * 60;
    if (m >= 120) tail += share, ++tail_n;
    for (const QueueEvent& e : r.events) {
      // No admission leaves team-a above its entitlement without credit
      // while team-b has work waiting.
      if (e.kind == QueueEvent::Kind::kStarted && e.job[8] == 'a' && share > 0.5 + 1e-9) {
        EXPECT_GT(before, 0) << "team-a admitted above its share with no credit at minute " << m;
      }
    }
  }
  EXPECT_GT(peak, 0.9);  // it did burst, far above its half
  EXPECT_GT(burst_excess, 0.25 * credit0);
  EXPECT_LE(burst_excess, credit0) << burst_excess << " vs credit " << credit0;
  EXPECT_NEAR(tail / tail_n, 0.5, 0.05);  // then back to its share
}

}  // namespace
}  // namespace tessera::sched
