#include "model/gpu_model_name.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"

namespace tessera::model {
namespace {

std::vector<std::string> Words(std::string_view s) {
  std::vector<std::string> out;
  for (absl::string_view w : absl::StrSplit(absl::string_view(s.data(), s.size()),
                                            absl::ByAnyChar(" -_"), absl::SkipEmpty())) {
    out.push_back(absl::AsciiStrToUpper(w));
  }
  return out;
}

}  // namespace

const std::vector<std::string>& GpuFamilies() {
  // Data-center GPUs NVML names by these words (nvidia-smi --query-gpu=name).
  static const std::vector<std::string>* families = new std::vector<std::string>{
      "B200", "B100", "GB200", "GH200", "H200", "H100", "H800", "H20",  "A100",
      "A800", "A40",  "A30",   "A16",   "A10",  "A10G", "A2",   "L40S", "L40",
      "L20",  "L4",   "V100",  "T4",    "P100", "P40",  "P4",   "RTX"};
  return *families;
}

bool GpuModelMatches(std::string_view requested, std::string_view node_model) {
  if (requested == node_model) return true;
  const std::vector<std::string> want = Words(requested);
  if (want.empty()) return false;
  const std::vector<std::string>& families = GpuFamilies();
  if (std::find(families.begin(), families.end(), want.front()) == families.end()) return false;
  const std::vector<std::string> have = Words(node_model);
  for (const std::string& w : want) {
    if (std::find(have.begin(), have.end(), w) == have.end()) return false;
  }
  return true;
}

bool AnyGpuModelMatches(const std::vector<std::string>& requested, std::string_view node_model) {
  if (requested.empty()) return true;
  for (const std::string& r : requested) {
    if (GpuModelMatches(r, node_model)) return true;
  }
  return false;
}

}  // namespace tessera::model
