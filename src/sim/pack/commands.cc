#include "sim/pack/commands.h"

#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "config/profile_yaml.h"
#include "sched/pack/plugin_set.h"
#include "sched/pack/policies.h"
#include "sim/pack/pack_sim.h"
#include "sim/pack/report.h"
#include "trace/openb.h"

namespace tessera::sim::pack {
namespace {

struct Options {
  std::string nodes;
  std::vector<std::string> pods;
  std::string policy = "random,dotprod,gpu-clustering,gpu-packing,best-fit,fgd,tessera";
  std::string seeds = "42-51";
  double inflate = 1.3;
  bool json = false;
  std::string csv, chart, expected;
  int threads = 0;
  bool ignore_memory = false;
  std::string lookahead = "0";
  std::vector<std::string> profiles;
  bool policy_given = false;
};

std::string TraceName(const std::string& path) {
  std::string base = path.substr(path.find_last_of('/') + 1);
  absl::string_view b = base;
  absl::ConsumeSuffix(&b, ".csv");
  absl::ConsumePrefix(&b, "openb_pod_list_");
  return std::string(b);
}

absl::Status WriteFile(const std::string& path, const std::string& text, const char* flag) {
  std::ofstream out(path, std::ios::binary);
  if (!out) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot write ", path));
  out << text;
  return out ? absl::OkStatus()
             : absl::InternalError(absl::StrCat(flag, ": write to ", path, " failed"));
}

absl::Status Run(const Options& o) {
  auto t0 = std::chrono::steady_clock::now();
  PackConfig cfg;
  cfg.inflate = o.inflate;
  cfg.threads = o.threads;
  cfg.enforce_memory = !o.ignore_memory;
  auto lookahead = ParseLookahead(o.lookahead);
  if (!lookahead.ok()) return lookahead.status();
  cfg.lookahead = *lookahead;
  if (!(o.inflate >= 1.0 && o.inflate <= 10.0)) {
    return absl::InvalidArgumentError("--inflate: must be in 1..10");
  }
  for (absl::string_view p : absl::StrSplit(o.policy, ',', absl::SkipEmpty())) {
    auto c = sched::pack::CanonicalPolicy(absl::StripAsciiWhitespace(p));
    if (!c.ok()) return c.status();
    cfg.policies.push_back(*c);
  }
  // With --profile and no --policy, only the profiles run.
  if (!o.profiles.empty() && !o.policy_given) cfg.policies.clear();
  for (const std::string& path : o.profiles) {
    absl::StatusOr<sched::Profile> p =
        config::LoadProfileFile(path, sched::pack::PluginSet().Registry());
    if (!p.ok())
      return absl::InvalidArgumentError(absl::StrCat("--profile ", p.status().message()));
    for (const std::string& name : cfg.policies) {
      if (name == p->name) {
        return absl::InvalidArgumentError(
            absl::StrCat("--profile ", path, ": profile.name \"", p->name,
                         "\" is already a policy of this run; give the profile another name"));
      }
    }
    cfg.policies.push_back(p->name);
    cfg.profiles.push_back(*std::move(p));
  }
  if (cfg.policies.empty()) return absl::InvalidArgumentError("--policy: no policy given");
  auto seeds = ParseSeeds(o.seeds);
  if (!seeds.ok()) return seeds.status();
  cfg.seeds = *seeds;
  auto node_rows = trace::LoadOpenbNodes(o.nodes);
  if (!node_rows.ok()) return node_rows.status();
  std::vector<model::Node> nodes;
  for (const trace::OpenbNode& n : *node_rows) nodes.push_back(trace::ToNode(n));
  std::vector<PackTrace> traces;
  for (const std::string& arg : o.pods) {
    for (absl::string_view path : absl::StrSplit(arg, ',', absl::SkipEmpty())) {
      auto pods = trace::LoadOpenbPods(std::string(path));
      if (!pods.ok()) return pods.status();
      traces.push_back({TraceName(std::string(path)), std::move(*pods)});
    }
  }
  if (traces.empty()) return absl::InvalidArgumentError("--pods: no pod list given");
  auto runs = RunPackSweep(nodes, traces, cfg);
  if (!runs.ok()) return runs.status();
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<PackSummary> sums = Summarize(*runs);
  if (!o.expected.empty()) {
    auto pub = LoadPublished(o.expected);
    if (!pub.ok()) return pub.status();
    AttachPublished(*pub, &sums);
  }
  if (o.json) {
    std::cout << FormatJson(sums, wall);
  } else {
    std::cout << FormatTable(sums, wall);
  }
  if (!o.csv.empty()) {
    absl::Status s = WriteFile(o.csv, FormatRunsCsv(*runs), "--csv");
    if (!s.ok()) return s;
  }
  if (!o.chart.empty()) {
    absl::Status s = WriteFile(o.chart, FormatSvg(sums), "--chart");
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterSimPackCommands(CLI::App& sim) {
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = sim.add_subcommand(
      "pack",
      "FGD packing protocol on openb traces: inflate, shuffle, schedule once, report GPU "
      "allocation per policy");
  cmd->add_option("--nodes", opts->nodes, "openb node list CSV")->required();
  cmd->add_option("--pods", opts->pods, "openb pod list CSV(s), comma-separated or repeated")
      ->required();
  cmd->add_option("--policy", opts->policy,
                  "policies, comma-separated: random, dotprod, gpu-clustering, gpu-packing, "
                  "best-fit, fgd, tessera")
      ->each([opts](const std::string&) { opts->policy_given = true; });
  cmd->add_option("--profile", opts->profiles,
                  "scheduler profile YAML run as one more policy under its name, as `tessera "
                  "server --profile` runs it (deploy/profiles/; repeatable); with no --policy "
                  "only the profiles run");
  cmd->add_option("--seeds", opts->seeds, "seeds, e.g. 42-51 or 42,43");
  cmd->add_option("--inflate", opts->inflate, "total GPU request as a multiple of capacity");
  cmd->add_flag("--json", opts->json, "print one JSON object keyed by policy");
  cmd->add_option("--csv", opts->csv, "write every run (allocation after each 1%) to this CSV");
  cmd->add_option("--chart", opts->chart, "write allocation vs arrival as SVG");
  cmd->add_option("--expected", opts->expected,
                  "the authors' analysis_allo_discrete.csv, to print published means");
  cmd->add_option("--threads", opts->threads, "worker threads (0: all cores)");
  cmd->add_flag("--ignore-memory", opts->ignore_memory,
                "fit CPU and GPU only, as the FGD simulator's pod resource does "
                "(default: memory is fitted too)");
  cmd->add_option("--lookahead", opts->lookahead,
                  "tessera also learns the pods arriving next, as many as ask this percent of "
                  "cluster GPU capacity (\"all\": the rest of the stream), and holds shared-GPU "
                  "pods that would strand share those whole-GPU pods want (default 0: none, "
                  "the published protocol)");
  cmd->footer(
      "Example:\n"
      "  tessera sim pack --nodes "
      "../shared/traces/alibaba-gpu-v2023/csv/openb_node_list_gpu_node.csv \\\n"
      "      --pods ../shared/traces/alibaba-gpu-v2023/csv/openb_pod_list_default.csv --policy "
      "fgd,tessera "
      "--seeds 42-44");
  cmd->callback([opts]() {
    absl::Status s = Run(*opts);
    if (!s.ok()) {
      std::cerr << "tessera sim pack: " << s.message() << "\n";
      throw CLI::RuntimeError(1);
    }
  });
}

}  // namespace tessera::sim::pack
