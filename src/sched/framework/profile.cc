#include "sched/framework/profile.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace tessera::sched {

Profile Profile::Default() {
  Profile p;
  p.plugins = {
      {.name = "resource-fit"}, {.name = "node-selector"},         {.name = "taint-toleration"},
      {.name = "gang"},         {.name = "topology", .weight = 2}, {.name = "pack-spread"},
  };
  return p;
}

absl::Status ValidateProfile(const Profile& p, const PluginRegistry& registry) {
  if (p.name.empty()) return absl::InvalidArgumentError("profile.name: must not be empty");
  if (!registry.Contains(p.queue_sort)) {
    return absl::InvalidArgumentError(
        absl::StrCat("profile.queueSort: unknown plugin \"", p.queue_sort, "\""));
  }
  if (!registry.Contains(p.gpu_chooser)) {
    return absl::InvalidArgumentError(
        absl::StrCat("profile.gpuChooser: unknown plugin \"", p.gpu_chooser, "\""));
  }
  {
    auto qs = registry.Create(p.queue_sort, {});
    if (!qs.ok() || dynamic_cast<QueueSortPlugin*>(qs->get()) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("profile.queueSort: plugin \"", p.queue_sort,
                                                     "\" is not a QueueSort plugin"));
    }
    auto gc = registry.Create(p.gpu_chooser, {});
    if (!gc.ok() || dynamic_cast<GpuChooserPlugin*>(gc->get()) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("profile.gpuChooser: plugin \"", p.gpu_chooser,
                                                     "\" is not a GpuChooser plugin"));
    }
  }
  absl::flat_hash_set<std::string> seen;
  for (size_t i = 0; i < p.plugins.size(); ++i) {
    const PluginConfig& c = p.plugins[i];
    std::string f = absl::StrCat("profile.plugins[", i, "]");
    if (!registry.Contains(c.name)) {
      return absl::InvalidArgumentError(absl::StrCat(f, ".name: unknown plugin \"", c.name, "\""));
    }
    if (!seen.insert(c.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(f, ".name: plugin \"", c.name, "\" listed twice"));
    }
    if (c.weight < 1 || c.weight > 100) {
      return absl::InvalidArgumentError(
          absl::StrCat(f, ".weight: must be in 1..100, got ", c.weight));
    }
  }
  if (p.nodes_to_score < 0) {
    return absl::InvalidArgumentError("profile.nodesToScore: must be >= 0 (0: all)");
  }
  if (p.max_domains < 1) return absl::InvalidArgumentError("profile.maxDomains: must be >= 1");
  return absl::OkStatus();
}

}  // namespace tessera::sched
