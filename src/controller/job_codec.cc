#include "controller/job_codec.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "model/priority.h"

namespace tessera::controller {
namespace {

absl::Status Bad(absl::string_view field, absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", msg));
}

// Reads an optional integer field; InvalidArgument naming it on a wrong type.
absl::StatusOr<int64_t> Int(const Json& o, const char* key, int64_t def, absl::string_view path) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return def;
  if (!it->is_number_integer()) return Bad(absl::StrCat(path, ".", key), "must be an integer");
  return it->get<int64_t>();
}

absl::StatusOr<double> Num(const Json& o, const char* key, double def, absl::string_view path) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return def;
  if (!it->is_number()) return Bad(absl::StrCat(path, ".", key), "must be a number");
  return it->get<double>();
}

std::string Str(const Json& o, const char* key, const std::string& def = "") {
  auto it = o.find(key);
  if (it == o.end() || !it->is_string()) return def;
  return it->get<std::string>();
}

absl::Status ReadResources(const Json& g, absl::string_view path, model::ResourceRequest* r) {
  absl::StatusOr<int64_t> gpus = Int(g, "gpusPerReplica", 0, path);
  if (!gpus.ok()) return gpus.status();
  absl::StatusOr<int64_t> milli = Int(g, "gpuMilli", model::kMilliPerGpu, path);
  if (!milli.ok()) return milli.status();
  absl::StatusOr<int64_t> mem = Int(g, "gpuMemoryMiB", 0, path);
  if (!mem.ok()) return mem.status();
  if (*gpus > model::kMaxGpusPerNode) {
    return Bad(absl::StrCat(path, ".gpusPerReplica"),
               absl::StrCat("at most ", model::kMaxGpusPerNode, " (one node)"));
  }
  if (*milli > model::kMilliPerGpu) {
    return Bad(absl::StrCat(path, ".gpuMilli"), "must be in 1..1000");
  }
  r->gpus = static_cast<int32_t>(*gpus);
  r->gpu_milli = static_cast<int32_t>(*milli);
  r->gpu_memory_mib = *mem;
  if (auto it = g.find("resources"); it != g.end() && it->is_object()) {
    std::string rp = absl::StrCat(path, ".resources");
    absl::StatusOr<double> cpu = Num(*it, "cpu", 0, rp);
    if (!cpu.ok()) return cpu.status();
    absl::StatusOr<double> gib = Num(*it, "memoryGiB", 0, rp);
    if (!gib.ok()) return gib.status();
    r->cpu_milli = static_cast<int64_t>(*cpu * 1000);
    r->memory_mib = static_cast<int64_t>(*gib * 1024);
  }
  return absl::OkStatus();
}

absl::Status ReadScheduling(const Json& spec, bool is_service, model::Job* job,
                            const PriorityResolver& priority) {
  job->queue = Str(spec, "queue", "default");
  if (auto it = spec.find("priority"); it != spec.end() && !it->is_null()) {
    if (!it->is_number_integer()) return Bad("spec.priority", "must be an integer");
    job->priority = it->get<int32_t>();
  } else if (std::string pc = Str(spec, "priorityClassName"); !pc.empty()) {
    std::optional<int32_t> v = priority ? priority(pc) : std::nullopt;
    if (!v) v = model::DefaultPriorityClassValue(pc);
    if (!v) {
      return absl::NotFoundError(
          absl::StrCat("spec.priorityClassName: no PriorityClass \"", pc, "\""));
    }
    job->priority = *v;
  }
  if (auto it = spec.find("gang"); it != spec.end() && it->is_object()) {
    absl::StatusOr<int64_t> mm = Int(*it, "minMember", job->gang.min_member, "spec.gang");
    if (!mm.ok()) return mm.status();
    absl::StatusOr<int64_t> to = Int(*it, "timeoutSeconds", 0, "spec.gang");
    if (!to.ok()) return to.status();
    job->gang.min_member = static_cast<int32_t>(*mm);
    job->gang.timeout = absl::Seconds(*to);
  }
  std::string placement = Str(spec, "placement", is_service ? "Spread" : "Pack");
  if (placement == "Pack") {
    job->placement = model::PlacementPreference::kPack;
  } else if (placement == "Spread") {
    job->placement = model::PlacementPreference::kSpread;
  } else {
    return Bad("spec.placement", "must be Pack or Spread");
  }
  if (auto it = spec.find("topology"); it != spec.end() && it->is_object()) {
    std::string level = Str(*it, "level");
    if (!model::ParseTopologyLevel(level, &job->topology.level) ||
        job->topology.level == model::TopologyLevel::kNone) {
      return Bad("spec.topology.level", "must be node, rack or block");
    }
    auto req = it->find("required");
    job->topology.required = req != it->end() && req->is_boolean() && req->get<bool>();
  }
  if (auto it = spec.find("gpuModels"); it != spec.end() && it->is_array()) {
    for (const Json& m : *it) {
      if (!m.is_string()) return Bad("spec.gpuModels", "must be strings");
      job->gpu_models.push_back(m.get<std::string>());
    }
  }
  if (auto it = spec.find("nodeSelector"); it != spec.end() && it->is_object()) {
    for (auto& [k, v] : it->items()) {
      if (!v.is_string()) return Bad(absl::StrCat("spec.nodeSelector.", k), "must be a string");
      job->node_selector[k] = v.get<std::string>();
    }
  }
  if (auto it = spec.find("tolerations"); it != spec.end() && it->is_array()) {
    for (size_t i = 0; i < it->size(); ++i) {
      const Json& t = (*it)[i];
      std::string path = absl::StrCat("spec.tolerations[", i, "]");
      model::Toleration tol;
      tol.key = Str(t, "key");
      std::string op = Str(t, "operator", "Equal");
      if (op == "Exists") {
        tol.op = model::Toleration::Op::kExists;
      } else if (op != "Equal") {
        return Bad(absl::StrCat(path, ".operator"), "must be Equal or Exists");
      }
      if (tol.key.empty() && tol.op != model::Toleration::Op::kExists) {
        return Bad(absl::StrCat(path, ".key"), "an empty key needs operator Exists");
      }
      tol.value = Str(t, "value");
      if (std::string e = Str(t, "effect"); !e.empty()) {
        tol.effect = model::ParseTaintEffect(e);
        if (!tol.effect) return Bad(absl::StrCat(path, ".effect"), "unknown effect");
      }
      job->tolerations.push_back(std::move(tol));
    }
  }
  return absl::OkStatus();
}

// Adds a group's gpuType to the job's model constraint; all groups must agree
// because model::Job constrains models per job.
absl::Status AddGroupModel(const std::string& type, absl::string_view path, model::Job* job,
                           std::string* seen) {
  if (type.empty()) return absl::OkStatus();
  if (!seen->empty() && *seen != type) {
    return Bad(path, absl::StrCat("\"", type, "\" differs from \"", *seen,
                                  "\" of an earlier group; a job runs on one GPU model"));
  }
  *seen = type;
  if (std::find(job->gpu_models.begin(), job->gpu_models.end(), type) == job->gpu_models.end()) {
    if (!job->gpu_models.empty()) {
      return Bad(path, absl::StrCat("\"", type, "\" is not in spec.gpuModels"));
    }
    job->gpu_models.push_back(type);
  }
  return absl::OkStatus();
}

}  // namespace

std::string SchedulerName(absl::string_view kind, absl::string_view name) {
  if (kind == "InferenceService") return absl::StrCat("isvc.", name);
  return std::string(name);
}

absl::StatusOr<model::Job> JobFromObject(const Json& obj, const PriorityResolver& priority) {
  if (!obj.is_object()) return absl::InvalidArgumentError("object: must be a JSON object");
  const std::string kind = Str(obj, "kind");
  if (kind != "TrainingJob" && kind != "InferenceService") {
    return Bad("kind", absl::StrCat("\"", kind, "\" is not a schedulable kind"));
  }
  const Json empty = Json::object();
  const Json& meta = obj.contains("metadata") ? obj["metadata"] : empty;
  const Json& spec = obj.contains("spec") && obj["spec"].is_object() ? obj["spec"] : empty;
  model::Job job;
  std::string name = Str(meta, "name");
  if (name.empty()) return Bad("metadata.name", "must not be empty");
  job.name = SchedulerName(kind, name);
  job.ns = Str(meta, "namespace", "default");
  if (absl::Time t; ParseTimestamp(Str(meta, "creationTimestamp"), &t)) job.creation_time = t;
  const bool service = kind == "InferenceService";
  if (absl::Status s = ReadScheduling(spec, service, &job, priority); !s.ok()) return s;
  std::string seen_model;
  if (service) {
    model::MemberGroup g;
    g.name = "replica";
    const Json& rep = spec.contains("replicas") ? spec["replicas"] : empty;
    absl::StatusOr<int64_t> max = Int(rep, "max", 1, "spec.replicas");
    if (!max.ok()) return max.status();
    absl::StatusOr<int64_t> min = Int(rep, "min", *max, "spec.replicas");
    if (!min.ok()) return min.status();
    if (*max <= 0) return Bad("spec.replicas.max", "must be > 0");
    if (*min > *max) return Bad("spec.replicas.min", "must be <= spec.replicas.max");
    g.count = static_cast<int32_t>(*max);
    if (absl::Status s = ReadResources(spec, "spec", &g.resources); !s.ok()) return s;
    if (absl::Status s = AddGroupModel(Str(spec, "gpuType"), "spec.gpuType", &job, &seen_model);
        !s.ok()) {
      return s;
    }
    if (!spec.contains("gang"))
      job.gang.min_member = static_cast<int32_t>(std::max<int64_t>(1, *min));
    // With an SLO the service is autoscaled (controller/autoscaler.h): an
    // elastic gang of replicas.max members that starts at max(1, replicas.min)
    // and is resized to status.desiredReplicas. Without one it is placed as
    // before: as many as fit, charged for all.
    if (auto slo = spec.find("slo"); slo != spec.end() && slo->is_object()) {
      absl::StatusOr<double> p99 = Num(*slo, "p99LatencyMs", 0, "spec.slo");
      if (!p99.ok()) return p99.status();
      absl::StatusOr<double> rps = Num(*slo, "minThroughputRps", 0, "spec.slo");
      if (!rps.ok()) return rps.status();
      if (*p99 > 0 || *rps > 0) {
        job.gang.min_member = static_cast<int32_t>(std::max<int64_t>(1, *min));
        job.gang.elastic = true;
        job.gang.start_members = job.gang.min_member;
      }
    }
    job.groups.push_back(std::move(g));
  } else {
    auto groups = spec.find("groups");
    if (groups == spec.end() || !groups->is_array() || groups->empty()) {
      return Bad("spec.groups", "at least one member group");
    }
    for (size_t i = 0; i < groups->size(); ++i) {
      const Json& gj = (*groups)[i];
      std::string path = absl::StrCat("spec.groups[", i, "]");
      model::MemberGroup g;
      g.name = Str(gj, "name", absl::StrCat("group-", i));
      absl::StatusOr<int64_t> count = Int(gj, "count", 1, path);
      if (!count.ok()) return count.status();
      g.count = static_cast<int32_t>(*count);
      if (absl::Status s = ReadResources(gj, path, &g.resources); !s.ok()) return s;
      if (absl::Status s =
              AddGroupModel(Str(gj, "gpuType"), absl::StrCat(path, ".gpuType"), &job, &seen_model);
          !s.ok()) {
        return s;
      }
      job.groups.push_back(std::move(g));
    }
    int32_t min_replicas = 0;
    if (std::optional<api::SpecError> e = api::CheckElastic(spec, &min_replicas))
      return Bad(e->field, e->message);
    if (min_replicas > 0) {
      job.gang.min_member = min_replicas;
      job.gang.elastic = true;
    }
  }
  if (absl::Status s = model::ValidateJob(job, nullptr); !s.ok()) return s;
  return job;
}

Json PlacementToJson(const sched::Placement& p, const model::Job& job,
                     const sched::ClusterState& cluster, int64_t generation) {
  Json out = Json::array();
  for (const sched::MemberPlacement& m : p.members) {
    Json gpus = Json::array();
    int milli = 0;
    for (const sched::GpuGrant& g : m.gpus) {
      gpus.push_back(static_cast<int>(g.gpu));
      milli = g.milli;
    }
    Json e = {{"group", job.groups[m.group].name},
              {"member", m.member},
              {"node", cluster.node(m.node).name},
              {"gpus", gpus},
              {"generation", generation}};
    if (!m.gpus.empty()) e["gpuMilli"] = milli;
    if (m.cpu_milli > 0) e["cpuMilli"] = m.cpu_milli;
    if (m.memory_mib > 0) e["memoryMiB"] = m.memory_mib;
    out.push_back(std::move(e));
  }
  return out;
}

absl::StatusOr<sched::Placement> PlacementFromJson(const Json& placement, const model::Job& job,
                                                   const sched::ClusterState& cluster) {
  if (!placement.is_array()) return Bad("status.placement", "must be an array");
  sched::Placement p;
  p.job_key = job.key();
  for (size_t i = 0; i < placement.size(); ++i) {
    const Json& e = placement[i];
    std::string path = absl::StrCat("status.placement[", i, "]");
    if (!e.is_object()) return Bad(path, "must be an object");
    sched::MemberPlacement m;
    std::string group = Str(e, "group");
    auto g = std::find_if(job.groups.begin(), job.groups.end(),
                          [&](const model::MemberGroup& mg) { return mg.name == group; });
    if (g == job.groups.end()) return Bad(absl::StrCat(path, ".group"), "no such group");
    m.group = static_cast<int32_t>(g - job.groups.begin());
    absl::StatusOr<int64_t> member = Int(e, "member", 0, path);
    if (!member.ok()) return member.status();
    m.member = static_cast<int32_t>(*member);
    std::string node = Str(e, "node");
    std::optional<sched::NodeId> id = cluster.FindNode(node);
    if (!id) return absl::NotFoundError(absl::StrCat(path, ".node: node \"", node, "\" is gone"));
    m.node = *id;
    absl::StatusOr<int64_t> milli = Int(e, "gpuMilli", model::kMilliPerGpu, path);
    if (!milli.ok()) return milli.status();
    auto gpus = e.find("gpus");
    if (gpus != e.end() && gpus->is_array()) {
      for (const Json& gi : *gpus) {
        if (!gi.is_number_integer() || gi.get<int>() < 0 ||
            gi.get<int>() >= static_cast<int>(cluster.node(*id).gpus.size())) {
          return Bad(absl::StrCat(path, ".gpus"), "no such GPU on the node");
        }
        m.gpus.push_back({static_cast<int8_t>(gi.get<int>()), static_cast<int16_t>(*milli)});
      }
    }
    absl::StatusOr<int64_t> cpu = Int(e, "cpuMilli", 0, path);
    if (!cpu.ok()) return cpu.status();
    absl::StatusOr<int64_t> mem = Int(e, "memoryMiB", 0, path);
    if (!mem.ok()) return mem.status();
    m.cpu_milli = *cpu;
    m.memory_mib = *mem;
    p.members.push_back(std::move(m));
  }
  return p;
}

}  // namespace tessera::controller
