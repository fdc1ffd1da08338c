#include "sim/replay/report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tessera::sim::replay {
namespace {

nlohmann::json DistJson(const Dist& d) {
  return {{"n", d.n}, {"mean", d.mean}, {"p50", d.p50}, {"p99", d.p99}, {"max", d.max}};
}

nlohmann::json PolicyJson(const PolicyResult& p) {
  nlohmann::json j;
  j["description"] = p.description;
  j["jobs"] = {{"total", p.jobs},
               {"completed", p.completed},
               {"rejected_too_large", p.rejected},
               {"unfinished", p.unfinished}};
  j["jct_s"] = DistJson(p.jct);
  j["queueing_delay_s"] = DistJson(p.queue_delay);
  j["slowdown"] = DistJson(p.slowdown);
  nlohmann::json sizes = nlohmann::json::object();
  for (const SizeClass& c : p.by_size) {
    sizes[c.name] = {{"jct_s", DistJson(c.jct)},
                     {"queueing_delay_s", DistJson(c.queue_delay)},
                     {"slowdown", DistJson(c.slowdown)}};
  }
  j["by_gpus"] = sizes;
  nlohmann::json queues = nlohmann::json::array();
  for (const QueueShare& q : p.queues) {
    queues.push_back({{"queue", q.queue},
                      {"gpu_hours", q.gpu_hours},
                      {"share", q.share},
                      {"entitlement", q.entitlement},
                      {"share_over_entitlement", q.entitlement > 0 ? q.share / q.entitlement : 0},
                      {"mean_jct_s", q.mean_jct_s},
                      {"mean_wait_s", q.mean_wait_s},
                      {"preemptions", q.preemptions},
                      {"contended_gpu_hours", q.contended_gpu_hours},
                      {"contended_share", q.contended_share}});
  }
  j["fairness"] = {{"jain_index_time_mean", p.jain_mean}, {"queues", queues}};
  j["gpu_hours"] = {{"allocated", p.allocated_gpu_s / 3600},
                    {"useful", p.useful_gpu_s / 3600},
                    {"demand", p.demand_gpu_s / 3600},
                    {"lost_work_failures", p.failure_lost_gpu_s / 3600},
                    {"restart_overhead_failures", p.failure_restart_gpu_s / 3600},
                    {"lost_work_preemption", p.preempt_lost_gpu_s / 3600},
                    {"restart_overhead_preemption", p.preempt_restart_gpu_s / 3600}};
  j["gpu_hours"]["checkpoint_writes"] = p.checkpoint_write_gpu_s / 3600;
  j["goodput"] = {{"achieved", p.goodput},
                  {"bound_from_checkpoint_and_restart", p.goodput_bound},
                  {"gap_points", 100 * (p.goodput_bound - p.goodput)}};
  j["utilization"] = p.utilization;
  j["utilization_while_waiting"] = {{"mean", p.util_waiting_mean},
                                    {"p5", p.util_waiting_p5},
                                    {"p50", p.util_waiting_p50},
                                    {"min", p.util_waiting_min},
                                    {"waiting_fraction_of_run", p.waiting_fraction}};
  nlohmann::json waits = nlohmann::json::object();
  for (const WaitBySize& b : p.wait_by_gpus) {
    waits[b.gpus] = {{"jobs", b.jobs},
                     {"never_started", b.never_started},
                     {"mean_s", b.mean_s},
                     {"p99_s", b.p99_s},
                     {"max_s", b.max_s}};
  }
  j["wait_by_gpus"] = waits;
  j["effective_utilization"] = p.effective_utilization;
  j["failures"] = {{"gpu_failures", p.gpu_failures},
                   {"node_failures", p.node_failures},
                   {"gang_kills", p.gang_kills},
                   {"spare_swaps", p.spare_swaps},
                   {"mean_restart_wait_s", p.mean_restart_wait_s},
                   {"restart_wait_gpu_hours", p.restart_wait_gpu_s / 3600}};
  j["preemptions"] = p.preemptions;
  j["loans"] = p.loans;
  j["makespan"] = {{"makespan_s", p.makespan_s},
                   {"lower_bound_s", p.lower_bound_s},
                   {"ratio", p.makespan_ratio}};
  j["scheduler"] = {{"schedule_calls", p.schedule_calls},
                    {"placements", p.placements},
                    {"events", p.events},
                    {"wall_s", p.wall_s},
                    {"decisions_per_s", p.decisions_per_s}};
  return j;
}

std::string Hours(double s) { return absl::StrFormat("%.2fh", s / 3600); }

// The checkpoint interval of each GPU count (the first job's; under
// young-daly all jobs of a size with the same cost share it), for at most
// kMaxWaitSizes sizes; empty otherwise.
std::map<int32_t, double> IntervalsByGpus(const Workload& w) {
  std::map<int32_t, double> by;
  for (const SimJob& j : w.jobs) by.emplace(j.gpus, j.checkpoint_s);
  if (by.size() > kMaxWaitSizes) by.clear();
  return by;
}

nlohmann::json IntervalsByGpusJson(const Workload& w) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [g, c] : IntervalsByGpus(w)) out[std::to_string(g)] = c;
  return out;
}

double MeanCheckpointCost(const Workload& w) {
  double sum = 0;
  for (const SimJob& j : w.jobs) sum += j.checkpoint_cost_s;
  return w.jobs.empty() ? 0 : sum / w.jobs.size();
}

std::string XmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// Tick values: 1, 2 or 5 times a power of ten, about `n` of them.
std::vector<double> Ticks(double lo, double hi, int n) {
  std::vector<double> out;
  if (!(hi > lo)) return {lo};
  double raw = (hi - lo) / n;
  double p = std::pow(10, std::floor(std::log10(raw)));
  double step = raw / p < 1.5 ? p : raw / p < 3.5 ? 2 * p : raw / p < 7.5 ? 5 * p : 10 * p;
  for (double v = std::ceil(lo / step) * step; v <= hi + 1e-9 * step; v += step) out.push_back(v);
  return out;
}

std::string Num(double v) {
  if (v != 0 && (std::fabs(v) >= 1e5 || std::fabs(v) < 1e-2)) return absl::StrFormat("%.0e", v);
  return absl::StrFormat("%g", v);
}

}  // namespace

nlohmann::json ToJson(const ReplayReport& r) {
  const Workload& w = *r.workload;
  const SimOptions& o = *r.options;
  nlohmann::json j;
  double span = w.jobs.empty() ? 0 : w.jobs.back().submit_s - w.jobs.front().submit_s;
  j["workload"] = {{"source", w.source},
                   {"jobs", w.jobs.size()},
                   {"queues", w.queues.size()},
                   {"demand_gpu_hours", w.GpuSeconds() / 3600},
                   {"submit_span_hours", span / 3600}};
  j["cluster"] = {{"nodes", o.cluster.nodes},
                  {"gpus_per_node", o.cluster.gpus_per_node},
                  {"gpus", static_cast<int64_t>(o.cluster.nodes) * o.cluster.gpus_per_node},
                  {"nodes_per_rack", o.cluster.nodes_per_rack},
                  {"racks_per_block", o.cluster.racks_per_block},
                  {"hot_spare_nodes", o.hot_spare_nodes}};
  j["failures"] = {{"gpu_failure_interval_s", o.failures.gpu_failure_interval_s},
                   {"node_failure_interval_s", o.failures.node_failure_interval_s},
                   {"gpu_repair_s", o.failures.gpu_repair_s},
                   {"node_repair_s", o.failures.node_repair_s}};
  j["seed"] = o.seed;
  j["checkpoints"] = {{"cadence", r.cadence.name},
                      {"interval_s_by_gpus", IntervalsByGpusJson(w)},
                      {"cost_s_mean", MeanCheckpointCost(w)}};
  if (r.cadence.name != "fixed") {
    j["checkpoints"]["gpu_mtbf_hours"] = r.cadence.gpu_mtbf_s / 3600;
    j["checkpoints"]["jobs_chosen"] = r.cadence.jobs_chosen;
  }
  nlohmann::json policies = nlohmann::json::object();
  for (const PolicyResult& p : r.results) policies[p.policy] = PolicyJson(p);
  j["policies"] = policies;
  j["wall_s"] = r.total_wall_s;
  return j;
}

std::string TextSummary(const ReplayReport& r) {
  const Workload& w = *r.workload;
  const SimOptions& o = *r.options;
  std::string s = absl::StrFormat(
      "workload %s: %d jobs, %d queues, %.0f GPU-hours; cluster %d nodes x %d GPUs = %d GPUs "
      "(+%d hot-spare nodes)\n",
      w.source, w.jobs.size(), w.queues.size(), w.GpuSeconds() / 3600, o.cluster.nodes,
      o.cluster.gpus_per_node, int64_t{o.cluster.nodes} * o.cluster.gpus_per_node,
      o.hot_spare_nodes);
  {
    absl::StrAppendFormat(&s, "checkpoints: %s cadence, mean write cost %.0f s; interval by GPUs:",
                          r.cadence.name, MeanCheckpointCost(w));
    const std::map<int32_t, double> by = IntervalsByGpus(w);
    for (const auto& [g, c] : by) absl::StrAppendFormat(&s, " %d: %.0f s;", g, c);
    if (!by.empty()) s.pop_back();
    if (by.empty()) s += " (many sizes)";
    if (r.cadence.name != "fixed") {
      absl::StrAppendFormat(&s, " (per-GPU MTBF %.0f h, %d jobs chosen)",
                            r.cadence.gpu_mtbf_s / 3600, r.cadence.jobs_chosen);
    }
    s += "\n";
  }
  absl::StrAppendFormat(&s, "%-8s %9s %9s %9s %9s %9s %8s %7s %7s %9s %8s %6s %10s %8s\n", "policy",
                        "jct_mean", "jct_p50", "jct_p99", "qd_mean", "qd_p99", "slowdn", "util",
                        "goodput", "makespan", "mk/LB", "jain", "preempt", "wall_s");
  for (const PolicyResult& p : r.results) {
    absl::StrAppendFormat(
        &s, "%-8s %9s %9s %9s %9s %9s %8.2f %6.1f%% %6.2f%% %9s %8.3f %6.3f %10d %8.2f\n", p.policy,
        Hours(p.jct.mean), Hours(p.jct.p50), Hours(p.jct.p99), Hours(p.queue_delay.mean),
        Hours(p.queue_delay.p99), p.slowdown.mean, 100 * p.utilization, 100 * p.goodput,
        Hours(p.makespan_s), p.makespan_ratio, p.jain_mean, p.preemptions, p.wall_s);
  }
  for (const PolicyResult& p : r.results) {
    absl::StrAppendFormat(
        &s,
        "%s: %d done, %d too large, %d unfinished; %d schedule calls (%.0f decisions/s); "
        "failures %d GPU + %d node, %d gangs killed, %d spare swaps; lost %.1f GPU-h work + "
        "%.1f GPU-h restart (failures), %.1f GPU-h (preemption)\n",
        p.policy, p.completed, p.rejected, p.unfinished, p.schedule_calls, p.decisions_per_s,
        p.gpu_failures, p.node_failures, p.gang_kills, p.spare_swaps, p.failure_lost_gpu_s / 3600,
        p.failure_restart_gpu_s / 3600, (p.preempt_lost_gpu_s + p.preempt_restart_gpu_s) / 3600);
    if (p.gpu_failures + p.node_failures > 0) {
      absl::StrAppendFormat(&s,
                            "%s: goodput %.3f%%; bound from checkpoint interval and restart "
                            "overhead %.3f%%; gap %.3f points; restart wait after a kill "
                            "%.2f min mean (%.1f GPU-h idle); useful work %.2f%% of capacity\n",
                            p.policy, 100 * p.goodput, 100 * p.goodput_bound,
                            100 * (p.goodput_bound - p.goodput), p.mean_restart_wait_s / 60,
                            p.restart_wait_gpu_s / 3600, 100 * p.effective_utilization);
    }
  }
  // Utilization while work waits, next to the whole run's, and the wait by
  // gang size (max and p99 show starvation; never-started jobs count up to the end).
  for (const PolicyResult& p : r.results) {
    absl::StrAppendFormat(&s,
                          "%s: utilization %.2f%% over the run; while work waits (%.1f%% of the "
                          "run) mean %.2f%%, p5 %.1f%%, median %.1f%%, min %.1f%%; checkpoint "
                          "writes %.1f GPU-h\n",
                          p.policy, 100 * p.utilization, 100 * p.waiting_fraction,
                          100 * p.util_waiting_mean, 100 * p.util_waiting_p5,
                          100 * p.util_waiting_p50, 100 * p.util_waiting_min,
                          p.checkpoint_write_gpu_s / 3600);
    std::string line = absl::StrCat(p.policy, ": wait by GPUs (p99 / max):");
    for (const WaitBySize& b : p.wait_by_gpus) {
      absl::StrAppend(&line, " ", b.gpus, ": ", Hours(b.p99_s), " / ", Hours(b.max_s));
      if (b.never_started > 0) absl::StrAppend(&line, " (", b.never_started, " never started)");
      absl::StrAppend(&line, ";");
    }
    if (!line.empty() && line.back() == ';') line.pop_back();
    s += line + "\n";
  }
  // Per queue: GPU-hours and share (overall, and while >= 2 queues had
  // work) against the entitlement (equal; under `queues` the manager's).
  if (w.queues.size() > 1 && w.queues.size() <= 64) {
    absl::StrAppendFormat(&s, "%-8s %-16s %10s %7s %9s %7s %9s %9s %8s\n", "policy", "queue",
                          "gpu_h", "share", "contended", "entitl", "wait_mean", "jct_mean",
                          "preempt");
    for (const PolicyResult& p : r.results) {
      for (const QueueShare& q : p.queues) {
        absl::StrAppendFormat(&s, "%-8s %-16s %10.1f %6.1f%% %8.1f%% %6.1f%% %9s %9s %8d\n",
                              p.policy, q.queue, q.gpu_hours, 100 * q.share,
                              100 * q.contended_share, 100 * q.entitlement, Hours(q.mean_wait_s),
                              Hours(q.mean_jct_s), q.preemptions);
      }
    }
  }
  absl::StrAppendFormat(&s, "total wall %.2f s\n", r.total_wall_s);
  return s;
}

std::string TimeSeriesCsv(const ReplayReport& r) {
  std::string s =
      "policy,t_hours,allocated_gpus,capacity_gpus,utilization,unhealthy_gpus,running,pending,"
      "goodput,cum_failure_lost_gpu_h,cum_preempt_lost_gpu_h,jain\n";
  for (const PolicyResult& p : r.results) {
    for (const Sample& x : p.series) {
      absl::StrAppendFormat(&s, "%s,%.4f,%.0f,%.0f,%.5f,%d,%d,%d,%.5f,%.3f,%.3f,%.4f\n", p.policy,
                            x.t_s / 3600, x.allocated_gpus, x.capacity_gpus,
                            x.capacity_gpus > 0 ? x.allocated_gpus / x.capacity_gpus : 0,
                            x.unhealthy_gpus, x.running, x.pending, x.goodput,
                            x.cum_failure_lost_gpu_h, x.cum_preempt_lost_gpu_h, x.jain);
    }
  }
  return s;
}

std::string SvgLineChart(const std::string& title, const std::string& x_label,
                         const std::string& y_label, const std::vector<ChartSeries>& series,
                         bool log_x) {
  static const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                  "#9467bd", "#8c564b", "#e377c2", "#17becf"};
  const double W = 800, H = 450, L = 70, R = 160, T = 40, B = 55;
  double x0 = INFINITY, x1 = -INFINITY, y0 = 0, y1 = -INFINITY;
  auto fx = [&](double x) { return log_x ? std::log10(std::max(x, 1e-9)) : x; };
  for (const ChartSeries& s : series) {
    for (auto [x, y] : s.points) {
      if (log_x && x <= 0) continue;
      x0 = std::min(x0, fx(x));
      x1 = std::max(x1, fx(x));
      y0 = std::min(y0, y);
      y1 = std::max(y1, y);
    }
  }
  if (!std::isfinite(x0)) x0 = 0, x1 = 1;
  if (x1 <= x0) x1 = x0 + 1;
  if (!(y1 > y0)) y1 = y0 + 1;
  auto px = [&](double x) { return L + (fx(x) - x0) / (x1 - x0) * (W - L - R); };
  auto py = [&](double y) { return H - B - (y - y0) / (y1 - y0) * (H - T - B); };
  std::string s = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" "
      "fill=\"white\"/>\n<text x=\"%.0f\" y=\"22\" font-size=\"15\" "
      "text-anchor=\"middle\">%s</text>\n",
      W, H, (W - R + L) / 2, XmlEscape(title));
  // Axes and ticks.
  absl::StrAppendFormat(
      &s,
      "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n"
      "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n",
      L, H - B, W - R, H - B, L, T, L, H - B);
  for (double v : Ticks(x0, x1, 6)) {
    double xp = L + (v - x0) / (x1 - x0) * (W - L - R);
    std::string label = log_x ? Num(std::pow(10, v)) : Num(v);
    absl::StrAppendFormat(&s,
                          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                          "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
                          xp, T, xp, H - B, xp, H - B + 16, label);
  }
  for (double v : Ticks(y0, y1, 5)) {
    double yp = py(v);
    absl::StrAppendFormat(&s,
                          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                          "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
                          L, yp, W - R, yp, L - 6, yp + 4, Num(v));
  }
  absl::StrAppendFormat(&s,
                        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n"
                        "<text x=\"16\" y=\"%.1f\" text-anchor=\"middle\" "
                        "transform=\"rotate(-90 16 %.1f)\">%s</text>\n",
                        (L + W - R) / 2, H - 12, XmlEscape(x_label), (T + H - B) / 2,
                        (T + H - B) / 2, XmlEscape(y_label));
  for (size_t i = 0; i < series.size(); ++i) {
    const char* color = kColors[i % 8];
    std::string pts;
    for (auto [x, y] : series[i].points) {
      if (log_x && x <= 0) continue;
      absl::StrAppendFormat(&pts, "%.1f,%.1f ", px(x), py(y));
    }
    absl::StrAppendFormat(&s,
                          "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" "
                          "points=\"%s\"/>\n",
                          color, pts);
    double ly = T + 10 + 18 * i;
    absl::StrAppendFormat(&s,
                          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                          "stroke-width=\"3\"/><text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
                          W - R + 10, ly, W - R + 30, ly, color, W - R + 35, ly + 4,
                          XmlEscape(series[i].name));
  }
  s += "</svg>\n";
  return s;
}

absl::Status WriteArtifacts(const ReplayReport& r, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return absl::InvalidArgumentError(
        absl::StrCat("--out: cannot create ", dir, ": ", ec.message()));
  std::vector<ChartSeries> util, cdf, lost, goodput;
  for (const PolicyResult& p : r.results) {
    ChartSeries u{p.policy, {}}, c{p.policy, {}}, l{p.policy, {}}, g{p.policy, {}};
    for (const Sample& x : p.series) {
      u.points.push_back(
          {x.t_s / 3600, x.capacity_gpus > 0 ? 100 * x.allocated_gpus / x.capacity_gpus : 0});
      l.points.push_back({x.t_s / 3600, x.cum_failure_lost_gpu_h});
      g.points.push_back({x.t_s / 3600, 100 * x.goodput});
    }
    for (size_t k = 0; k < p.jct_sorted.size(); ++k) {
      c.points.push_back({p.jct_sorted[k] / 3600, 100.0 * (k + 1) / p.jct_sorted.size()});
    }
    util.push_back(std::move(u));
    cdf.push_back(std::move(c));
    lost.push_back(std::move(l));
    goodput.push_back(std::move(g));
  }
  struct File {
    std::string name, body;
  };
  std::vector<File> files = {
      {"utilization.svg", SvgLineChart("GPU allocation over time", "time (hours)",
                                       "allocated GPUs (% of capacity)", util)},
      {"jct_cdf.svg", SvgLineChart("Job completion time CDF", "JCT (hours, log scale)",
                                   "jobs completed (%)", cdf, /*log_x=*/true)},
      {"goodput_lost.svg", SvgLineChart("Goodput lost to failures (cumulative)", "time (hours)",
                                        "GPU-hours lost (work + restart)", lost)},
      {"goodput.svg",
       SvgLineChart("Goodput per interval", "time (hours)", "useful / allocated (%)", goodput)},
      {"timeseries.csv", TimeSeriesCsv(r)},
      {"result.json", ToJson(r).dump(2) + "\n"},
  };
  for (const File& f : files) {
    std::string path = absl::StrCat(dir, "/", f.name);
    std::ofstream out(path, std::ios::binary);
    out << f.body;
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  }
  return absl::OkStatus();
}

}  // namespace tessera::sim::replay
