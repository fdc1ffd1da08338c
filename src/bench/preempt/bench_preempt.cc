#include "bench/preempt/bench_preempt.h"

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
#include "sched/plugins/preemption.h"
#include "sched/queue/queue_manager.h"

namespace tessera::bench {
namespace {

struct Options {
  int nodes = 12500;
  int running = 20000;
  int preemptors = 1000;
  uint64_t seed = 1;
  // Percent of the initial multi-member jobs made elastic (minMember half
  // their members), so preemption may shrink them (0: none; the default run
  // draws the same random numbers as before the option existed).
  int elastic_percent = 0;
};

int Run(const Options& o) {
  using Clock = std::chrono::steady_clock;
  auto t_start = Clock::now();
  sched::ClusterState cs;
  if (absl::Status s = BuildBenchFleet(o.nodes, &cs); !s.ok()) {
    std::cerr << s << "\n";
    return 1;
  }
  sched::QueueManagerConfig cfg;
  for (const char* t : {"team-a", "team-b", "team-c", "team-d"}) {
    sched::QueueSpec q;
    q.name = t;
    cfg.tree.queues.push_back(q);
  }
  cfg.preemption.cross_queue_lower_priority = true;
  cfg.preemption.grace_period = absl::Seconds(30);
  cfg.preemption.max_evicted_ratio = 4;
  cfg.backfill = false;  // measure preemption, not reservation planning
  auto qm_or = sched::QueueManager::Create(cfg, &cs);
  if (!qm_or.ok()) {
    std::cerr << qm_or.status() << "\n";
    return 1;
  }
  sched::QueueManager& qm = **qm_or;
  std::mt19937_64 rng(o.seed);
  const char* teams[] = {"team-a", "team-b", "team-c", "team-d"};
  absl::Time now = absl::UnixEpoch() + absl::Hours(24 * 365);

  // Fill: 20,000 jobs of mixed sizes and priorities.
  const int sizes[] = {1, 2, 4, 8, 16, 32, 64};
  std::discrete_distribution<int> size_d({40, 20, 17, 15, 5, 2, 1});
  std::discrete_distribution<int> prio_d({40, 40, 20});
  const int32_t prios[] = {100, 1000, 100000};
  for (int i = 0; i < o.running; ++i) {
    int gpus = sizes[size_d(rng)];
    bool rack = std::uniform_int_distribution<int>(0, 1)(rng) == 0;
    model::Job j =
        MakeBenchJob(absl::StrCat("run-", i), teams[i % 4], gpus, prios[prio_d(rng)], rack);
    j.creation_time = now - absl::Hours(48);
    if (o.elastic_percent > 0 && j.groups[0].count > 1 &&
        std::uniform_int_distribution<int>(0, 99)(rng) < o.elastic_percent) {
      j.gang.elastic = true;
      j.gang.min_member = std::max(1, j.groups[0].count / 2);
    }
    (void)qm.Submit(
        std::move(j),
        {.expected_runtime = absl::Hours(std::uniform_int_distribution<int>(1, 48)(rng))}, now);
  }
  qm.Cycle(now - absl::Hours(24));
  // Checkpoints at random times in the last few hours.
  for (int32_t s = 0; s < qm.running().num_slots(); ++s) {
    if (!qm.running().live(s)) continue;
    (void)qm.ReportCheckpoint(qm.running().at(s).key,
                              now - absl::Minutes(std::uniform_int_distribution<int>(1, 600)(rng)));
  }
  int64_t running_jobs = static_cast<int64_t>(qm.running().size());
  int64_t used = cs.allocated_milli() / 1000;
  // Drop jobs that did not fit.
  for (int i = 0; i < o.running; ++i) {
    std::string k = absl::StrCat("default/run-", i);
    if (qm.Phase(k) == sched::JobPhase::kPending) (void)qm.Finish(k, now);
  }
  double fill_s = std::chrono::duration<double>(Clock::now() - t_start).count();

  std::vector<double> lat, cpu;
  std::vector<int64_t> victims;
  int64_t evals = 0;
  int64_t evicted = 0, needed = 0, not_found = 0, started = 0, shrink_plans = 0;
  const int pre_sizes[] = {8, 16, 32, 64, 128};
  for (int i = 0; i < o.preemptors; ++i) {
    now += absl::Minutes(1);
    int gpus = pre_sizes[std::uniform_int_distribution<int>(0, 4)(rng)];
    bool rack = std::uniform_int_distribution<int>(0, 1)(rng) == 0;
    std::string name = absl::StrCat("urgent-", i);
    model::Job j = MakeBenchJob(name, teams[i % 4], gpus, 500000, rack);
    if (!qm.Submit(std::move(j), {.expected_runtime = absl::Hours(1)}, now).ok()) return 1;
    double c0 = ThreadCpuUs();
    auto t0 = Clock::now();
    sched::CycleReport r = qm.Cycle(now);
    auto t1 = Clock::now();
    double c1 = ThreadCpuUs();
    std::string key = absl::StrCat("default/", name);
    int64_t v = 0;
    for (const auto& e : r.events) {
      if (e.kind == sched::QueueEvent::Kind::kCheckpointSignal) ++v;
    }
    if (r.started > 0 && qm.Phase(key) == sched::JobPhase::kRunning) {
      ++started;  // fit without preemption (free capacity was left)
    } else if (v == 0) {
      ++not_found;
    } else {
      lat.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      cpu.push_back(c1 - c0);
      victims.push_back(v);
      evicted += qm.last_plan().evicted_milli / 1000;
      shrink_plans += qm.last_plan().shrink() ? 1 : 0;
      evals += qm.last_plan().evaluations;
      needed += gpus;
    }
    // Grace period over: victims go, the preemptor runs and finishes.
    now += absl::Seconds(31);
    qm.Cycle(now);
    (void)qm.Finish(key, now);
    qm.Cycle(now);
    // Victims that found no room again are dropped; the fleet stays full.
    std::vector<std::string> drop;
    for (const auto& e : r.events) {
      if (e.kind == sched::QueueEvent::Kind::kCheckpointSignal &&
          qm.Phase(e.job) == sched::JobPhase::kPending) {
        drop.push_back(e.job);
      }
    }
    for (const auto& k : drop) (void)qm.Finish(k, now);
    // Keep the fleet full: refill with as many small low-priority jobs.
    int64_t free = cs.total_gpus() - cs.allocated_milli() / 1000;
    for (int64_t f = 0; f + 8 <= free; f += 8) {
      (void)qm.Submit(MakeBenchJob(absl::StrCat("fill-", i, "-", f), teams[f % 4], 8, 100, false),
                      {.expected_runtime = absl::Hours(10)}, now);
    }
    qm.Cycle(now);
    for (int64_t f = 0; f + 8 <= free; f += 8) {
      std::string k = absl::StrCat("default/fill-", i, "-", f);
      if (qm.Phase(k) == sched::JobPhase::kPending) (void)qm.Finish(k, now);
    }
  }
  double vsum = 0;
  int64_t vmax = 0;
  for (int64_t v : victims) vsum += v, vmax = std::max(vmax, v);
  nlohmann::json out = {
      {"bench", "preempt"},
      {"nodes", o.nodes},
      {"gpus", cs.total_gpus()},
      {"running_jobs", running_jobs},
      {"gpus_in_use_at_start", used},
      {"fill_seconds", fill_s},
      {"preemptors", o.preemptors},
      {"decisions", lat.size()},
      {"placed_without_preemption", started},
      {"no_victim_set", not_found},
      {"preempt_p50_us", Percentile(lat, 0.5)},
      {"preempt_p90_us", Percentile(lat, 0.9)},
      {"preempt_p99_us", Percentile(lat, 0.99)},
      {"preempt_max_us", Percentile(lat, 1.0)},
      {"preempt_cpu_p50_us", Percentile(cpu, 0.5)},
      {"preempt_cpu_p99_us", Percentile(cpu, 0.99)},
      {"victims_per_decision_mean", victims.empty() ? 0 : vsum / victims.size()},
      {"victims_per_decision_max", vmax},
      {"victim_set_evaluations_mean", lat.empty() ? 0.0 : static_cast<double>(evals) / lat.size()},
      {"gpus_evicted", evicted},
      {"gpus_needed", needed},
      {"evicted_over_needed", needed == 0 ? 0.0 : static_cast<double>(evicted) / needed},
      {"elastic_percent", o.elastic_percent},
      {"shrink_plans", shrink_plans},
  };
  std::cout << out.dump(2) << std::endl;
  return 0;
}

}  // namespace

void RegisterBenchPreemptCommands(CLI::App& bench) {
  auto opts = std::make_shared<Options>();
  CLI::App* c = bench.add_subcommand(
      "preempt", "Preemption decisions on a full 100,000-GPU fleet (prints JSON)");
  c->add_option("--nodes", opts->nodes, "8-GPU nodes (32 per rack)");
  c->add_option("--running", opts->running, "running jobs to fill the fleet with");
  c->add_option("--preemptors", opts->preemptors, "high-priority gangs to place");
  c->add_option("--seed", opts->seed, "random seed");
  c->add_option("--elastic-percent", opts->elastic_percent,
                "percent of the initial multi-member jobs made elastic (preemption may shrink "
                "them)")
      ->check(CLI::Range(0, 100));
  c->callback([opts]() {
    int rc = Run(*opts);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace tessera::bench
