#include "sim/replay/trace/openb_reader.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "sim/replay/trace/philly_reader.h"

namespace tessera::sim::replay {

absl::StatusOr<Workload> ParseOpenbPodCsv(absl::string_view text) {
  Workload w;
  w.source = "openb";
  absl::flat_hash_map<std::string, int32_t> queue_ids;
  int line_no = 0;
  bool header = true;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripTrailingAsciiWhitespace(line);
    if (line.empty()) continue;
    if (header) {
      header = false;
      if (!absl::StartsWith(line, "name,cpu_milli,memory_mib,num_gpu,gpu_milli")) {
        return absl::InvalidArgumentError("line 1: expected the openb pod list header");
      }
      if (!absl::StrContains(line, "creation_time")) {
        return absl::InvalidArgumentError(
            "line 1: no creation_time column; this pod list has no times (a multigpu* file?) "
            "and can only be used for static packing");
      }
      continue;
    }
    std::vector<absl::string_view> f = absl::StrSplit(line, ',');
    if (f.size() < 11) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_no, ": expected 11 columns, got ", f.size()));
    }
    int32_t num_gpu;
    if (!absl::SimpleAtoi(f[3], &num_gpu) || num_gpu < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_no, ": num_gpu: \"", f[3], "\" is not an integer >= 0"));
    }
    if (num_gpu == 0) continue;
    double created, deleted, scheduled = -1;
    if (!absl::SimpleAtod(f[8], &created)) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_no, ": creation_time: \"", f[8], "\" is not a number"));
    }
    if (!absl::SimpleAtod(f[9], &deleted)) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_no, ": deletion_time: \"", f[9], "\" is not a number"));
    }
    if (!f[10].empty() && !absl::SimpleAtod(f[10], &scheduled)) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_no, ": scheduled_time: \"", f[10], "\" is not a number"));
    }
    double start = scheduled >= 0 ? scheduled : created;
    if (deleted < start) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_no, ": deletion_time: before the pod started"));
    }
    SimJob j;
    j.submit_s = created;
    j.duration_s = deleted - start;
    j.gpus = num_gpu;
    std::string qos(f[6].empty() ? absl::string_view("none") : f[6]);
    auto [it, inserted] = queue_ids.try_emplace(qos, static_cast<int32_t>(w.queues.size()));
    if (inserted) w.queues.push_back(qos);
    j.queue = it->second;
    w.jobs.push_back(j);
  }
  if (w.jobs.empty()) return absl::InvalidArgumentError("openb pod list: no GPU pods");
  SortBySubmit(&w);
  return w;
}

absl::StatusOr<Workload> ReadOpenbPodList(const std::string& path) {
  auto text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  auto w = ParseOpenbPodCsv(*text);
  if (!w.ok()) {
    return absl::Status(w.status().code(), absl::StrCat(path, ": ", w.status().message()));
  }
  w->source = absl::StrCat("openb:", path);
  return w;
}

}  // namespace tessera::sim::replay
