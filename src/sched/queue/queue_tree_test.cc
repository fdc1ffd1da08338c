#include "sched/queue/queue_tree.h"

#include <gtest/gtest.h>

#include "sched/queue/queue_test_util.h"

namespace tessera::sched {
namespace {

using testing::Q;

ResourceList Gpus(const QueueTree& t, int64_t n) {
  ResourceList r(t.resources().size(), 0);
  r[t.FindResource("gpu/H100")] = n * 1000;
  return r;
}

TEST(QueueTree, OverQuotaReasonNamesQueueAndNumbers) {
  QueueTreeSpec spec;
  spec.queues = {Q("org", "", 256), Q("team-a", "org", 128, 0), Q("team-b", "org", 128)};
  auto t = QueueTree::Create(spec);
  ASSERT_TRUE(t.ok()) << t.status();
  t->SetCapacity("gpu/H100", 256000);
  int a = t->Find("team-a");
  t->Add(a, Gpus(*t, 120));
  EXPECT_EQ(t->Check(a, Gpus(*t, 8), {}), "");
  std::string why = t->Check(a, Gpus(*t, 16), {});
  EXPECT_EQ(why,
            "queue team-a over quota: 120 H100 GPUs of 128 H100 GPUs guaranteed in use, job "
            "needs 16 H100 GPUs, borrowing limit 0 H100 GPUs");
  EXPECT_TRUE(t->CheckInvariants().ok());
}

TEST(QueueTree, BorrowingAndLendingLimits) {
  QueueTreeSpec spec;
  // team-b lends at most 32 of its 64: 32 always stay held for it.
  spec.queues = {Q("org", "", 128, 0), Q("team-a", "org", 64, 48), Q("team-b", "org", 64, -1, 32)};
  auto t = QueueTree::Create(spec);
  ASSERT_TRUE(t.ok()) << t.status();
  t->SetCapacity("gpu/H100", 128000);
  int a = t->Find("team-a"), b = t->Find("team-b");
  EXPECT_EQ(t->Check(a, Gpus(*t, 96), {}), "");   // 64 own + 32 borrowed
  EXPECT_NE(t->Check(a, Gpus(*t, 104), {}), "");  // team-b keeps 32 unlendable
  t->Add(a, Gpus(*t, 96));
  EXPECT_TRUE(t->Borrowing(a, Gpus(*t, 1)));
  EXPECT_EQ(t->Check(b, Gpus(*t, 32), {}), "");
  EXPECT_NE(t->Check(b, Gpus(*t, 40), {}), "");  // the rest is lent to team-a
  // Reclaim: with 32 of team-a's GPUs taken away, team-b fits its guarantee.
  ResourceList victim = Gpus(*t, 32);
  EXPECT_EQ(t->Check(b, Gpus(*t, 64), {{a, &victim}}), "");
  EXPECT_TRUE(t->CheckInvariants().ok());
}

TEST(QueueTree, ValidationNamesTheField) {
  QueueTreeSpec cyc;
  cyc.queues = {Q("a", "b"), Q("b", "a")};
  absl::Status s = ValidateQueueTree(cyc);
  EXPECT_NE(s.message().find("queues[0].parent: cycle in the queue tree: a -> b -> a"),
            std::string::npos)
      << s;
  QueueTreeSpec below;
  below.queues = {Q("org", "", 100), Q("x", "org", 64), Q("y", "org", 64)};
  s = ValidateQueueTree(below);
  EXPECT_NE(s.message().find("queues[0].quotas[\"gpu/H100\"].guaranteed: 100 H100 GPUs is below "
                             "the sum of its children's guarantees (128 H100 GPUs"),
            std::string::npos)
      << s;
  QueueTreeSpec unknown;
  unknown.queues = {Q("x", "nope")};
  EXPECT_NE(ValidateQueueTree(unknown).message().find("queues[0].parent: unknown queue"),
            std::string::npos);
}

TEST(QueueTree, CreditAccruesWhileIdleAndIsCapped) {
  QueueTreeSpec spec;
  spec.half_life = absl::Minutes(30);
  spec.queues = {Q("a", "", 0), Q("b", "", 0)};
  auto t = QueueTree::Create(spec);
  ASSERT_TRUE(t.ok());
  t->SetCapacity("gpu/H100", 100000);
  t->Add(t->Find("b"), Gpus(*t, 100));
  absl::Time now = absl::UnixEpoch();
  t->Advance(now);
  for (int i = 0; i < 600; ++i) t->Advance(now += absl::Minutes(1));
  int a = t->Find("a"), b = t->Find("b");
  double cap = 0.5 * 1800 / std::log(2.0);
  EXPECT_NEAR(t->credit(a), cap, 1e-6);
  EXPECT_EQ(t->credit(b), 0);
  EXPECT_NEAR(t->Status(b).decayed_usage, 1.0, 1e-6);
  EXPECT_TRUE(t->Key(a) < t->Key(b));
  EXPECT_EQ(t->Key(b).tier, 1);  // above entitlement, no credit
}

}  // namespace
}  // namespace tessera::sched
