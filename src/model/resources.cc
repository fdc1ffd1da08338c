#include "model/resources.h"

#include "absl/strings/str_cat.h"

namespace tessera::model {

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
  if (r.gpus == 0 && r.cpu_milli == 0 && r.memory_mib == 0) {
    return bad("gpus", "a member must request some resource (GPUs, CPU or memory)");
  }
  return absl::OkStatus();
}

}  // namespace tessera::model
