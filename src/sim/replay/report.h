// Replay output: one JSON object (a section per policy), a text summary,
// CSV time series and SVG charts written here (no plotting library).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "sim/replay/simulator.h"
#include "sim/replay/workload.h"

namespace tessera::sim::replay {

// How the jobs' checkpoint intervals were chosen (for the header and JSON).
struct CadenceInfo {
  std::string name = "fixed";  // "fixed" (the workload's or --checkpoint) or "young-daly"
  double gpu_mtbf_s = 0;       // young-daly: the per-GPU MTBF it used
  int64_t jobs_chosen = 0;     // young-daly: jobs whose interval it chose
};

struct ReplayReport {
  const Workload* workload = nullptr;
  const SimOptions* options = nullptr;
  CadenceInfo cadence;
  std::vector<PolicyResult> results;
  double total_wall_s = 0;
};

nlohmann::json ToJson(const ReplayReport& r);
std::string TextSummary(const ReplayReport& r);
// One CSV, a row per policy and sample.
std::string TimeSeriesCsv(const ReplayReport& r);

// A line chart; each series is (name, points). log_x plots log10(x).
struct ChartSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;
};
std::string SvgLineChart(const std::string& title, const std::string& x_label,
                         const std::string& y_label, const std::vector<ChartSeries>& series,
                         bool log_x = false);

// utilization.svg, jct_cdf.svg, goodput_lost.svg and timeseries.csv in `dir`
// (created if missing).
absl::Status WriteArtifacts(const ReplayReport& r, const std::string& dir);

}  // namespace tessera::sim::replay
