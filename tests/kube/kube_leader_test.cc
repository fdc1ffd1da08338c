// Leader election on a real coordination.k8s.io/v1 Lease: one leader among candidates, expiry
// judged on each candidate's own clock (observed time), optimistic concurrency, failover when the
// leader stops renewing, and immediate hand-over on release.
#include <gtest/gtest.h>

#include <thread>

#include "kube/api_error.h"
#include "kube/codec.h"
#include "kube/leader_election.h"
#include "kube_test_util.h"

namespace tessera::testing {
namespace {

using kube::Json;
using kube::LeaderElectionConfig;
using kube::LeaderElector;
using kube::RestClient;

LeaderElectionConfig Config(const std::string& ns, const std::string& lease,
                            const std::string& id) {
  LeaderElectionConfig c;
  c.lease_namespace = ns;
  c.lease_name = lease;
  c.identity = id;
  return c;
}

std::unique_ptr<LeaderElector> Elector(RestClient& c, const Clock& clock,
                                       LeaderElectionConfig cfg) {
  absl::StatusOr<std::unique_ptr<LeaderElector>> e =
      LeaderElector::Create(c, clock, std::move(cfg));
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? *std::move(e) : nullptr;
}

kube::Lease ReadLease(RestClient& c, const std::string& ns, const std::string& name) {
  absl::StatusOr<Json> j = c.Get(kube::LeasesResource(), ns, name);
  EXPECT_TRUE(j.ok()) << j.status();
  absl::StatusOr<kube::Lease> l = j.ok() ? kube::DecodeLease(*j) : j.status();
  EXPECT_TRUE(l.ok()) << l.status();
  return l.ok() ? *l : kube::Lease{};
}

TEST(KubeLeaderTest, ConfigIsCheckedLikeClientGo) {
  KUBE_BED_OR_SKIP(bed);
  std::unique_ptr<RestClient> c = ClientFor(bed->admin_kubeconfig());
  ASSERT_NE(c, nullptr);
  RealClock clock;
  LeaderElectionConfig cfg = Config("default", "x", "");
  cfg.lease_duration = absl::Seconds(5);
  cfg.renew_deadline = absl::Seconds(5);
  cfg.retry_period = absl::Seconds(5);
  absl::StatusOr<std::unique_ptr<LeaderElector>> e = LeaderElector::Create(*c, clock, cfg);
  ASSERT_FALSE(e.ok());
  const std::string msg(e.status().message());
  EXPECT_NE(msg.find("identity: empty"), std::string::npos) << msg;
  EXPECT_NE(msg.find("lease_duration: must be greater than renew_deadline"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("renew_deadline: must be greater than 1.2 * retry_period"), std::string::npos)
      << msg;
}

TEST(KubeLeaderTest, ExpiryIsJudgedOnEachCandidatesOwnClock) {
  KUBE_BED_OR_SKIP(bed);
  std::unique_ptr<RestClient> c = ClientFor(bed->admin_kubeconfig());
  ASSERT_NE(c, nullptr);
  const std::string ns = MakeNamespace(*c, "lease");
  // Each candidate has a clock of its own, far apart: only durations on one clock matter.
  ManualClock clock_a(absl::FromUnixSeconds(1800000000));
  ManualClock clock_b(absl::FromUnixSeconds(1700000000));
  std::vector<std::string> leaders_seen_by_b;
  LeaderElectionConfig cb = Config(ns, "sched", "b");
  cb.on_new_leader = [&](const std::string& id) { leaders_seen_by_b.push_back(id); };
  std::unique_ptr<LeaderElector> a = Elector(*c, clock_a, Config(ns, "sched", "a"));
  std::unique_ptr<LeaderElector> b = Elector(*c, clock_b, cb);
  ASSERT_TRUE(a && b);

  ASSERT_TRUE(a->TryAcquireOrRenew());  // creates the Lease
  EXPECT_TRUE(a->IsLeader());
  kube::Lease l = ReadLease(*c, ns, "sched");
  EXPECT_EQ(l.holder_identity, "a");
  EXPECT_EQ(l.lease_duration_seconds, 15);
  EXPECT_EQ(l.lease_transitions, 0);

  EXPECT_FALSE(b->TryAcquireOrRenew());  // held, and fresh on b's clock
  EXPECT_FALSE(b->IsLeader());
  EXPECT_EQ(b->GetLeader(), "a");
  // a renews; b sees a new record (its clock has not moved), so its 15 s start again then.
  clock_b.Advance(absl::Seconds(10));
  clock_a.Advance(absl::Seconds(10));
  ASSERT_TRUE(a->TryAcquireOrRenew());
  EXPECT_FALSE(b->TryAcquireOrRenew());
  clock_b.Advance(absl::Seconds(14));
  EXPECT_FALSE(b->TryAcquireOrRenew());  // 14 s since b observed the renewal
  clock_b.Advance(absl::Seconds(2));
  EXPECT_TRUE(b->TryAcquireOrRenew());  // 16 s without a change: expired, taken
  EXPECT_TRUE(b->IsLeader());
  l = ReadLease(*c, ns, "sched");
  EXPECT_EQ(l.holder_identity, "b");
  EXPECT_EQ(l.lease_transitions, 1);

  // a, still believing it leads, fails to renew: the lease changed hands.
  EXPECT_FALSE(a->TryAcquireOrRenew());
  EXPECT_FALSE(a->IsLeader());
  EXPECT_EQ(a->GetLeader(), "b");
  // b's renewals keep acquireTime and transitions.
  clock_b.Advance(absl::Seconds(2));
  ASSERT_TRUE(b->TryAcquireOrRenew());
  kube::Lease renewed = ReadLease(*c, ns, "sched");
  EXPECT_EQ(renewed.acquire_time, l.acquire_time);
  EXPECT_NE(renewed.renew_time, l.renew_time);
  EXPECT_EQ(renewed.lease_transitions, 1);
  EXPECT_EQ(leaders_seen_by_b, (std::vector<std::string>{"a", "b"}));

  // Optimistic concurrency: an update with a stale resourceVersion loses.
  kube::Lease stale = l;  // read before b's renewal
  stale.holder_identity = "intruder";
  absl::StatusOr<Json> r = c->Update(kube::LeasesResource(), ns, "sched", kube::EncodeLease(stale));
  EXPECT_TRUE(kube::IsApiConflict(r.status())) << r.status();

  // Release: the holder clears itself and anyone can take over at once.
  ASSERT_TRUE(b->Release().ok());
  EXPECT_EQ(ReadLease(*c, ns, "sched").holder_identity.value_or(""), "");
  EXPECT_TRUE(a->TryAcquireOrRenew());
  EXPECT_EQ(ReadLease(*c, ns, "sched").lease_transitions, 2);
}

// What a Run()ning elector reported, for waiting on it.
struct Leadership {
  absl::Mutex mu;
  bool leading ABSL_GUARDED_BY(mu) = false;
  bool stopped ABSL_GUARDED_BY(mu) = false;
  void Wire(LeaderElectionConfig& cfg) {
    cfg.on_started_leading = [this] {
      absl::MutexLock l(&mu);
      leading = true;
    };
    cfg.on_stopped_leading = [this] {
      absl::MutexLock l(&mu);
      leading = false;
      stopped = true;
    };
  }
  bool AwaitLeading(absl::Duration timeout) {
    return AwaitTrue(
        mu, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return leading; }, timeout);
  }
  bool IsLeading() {
    absl::MutexLock l(&mu);
    return leading;
  }
};

TEST(KubeLeaderTest, TheStandbyTakesOverWhenTheLeaderStopsRenewingAndAtOnceOnRelease) {
  KUBE_BED_OR_SKIP(bed);
  std::unique_ptr<RestClient> c = ClientFor(bed->admin_kubeconfig());
  ASSERT_NE(c, nullptr);
  const std::string ns = MakeNamespace(*c, "failover");
  RealClock clock;
  auto config = [&](const std::string& id, Leadership& lead) {
    LeaderElectionConfig cfg = Config(ns, "sched", id);
    cfg.lease_duration = absl::Seconds(3);
    cfg.renew_deadline = absl::Seconds(2);
    cfg.retry_period = absl::Milliseconds(300);
    cfg.seed = static_cast<unsigned char>(id[0]);
    lead.Wire(cfg);
    return cfg;
  };
  Leadership lead_a, lead_b;
  LeaderElectionConfig ca = config("a", lead_a);
  ca.release_on_cancel = false;  // a stops as if it crashed: it never clears the lease
  std::unique_ptr<LeaderElector> a = Elector(*c, clock, ca);
  std::unique_ptr<LeaderElector> b = Elector(*c, clock, config("b", lead_b));
  ASSERT_TRUE(a && b);
  std::thread ta([&] { a->Run(); });
  ASSERT_TRUE(lead_a.AwaitLeading(absl::Seconds(20)));
  std::thread tb([&] { b->Run(); });
  // b keeps trying and is refused while a renews: it does not lead for longer than a lease.
  EXPECT_FALSE(lead_b.AwaitLeading(absl::Seconds(4)));
  EXPECT_EQ(b->GetLeader(), "a");
  EXPECT_EQ(ReadLease(*c, ns, "sched").holder_identity, "a");

  const absl::Time stopped = clock.Now();
  a->Stop();
  ta.join();
  EXPECT_FALSE(lead_a.IsLeading());
  ASSERT_TRUE(lead_b.AwaitLeading(absl::Seconds(20)));
  // b waited for the lease to expire: a's last renewal plus the lease duration (3 s), less a
  // renewal period at most.
  EXPECT_GE(clock.Now() - stopped, absl::Seconds(3) - absl::Milliseconds(400));
  kube::Lease l = ReadLease(*c, ns, "sched");
  EXPECT_EQ(l.holder_identity, "b");
  EXPECT_EQ(l.lease_transitions, 1);

  // b stops and releases: a new candidate takes over on its first try.
  b->Stop();
  tb.join();
  EXPECT_EQ(ReadLease(*c, ns, "sched").holder_identity.value_or(""), "");
  std::unique_ptr<LeaderElector> next = Elector(*c, clock, Config(ns, "sched", "c"));
  ASSERT_NE(next, nullptr);
  EXPECT_TRUE(next->TryAcquireOrRenew());
  EXPECT_EQ(ReadLease(*c, ns, "sched").lease_transitions, 2);
}

TEST(KubeLeaderTest, ALeaderThatCannotRenewWithinTheDeadlineStopsLeading) {
  KUBE_BED_OR_SKIP(bed);
  std::unique_ptr<RestClient> c = ClientFor(bed->admin_kubeconfig());
  ASSERT_NE(c, nullptr);
  const std::string ns = MakeNamespace(*c, "deadline");
  RealClock clock;
  Leadership lead;
  LeaderElectionConfig cfg = Config(ns, "sched", "a");
  cfg.lease_duration = absl::Seconds(3);
  cfg.renew_deadline = absl::Seconds(2);
  cfg.retry_period = absl::Milliseconds(300);
  lead.Wire(cfg);
  std::unique_ptr<LeaderElector> a = Elector(*c, clock, cfg);
  ASSERT_NE(a, nullptr);
  std::thread t([&] { a->Run(); });
  ASSERT_TRUE(lead.AwaitLeading(absl::Seconds(20)));
  // Someone else seizes the lease (an operator, a split brain): a's renewals now fail.
  absl::Status seized = absl::UnknownError("not tried");
  for (int i = 0; i < 20 && !seized.ok(); ++i) {  // a renews concurrently: retry on Conflict
    kube::Lease l = ReadLease(*c, ns, "sched");
    l.holder_identity = "usurper";
    l.lease_duration_seconds = 3600;
    l.renew_time = kube::FormatMicroTime(clock.Now());
    seized = c->Update(kube::LeasesResource(), ns, "sched", kube::EncodeLease(l)).status();
    if (!seized.ok()) {
      ASSERT_TRUE(kube::IsApiConflict(seized)) << seized;
    }
  }
  ASSERT_TRUE(seized.ok()) << seized;
  // Run returns by itself once the renew deadline passes (no Stop()).
  t.join();
  absl::MutexLock m(&lead.mu);
  EXPECT_TRUE(lead.stopped);
  EXPECT_FALSE(lead.leading);
  EXPECT_FALSE(a->IsLeader());
}

}  // namespace
}  // namespace tessera::testing
