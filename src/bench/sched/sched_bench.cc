#include "bench/sched/sched_bench.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/bench_stats.h"
#include "config/profile_yaml.h"
#include "sched/framework/scheduler.h"
#include "sched/pack/plugin_set.h"
#include "sched/plugins/default_registry.h"

namespace tessera::bench {
namespace {

using Clock = std::chrono::steady_clock;

model::Job SimpleJob(const std::string& name, int members, int gpus, int milli = 1000) {
  model::Job j;
  j.name = name;
  j.groups.push_back(
      {.name = "w",
       .count = members,
       .resources = {.gpus = gpus, .gpu_milli = milli, .cpu_milli = 4000, .memory_mib = 16384}});
  return j;
}

// `plugins` (every plugin a server can run) must outlive the scheduler.
std::unique_ptr<sched::Scheduler> NewScheduler(sched::ClusterState* cs,
                                               const sched::Profile& profile,
                                               const sched::pack::PluginSet& plugins) {
  auto s = sched::Scheduler::Create(profile, plugins.Registry(), cs);
  if (!s.ok()) {
    std::cerr << s.status() << "\n";
    std::exit(1);
  }
  return std::move(*s);
}

void Fill(sched::ClusterState* cs, const model::SyntheticClusterSpec& spec) {
  auto nodes = model::BuildSyntheticCluster(spec);
  if (!nodes.ok()) {
    std::cerr << nodes.status() << "\n";
    std::exit(2);
  }
  for (auto& n : *nodes) (void)cs->AddNode(std::move(n));
}

// A background job from the mix: single GPU, fractional, 8-GPU, small gang.
model::Job MixJob(std::mt19937_64& rng, int i) {
  int k = std::uniform_int_distribution<int>(0, 99)(rng);
  std::string name = absl::StrCat("bg", i);
  if (k < 40) return SimpleJob(name, 1, 1);
  if (k < 55) return SimpleJob(name, 1, 1, std::uniform_int_distribution<int>(1, 9)(rng) * 100);
  if (k < 70) return SimpleJob(name, 1, 2 << std::uniform_int_distribution<int>(0, 1)(rng));
  if (k < 90) return SimpleJob(name, 1, 8);
  model::Job g = SimpleJob(name, std::uniform_int_distribution<int>(2, 4)(rng), 8);
  g.topology = {model::TopologyLevel::kRack, false};
  return g;
}

}  // namespace

nlohmann::json RunSchedBench(const SchedBenchOptions& o) {
  nlohmann::json out;
  const int64_t total_gpus = int64_t{o.cluster.nodes} * o.cluster.gpus_per_node;
  out["cluster"] = {{"nodes", o.cluster.nodes},
                    {"gpus_per_node", o.cluster.gpus_per_node},
                    {"gpus", total_gpus},
                    {"nodes_per_rack", o.cluster.nodes_per_rack},
                    {"racks_per_block", o.cluster.racks_per_block},
                    {"gpu_model", o.cluster.gpu_model},
                    {"layout", o.layout}};
  out["threads"] = 1;
  out["profile"] = o.profile.name;

  // Phase 1: single-GPU placements until fill_target of the fleet is allocated.
  {
    sched::ClusterState cs;
    auto t0 = Clock::now();
    Fill(&cs, o.cluster);
    double build_s = std::chrono::duration<double>(Clock::now() - t0).count();
    sched::pack::PluginSet plugins;
    auto s = NewScheduler(&cs, o.profile, plugins);
    const int64_t target = static_cast<int64_t>(o.fill_target * total_gpus);
    std::vector<model::Job> jobs;
    jobs.reserve(target);
    for (int64_t i = 0; i < target; ++i) jobs.push_back(SimpleJob(absl::StrCat("s", i), 1, 1));
    int64_t placed = 0;
    auto t1 = Clock::now();
    for (const auto& j : jobs) placed += s->Schedule(j).placed();
    double secs = std::chrono::duration<double>(Clock::now() - t1).count();
    out["cluster_build_s"] = build_s;
    out["single_gpu"] = {{"placed", placed},
                         {"seconds", secs},
                         {"alloc_ratio", double(cs.allocated_milli()) / 1000.0 / total_gpus}};
    out["placements_per_sec"] = placed / secs;
    out["consistent"] = cs.CheckConsistency().ok();
  }

  // Phase 2: gang latency on a cluster at background load, per gang size,
  // topology required (rack for gangs that fit a rack, else block).
  {
    sched::ClusterState cs;
    Fill(&cs, o.cluster);
    sched::pack::PluginSet plugins;
    auto s = NewScheduler(&cs, o.profile, plugins);
    std::mt19937_64 rng(o.seed);
    const int64_t bg_target = static_cast<int64_t>(o.background_load * total_gpus * 1000);
    int i = 0;
    int64_t bg_jobs = 0;
    auto tb = Clock::now();
    while (cs.allocated_milli() < bg_target && i < 50 * total_gpus) {
      bg_jobs += s->Schedule(MixJob(rng, i++)).placed();
    }
    double bg_secs = std::chrono::duration<double>(Clock::now() - tb).count();
    out["mixed_stream"] = {{"jobs_placed", bg_jobs},
                           {"jobs_per_sec", bg_jobs / bg_secs},
                           {"alloc_ratio", double(cs.allocated_milli()) / 1000.0 / total_gpus}};
    const int rack_gpus = o.cluster.nodes_per_rack * o.cluster.gpus_per_node;
    nlohmann::json gangs = nlohmann::json::object();
    for (int size : o.gang_sizes) {
      int per = std::min(size, o.cluster.gpus_per_node);
      int members = size / per;
      model::TopologyLevel level =
          size <= rack_gpus ? model::TopologyLevel::kRack : model::TopologyLevel::kBlock;
      std::vector<double> us;
      int placed = 0;
      for (int k = 0; k < o.gang_samples; ++k) {
        model::Job g = SimpleJob(absl::StrCat("gang", size, "-", k), members, per);
        g.topology = {level, true};
        auto t = Clock::now();
        sched::ScheduleResult r = s->Schedule(g);
        us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t).count());
        if (r.placed()) {
          ++placed;
          (void)s->Release(g.key());
        }
      }
      gangs[std::to_string(size)] = {{"p50_us", Percentile(us, 0.5)},
                                     {"p99_us", Percentile(us, 0.99)},
                                     {"placed", placed},
                                     {"samples", o.gang_samples},
                                     {"topology", model::TopologyLevelName(level)}};
    }
    out["gangs"] = gangs;
    if (gangs.contains("64")) {
      out["gang_p50_us"] = gangs["64"]["p50_us"];
      out["gang_p99_us"] = gangs["64"]["p99_us"];
    }
    out["alloc_ratio"] = double(cs.allocated_milli()) / 1000.0 / total_gpus;
    out["consistent_after_gangs"] = cs.CheckConsistency().ok();
  }
  out["peak_rss_mb"] = PeakRssMb();
  return out;
}

void RegisterBenchSchedCommands(CLI::App& bench) {
  auto opts = std::make_shared<SchedBenchOptions>();
  CLI::App* cmd = bench.add_subcommand("sched", "Scheduling core: placements/s and gang latency");
  cmd->add_option("--nodes", opts->cluster.nodes, "Nodes")->capture_default_str();
  cmd->add_option("--gpus-per-node", opts->cluster.gpus_per_node)->capture_default_str();
  cmd->add_option("--nodes-per-rack", opts->cluster.nodes_per_rack)->capture_default_str();
  cmd->add_option("--racks-per-block", opts->cluster.racks_per_block)->capture_default_str();
  cmd->add_option("--gpu-model", opts->cluster.gpu_model)->capture_default_str();
  cmd->add_option("--layout", opts->layout, "nvswitch | nvlink-pairs | nvlink-quads | pcie")
      ->capture_default_str();
  cmd->add_option("--gang-sizes", opts->gang_sizes, "Gang sizes in GPUs")->delimiter(',');
  cmd->add_option("--gang-samples", opts->gang_samples)->capture_default_str();
  cmd->add_option("--background-load", opts->background_load)->capture_default_str();
  cmd->add_option("--seed", opts->seed)->capture_default_str();
  cmd->add_option("--profile", opts->profile_path, "Scheduler profile YAML");
  cmd->callback([opts]() {
    if (!model::ParseGpuLayout(opts->layout, &opts->cluster.layout)) {
      throw CLI::ValidationError("--layout",
                                 "must be nvswitch, nvlink-pairs, nvlink-quads or pcie");
    }
    if (opts->cluster.nodes <= 0) throw CLI::ValidationError("--nodes", "must be > 0");
    if (!opts->profile_path.empty()) {
      auto p = config::LoadProfileFile(opts->profile_path, sched::pack::PluginSet().Registry());
      if (!p.ok()) throw CLI::ValidationError("--profile", std::string(p.status().message()));
      opts->profile = *p;
    }
    std::cout << RunSchedBench(*opts).dump(2) << std::endl;
  });
}

}  // namespace tessera::bench
