#include "model/resources.h"

#include "absl/strings/str_cat.h"

namespace tessera::model {

int64_t ScalarAmount(const ScalarResources& s, const std::string& name) {
  for (const auto& [n, v] : s) {
    if (n == name) return v;
  }
  return 0;
}

absl::Status ValidateRequest(const ResourceRequest& r, absl::string_view field) {
  auto bad = [&](absl::string_view sub, absl::string_view msg) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".", sub, ": ", msg));
  };
  if (r.gpus < 0) return bad("gpus", absl::StrCat("must be >= 0, got ", r.gpus));
  if (r.gpu_milli <= 0 || r.gpu_milli > kMilliPerGpu) {
    return bad("gpuMilli", absl::StrCat("must be in 1..1000, got ", r.gpu_milli));
  }
  if (r.gpu_milli < kMilliPerGpu && r.gpus != 1) {
    return bad("gpuMilli", absl::StrCat("a GPU fraction (", r.gpu_milli,
                                        ") needs gpus == 1, got gpus ", r.gpus));
  }
  if (r.gpu_memory_mib < 0) return bad("gpuMemoryMiB", "must be >= 0");
  if (r.cpu_milli < 0) return bad("cpuMilli", "must be >= 0");
  if (r.memory_mib < 0) return bad("memoryMiB", "must be >= 0");
  for (size_t i = 0; i < r.scalars.size(); ++i) {
    const auto& [name, amount] = r.scalars[i];
    if (name.empty() || amount <= 0) {
      return bad(absl::StrCat("scalars[", i, "]"), "needs a name and an amount > 0");
    }
    if (i > 0 && r.scalars[i - 1].first >= name) {
      return bad(absl::StrCat("scalars[", i, "]"), "must be sorted by name, each name once");
    }
  }
  if (r.gpus == 0 && r.cpu_milli == 0 && r.memory_mib == 0 && r.scalars.empty()) {
    return bad("gpus", "a member must request some resource (GPUs, CPU or memory)");
  }
  return absl::OkStatus();
}

}  // namespace tessera::model
