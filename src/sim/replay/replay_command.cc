#include "sim/replay/replay_command.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "config/cluster_yaml.h"
#include "config/profile_yaml.h"
#include "sched/framework/checkpoint_cadence.h"
#include "sched/pack/plugin_set.h"
#include "sched/plugins/default_registry.h"
#include "sim/replay/report.h"
#include "sim/replay/simulator.h"
#include "sim/replay/synthetic_workload.h"
#include "sim/replay/trace_workload.h"

namespace tessera::sim::replay {

absl::StatusOr<double> ParseSeconds(const std::string& flag, const std::string& value) {
  double v;
  if (absl::SimpleAtod(value, &v) && v >= 0) return v;
  std::string s = value;
  double mult = 0;
  if (!s.empty() && s.back() == 'd') {
    mult = 86400;
  } else if (!s.empty() && s.back() == 'w') {
    mult = 7 * 86400;
  }
  if (mult > 0 && absl::SimpleAtod(s.substr(0, s.size() - 1), &v) && v >= 0) return v * mult;
  absl::Duration d;
  if (absl::ParseDuration(value, &d) && d >= absl::ZeroDuration()) return absl::ToDoubleSeconds(d);
  return absl::InvalidArgumentError(absl::StrCat(
      flag, ": \"", value, "\" is not a duration (seconds, or e.g. 30m, 2.5h, 1d, 1w)"));
}

absl::StatusOr<std::vector<std::pair<double, double>>> ParseDurationMix(const std::string& flag,
                                                                        const std::string& value) {
  std::vector<std::pair<double, double>> out;
  for (absl::string_view part : absl::StrSplit(value, ',', absl::SkipEmpty())) {
    std::vector<std::string> kv = absl::StrSplit(part, ':');
    double w = 0;
    if (kv.size() != 2 || !absl::SimpleAtod(kv[1], &w) || !(w > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": \"", part, "\" is not DURATION:WEIGHT with WEIGHT > 0"));
    }
    auto d = ParseSeconds(flag, kv[0]);
    if (!d.ok()) return d.status();
    out.push_back({*d, w});
  }
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat(flag, ": empty"));
  return out;
}

namespace {

struct Flags {
  std::string workload = "philly";
  std::string trace;
  int64_t max_jobs = 0;
  std::string policies = "fifo,sjf,las,default";
  std::string cluster_file;  // YAML; overrides the cluster flags
  std::string profile;       // scheduler profile YAML for every policy
  int nodes = 256;
  int gpus_per_node = 8;
  int nodes_per_rack = 32;
  int racks_per_block = 8;
  std::string layout = "nvswitch";
  int hot_spares = 0;
  int compare_spares = 0;
  std::string gpu_failure_interval = "0";
  std::string node_failure_interval = "0";
  std::string gpu_repair = "4h";
  std::string node_repair = "12h";
  std::string checkpoint = "30m";
  std::string checkpoint_mix;  // synthetic: per-job intervals
  std::string restart = "5m";
  std::string checkpoint_cost = "0";  // write time of each periodic checkpoint
  std::string cadence = "fixed";      // fixed | young-daly
  std::string gpu_mtbf;               // young-daly: per-GPU MTBF (default: from the failure flags)
  std::string reserve_after;          // empty: each policy's own
  int32_t reservations = 0;           // 0: the queue config's
  bool lend_reserved = false;
  std::string min_loan;  // empty: the queue config's
  std::string estimates = "oracle";
  std::string las_thresholds = "3600,36000";
  std::string sample_interval = "0";
  bool no_preempt_checkpoint = false;
  std::string queue_config;  // `queues` policy: the server's --queue-config YAML
  std::string preempt_exit = "20s";
  uint64_t seed = 1;
  bool json = false;
  std::string out;
  int parallel = 0;  // 0: one thread per run, up to the hardware's threads
  // Synthetic.
  int64_t jobs = 10000;
  std::string span = "7d";
  std::string size_mix;
  std::string duration_median = "1h";
  double duration_sigma = 1.2;
  std::string duration_max = "3d";
  int queues = 4;
  double high_priority_fraction = 0.1;
};

std::string DefaultTrace(const std::string& workload) {
  const char* env = std::getenv("TESSERA_SHARED_DIR");
  std::string shared = env != nullptr && *env != '\0' ? env : "../shared";
  if (workload == "openb")
    return shared + "/traces/alibaba-gpu-v2023/csv/openb_pod_list_default.csv";
  return shared + "/traces/philly-pollux/philly.csv";
}

absl::Status Run(const Flags& f) {
  SimOptions opt;
  opt.cluster.nodes = f.nodes;
  opt.cluster.gpus_per_node = f.gpus_per_node;
  opt.cluster.nodes_per_rack = f.nodes_per_rack;
  opt.cluster.racks_per_block = f.racks_per_block;
  if (!model::ParseGpuLayout(f.layout, &opt.cluster.layout)) {
    return absl::InvalidArgumentError(absl::StrCat("--layout: unknown \"", f.layout, "\""));
  }
  if (f.nodes <= 0) return absl::InvalidArgumentError("--nodes: must be > 0");
  if (f.gpus_per_node <= 0 || f.gpus_per_node > model::kMaxGpusPerNode) {
    return absl::InvalidArgumentError("--gpus-per-node: must be in 1..16");
  }
  if (!f.cluster_file.empty()) {
    auto spec = config::LoadClusterFile(f.cluster_file);
    if (!spec.ok())
      return absl::InvalidArgumentError(absl::StrCat("--cluster: ", spec.status().message()));
    if (spec->gpus_per_node <= 0)
      return absl::InvalidArgumentError("--cluster: gpusPerNode must be > 0");
    opt.cluster = *spec;
  }
  if (f.hot_spares < 0) return absl::InvalidArgumentError("--hot-spares: must be >= 0");
  opt.hot_spare_nodes = f.hot_spares;
  opt.reservations = f.reservations;
  opt.learned_estimates = f.estimates == "learned";
  opt.lend_reserved = f.lend_reserved;
  if (!f.min_loan.empty()) {
    absl::StatusOr<double> s = ParseSeconds("--min-loan", f.min_loan);
    if (!s.ok()) return s.status();
    opt.min_loan = absl::Seconds(*s);
  }
  opt.seed = f.seed;
  opt.preemption_checkpoints = !f.no_preempt_checkpoint;
  auto sec = [](const std::string& flag, const std::string& v, double* out) -> absl::Status {
    auto s = ParseSeconds(flag, v);
    if (!s.ok()) return s.status();
    *out = *s;
    return absl::OkStatus();
  };
  double checkpoint = 0, restart = 0, checkpoint_cost = 0;
  struct {
    const char* flag;
    const std::string* value;
    double* out;
  } durations[] = {
      {"--gpu-failure-interval", &f.gpu_failure_interval, &opt.failures.gpu_failure_interval_s},
      {"--node-failure-interval", &f.node_failure_interval, &opt.failures.node_failure_interval_s},
      {"--gpu-repair", &f.gpu_repair, &opt.failures.gpu_repair_s},
      {"--node-repair", &f.node_repair, &opt.failures.node_repair_s},
      {"--checkpoint", &f.checkpoint, &checkpoint},
      {"--restart", &f.restart, &restart},
      {"--checkpoint-cost", &f.checkpoint_cost, &checkpoint_cost},
      {"--sample-interval", &f.sample_interval, &opt.sample_interval_s},
      {"--preempt-exit", &f.preempt_exit, &opt.preempt_exit_s},
  };
  for (auto& d : durations) {
    if (auto s = sec(d.flag, *d.value, d.out); !s.ok()) return s;
  }
  if (!f.queue_config.empty()) {
    auto c = LoadReplayQueueConfig("--queue-config", f.queue_config);
    if (!c.ok()) return c.status();
    opt.queue_config = std::move(*c);
  }
  if (!f.reserve_after.empty()) {
    if (auto s = sec("--reserve-after", f.reserve_after, &opt.reserve_after_s); !s.ok()) return s;
  }
  opt.las.thresholds_gpu_s.clear();
  for (absl::string_view t : absl::StrSplit(f.las_thresholds, ',', absl::SkipEmpty())) {
    double v;
    if (!absl::SimpleAtod(t, &v) || v <= 0 ||
        (!opt.las.thresholds_gpu_s.empty() && v <= opt.las.thresholds_gpu_s.back())) {
      return absl::InvalidArgumentError(
          "--las-thresholds: increasing positive GPU-seconds, e.g. 3600,36000");
    }
    opt.las.thresholds_gpu_s.push_back(v);
  }

  Workload w;
  if (f.workload == "synthetic") {
    SyntheticWorkloadSpec spec;
    spec.jobs = f.jobs;
    spec.queues = f.queues;
    spec.high_priority_fraction = f.high_priority_fraction;
    spec.duration_sigma = f.duration_sigma;
    spec.checkpoint_s = checkpoint;
    spec.restart_s = restart;
    spec.seed = f.seed;
    if (auto s = sec("--span", f.span, &spec.span_s); !s.ok()) return s;
    if (auto s = sec("--duration-median", f.duration_median, &spec.duration_median_s); !s.ok()) {
      return s;
    }
    if (auto s = sec("--duration-max", f.duration_max, &spec.duration_max_s); !s.ok()) return s;
    if (!f.checkpoint_mix.empty()) {
      auto mix = ParseDurationMix("--checkpoint-mix", f.checkpoint_mix);
      if (!mix.ok()) return mix.status();
      spec.checkpoint_mix = *mix;
    }
    if (!f.size_mix.empty()) {
      auto mix = ParseSizeMix(f.size_mix);
      if (!mix.ok()) return mix.status();
      spec.size_mix = *mix;
    }
    auto g = GenerateSyntheticWorkload(spec);
    if (!g.ok()) return g.status();
    w = std::move(*g);
  } else if (f.workload == "philly" || f.workload == "openb") {
    std::string path = f.trace.empty() ? DefaultTrace(f.workload) : f.trace;
    auto t = f.workload == "philly" ? ReadPhillyTrace(path) : ReadOpenbPodList(path);
    if (!t.ok()) return t.status();
    w = std::move(*t);
    ApplyDefaults({checkpoint, restart}, &w);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--workload: \"", f.workload, "\" is not philly, openb or synthetic"));
  }
  if (f.max_jobs > 0 && static_cast<int64_t>(w.jobs.size()) > f.max_jobs) w.jobs.resize(f.max_jobs);
  for (SimJob& j : w.jobs) j.checkpoint_cost_s = checkpoint_cost;
  CadenceInfo cadence;
  cadence.name = f.cadence;
  if (f.cadence == "young-daly") {
    if (!(checkpoint_cost > 0)) {
      return absl::InvalidArgumentError(
          "--cadence young-daly: needs --checkpoint-cost > 0 (the interval is "
          "sqrt(2 x cost x MTBF of the job's GPUs))");
    }
    cadence.gpu_mtbf_s = FleetGpuMtbfSeconds(opt);
    if (!f.gpu_mtbf.empty()) {
      if (auto s = sec("--gpu-mtbf", f.gpu_mtbf, &cadence.gpu_mtbf_s); !s.ok()) return s;
    }
    if (!(cadence.gpu_mtbf_s > 0)) cadence.gpu_mtbf_s = sched::kDefaultGpuMtbfSeconds;
    cadence.jobs_chosen = ApplyYoungDalyCadence(cadence.gpu_mtbf_s, &w);
  } else if (f.cadence != "fixed") {
    return absl::InvalidArgumentError(
        absl::StrCat("--cadence: \"", f.cadence, "\" is not fixed or young-daly"));
  }

  PolicyRegistry policies = PolicyRegistry::Builtin();
  std::vector<PolicySpec> specs;
  for (absl::string_view name : absl::StrSplit(f.policies, ',', absl::SkipEmpty())) {
    auto p = policies.Lookup(name);
    if (!p.ok()) return p.status();
    specs.push_back(*p);
  }
  if (specs.empty()) return absl::InvalidArgumentError("--policies: none given");
  if (!f.profile.empty()) {
    // The profile the server would run (`tessera server --profile`), with each policy's own queue
    // order: fifo, sjf and las keep theirs, default and queues take the profile's.
    absl::StatusOr<sched::Profile> prof =
        config::LoadProfileFile(f.profile, sched::pack::PluginSet().Registry());
    if (!prof.ok())
      return absl::InvalidArgumentError(absl::StrCat("--profile ", prof.status().message()));
    for (PolicySpec& p : specs) {
      const std::string sort =
          p.profile.queue_sort == "priority" ? prof->queue_sort : p.profile.queue_sort;
      p.profile = *prof;
      p.profile.queue_sort = sort;
      p.profile.name = p.name;
    }
  }

  struct RunSpec {
    PolicySpec policy;
    SimOptions opt;
  };
  std::vector<RunSpec> runs;
  for (const PolicySpec& p : specs) {
    runs.push_back({p, opt});
    if (f.compare_spares > 0) {
      RunSpec r{p, opt};
      r.opt.hot_spare_nodes = f.compare_spares;
      r.policy.name = absl::StrCat(p.name, "+", f.compare_spares, "spares");
      runs.push_back(std::move(r));
    }
  }
  for (RunSpec& r : runs) r.opt.keep_job_jcts = false;

  RealClock wall;
  absl::Time t0 = wall.Now();
  const sched::PluginRegistry registry = sched::DefaultRegistry();
  std::vector<absl::StatusOr<PolicyResult>> results(runs.size(), absl::UnknownError("not run"));
  std::atomic<size_t> next{0};
  auto worker = [&] {
    RealClock clock;
    for (size_t k = next++; k < runs.size(); k = next++) {
      results[k] = RunReplay(w, runs[k].opt, runs[k].policy, registry, &clock);
    }
  };
  int want = f.parallel > 0 ? f.parallel
                            : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int threads = std::max(1, std::min<int>(want, static_cast<int>(runs.size())));
  std::vector<std::thread> pool;
  for (int k = 1; k < threads; ++k) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();

  ReplayReport report;
  report.workload = &w;
  report.options = &opt;
  report.cadence = cadence;
  for (auto& r : results) {
    if (!r.ok()) return r.status();
    report.results.push_back(std::move(*r));
  }
  report.total_wall_s = absl::ToDoubleSeconds(wall.Now() - t0);
  if (!f.out.empty()) {
    if (auto s = WriteArtifacts(report, f.out); !s.ok()) return s;
  }
  if (f.json) {
    std::cout << ToJson(report).dump(2) << "\n";
  } else {
    std::cout << TextSummary(report);
    if (!f.out.empty())
      std::cout << "wrote charts, timeseries.csv and result.json to " << f.out << "\n";
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterSimReplayCommands(CLI::App& sim) {
  auto flags = std::make_shared<Flags>();
  CLI::App* c = sim.add_subcommand(
      "replay",
      "Discrete-event replay of a trace or synthetic load through the real scheduler, "
      "with GPU failures and checkpoints; policies side by side");
  Flags& f = *flags;
  c->add_option("--workload", f.workload, "philly | openb | synthetic")->capture_default_str();
  c->add_option("--trace", f.trace,
                "trace file (default: $TESSERA_SHARED_DIR or ../shared, traces/...)");
  c->add_option("--max-jobs", f.max_jobs, "replay only the first N jobs (0: all)");
  c->add_option("--policies", f.policies, "comma-separated: fifo, sjf, las, default, queues")
      ->capture_default_str();
  c->add_option("--cluster", f.cluster_file,
                "cluster YAML (deploy/clusters/*.yaml); replaces --nodes, --gpus-per-node, ...");
  c->add_option("--nodes", f.nodes, "nodes in the fleet")->capture_default_str();
  c->add_option("--gpus-per-node", f.gpus_per_node)->capture_default_str();
  c->add_option("--nodes-per-rack", f.nodes_per_rack)->capture_default_str();
  c->add_option("--racks-per-block", f.racks_per_block)->capture_default_str();
  c->add_option("--layout", f.layout, "GPU layout: nvswitch, nvlink-pairs, ...")
      ->capture_default_str();
  c->add_option("--hot-spares", f.hot_spares, "idle spare nodes on top of --nodes")
      ->capture_default_str();
  c->add_option("--compare-spares", f.compare_spares,
                "also run every policy with this many hot-spare nodes");
  c->add_option("--gpu-failure-interval", f.gpu_failure_interval,
                "fleet-wide mean time between GPU failures (0: none), e.g. 2.5h")
      ->capture_default_str();
  c->add_option("--node-failure-interval", f.node_failure_interval,
                "fleet-wide mean time between node failures (0: none)")
      ->capture_default_str();
  c->add_option("--gpu-repair", f.gpu_repair)->capture_default_str();
  c->add_option("--node-repair", f.node_repair)->capture_default_str();
  c->add_option("--checkpoint", f.checkpoint, "checkpoint interval of every job (0: none)")
      ->capture_default_str();
  c->add_option(
      "--checkpoint-mix", f.checkpoint_mix,
      "synthetic: per-job checkpoint intervals INTERVAL:WEIGHT,... (e.g. 10m:1,30m:2,0:1; "
      "0: never); replaces --checkpoint");
  c->add_option("--restart", f.restart, "restart overhead after a failure or preemption")
      ->capture_default_str();
  c->add_option("--checkpoint-cost", f.checkpoint_cost,
                "run time each periodic checkpoint takes to write (no progress meanwhile)")
      ->capture_default_str();
  c->add_option("--cadence", f.cadence,
                "checkpoint intervals: fixed (--checkpoint / --checkpoint-mix) or young-daly "
                "(Tessera chooses sqrt(2 x --checkpoint-cost x MTBF of the job's GPUs), as the "
                "server does for jobs declaring spec.checkpoint.costSeconds)")
      ->capture_default_str();
  c->add_option("--gpu-mtbf", f.gpu_mtbf,
                "young-daly: per-GPU mean time between failures (default: the fleet's rate from "
                "--gpu-failure-interval and --node-failure-interval, else 50,000 h)");
  c->add_option("--reserve-after", f.reserve_after,
                "for every policy: a blocked head waiting this long stops backfill "
                "(default: each policy's own; sjf 6h, default never)");
  c->add_option("--las-thresholds", f.las_thresholds, "LAS band limits in GPU-seconds")
      ->capture_default_str();
  c->add_flag("--no-preempt-checkpoint", f.no_preempt_checkpoint,
              "preemption loses work since the last periodic checkpoint");
  c->add_option("--profile", f.profile,
                "scheduler profile YAML every policy runs, as `tessera server --profile` does "
                "(deploy/profiles/); fifo, sjf and las keep their queue order");
  c->add_option("--queue-config", f.queue_config,
                "queues policy: queue tree, quotas, priority classes, preemption and backfill "
                "(the server's --queue-config YAML); default: one leaf per workload queue with "
                "equal guaranteed GPUs, borrowing allowed");
  c->add_option("--reservations", f.reservations,
                "queues policy: waiting jobs given a backfill reservation each cycle, in queue "
                "order (backfill.reservations, 1..64; 1 is EASY backfill); default: the queue "
                "config's")
      ->check(CLI::Range(1, 64));
  c->add_flag("--lend-reserved", f.lend_reserved,
              "queues policy: backfill lends reserved room to jobs that checkpoint, until shortly "
              "before the reservation starts, then the reserved job preempts them "
              "(backfill.lendReserved)");
  c->add_option("--min-loan", f.min_loan,
                "queues policy with --lend-reserved: the shortest loan made (backfill.minLoan; "
                "default: the queue config's, 30m)");
  c->add_option("--estimates", f.estimates,
                "queues policy: runtime estimates for backfill: oracle (each job's true remaining "
                "duration) or learned (none given; the manager learns them from completed jobs, "
                "backfill.learnRuntimes)")
      ->check(CLI::IsMember({"oracle", "learned"}))
      ->capture_default_str();
  c->add_option("--preempt-exit", f.preempt_exit,
                "queues policy: time a signalled victim takes to checkpoint and exit (past the "
                "grace period it is killed at its deadline)")
      ->capture_default_str();
  c->add_option("--sample-interval", f.sample_interval, "time-series step (0: span/400)");
  c->add_option("--seed", f.seed)->capture_default_str();
  c->add_flag("--json", f.json, "print one JSON object (a section per policy)");
  c->add_option("--out", f.out, "directory for SVG charts, timeseries.csv and result.json");
  c->add_option("--parallel", f.parallel,
                "policies simulated at once (threads; 0: up to the hardware's threads)")
      ->capture_default_str();
  c->add_option("--jobs", f.jobs, "synthetic: number of jobs")->capture_default_str();
  c->add_option("--span", f.span, "synthetic: arrival window")->capture_default_str();
  c->add_option("--size-mix", f.size_mix, "synthetic: GPUS:WEIGHT,... (default 1..4096 mix)");
  c->add_option("--duration-median", f.duration_median)->capture_default_str();
  c->add_option("--duration-sigma", f.duration_sigma, "log-normal sigma")->capture_default_str();
  c->add_option("--duration-max", f.duration_max)->capture_default_str();
  c->add_option("--queues", f.queues, "synthetic: queues (Zipf mix)")->capture_default_str();
  c->add_option("--high-priority-fraction", f.high_priority_fraction)->capture_default_str();
  c->footer(
      "Examples:\n"
      "  tessera sim replay --workload philly --policies fifo,default\n"
      "  tessera sim replay --workload synthetic --cluster deploy/clusters/25k-h100.yaml");
  c->callback([flags] {
    absl::Status s = Run(*flags);
    if (!s.ok()) {
      std::cerr << "error: " << s.message() << "\n";
      throw CLI::RuntimeError(1);
    }
  });
}

}  // namespace tessera::sim::replay
