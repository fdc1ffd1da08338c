#include "sched/framework/scheduling_queue.h"

#include <gtest/gtest.h>

#include "sched/plugins/priority_sort.h"

namespace tessera::sched {
namespace {

std::shared_ptr<const model::Job> J(std::string name, int prio, int created) {
  auto j = std::make_shared<model::Job>();
  j->name = std::move(name);
  j->priority = prio;
  j->creation_time = absl::FromUnixSeconds(created);
  return j;
}

TEST(SchedulingQueueTest, PriorityThenFifo) {
  PrioritySort sort;
  SchedulingQueue q(&sort);
  q.Add(J("low", 100, 1));
  q.Add(J("high-late", 1000, 5));
  q.Add(J("high-early", 1000, 2));
  absl::Time now = absl::FromUnixSeconds(10);
  EXPECT_EQ(q.Pop(now)->job->name, "high-early");
  EXPECT_EQ(q.Pop(now)->job->name, "high-late");
  EXPECT_EQ(q.Pop(now)->job->name, "low");
  EXPECT_FALSE(q.Pop(now).has_value());
}

TEST(SchedulingQueueTest, BackoffAndEvents) {
  PrioritySort sort;
  SchedulingQueue q(&sort);
  q.Add(J("a", 0, 1));
  absl::Time now = absl::FromUnixSeconds(100);
  auto a = q.Pop(now);
  ASSERT_TRUE(a.has_value());
  q.Requeue(std::move(*a), now, "no room");
  EXPECT_FALSE(q.Pop(now).has_value()) << "in backoff";
  ASSERT_EQ(q.Waiting().size(), 1u);
  EXPECT_EQ(q.Waiting()[0]->last_reason, "no room");
  auto again = q.Pop(now + absl::Seconds(1));
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->attempts, 1);
  q.Requeue(std::move(*again), now, "still no room");
  q.MoveAllToActive();
  EXPECT_TRUE(q.Pop(now).has_value()) << "a cluster event reactivates it";
  EXPECT_EQ(SchedulingQueue::BackoffFor(1), absl::Seconds(1));
  EXPECT_EQ(SchedulingQueue::BackoffFor(3), absl::Seconds(4));
  EXPECT_EQ(SchedulingQueue::BackoffFor(50), absl::Seconds(60));
}

TEST(SchedulingQueueTest, RemoveAndReplace) {
  PrioritySort sort;
  SchedulingQueue q(&sort);
  q.Add(J("a", 0, 1));
  q.Add(J("a", 5, 1));
  EXPECT_EQ(q.size(), 1u);
  EXPECT_TRUE(q.Remove("default/a"));
  EXPECT_FALSE(q.Remove("default/a"));
  EXPECT_EQ(q.size(), 0u);
}

}  // namespace
}  // namespace tessera::sched
