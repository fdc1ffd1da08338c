#include "sim/replay/trace_workload.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "model/resources.h"
#include "trace/csv.h"

namespace tessera::sim::replay {
namespace {

int32_t QueueId(const std::string& name, absl::flat_hash_map<std::string, int32_t>* ids,
                Workload* w) {
  auto [it, inserted] = ids->try_emplace(name, static_cast<int32_t>(w->queues.size()));
  if (inserted) w->queues.push_back(name);
  return it->second;
}

// The loaders accept five-column pod lists (no times); time mode needs them.
absl::Status CheckOpenbHasTimes(absl::string_view text, absl::string_view file) {
  absl::string_view first = text.substr(0, text.find('\n'));
  if (absl::StartsWith(first, "name,cpu_milli,memory_mib,num_gpu,gpu_milli") &&
      !absl::StrContains(first, "creation_time")) {
    return absl::InvalidArgumentError(
        absl::StrCat(file,
                     ":1: no creation_time column; this pod list has no times (a multigpu* "
                     "file?) and can only be used for static packing (sim pack)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Workload> WorkloadFromPhilly(const std::vector<trace::PhillyJob>& jobs) {
  if (jobs.empty()) return absl::InvalidArgumentError("philly trace: no jobs");
  Workload w;
  w.source = "philly";
  absl::flat_hash_map<std::string, int32_t> queue_ids;
  int64_t t0 = jobs.front().timestamp;
  for (const trace::PhillyJob& p : jobs) t0 = std::min(t0, p.timestamp);
  w.jobs.reserve(jobs.size());
  for (const trace::PhillyJob& p : jobs) {
    SimJob j;
    j.submit_s = static_cast<double>(p.timestamp - t0);
    j.duration_s = p.duration_s;
    j.gpus = p.num_gpus;
    j.queue = QueueId(p.cluster, &queue_ids, &w);
    w.jobs.push_back(j);
  }
  SortBySubmit(&w);
  return w;
}

absl::StatusOr<Workload> WorkloadFromOpenbPods(const std::vector<trace::OpenbPod>& pods,
                                               absl::string_view file) {
  Workload w;
  w.source = "openb";
  absl::flat_hash_map<std::string, int32_t> queue_ids;
  for (const trace::OpenbPod& p : pods) {
    if (p.num_gpu == 0) continue;
    // The loader reads an empty scheduled_time as 0: the pod never ran, so
    // it would have held its GPUs from creation.
    const int64_t start = p.scheduled_time > 0 ? p.scheduled_time : p.creation_time;
    if (p.deletion_time < start) {
      return absl::InvalidArgumentError(absl::StrCat(
          file, ": pod ", p.name, ": deletion_time ", p.deletion_time,
          " is before the pod started (", start, "; an empty deletion_time reads as 0)"));
    }
    SimJob j;
    j.submit_s = static_cast<double>(p.creation_time);
    j.duration_s = static_cast<double>(p.deletion_time - start);
    j.gpus = p.num_gpu;
    j.gpu_milli = p.gpu_milli;
    j.queue = QueueId(p.qos.empty() ? "none" : p.qos, &queue_ids, &w);
    w.jobs.push_back(j);
  }
  if (w.jobs.empty()) return absl::InvalidArgumentError(absl::StrCat(file, ": no GPU pods"));
  SortBySubmit(&w);
  return w;
}

absl::StatusOr<Workload> ParsePhillyCsv(absl::string_view text, absl::string_view file) {
  auto jobs = trace::ParsePhillyJobs(text, file);
  if (!jobs.ok()) return jobs.status();
  return WorkloadFromPhilly(*jobs);
}

absl::StatusOr<Workload> ParseOpenbPodCsv(absl::string_view text, absl::string_view file) {
  if (auto s = CheckOpenbHasTimes(text, file); !s.ok()) return s;
  auto pods = trace::ParseOpenbPods(text, file);
  if (!pods.ok()) return pods.status();
  return WorkloadFromOpenbPods(*pods, file);
}

absl::StatusOr<Workload> ReadPhillyTrace(const std::string& path) {
  auto text = trace::ReadTextFile(path);
  if (!text.ok()) return text.status();
  auto w = ParsePhillyCsv(*text, path);
  if (w.ok()) w->source = absl::StrCat("philly:", path);
  return w;
}

absl::StatusOr<Workload> ReadOpenbPodList(const std::string& path) {
  auto text = trace::ReadTextFile(path);
  if (!text.ok()) return text.status();
  auto w = ParseOpenbPodCsv(*text, path);
  if (w.ok()) w->source = absl::StrCat("openb:", path);
  return w;
}

}  // namespace tessera::sim::replay
