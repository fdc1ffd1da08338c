#include "bench/preempt/bench_queue_cycle.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/preempt/bench_fleet.h"
#include "common/bench_stats.h"
#include "nlohmann/json.hpp"
#include "sched/framework/cluster_state.h"
#include "sched/queue/queue_manager.h"

namespace tessera::bench {
namespace {

struct Options {
  int nodes = 12500;
  int running = 30000;
  int pending = 1000;
  int cycles = 200;
  // Running jobs finished (and jobs submitted) before a churn cycle.
  int churn = 2;
  double production = 0.05;  // waiting jobs of production priority
  // Teams guaranteed an eighth each (reclaim preemption between them);
  // without, weights only: no preemption but by production jobs.
  bool guarantees = true;
  uint64_t seed = 1;
};

constexpr const char* kLeaves[] = {"a1", "a2", "a3", "a4", "b1", "b2", "b3", "b4"};

model::Job MakeJob(const std::string& name, const std::string& queue, int gpus, int32_t prio,
                   bool rack, absl::Time created) {
  model::Job j = MakeBenchJob(name, queue, gpus, prio, rack);
  j.creation_time = created;
  return j;
}

int Run(const Options& o) {
  using Clock = std::chrono::steady_clock;
  const auto t_start = Clock::now();
  sched::ClusterState cs;
  if (absl::Status s = BuildBenchFleet(o.nodes, &cs); !s.ok()) {
    std::cerr << s << "\n";
    return 1;
  }
  // Two organisations of four teams; every team guaranteed an eighth of the
  // fleet's GPUs, borrowing allowed (the server's usual setup).
  sched::QueueManagerConfig cfg;
  const std::string gpu = absl::StrCat("gpu/", cs.model_name(0));
  const int64_t total_milli = cs.total_gpus() * 1000;
  for (const char* org : {"a", "b"}) {
    sched::QueueSpec q;
    q.name = org;
    if (o.guarantees) q.quotas[gpu] = {.guaranteed = total_milli / 2};
    cfg.tree.queues.push_back(q);
  }
  for (const char* leaf : kLeaves) {
    sched::QueueSpec q;
    q.name = leaf;
    q.parent = std::string(1, leaf[0]);
    if (o.guarantees) q.quotas[gpu] = {.guaranteed = total_milli / 8};
    cfg.tree.queues.push_back(q);
  }
  auto qm_or = sched::QueueManager::Create(cfg, &cs);
  if (!qm_or.ok()) {
    std::cerr << qm_or.status() << "\n";
    return 1;
  }
  sched::QueueManager& qm = **qm_or;
  std::mt19937_64 rng(o.seed);
  absl::Time now = absl::UnixEpoch() + absl::Hours(24 * 365);
  const int sizes[] = {1, 2, 4, 8, 16, 32, 64};
  std::discrete_distribution<int> size_d({40, 20, 17, 15, 5, 2, 1});
  auto leaf = [&]() { return kLeaves[std::uniform_int_distribution<int>(0, 7)(rng)]; };
  auto coin = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };

  // Fill the fleet: research and development jobs started a day ago.
  for (int i = 0; i < o.running; ++i) {
    const int32_t prio = coin(0.5) ? 1000 : 100;
    (void)qm.Submit(MakeJob(absl::StrCat("run-", i), leaf(), sizes[size_d(rng)], prio, coin(0.5),
                            now - absl::Hours(25)),
                    {.expected_runtime = absl::Hours(48)}, now - absl::Hours(24));
  }
  qm.Cycle(now - absl::Hours(24));
  for (int i = 0; i < o.running; ++i) {
    std::string k = absl::StrCat("default/run-", i);
    if (qm.Phase(k) == sched::JobPhase::kPending) (void)qm.Finish(k, now);
  }
  const int64_t running_jobs = static_cast<int64_t>(qm.running().size());
  const int64_t used = cs.allocated_milli() / 1000;

  // The backlog: development jobs (the running research and development
  // jobs are not their victims), a few production ones (which may preempt
  // research and development jobs of their queue).
  int submitted = 0;
  auto submit_pending = [&](absl::Time t) {
    const int32_t prio = coin(o.production) ? 100000 : 100;
    (void)qm.Submit(
        MakeJob(absl::StrCat("wait-", submitted++), leaf(), sizes[size_d(rng)], prio, coin(0.3), t),
        {.expected_runtime = absl::Hours(std::uniform_int_distribution<int>(1, 24)(rng))}, t);
  };
  for (int i = 0; i < o.pending; ++i) submit_pending(now - absl::Seconds(o.pending - i));
  qm.Cycle(now);  // warm: the first attempts of every shape
  const double setup_s = std::chrono::duration<double>(Clock::now() - t_start).count();

  // Alternate: a churn cycle (jobs finished, as many submitted, a minute
  // later) and a quiet cycle (one arrival, a second later).
  std::vector<double> churn_cpu, quiet_cpu;
  int64_t attempts = 0, started = 0, preemptions = 0;
  std::vector<std::string> keys;
  for (int c = 0; c < o.cycles; ++c) {
    const bool churn = c % 2 == 0;
    if (churn) {
      now += absl::Minutes(1);
      for (int k = 0; k < o.churn; ++k) {
        keys.clear();
        for (int32_t s = 0; s < qm.running().num_slots(); ++s) {
          if (qm.running().live(s) && !qm.running().at(s).terminating) {
            keys.push_back(qm.running().at(s).key);
          }
        }
        if (keys.empty()) break;
        (void)qm.Finish(keys[std::uniform_int_distribution<size_t>(0, keys.size() - 1)(rng)], now);
        submit_pending(now);
      }
    } else {
      now += absl::Seconds(1);
      submit_pending(now);
    }
    const double c0 = ThreadCpuUs();
    sched::CycleReport r = qm.Cycle(now);
    const double c1 = ThreadCpuUs();
    (churn ? churn_cpu : quiet_cpu).push_back(c1 - c0);
    attempts += r.attempts;
    started += r.started;
    preemptions += r.preemptions;
  }
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0.0 : s / v.size();
  };
  nlohmann::json out = {
      {"bench", "queue-cycle"},
      {"nodes", o.nodes},
      {"gpus", cs.total_gpus()},
      {"queues", 8},
      {"running_jobs", running_jobs},
      {"gpus_in_use_at_start", used},
      {"pending_at_end", qm.pending_size()},
      {"setup_seconds", setup_s},
      {"cycles", o.cycles},
      {"churn_cycle_cpu_p50_us", Percentile(churn_cpu, 0.5)},
      {"churn_cycle_cpu_p99_us", Percentile(churn_cpu, 0.99)},
      {"churn_cycle_cpu_mean_us", mean(churn_cpu)},
      {"quiet_cycle_cpu_p50_us", Percentile(quiet_cpu, 0.5)},
      {"quiet_cycle_cpu_p99_us", Percentile(quiet_cpu, 0.99)},
      {"quiet_cycle_cpu_mean_us", mean(quiet_cpu)},
      {"schedule_attempts_per_cycle", static_cast<double>(attempts) / o.cycles},
      {"started", started},
      {"preemptions", preemptions},
      {"peak_rss_mb", PeakRssMb()},
  };
  std::cout << out.dump(2) << std::endl;
  return 0;
}

}  // namespace

void RegisterBenchQueueCycleCommands(CLI::App& bench) {
  auto opts = std::make_shared<Options>();
  CLI::App* c = bench.add_subcommand(
      "queue-cycle", "QueueManager::Cycle with a large backlog on a full fleet (prints JSON)");
  c->add_option("--nodes", opts->nodes, "8-GPU nodes (32 per rack)")->capture_default_str();
  c->add_option("--running", opts->running, "jobs submitted to fill the fleet")
      ->capture_default_str();
  c->add_option("--pending", opts->pending, "jobs waiting")->capture_default_str();
  c->add_option("--cycles", opts->cycles, "measured cycles (half churn, half quiet)")
      ->capture_default_str();
  c->add_option("--churn", opts->churn, "jobs finished and submitted before a churn cycle")
      ->capture_default_str();
  c->add_option("--production", opts->production,
                "fraction of waiting jobs of production priority (they preempt)")
      ->capture_default_str();
  c->add_flag(
      "--no-guarantees", [opts](int64_t) { opts->guarantees = false; },
      "queues without guarantees (no reclaim preemption)");
  c->add_option("--seed", opts->seed, "random seed")->capture_default_str();
  c->callback([opts]() {
    int rc = Run(*opts);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace tessera::bench
