// Loader for the Alibaba cluster-trace-gpu-v2023 ("openb") CSVs used by the
// FGD paper: the node list (sn,cpu_milli,memory_mib,gpu,model) and the pod
// lists (name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,
// creation_time,deletion_time,scheduled_time; the multigpu* files carry only
// the first five columns).
//
// Parsing is strict: a malformed row fails the whole file with
// "file:line: column N (name): what is wrong", and nothing is returned.
// Rows map to model values: a node to a model::Node (its GPUs of one model,
// modelled as one symmetric NVSwitch domain since the trace has no
// topology), a pod to a one-member model::Job (gpu_spec "A|B" becomes the
// job's allowed GPU models). Plain functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/job.h"
#include "model/node.h"

namespace tessera::trace {

struct OpenbNode {
  std::string sn;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int32_t gpu = 0;
  std::string model;  // empty for CPU-only nodes
  friend bool operator==(const OpenbNode&, const OpenbNode&) = default;
};

struct OpenbPod {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int32_t num_gpu = 0;
  int32_t gpu_milli = 0;  // per GPU; < 1000 only with num_gpu == 1
  // The remaining columns are absent in five-column files.
  std::string gpu_spec;  // "V100M16|V100M32"; empty: any model
  std::string qos;
  std::string pod_phase;
  int64_t creation_time = 0;
  int64_t deletion_time = 0;
  int64_t scheduled_time = 0;
  friend bool operator==(const OpenbPod&, const OpenbPod&) = default;
};

// `file` names the source in error messages.
absl::StatusOr<std::vector<OpenbNode>> ParseOpenbNodes(absl::string_view text,
                                                       absl::string_view file);
absl::StatusOr<std::vector<OpenbPod>> ParseOpenbPods(absl::string_view text,
                                                     absl::string_view file);
absl::StatusOr<std::vector<OpenbNode>> LoadOpenbNodes(const std::string& path);
absl::StatusOr<std::vector<OpenbPod>> LoadOpenbPods(const std::string& path);

// CSV text in the trace's format (full eleven-column pod header unless
// `five_columns`), parseable by the functions above.
std::string FormatOpenbNodes(const std::vector<OpenbNode>& nodes);
std::string FormatOpenbPods(const std::vector<OpenbPod>& pods, bool five_columns = false);

// GPU models named by a gpu_spec, deduplicated, in order of appearance.
std::vector<std::string> SplitGpuSpec(absl::string_view spec);

model::Node ToNode(const OpenbNode& n);
// A one-member job named `name` (the caller makes copies unique).
model::Job ToJob(const OpenbPod& p, std::string name);

}  // namespace tessera::trace
