#include "config/queue_config.h"

#include <gtest/gtest.h>

#include "sched/queue/queue_test_util.h"

namespace tessera::config {
namespace {

constexpr char kGood[] = R"(
fairShare: {halfLife: 30m}
priorityClasses: {batch: 50}
defaultPriorityClass: research
preemption: {maxEvictedGpus: 64, maxEvictedRatio: 2, gracePeriod: 45s, crossQueueLowerPriority: true, order: gangsFirst}
backfill: {defaultRuntime: 2h, reservations: 8, learnRuntimes: true, lendReserved: true,
           minLoan: 45m}
queues:
  - name: org
    quotas:
      gpu/H100: {guaranteed: 256, borrowingLimit: 0}
      cpu: {guaranteed: 4000}
      memory: {guaranteed: 1024}
  - {name: team-a, parent: org, weight: 2, quotas: {gpu/H100: {guaranteed: 128, lendingLimit: 32}}}
  - {name: team-b, parent: org, quotas: {gpu/H100: {guaranteed: 64.5}}}
)";

TEST(QueueConfig, ParsesEveryField) {
  auto c = ParseQueueConfig(kGood);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->tree.half_life, absl::Minutes(30));
  EXPECT_EQ(c->priority_classes.at("batch"), 50);
  EXPECT_EQ(c->priority_classes.at("production"), 100000);  // built-ins stay
  EXPECT_EQ(c->default_priority_class, "research");
  EXPECT_EQ(c->preemption.max_evicted_gpus, 64);
  EXPECT_EQ(c->preemption.max_evicted_ratio, 2);
  EXPECT_EQ(c->preemption.grace_period, absl::Seconds(45));
  EXPECT_TRUE(c->preemption.cross_queue_lower_priority);
  EXPECT_TRUE(c->preemption.gangs_first);
  EXPECT_EQ(c->default_runtime, absl::Hours(2));
  EXPECT_EQ(c->reservations, 8);
  EXPECT_TRUE(c->learn_runtimes);
  EXPECT_TRUE(c->lend_reserved);
  EXPECT_EQ(c->min_loan, absl::Minutes(45));
  ASSERT_EQ(c->tree.queues.size(), 3u);
  EXPECT_EQ(c->tree.queues[0].quotas.at("gpu/H100").guaranteed, 256000);
  EXPECT_EQ(c->tree.queues[0].quotas.at("gpu/H100").borrowing_limit, 0);
  EXPECT_EQ(c->tree.queues[0].quotas.at("memory").guaranteed, 1024 * 1024);
  EXPECT_EQ(c->tree.queues[1].parent, "org");
  EXPECT_EQ(c->tree.queues[1].weight, 2);
  EXPECT_EQ(c->tree.queues[1].quotas.at("gpu/H100").lending_limit, 32000);
  EXPECT_EQ(c->tree.queues[2].quotas.at("gpu/H100").guaranteed, 64500);
}

struct BadCase {
  const char* yaml;
  const char* error;
};

TEST(QueueConfig, BadConfigurationsNameTheField) {
  const BadCase cases[] = {
      {"queues:\n  - {name: a, parent: b}\n  - {name: b, parent: a}\n",
       "queues[0].parent: cycle in the queue tree: a -> b -> a"},
      {"queues:\n  - {name: org, quotas: {gpu/H100: {guaranteed: 100}}}\n"
       "  - {name: x, parent: org, quotas: {gpu/H100: {guaranteed: 64}}}\n"
       "  - {name: y, parent: org, quotas: {gpu/H100: {guaranteed: 64}}}\n",
       "queues[0].quotas.gpu/H100.guaranteed: 100 H100 GPUs is below the sum of its children's "
       "guarantees (128 H100 GPUs: x 64 H100 GPUs, y 64 H100 GPUs)"},
      {"defaultPriorityClass: urgent\nqueues: [{name: a}]\n",
       "defaultPriorityClass: unknown priority class \"urgent\""},
      {"queues: [{name: a, wieght: 2}]\n",
       "queues[0].wieght: unknown field; expected one of: name, parent, quotas, weight"},
      {"queues: [{name: a, weight: -1}]\n", "queues[0].weight: must be a positive number, got -1"},
      {"queues: [{name: a, quotas: {gpu/H100: {guaranteed: lots}}}]\n",
       "queues[0].quotas.gpu/H100.guaranteed: must be a number, got \"lots\""},
      {"queues: [{name: a, quotas: {tpu: {guaranteed: 1}}}]\n",
       "queues[0].quotas.tpu: unknown resource; use \"cpu\", \"memory\" or \"gpu/<model>\""},
      {"preemption: {gracePeriod: soon}\nqueues: [{name: a}]\n",
       "preemption.gracePeriod: must be a duration such as \"30s\" or \"1h\", got \"soon\""},
      {"preemption: {order: cheapest}\nqueues: [{name: a}]\n",
       "preemption.order: must be priorityFirst or gangsFirst, got \"cheapest\""},
      {"queues: [{name: a}, {name: a}]\n", "queues[1].name: queue \"a\" is defined twice"},
      {"queues: [{name: a, parent: nope}]\n", "queues[0].parent: unknown queue \"nope\""},
      {"fairShare: {halfLife: 0s}\nqueues: [{name: a}]\n", "fairShare.halfLife: must be > 0"},
      {"backfill: {reservations: 0}\nqueues: [{name: a}]\n",
       "backfill.reservations: must be an integer in 1..64"},
      {"backfill: {reservations: 2.5}\nqueues: [{name: a}]\n",
       "backfill.reservations: must be an integer in 1..64"},
      {"queues: [\n", "yaml: "},
  };
  for (const BadCase& c : cases) {
    auto r = ParseQueueConfig(c.yaml);
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_EQ(std::string(r.status().message()).substr(0, std::string(c.error).size()), c.error)
        << r.status();
  }
}

TEST(QueueConfigStore, BadConfigurationLeavesThePreviousInForce) {
  auto cs = sched::testing::SmallCluster(2, 8);
  QueueConfigStore store;
  auto first = ParseQueueConfig(kGood);
  ASSERT_TRUE(first.ok());
  auto qm = sched::QueueManager::Create(*first, cs.get());
  ASSERT_TRUE(qm.ok());
  ASSERT_TRUE(store.Load(kGood, qm->get()).ok());
  EXPECT_EQ(store.generation(), 1);
  ASSERT_TRUE(
      (*qm)->Submit(sched::testing::GangJob("j", "team-a", 1, 8), {}, absl::UnixEpoch()).ok());
  (*qm)->Cycle(absl::UnixEpoch());
  // Invalid YAML, invalid tree, and a valid tree that drops a queue with work.
  EXPECT_FALSE(store.Load("queues: [{name: a, parent: a}]\n", qm->get()).ok());
  EXPECT_FALSE(store.Load("queues: [{name: org}]\n", qm->get()).ok());
  EXPECT_EQ(store.generation(), 1);
  EXPECT_EQ(store.current().tree.queues.size(), 3u);
  EXPECT_EQ((*qm)->tree().num_queues(), 3);
  EXPECT_EQ((*qm)->config().preemption.grace_period, absl::Seconds(45));
  // A good one replaces it.
  ASSERT_TRUE(store.Load("queues: [{name: org}, {name: team-a, parent: org}]\n", qm->get()).ok());
  EXPECT_EQ((*qm)->tree().num_queues(), 2);
  EXPECT_EQ(store.generation(), 2);
}

}  // namespace
}  // namespace tessera::config
