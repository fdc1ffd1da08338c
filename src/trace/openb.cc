#include "trace/openb.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "model/node_topology.h"
#include "trace/csv.h"

namespace tessera::trace {
namespace {

constexpr const char* kNodeHeader = "sn,cpu_milli,memory_mib,gpu,model";
constexpr const char* kPodHeader5 = "name,cpu_milli,memory_mib,num_gpu,gpu_milli";
constexpr const char* kPodHeader11 =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time";

// The loaders below name fields through the shared CSV helpers.
absl::Status Bad(absl::string_view file, size_t line, size_t col, const CsvColumns& names,
                 absl::string_view msg) {
  return CsvFieldError(file, line, col, names, msg);
}

absl::Status Int(absl::string_view file, size_t line, size_t col, const CsvColumns& names,
                 absl::string_view v, int64_t lo, int64_t hi, int64_t* out) {
  return CsvInt(file, line, col, names, v, lo, hi, out);
}

constexpr int64_t kMax = int64_t{1} << 40;

}  // namespace

absl::StatusOr<std::vector<OpenbNode>> ParseOpenbNodes(absl::string_view text,
                                                       absl::string_view file) {
  std::vector<OpenbNode> out;
  size_t columns = 0;
  absl::Status s =
      ForEachCsvRow(text, file, {kNodeHeader}, &columns,
                    [&](size_t line, const std::vector<absl::string_view>& f,
                        const std::vector<std::string>& names) -> absl::Status {
                      OpenbNode n;
                      n.sn = std::string(f[0]);
                      if (n.sn.empty()) return Bad(file, line, 0, names, "must not be empty");
                      int64_t gpu = 0;
                      absl::Status st = Int(file, line, 1, names, f[1], 0, kMax, &n.cpu_milli);
                      if (st.ok()) st = Int(file, line, 2, names, f[2], 0, kMax, &n.memory_mib);
                      if (st.ok())
                        st = Int(file, line, 3, names, f[3], 0, model::kMaxGpusPerNode, &gpu);
                      if (!st.ok()) return st;
                      n.gpu = static_cast<int32_t>(gpu);
                      n.model = std::string(f[4]);
                      if (n.gpu > 0 && n.model.empty()) {
                        return Bad(file, line, 4, names, "a node with GPUs needs a GPU model");
                      }
                      if (n.gpu == 0 && !n.model.empty()) {
                        return Bad(file, line, 4, names, "a node without GPUs has no GPU model");
                      }
                      out.push_back(std::move(n));
                      return absl::OkStatus();
                    });
  if (!s.ok()) return s;
  return out;
}

absl::StatusOr<std::vector<OpenbPod>> ParseOpenbPods(absl::string_view text,
                                                     absl::string_view file) {
  std::vector<OpenbPod> out;
  size_t columns = 0;
  absl::Status s = ForEachCsvRow(
      text, file, {kPodHeader11, kPodHeader5}, &columns,
      [&](size_t line, const std::vector<absl::string_view>& f,
          const std::vector<std::string>& names) -> absl::Status {
        OpenbPod p;
        p.name = std::string(f[0]);
        if (p.name.empty()) return Bad(file, line, 0, names, "must not be empty");
        int64_t num_gpu = 0, milli = 0;
        absl::Status st = Int(file, line, 1, names, f[1], 0, kMax, &p.cpu_milli);
        if (st.ok()) st = Int(file, line, 2, names, f[2], 0, kMax, &p.memory_mib);
        if (st.ok()) st = Int(file, line, 3, names, f[3], 0, model::kMaxGpusPerNode, &num_gpu);
        if (st.ok()) st = Int(file, line, 4, names, f[4], 0, model::kMilliPerGpu, &milli);
        if (!st.ok()) return st;
        p.num_gpu = static_cast<int32_t>(num_gpu);
        p.gpu_milli = static_cast<int32_t>(milli);
        if (p.num_gpu > 0 && p.gpu_milli == 0) {
          return Bad(file, line, 4, names, "a pod with GPUs needs gpu_milli in 1..1000");
        }
        if (p.num_gpu > 1 && p.gpu_milli != model::kMilliPerGpu) {
          return Bad(
              file, line, 4, names,
              absl::StrCat("a GPU share (", p.gpu_milli, ") needs num_gpu == 1, got ", p.num_gpu));
        }
        if (columns == 11) {
          p.gpu_spec = std::string(f[5]);
          for (absl::string_view m : absl::StrSplit(f[5], '|')) {
            if (!p.gpu_spec.empty() && m.empty()) {
              return Bad(file, line, 5, names, "empty GPU model in the list");
            }
          }
          p.qos = std::string(f[6]);
          p.pod_phase = std::string(f[7]);
          if (st.ok()) st = Int(file, line, 8, names, f[8], 0, kMax, &p.creation_time);
          if (st.ok() && !f[9].empty()) {
            st = Int(file, line, 9, names, f[9], 0, kMax, &p.deletion_time);
          }
          if (st.ok() && !f[10].empty()) {
            st = Int(file, line, 10, names, f[10], 0, kMax, &p.scheduled_time);
          }
          if (!st.ok()) return st;
        }
        out.push_back(std::move(p));
        return absl::OkStatus();
      });
  if (!s.ok()) return s;
  return out;
}

absl::StatusOr<std::vector<OpenbNode>> LoadOpenbNodes(const std::string& path) {
  auto text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  return ParseOpenbNodes(*text, path);
}

absl::StatusOr<std::vector<OpenbPod>> LoadOpenbPods(const std::string& path) {
  auto text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  return ParseOpenbPods(*text, path);
}

std::string FormatOpenbNodes(const std::vector<OpenbNode>& nodes) {
  std::string out = absl::StrCat(kNodeHeader, "\n");
  for (const OpenbNode& n : nodes) {
    absl::StrAppend(&out, n.sn, ",", n.cpu_milli, ",", n.memory_mib, ",", n.gpu, ",", n.model,
                    "\n");
  }
  return out;
}

std::string FormatOpenbPods(const std::vector<OpenbPod>& pods, bool five_columns) {
  std::string out = absl::StrCat(five_columns ? kPodHeader5 : kPodHeader11, "\n");
  for (const OpenbPod& p : pods) {
    absl::StrAppend(&out, p.name, ",", p.cpu_milli, ",", p.memory_mib, ",", p.num_gpu, ",",
                    p.gpu_milli);
    if (!five_columns) {
      absl::StrAppend(&out, ",", p.gpu_spec, ",", p.qos, ",", p.pod_phase, ",", p.creation_time,
                      ",", p.deletion_time, ",", p.scheduled_time);
    }
    out += "\n";
  }
  return out;
}

std::vector<std::string> SplitGpuSpec(absl::string_view spec) {
  std::vector<std::string> out;
  if (spec.empty()) return out;
  for (absl::string_view m : absl::StrSplit(spec, '|')) {
    if (m.empty()) continue;
    if (std::find(out.begin(), out.end(), m) == out.end()) out.emplace_back(m);
  }
  return out;
}

model::Node ToNode(const OpenbNode& n) {
  model::Node node;
  node.name = n.sn;
  node.cpu_milli = n.cpu_milli;
  node.memory_mib = n.memory_mib;
  for (int i = 0; i < n.gpu; ++i) {
    model::Gpu g;
    g.index = i;
    g.uuid = absl::StrCat("GPU-", n.sn, "-", i);
    g.model = n.model;
    node.gpus.push_back(std::move(g));
  }
  node.topology = model::NodeTopology::NvSwitch(n.gpu);
  return node;
}

model::Job ToJob(const OpenbPod& p, std::string name) {
  model::Job j;
  j.name = std::move(name);
  model::MemberGroup g;
  g.name = "pod";
  g.count = 1;
  g.resources.gpus = p.num_gpu;
  g.resources.gpu_milli = p.num_gpu > 0 ? p.gpu_milli : model::kMilliPerGpu;
  g.resources.cpu_milli = p.cpu_milli;
  g.resources.memory_mib = p.memory_mib;
  j.groups.push_back(std::move(g));
  j.gpu_models = SplitGpuSpec(p.gpu_spec);
  return j;
}

}  // namespace tessera::trace
