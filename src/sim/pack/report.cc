#include "sim/pack/report.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"
#include "sched/pack/policies.h"

namespace tessera::sim::pack {
namespace {

Stat Of(const std::vector<double>& v) {
  Stat s;
  if (v.empty()) return s;
  s.min = *std::min_element(v.begin(), v.end());
  s.max = *std::max_element(v.begin(), v.end());
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  return s;
}

}  // namespace

std::vector<PackSummary> Summarize(const std::vector<PackRunResult>& runs) {
  std::vector<PackSummary> out;
  std::map<std::pair<std::string, std::string>, std::vector<const PackRunResult*>> groups;
  std::vector<std::pair<std::string, std::string>> order;
  for (const PackRunResult& r : runs) {
    auto key = std::make_pair(r.trace, r.policy);
    if (!groups.contains(key)) order.push_back(key);
    groups[key].push_back(&r);
  }
  for (const auto& key : order) {
    const auto& g = groups[key];
    PackSummary s;
    s.trace = key.first;
    s.policy = key.second;
    s.runs = static_cast<int>(g.size());
    std::vector<double> a100, a130, un, fr, fa, he, hf;
    s.mean_curve.assign(kMaxArrivalPct + 1, 0);
    int64_t pods = 0;
    for (const PackRunResult* r : g) {
      a100.push_back(r->alloc_pct[100]);
      a130.push_back(r->alloc_pct[kMaxArrivalPct]);
      un.push_back(r->unallocated_gpus);
      fr.push_back(r->fragmented_gpus);
      fa.push_back(static_cast<double>(r->failed));
      he.push_back(static_cast<double>(r->held));
      hf.push_back(static_cast<double>(r->held_failed));
      for (int k = 0; k <= kMaxArrivalPct; ++k) s.mean_curve[k] += r->alloc_pct[k] / g.size();
      s.wall_s += r->wall_s;
      const double w = 1.0 / static_cast<double>(g.size());
      s.idle.fraction += r->idle.fraction * w;
      s.idle.cpu += r->idle.cpu * w;
      s.idle.memory += r->idle.memory * w;
      s.idle.model += r->idle.model * w;
      s.idle.partial += r->idle.partial * w;
      s.idle.whole += r->idle.whole * w;
      pods += r->pods;
    }
    s.alloc100 = Of(a100);
    s.alloc130 = Of(a130);
    s.unallocated_gpus = Of(un);
    s.fragmented_gpus = Of(fr);
    s.failed = Of(fa);
    s.held = Of(he);
    s.held_failed = Of(hf);
    s.pods_per_s = s.wall_s > 0 ? static_cast<double>(pods) / s.wall_s : 0;
    out.push_back(std::move(s));
  }
  return out;
}

absl::StatusOr<std::map<std::pair<std::string, std::string>, std::pair<double, double>>>
LoadPublished(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("--expected: cannot open ", path));
  std::string line;
  std::getline(in, line);
  std::vector<std::string> head = absl::StrSplit(absl::StripTrailingAsciiWhitespace(line), ',');
  int c100 = -1, c130 = -1;
  for (size_t i = 0; i < head.size(); ++i) {
    if (head[i] == "100") c100 = static_cast<int>(i);
    if (head[i] == "130") c130 = static_cast<int>(i);
  }
  if (head.size() < 2 || head[0] != "workload" || c100 < 0 || c130 < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ":1: expected a header workload,sc_policy,...,100,...,130"));
  }
  std::map<std::pair<std::string, std::string>, std::vector<std::pair<double, double>>> acc;
  int lineno = 1;
  while (std::getline(in, line)) {
    ++lineno;
    std::vector<std::string> f = absl::StrSplit(absl::StripTrailingAsciiWhitespace(line), ',');
    if (f.size() < head.size()) continue;
    std::string trace = f[0];
    if (absl::StartsWith(trace, "openb_pod_list_")) trace = trace.substr(15);
    std::string pol = f[1];
    if (auto dash = pol.find('-'); dash != std::string::npos) pol = pol.substr(dash + 1);
    auto canon = sched::pack::CanonicalPolicy(pol);
    if (!canon.ok()) continue;
    double v100, v130;
    if (!absl::SimpleAtod(f[c100], &v100) || !absl::SimpleAtod(f[c130], &v130)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", lineno, ": bad number"));
    }
    acc[{trace, *canon}].push_back({v100, v130});
  }
  std::map<std::pair<std::string, std::string>, std::pair<double, double>> out;
  for (const auto& [k, v] : acc) {
    double a = 0, b = 0;
    for (const auto& [x, y] : v) a += x, b += y;
    out[k] = {a / v.size(), b / v.size()};
  }
  return out;
}

void AttachPublished(
    const std::map<std::pair<std::string, std::string>, std::pair<double, double>>& pub,
    std::vector<PackSummary>* sums) {
  for (PackSummary& s : *sums) {
    auto it = pub.find({s.trace, s.policy});
    if (it == pub.end()) continue;
    s.published100 = it->second.first;
    s.published130 = it->second.second;
  }
}

std::string FormatTable(const std::vector<PackSummary>& sums, double total_wall_s) {
  std::string out =
      absl::StrFormat("%-12s %-15s %5s %22s %22s %8s %8s %9s %8s %8s %9s\n", "trace", "policy",
                      "runs", "alloc%@100 mean[min,max]", "alloc%@130 mean[min,max]", "pub@130",
                      "delta", "unalloc", "fragGPU", "failed", "pods/s");
  for (const PackSummary& s : sums) {
    std::string pub = s.published130 >= 0 ? absl::StrFormat("%.2f", s.published130) : "-";
    std::string delta =
        s.published130 >= 0 ? absl::StrFormat("%+.2f", s.alloc130.mean - s.published130) : "-";
    absl::StrAppendFormat(&out,
                          "%-12s %-15s %5d %7.2f [%5.2f,%5.2f] %7.2f [%5.2f,%5.2f] %8s %8s "
                          "%9.1f %8.1f %8.1f %9.0f\n",
                          s.trace, s.policy, s.runs, s.alloc100.mean, s.alloc100.min,
                          s.alloc100.max, s.alloc130.mean, s.alloc130.min, s.alloc130.max, pub,
                          delta, s.unallocated_gpus.mean, s.fragmented_gpus.mean, s.failed.mean,
                          s.pods_per_s);
  }
  bool any_held = false;
  for (const PackSummary& s : sums) any_held |= s.held.max > 0;
  if (any_held) {
    absl::StrAppend(&out,
                    "\nlook-ahead (mean over seeds): pods held back for arriving whole-GPU work, "
                    "and of them the ones that never got a GPU (counted in failed above)\n");
    absl::StrAppendFormat(&out, "%-12s %-15s %9s %12s\n", "trace", "policy", "held",
                          "never placed");
    for (const PackSummary& s : sums) {
      if (s.held.max <= 0) continue;
      absl::StrAppendFormat(&out, "%-12s %-15s %9.1f %12.1f\n", s.trace, s.policy, s.held.mean,
                            s.held_failed.mean);
    }
  }
  absl::StrAppend(&out,
                  "\nidle GPUs at the end (mean), by cause: fraction = shared-GPU leftovers no "
                  "pod fits; cpu/memory = the node lacks it for every pod that fits the GPU; "
                  "model = gpu_spec excludes it; partial/whole = a pod would fit a partly "
                  "used/free GPU but none came\n");
  absl::StrAppendFormat(&out, "%-12s %-15s %9s %9s %9s %9s %9s %9s %9s\n", "trace", "policy",
                        "idle", "fraction", "cpu", "memory", "model", "partial", "whole");
  for (const PackSummary& s : sums) {
    absl::StrAppendFormat(&out, "%-12s %-15s %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f\n", s.trace,
                          s.policy, s.idle.total(), s.idle.fraction, s.idle.cpu, s.idle.memory,
                          s.idle.model, s.idle.partial, s.idle.whole);
  }
  absl::StrAppendFormat(&out, "total wall time: %.2f s\n", total_wall_s);
  return out;
}

std::string FormatJson(const std::vector<PackSummary>& sums, double total_wall_s) {
  std::set<std::string> traces;
  for (const PackSummary& s : sums) traces.insert(s.trace);
  nlohmann::json j = nlohmann::json::object();
  for (const PackSummary& s : sums) {
    auto stat = [](const Stat& x) {
      return nlohmann::json{{"mean", x.mean}, {"min", x.min}, {"max", x.max}};
    };
    nlohmann::json o = {{"runs", s.runs},
                        {"alloc_pct_at_100", stat(s.alloc100)},
                        {"alloc_pct_at_130", stat(s.alloc130)},
                        {"unallocated_gpus", stat(s.unallocated_gpus)},
                        {"fragmented_gpus", stat(s.fragmented_gpus)},
                        {"failed_pods", stat(s.failed)},
                        {"held_pods", stat(s.held)},
                        {"held_failed_pods", stat(s.held_failed)},
                        {"idle_gpus_by_cause",
                         {{"fraction", s.idle.fraction},
                          {"cpu", s.idle.cpu},
                          {"memory", s.idle.memory},
                          {"model", s.idle.model},
                          {"partial", s.idle.partial},
                          {"whole", s.idle.whole}}},
                        {"wall_s", s.wall_s},
                        {"pods_per_s", s.pods_per_s}};
    if (s.published130 >= 0) {
      o["published_alloc_pct_at_100"] = s.published100;
      o["published_alloc_pct_at_130"] = s.published130;
    }
    if (traces.size() == 1) {
      j[s.policy] = o;
    } else {
      j[s.policy][s.trace] = o;
    }
  }
  j["total_wall_s"] = total_wall_s;
  return j.dump(2) + "\n";
}

std::string FormatRunsCsv(const std::vector<PackRunResult>& runs) {
  std::string out =
      "trace,policy,seed,pods,failed,held,held_failed,unallocated_gpus,fragmented_gpus,wall_s";
  for (int k = 0; k <= kMaxArrivalPct; ++k) absl::StrAppend(&out, ",", k);
  out += "\n";
  for (const PackRunResult& r : runs) {
    absl::StrAppendFormat(&out, "%s,%s,%d,%d,%d,%d,%d,%.3f,%.3f,%.4f", r.trace, r.policy, r.seed,
                          r.pods, r.failed, r.held, r.held_failed, r.unallocated_gpus,
                          r.fragmented_gpus, r.wall_s);
    for (int k = 0; k <= kMaxArrivalPct; ++k) absl::StrAppendFormat(&out, ",%.3f", r.alloc_pct[k]);
    out += "\n";
  }
  return out;
}

std::string FormatSvg(const std::vector<PackSummary>& sums) {
  std::vector<std::string> traces;
  for (const PackSummary& s : sums) {
    if (std::find(traces.begin(), traces.end(), s.trace) == traces.end()) traces.push_back(s.trace);
  }
  const char* colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                          "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};
  const int W = 720, H = 420, L = 60, R = 170, T = 30, B = 50;
  const int pw = W - L - R, ph = H - T - B;
  std::string out = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" "
      "fill=\"white\"/>\n",
      W, H * static_cast<int>(traces.size()));
  // y from 0 to 100% allocation; x from 0 to 130% arrived.
  for (size_t t = 0; t < traces.size(); ++t) {
    const int oy = static_cast<int>(t) * H;
    auto X = [&](double k) { return L + k / kMaxArrivalPct * pw; };
    auto Y = [&](double v) { return oy + T + ph - v / 100.0 * ph; };
    absl::StrAppendFormat(&out,
                          "<text x=\"%d\" y=\"%d\" font-size=\"14\">GPU allocation vs arrival: "
                          "%s</text>\n",
                          L, oy + 18, traces[t]);
    absl::StrAppendFormat(&out,
                          "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
                          "stroke=\"black\"/>\n",
                          L, oy + T, pw, ph);
    for (int k = 0; k <= kMaxArrivalPct; k += 10) {
      absl::StrAppendFormat(&out,
                            "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>"
                            "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%d</text>\n",
                            X(k), oy + T, X(k), oy + T + ph, X(k), oy + T + ph + 16, k);
    }
    for (int v = 0; v <= 100; v += 20) {
      absl::StrAppendFormat(&out,
                            "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                            "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%d</text>\n",
                            L, Y(v), L + pw, Y(v), L - 6, Y(v) + 4, v);
    }
    absl::StrAppendFormat(&out,
                          "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">arrived GPU request, "
                          "%% of capacity</text>\n<text x=\"14\" y=\"%d\" transform=\"rotate(-90 "
                          "14 %d)\" text-anchor=\"middle\">allocated GPUs, %%</text>\n",
                          L + pw / 2, oy + H - 12, oy + T + ph / 2, oy + T + ph / 2);
    int i = 0;
    for (const PackSummary& s : sums) {
      if (s.trace != traces[t]) continue;
      std::string pts;
      for (int k = 0; k <= kMaxArrivalPct; ++k) {
        absl::StrAppendFormat(&pts, "%.1f,%.1f ", X(k), Y(s.mean_curve[k]));
      }
      const char* c = colors[i % 8];
      absl::StrAppendFormat(&out,
                            "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" "
                            "points=\"%s\"/>\n",
                            c, pts);
      absl::StrAppendFormat(&out,
                            "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" "
                            "stroke-width=\"3\"/><text x=\"%d\" y=\"%d\">%s %.2f%%</text>\n",
                            L + pw + 10, oy + T + 10 + 18 * i, L + pw + 30, oy + T + 10 + 18 * i, c,
                            L + pw + 36, oy + T + 14 + 18 * i, s.policy, s.alloc130.mean);
      ++i;
    }
  }
  out += "</svg>\n";
  return out;
}

}  // namespace tessera::sim::pack
