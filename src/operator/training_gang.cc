#include "operator/training_gang.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "operator/json_fields.h"
#include "sched/framework/checkpoint_cadence.h"

namespace tessera::op {
namespace {

std::string Name(const Json& obj) { return StrOr(Field(obj, "metadata"), "name"); }
std::string Namespace(const Json& obj) {
  return StrOr(Field(obj, "metadata"), "namespace", "default");
}

// "1.5" cores -> "1500m"; whole cores stay whole.
std::string CpuQuantity(double cores) {
  const auto milli = static_cast<int64_t>(std::llround(cores * 1000));
  return milli % 1000 == 0 ? absl::StrCat(milli / 1000) : absl::StrCat(milli, "m");
}

// GiB -> "NGi", or "NMi" when not whole.
std::string MemoryQuantity(double gib) {
  const auto mib = static_cast<int64_t>(std::llround(gib * 1024));
  return mib % 1024 == 0 ? absl::StrCat(mib / 1024, "Gi") : absl::StrCat(mib, "Mi");
}

std::string Hostname(const Member& m) {
  std::string h = absl::StrCat(m.group, "-", m.index);
  if (h.size() > 63) h = absl::StrCat("m-", m.rank);
  return h;
}

Json GroupSpec(const Json& spec, const std::string& group) {
  for (const Json& g : Field(spec, "groups")) {
    if (StrOr(g, "name") == group) return g;
  }
  return Json::object();
}

}  // namespace

std::vector<Member> MembersOf(const Json& spec) {
  std::vector<Member> out;
  int rank = 0;
  for (const Json& g : Field(spec, "groups")) {
    const std::string name = StrOr(g, "name");
    const int64_t count = IntOr(g, "count", 0);
    const auto gpus = static_cast<int>(IntOr(g, "gpusPerReplica", 0));
    for (int64_t i = 0; i < count; ++i) out.push_back({name, static_cast<int>(i), rank++, gpus});
  }
  return out;
}

int MinMembers(const Json& spec, int members) {
  if (int64_t m = IntOr(Field(spec, "elastic"), "minReplicas", 0); m > 0) {
    return static_cast<int>(std::min<int64_t>(m, members));
  }
  if (int64_t m = IntOr(Field(spec, "gang"), "minMember", 0); m > 0) {
    return static_cast<int>(std::min<int64_t>(m, members));
  }
  return members;
}

int64_t CheckpointInterval(const Json& spec, const GangOptions& opts) {
  const Json& cp = Field(spec, "checkpoint");
  if (int64_t i = IntOr(cp, "intervalSeconds", 0); i > 0) return i;
  const Json& cost = Field(cp, "costSeconds");
  if (!cost.is_number()) return 0;
  int64_t gpus = 0;
  for (const Member& m : MembersOf(spec)) gpus += m.gpus;
  return sched::CheckpointIntervalSeconds(cost.get<double>(), opts.gpu_mtbf_s, gpus);
}

std::vector<std::string> KubeSpecProblems(const Json& spec) {
  std::vector<std::string> out;
  if (StrOr(spec, "image").empty()) {
    out.push_back("spec.image: required on Kubernetes (the container image every member runs)");
  }
  int i = 0;
  for (const Json& g : Field(spec, "groups")) {
    if (IntOr(g, "gpuMilli", 0) > 0) {
      out.push_back(absl::StrCat("spec.groups[", i,
                                 "].gpuMilli: fractional GPUs are not offered on Kubernetes "
                                 "(nvidia.com/gpu counts whole GPUs)"));
    }
    ++i;
  }
  return out;
}

std::string PodName(const std::string& job, int64_t generation, const Member& m) {
  return absl::StrCat(job, "-g", generation, "-", m.group, "-", m.index);
}

std::string PodGroupName(const std::string& job, int64_t generation) {
  return absl::StrCat(job, "-g", generation);
}

std::string ServiceName(const std::string& job) {
  if (!job.empty() && absl::ascii_isalpha(static_cast<unsigned char>(job[0]))) return job;
  return absl::StrCat("tj-", job).substr(0, 63);
}

Json DesiredService(const Json& job) {
  const std::string name = Name(job);
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata",
           {{"name", ServiceName(name)},
            {"namespace", Namespace(job)},
            {"labels", {{kJobLabel, name}}},
            {"ownerReferences", Json::array({ControllerReference(job, "TrainingJob")})}}},
          {"spec",
           {{"clusterIP", "None"},
            {"publishNotReadyAddresses", true},
            {"selector", {{kJobLabel, name}}},
            {"ports", Json::array({{{"name", "rendezvous"},
                                    {"port", kMasterPort},
                                    {"targetPort", kMasterPort},
                                    {"protocol", "TCP"}}})}}}};
}

Json DesiredPodGroup(const Json& job, int64_t generation) {
  const Json& spec = Field(job, "spec");
  const std::string name = Name(job);
  const auto members = static_cast<int>(MembersOf(spec).size());
  Json pg = {{"apiVersion", "scheduling.x-k8s.io/v1alpha1"},
             {"kind", "PodGroup"},
             {"metadata",
              {{"name", PodGroupName(name, generation)},
               {"namespace", Namespace(job)},
               {"labels", {{kJobLabel, name}, {kGenerationLabel, absl::StrCat(generation)}}},
               {"ownerReferences", Json::array({ControllerReference(job, "TrainingJob")})}}},
             {"spec", {{"minMember", MinMembers(spec, members)}}}};
  if (int64_t t = IntOr(Field(spec, "gang"), "timeoutSeconds", 0); t > 0) {
    pg["spec"]["scheduleTimeoutSeconds"] = t;
  }
  if (const Json& topo = Field(spec, "topology"); topo.is_object()) {
    Json& ann = pg["metadata"]["annotations"];
    ann["tessera.dev/topology"] = StrOr(topo, "level", "node");
    ann["tessera.dev/topology-policy"] =
        Field(topo, "required").is_boolean() && !Field(topo, "required").get<bool>() ? "preferred"
                                                                                     : "required";
  }
  return pg;
}

Json DesiredPod(const Json& job, int64_t generation, const Member& m, int world_size,
                const std::optional<ResumePoint>& resume, const GangOptions& opts) {
  const Json& spec = Field(job, "spec");
  const std::string name = Name(job);
  const Json group = GroupSpec(spec, m.group);
  const std::vector<Member> members = MembersOf(spec);
  const std::string service = ServiceName(name);
  const std::string master =
      absl::StrCat(members.empty() ? "m-0" : Hostname(members.front()), ".", service);
  std::string nnodes = absl::StrCat(world_size);
  if (const Json& el = Field(spec, "elastic"); el.is_object()) {
    nnodes = absl::StrCat(IntOr(el, "minReplicas", world_size), ":",
                          IntOr(el, "maxReplicas", world_size));
  }
  Json env = Json::array({
      EnvVar("MASTER_ADDR", master),
      EnvVar("MASTER_PORT", absl::StrCat(kMasterPort)),
      EnvVar("WORLD_SIZE", absl::StrCat(world_size)),
      EnvVar("RANK", absl::StrCat(m.rank)),
      EnvVar("PET_NNODES", nnodes),
      EnvVar("PET_NPROC_PER_NODE", absl::StrCat(std::max(1, m.gpus))),
      EnvVar("PET_NODE_RANK", absl::StrCat(m.rank)),
      EnvVar("PET_MASTER_ADDR", master),
      EnvVar("PET_MASTER_PORT", absl::StrCat(kMasterPort)),
      EnvVar("TESSERA_JOB", name),
      EnvVar("TESSERA_GENERATION", absl::StrCat(generation)),
      EnvVar("TESSERA_WORLD_SIZE", absl::StrCat(world_size)),
      EnvVar("TESSERA_RANK", absl::StrCat(m.rank)),
  });
  if (std::string p = StrOr(Field(spec, "checkpoint"), "path"); !p.empty()) {
    env.push_back(EnvVar("TESSERA_CHECKPOINT_PATH", p));
  }
  if (int64_t interval = CheckpointInterval(spec, opts); interval > 0) {
    env.push_back(EnvVar("TESSERA_CHECKPOINT_INTERVAL_SECONDS", absl::StrCat(interval)));
  }
  if (resume) {
    env.push_back(EnvVar("TESSERA_RESUME_FROM", resume->path));
    env.push_back(EnvVar("TESSERA_RESUME_STEP", absl::StrCat(resume->step)));
  }
  // Downward API: the member's own Pod name, for the checkpoint report annotations.
  env.push_back({{"name", "TESSERA_POD_NAME"},
                 {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}});

  Json resources = Json::object();
  if (m.gpus > 0) resources["limits"]["nvidia.com/gpu"] = absl::StrCat(m.gpus);
  if (const Json& r = Field(group, "resources"); r.is_object()) {
    if (const Json& cpu = Field(r, "cpu"); cpu.is_number()) {
      resources["requests"]["cpu"] = CpuQuantity(cpu.get<double>());
    }
    if (const Json& mem = Field(r, "memoryGiB"); mem.is_number()) {
      resources["requests"]["memory"] = MemoryQuantity(mem.get<double>());
    }
  }
  Json container = {{"name", "trainer"},
                    {"image", StrOr(spec, "image")},
                    {"env", std::move(env)},
                    {"resources", std::move(resources)}};
  if (const Json& cmd = Field(spec, "command"); cmd.is_array() && !cmd.empty()) {
    container["command"] = cmd;
  }
  container["ports"] =
      Json::array({{{"name", "rendezvous"}, {"containerPort", kMasterPort}, {"protocol", "TCP"}}});

  Json pod_spec = {{"schedulerName", opts.scheduler_name},
                   {"restartPolicy", "Never"},
                   {"hostname", Hostname(m)},
                   {"subdomain", service},
                   {"containers", Json::array({std::move(container)})}};
  Json selector = Json::object();
  if (const Json& ns = Field(spec, "nodeSelector"); ns.is_object()) selector = ns;
  if (std::string t = StrOr(group, "gpuType"); !t.empty()) selector["nvidia.com/gpu.product"] = t;
  if (!selector.empty()) pod_spec["nodeSelector"] = std::move(selector);
  if (const Json& models = Field(spec, "gpuModels"); models.is_array() && !models.empty()) {
    pod_spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = {
        {"nodeSelectorTerms",
         Json::array({{{"matchExpressions", Json::array({{{"key", "nvidia.com/gpu.product"},
                                                          {"operator", "In"},
                                                          {"values", models}}})}}})}};
  }
  if (const Json& t = Field(spec, "tolerations"); t.is_array() && !t.empty()) {
    pod_spec["tolerations"] = t;
  }
  if (std::string pc = StrOr(spec, "priorityClassName"); !pc.empty()) {
    pod_spec["priorityClassName"] = pc;
  }
  Json labels = {{kJobLabel, name},
                 {kGenerationLabel, absl::StrCat(generation)},
                 {kGroupLabel, m.group},
                 {kRankLabel, absl::StrCat(m.rank)},
                 {kPodGroupLabel, PodGroupName(name, generation)},
                 {kQueueLabel, StrOr(spec, "queue", "default")}};
  Json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata",
               {{"name", PodName(name, generation, m)},
                {"namespace", Namespace(job)},
                {"labels", std::move(labels)},
                {"ownerReferences", Json::array({ControllerReference(job, "TrainingJob")})}}},
              {"spec", std::move(pod_spec)}};
  if (std::string pl = StrOr(spec, "placement"); !pl.empty()) {
    pod["metadata"]["annotations"]["tessera.dev/placement"] = pl;  // Pack or Spread
  }
  return pod;
}

}  // namespace tessera::op
