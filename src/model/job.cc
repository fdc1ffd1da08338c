#include "model/job.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/gpu_model_name.h"

namespace tessera::model {

absl::string_view TopologyLevelName(TopologyLevel l) {
  switch (l) {
    case TopologyLevel::kNone:
      return "none";
    case TopologyLevel::kNode:
      return "node";
    case TopologyLevel::kRack:
      return "rack";
    case TopologyLevel::kBlock:
      return "block";
  }
  return "?";
}

bool ParseTopologyLevel(absl::string_view s, TopologyLevel* out) {
  for (TopologyLevel l :
       {TopologyLevel::kNone, TopologyLevel::kNode, TopologyLevel::kRack, TopologyLevel::kBlock}) {
    if (s == TopologyLevelName(l)) {
      *out = l;
      return true;
    }
  }
  return false;
}

int32_t Job::total_members() const {
  int32_t n = 0;
  for (const auto& g : groups) n += g.count;
  return n;
}

int32_t Job::effective_min_member() const {
  return gang.min_member > 0 ? gang.min_member : total_members();
}

int64_t Job::total_gpu_milli() const {
  int64_t t = 0;
  for (const auto& g : groups) t += g.count * g.resources.total_gpu_milli();
  return t;
}

absl::Status ValidateJob(const Job& j, const absl::flat_hash_set<std::string>* known_models) {
  if (j.name.empty()) return absl::InvalidArgumentError("metadata.name: must not be empty");
  if (j.groups.empty()) return absl::InvalidArgumentError("spec.groups: at least one member group");
  for (size_t i = 0; i < j.groups.size(); ++i) {
    const MemberGroup& g = j.groups[i];
    std::string f = absl::StrCat("spec.groups[", i, "]");
    if (g.count <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(f, ".count: must be > 0, got ", g.count));
    }
    absl::Status s = ValidateRequest(g.resources, absl::StrCat(f, ".resources"));
    if (!s.ok()) return s;
  }
  if (j.gang.min_member < 0) {
    return absl::InvalidArgumentError("spec.gang.minMember: must be >= 0");
  }
  if (j.gang.min_member > j.total_members()) {
    return absl::InvalidArgumentError(absl::StrCat("spec.gang.minMember: ", j.gang.min_member,
                                                   " is larger than the ", j.total_members(),
                                                   " members of the job"));
  }
  if (j.gang.timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("spec.gang.timeout: must be >= 0");
  }
  if (known_models != nullptr) {
    for (size_t i = 0; i < j.gpu_models.size(); ++i) {
      const std::string& want = j.gpu_models[i];
      if (!std::any_of(known_models->begin(), known_models->end(),
                       [&](const std::string& m) { return GpuModelMatches(want, m); })) {
        std::vector<std::string> names(known_models->begin(), known_models->end());
        std::sort(names.begin(), names.end());
        return absl::InvalidArgumentError(
            absl::StrCat("spec.gpuModels[", i, "]: unknown GPU model \"", j.gpu_models[i],
                         "\"; the fleet has: ", absl::StrJoin(names, ", ")));
      }
    }
  }
  if (absl::Status s = ValidateNodeAffinity(j.node_affinity, "spec.nodeAffinity"); !s.ok()) {
    return s;
  }
  if (j.topology.required && j.topology.level == TopologyLevel::kNone) {
    return absl::InvalidArgumentError("spec.topology.level: a required topology needs a level");
  }
  return absl::OkStatus();
}

}  // namespace tessera::model
