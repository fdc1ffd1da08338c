// Summaries and renderings of `tessera sim pack` runs: a text table, one
// JSON object keyed by policy, a per-run CSV, and an SVG chart of
// allocation vs arrival (the FGD paper's Fig. 9a). Pure functions of the
// results; the caller writes files.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/pack/pack_sim.h"

namespace tessera::sim::pack {

struct Stat {
  double mean = 0, min = 0, max = 0;
};

// Aggregate over seeds of one (trace, policy).
struct PackSummary {
  std::string trace, policy;
  int runs = 0;
  Stat alloc100, alloc130, unallocated_gpus, fragmented_gpus, failed;
  Stat held, held_failed;          // look-ahead: pods held, and of them never placed
  IdleGpus idle;                   // mean over runs
  std::vector<double> mean_curve;  // mean alloc_pct[k], k = 0..130
  double wall_s = 0;               // sum over runs
  double pods_per_s = 0;           // pods scheduled / wall_s
  double published130 = -1;        // the authors' mean at 130%, when known
  double published100 = -1;
};

std::vector<PackSummary> Summarize(const std::vector<PackRunResult>& runs);

// The authors' analysis_allo_discrete.csv: (trace, policy) -> mean at
// 100% and 130% arrived. Policies map to our canonical names.
absl::StatusOr<std::map<std::pair<std::string, std::string>, std::pair<double, double>>>
LoadPublished(const std::string& path);
void AttachPublished(
    const std::map<std::pair<std::string, std::string>, std::pair<double, double>>& pub,
    std::vector<PackSummary>* sums);

std::string FormatTable(const std::vector<PackSummary>& sums, double total_wall_s);
std::string FormatJson(const std::vector<PackSummary>& sums, double total_wall_s);
std::string FormatRunsCsv(const std::vector<PackRunResult>& runs);
std::string FormatSvg(const std::vector<PackSummary>& sums);

}  // namespace tessera::sim::pack
