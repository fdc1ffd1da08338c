#include "api/kinds.h"

#include "api/gpu_pool.h"
#include "api/limits.h"
#include "api/member_status.h"

namespace tessera::api {
namespace {

using S = Schema;

Schema Metadata() {
  return S::Object({
      Required("name", S::String().DnsLabel()),
      Optional("namespace", S::String().DnsLabel()),
      Optional("labels", S::Map(S::String().MaxLength(63))),
      Optional("annotations", S::Map(S::String().MaxLength(4096))),
      // Server-owned; accepted on input so that a GET result can be PUT back.
      Optional("uid", S::String()),
      Optional("resourceVersion", S::String()),
      Optional("creationTimestamp", S::String()),
  });
}

Schema Status(const std::vector<std::string>& phases, std::vector<Schema::Field> extra = {}) {
  std::vector<Schema::Field> fields = {
      Optional("phase", S::String().OneOf(phases)),
      // Why the object is in its phase, one CamelCase word from a bounded set (a waiting job's
      // OverQuota, NoRoom, Unschedulable...; a failed one's Error or Killed); the prose is in
      // message.
      Optional("reason", S::String().MaxLength(63)),
      Optional("message", S::String().MaxLength(4096)),
      Optional("conditions",
               S::Array(S::Object({
                   Required("type", S::String().MaxLength(63)),
                   Required("status", S::String().OneOf({"True", "False", "Unknown"})),
                   Optional("reason", S::String().MaxLength(256)),
                   Optional("message", S::String().MaxLength(4096)),
                   Optional("lastTransitionTime", S::String()),
               }))),
  };
  for (Schema::Field& f : extra) fields.push_back(std::move(f));
  return S::Object(std::move(fields));
}

KindInfo Make(std::string kind, std::string plural, bool namespaced,
              std::vector<std::string> phases, Schema spec,
              std::vector<Schema::Field> extra_status = {}) {
  Schema object = S::Object({
      Required("apiVersion", S::String().OneOf({kApiVersion})),
      Required("kind", S::String().OneOf({kind})),
      Required("metadata", Metadata()),
      Required("spec", std::move(spec)),
      Optional("status", Status(phases, std::move(extra_status))),
  });
  return KindInfo{std::move(kind), std::move(plural), namespaced, std::move(phases),
                  std::move(object)};
}

Schema Resources() {
  return S::Object({
      Optional("cpu", S::Number().Min(0).Max(kMaxCpuCores)),
      Optional("memoryGiB", S::Number().Min(0).Max(kMaxMemoryGiB)),
  });
}

// Scheduling fields shared by TrainingJob and InferenceService (see
// docs/api.md, "Scheduling"); src/controller/job_codec.cc maps them onto
// model::Job.
void AddSchedulingFields(std::vector<Schema::Field>& f) {
  f.push_back(Optional("priority", S::Int().Min(-kMaxPriority).Max(kMaxPriority)));
  f.push_back(
      Optional("gang", S::Object({
                           Optional("minMember", S::Int().Min(0).Max(kMaxMembersPerJob)),
                           Optional("timeoutSeconds", S::Int().Min(0).Max(kMaxRuntimeSeconds)),
                       })));
  f.push_back(Optional("placement", S::String().OneOf({"Pack", "Spread"})));
  f.push_back(
      Optional("topology", S::Object({
                               Required("level", S::String().OneOf({"node", "rack", "block"})),
                               Optional("required", S::Bool()),
                           })));
  f.push_back(Optional("gpuModels", S::Array(S::String().MaxLength(63)).MaxItems(64)));
  f.push_back(Optional("nodeSelector", S::Map(S::String().MaxLength(63)).MaxItems(64)));
  f.push_back(Optional(
      "tolerations",
      S::Array(S::Object({
                   Optional("key", S::String().MaxLength(253)),
                   Optional("operator", S::String().OneOf({"Equal", "Exists"})),
                   Optional("value", S::String().MaxLength(63)),
                   Optional("effect",
                            S::String().OneOf({"NoSchedule", "PreferNoSchedule", "NoExecute"})),
               }))
          .MaxItems(kMaxListItems)));
}

// Status written by the scheduling controller: the binding and its fencing
// generation (bumped on every placement), and where the job resumes from.
std::vector<Schema::Field> JobStatusFields() {
  return {
      Optional("generation", S::Int().Min(0)),
      // One entry per member, written by its node agent (PUT .../status): what became of it
      // (api/member_status.h). The job's phase is derived from these by the controller.
      Optional(
          "members",
          S::Array(
              S::Object({
                  Required("member", S::String().MaxLength(127)),
                  Required("generation", S::Int().Min(0)),
                  Required("state", S::String().OneOf({"Starting", "Running", "Exited", "Failed"})),
                  Optional("exitCode", S::Int().Min(-1).Max(255)),
                  Optional("reason", S::String().MaxLength(kMemberReasonMaxBytes)),
                  Optional("message", S::String().MaxLength(kMemberMessageMaxBytes)),
                  Optional("node", S::String().MaxLength(253)),
                  Optional("lastCheckpoint", S::Object({
                                                 Optional("step", S::Int().Min(0)),
                                                 Optional("path", S::String().MaxLength(1024)),
                                                 Optional("time", S::String()),
                                             })),
                  Optional("time", S::String()),
              }))
              .MaxItems(kMaxMembersPerJob)),
      Optional("placement", S::Array(S::Object({
                                Required("group", S::String()),
                                Required("member", S::Int().Min(0)),
                                Required("node", S::String()),
                                Required("gpus", S::Array(S::Int().Min(0))),
                                Optional("gpuMilli", S::Int().Min(0)),
                                Optional("cpuMilli", S::Int().Min(0)),
                                Optional("memoryMiB", S::Int().Min(0)),
                                Optional("generation", S::Int().Min(0)),
                            }))),
      Optional("attempts", S::Int().Min(0)),
      // Members bound now (status.placement's size); an elastic TrainingJob
      // runs with between spec.elastic.minReplicas and maxReplicas of them.
      Optional("replicas", S::Int().Min(0)),
      // The last ElasticShrink / ElasticGrow (spaces grow attempts out).
      Optional("lastResizeTime", S::String()),
      // Federation hub (src/federation): the member cluster running the job,
      // and how often it was moved off a lost member.
      Optional("cluster", S::String()),
      Optional("failovers", S::Int().Min(0)),
      // ...moved off a member that accepted but did not place it, and when;
      // the last change of spec or metadata passed on to the member's copy
      // (state Synced, Deferred or Refused).
      Optional("requeues", S::Int().Min(0)),
      Optional("lastRequeueTime", S::String()),
      Optional("specSync", S::Object({
                               Optional("hash", S::String()),
                               Optional("state", S::String()),
                               Optional("message", S::String()),
                               Optional("time", S::String()),
                           })),
      // Gang restarts after a member failed (spec.maxRestarts), and the last.
      Optional("restarts", S::Int().Min(0)),
      Optional("lastRestartTime", S::String()),
      Optional("priority", S::Int()),
      Optional("scheduledTime", S::String()),
      // Accounting (api/job_accounting.h): the first binding, the end, the GPU-seconds of the
      // bindings that ended; and while a backfill reservation holds room for the job, when it
      // is to start at the latest.
      Optional("startTime", S::String()),
      Optional("completionTime", S::String()),
      Optional("gpuSeconds", S::Number().Min(0)),
      Optional("accountedTime", S::String()),
      Optional("estimatedStartTime", S::String()),
      // Every node a binding of the job placed members on, oldest first (at most 64): where its
      // members' logs are (`tessera logs --previous` after a move).
      Optional("logNodes", S::Array(S::String().MaxLength(253)).MaxItems(64)),
      Optional("resumeFrom", S::Object({
                                 Optional("checkpoint", S::String()),
                                 Optional("step", S::Int().Min(0)),
                                 Optional("path", S::String()),
                             })),
      // A preemption in flight, while PreemptionPending is True (the
      // controller carries it over its restarts).
      Optional("preemption", S::Object({
                                 Required("preemptor", S::String()),
                                 Required("deadline", S::String()),
                                 Optional("dropping", S::Array(S::Object({
                                                          Required("group", S::String()),
                                                          Required("member", S::Int().Min(0)),
                                                      }))),
                             })),
  };
}

// An InferenceService's status adds its autoscaling (spec.slo): the count the
// controller's autoscaler wants, and each replica's latest metrics reading as
// its node agent reported it (docs/api.md, docs/agent.md "Replica metrics").
std::vector<Schema::Field> InferenceStatusFields() {
  std::vector<Schema::Field> f = JobStatusFields();
  f.push_back(Optional("desiredReplicas", S::Int().Min(0)));
  f.push_back(Optional("lastScaleTime", S::String()));
  f.push_back(Optional("replicaMetrics", S::Map(S::Object({
                                             Optional("p99LatencyMs", S::Number()),
                                             Optional("rps", S::Number()),
                                             Required("time", S::String()),
                                             Optional("node", S::String()),
                                             Optional("generation", S::Int().Min(0)),
                                         }))));
  return f;
}

Schema Taints() {
  return S::Array(S::Object({
                      Required("key", S::String().MaxLength(253)),
                      Optional("value", S::String().MaxLength(63)),
                      Required("effect",
                               S::String().OneOf({"NoSchedule", "PreferNoSchedule", "NoExecute"})),
                  }))
      .MaxItems(kMaxListItems);
}

std::vector<KindInfo> BuildKinds() {
  std::vector<KindInfo> kinds;
  const std::vector<std::string> job_phases = {"Pending",   "Admitted",  "Queued",    "Scheduled",
                                               "Running",   "Suspended", "Succeeded", "Failed",
                                               "Preempted", "NodeLost",  "Dispatched"};
  std::vector<Schema::Field> training = {
      Optional("queue", S::String().DnsLabel()),
      Optional("priorityClassName", S::String().DnsLabel()),
      Optional("image", S::String().MaxLength(1024)),
      Optional("command", S::Array(S::String().MaxLength(65536)).MaxItems(kMaxCommandArgs)),
      Required("groups",
               S::Array(S::Object({
                            Required("name", S::String().DnsLabel()),
                            Required("count", S::Int().Positive().Max(kMaxMembersPerJob)),
                            Required("gpusPerReplica", S::Int().Min(0).Max(kMaxGpusPerNode)),
                            Optional("gpuMilli", S::Int().Positive().Max(kMaxGpuMilli)),
                            Optional("gpuMemoryMiB", S::Int().Min(0).Max(kMaxGpuMemoryMiB)),
                            Optional("gpuType", S::String().MaxLength(63)),
                            Optional("resources", Resources()),
                        }))
                   .MinItems(1)
                   .MaxItems(256)),
      Optional("elastic", S::Object({
                              Required("minReplicas", S::Int().Positive().Max(kMaxMembersPerJob)),
                              Required("maxReplicas", S::Int().Positive().Max(kMaxMembersPerJob)),
                          })),
      Optional("maxRuntimeSeconds", S::Int().Positive().Max(kMaxRuntimeSeconds)),
      // A member exiting non-zero restarts the whole gang from its last
      // checkpoint this many times before the job is Failed (default 0).
      Optional("maxRestarts", S::Int().Min(0).Max(kMaxRestarts)),
      // intervalSeconds: the job checkpoints this often. Omitted with costSeconds (what one
      // checkpoint takes to write) given, Tessera chooses the interval from the failure
      // rate of the job's GPUs (Young/Daly, sched/framework/checkpoint_cadence.h) and
      // writes it in status.checkpointIntervalSeconds; members read it from env
      // TESSERA_CHECKPOINT_INTERVAL_SECONDS.
      Optional("checkpoint",
               S::Object({
                   Optional("intervalSeconds", S::Int().Positive().Max(kMaxRuntimeSeconds)),
                   Optional("costSeconds", S::Number().Positive().Max(kMaxRuntimeSeconds)),
                   Optional("path", S::String().MaxLength(1024)),
                   // Retention: the newest this many Ready Checkpoints of the job are kept, older
                   // ones deleted (api/checkpoints.h); 0 or absent keeps all.
                   Optional("keep", S::Int().Min(0).Max(kMaxCheckpointsKept)),
               })),
      Optional("suspend", S::Bool()),
  };
  AddSchedulingFields(training);
  std::vector<Schema::Field> training_status = JobStatusFields();
  // Written by the controller for a job that declares spec.checkpoint.costSeconds and no
  // intervalSeconds: the Young/Daly interval for its GPUs.
  training_status.push_back(
      Optional("checkpointIntervalSeconds", S::Int().Positive().Max(kMaxRuntimeSeconds)));
  kinds.push_back(Make("TrainingJob", "trainingjobs", true, job_phases,
                       S::Object(std::move(training)), std::move(training_status)));
  std::vector<Schema::Field> inference = {
      Required("modelVersion", S::String().DnsLabel()),
      // What each replica runs (the agent's command line), as a TrainingJob's members.
      Optional("image", S::String().MaxLength(1024)),
      Optional("command", S::Array(S::String().MaxLength(65536)).MaxItems(kMaxCommandArgs)),
      Optional("queue", S::String().DnsLabel()),
      Optional("priorityClassName", S::String().DnsLabel()),
      Required("replicas", S::Object({
                               Required("min", S::Int().Min(0).Max(kMaxMembersPerJob)),
                               Required("max", S::Int().Positive().Max(kMaxMembersPerJob)),
                           })),
      Required("gpusPerReplica", S::Int().Positive().Max(kMaxGpusPerNode)),
      Optional("gpuMilli", S::Int().Positive().Max(kMaxGpuMilli)),
      Optional("gpuMemoryMiB", S::Int().Min(0).Max(kMaxGpuMemoryMiB)),
      Optional("gpuType", S::String().MaxLength(63)),
      Optional("resources", Resources()),
      Optional("slo", S::Object({
                          Optional("p99LatencyMs", S::Number().Positive()),
                          Optional("minThroughputRps", S::Number().Positive()),
                      })),
  };
  AddSchedulingFields(inference);
  kinds.push_back(
      Make("InferenceService", "inferenceservices", true,
           {"Pending", "Admitted", "Queued", "Scheduled", "Deploying", "Running", "Ready",
            "Degraded", "Preempted", "NodeLost", "Succeeded", "Failed", "Dispatched"},
           S::Object(std::move(inference)), InferenceStatusFields()));
  // Nodes chosen by GPU type ("" or "*": any) and labels; cordoned or drained as a whole; the
  // queues confined to them (api/gpu_pool.h, docs/queueing.md "GPU pools").
  kinds.push_back(
      Make("GPUPool", "gpupools", true, {"Pending", "Ready", "Draining"},
           S::Object({
               Required("gpuType", S::String().MaxLength(63)),
               Optional("nodeSelector", S::Map(S::String().MaxLength(63))),
               Optional("capacity", S::Int().Min(0)),
               Optional("queues", S::Array(S::String().DnsLabel())),
               Optional("cordon", S::Bool()),
               Optional("drain", S::Bool()),
           }),
           {
               // Written by the controller (api::PoolStatus).
               Optional("nodes", S::Int().Min(0)),
               Optional("gpus", S::Int().Min(0)),
               Optional("allocatable", S::Int().Min(0)),
               Optional("allocated", S::Int().Min(0)),
               Optional("unhealthy", S::Int().Min(0)),
               Optional("cordoned", S::Int().Min(0)),
               Optional("nodeNames",
                        S::Array(S::String().MaxLength(253)).MaxItems(kPoolStatusMaxNodeNames)),
           }));
  kinds.push_back(Make("Checkpoint", "checkpoints", true, {"Pending", "Writing", "Ready", "Failed"},
                       S::Object({
                           Required("jobName", S::String().DnsLabel()),
                           Required("step", S::Int().Min(0)),
                           Required("path", S::String().MaxLength(1024)),
                           Optional("sizeBytes", S::Int().Min(0)),
                       })));
  kinds.push_back(Make("ModelVersion", "modelversions", true, {"Pending", "Ready", "Retired"},
                       S::Object({
                           Required("model", S::String().DnsLabel()),
                           Required("version", S::String().MaxLength(63)),
                           Optional("checkpoint", S::String().DnsLabel()),
                           Optional("artifactPath", S::String().MaxLength(1024)),
                       }),
                       {
                           // Lineage, written by the controller (api::ModelVersionStatus).
                           Optional("servedBy", S::Array(S::String().DnsLabel())),
                           Optional("checkpoint", S::Object({
                                                      Required("name", S::String()),
                                                      Optional("jobName", S::String()),
                                                      Optional("step", S::Int().Min(0)),
                                                      Optional("path", S::String()),
                                                  })),
                       }));
  kinds.push_back(Make(
      "Queue", "queues", false, {"Active", "Closed"},
      S::Object({
          Optional("parent", S::String().DnsLabel()),
          Optional("weight", S::Number().Positive()),
          Optional("gpuQuota", S::Map(S::Int().Min(0).Max(kMaxQuotaGpus))),
          Optional("borrowing", S::Bool()),
          // Full form, in GPUs / CPU cores / GiB; keys "gpu/<model>", "cpu", "memory" (also
          // checked by controller/queue_codec.h, which decodes them).
          Optional("quotas",
                   S::Map(S::Object({
                              Optional("guaranteed", S::Number().Min(0).Max(kMaxQuotaGpus)),
                              Optional("borrowingLimit", S::Number().Min(0).Max(kMaxQuotaGpus)),
                              Optional("lendingLimit", S::Number().Min(0).Max(kMaxQuotaGpus)),
                          }))
                       .Keys({"cpu", "memory", "gpu/*"})),
          Optional("namespaces", S::Array(S::String().DnsLabel())),
      }),
      {
          // Written by the scheduling controller.
          Optional("gpusAllocated", S::Map(S::Number())),
          Optional("pendingJobs", S::Int().Min(0)),
          Optional("admittedJobs", S::Int().Min(0)),
          Optional("entitlement", S::Number()),
          Optional("fairShare", S::Number()),
          Optional("dominantShare", S::Number()),
          Optional("decayedUsage", S::Number()),
          Optional("burstCredit", S::Number()),
          Optional("burstCreditGpuSeconds", S::Number()),
          Optional("borrowing", S::Bool()),
      }));
  // A member cluster of a federation, read by the hub's dispatcher
  // (`tessera server --federation`, src/federation/dispatcher.h).
  kinds.push_back(Make("Cluster", "clusters", false, {"Unknown", "Ready", "Unreachable"},
                       S::Object({
                           Required("server", S::String().MaxLength(1024)),
                           // A bearer token for the member, read from this file on the hub.
                           Optional("tokenFile", S::String().MaxLength(1024)),
                       }),
                       {
                           Optional("gpus", S::Int().Min(0)),
                           Optional("freeGpus", S::Int().Min(0)),
                           Optional("lastTransitionTime", S::String()),
                       }));
  kinds.push_back(
      Make("PriorityClass", "priorityclasses", false, {"Active"},
           S::Object({
               Required("value", S::Int().Min(-kMaxPriority).Max(kMaxPriority)),
               Optional("preemptionPolicy", S::String().OneOf({"PreemptLowerPriority", "Never"})),
               Optional("description", S::String().MaxLength(1024)),
           })));
  // A node is described either by gpuType + gpuCount (+ layout) or by an
  // explicit gpus[] list (+ links matrix); src/controller/node_codec.cc
  // checks that exactly one is used.
  kinds.push_back(Make(
      "Node", "nodes", false, {"Unknown", "Ready", "NotReady"},
      S::Object({
          Optional("gpuType", S::String().MaxLength(63)),
          Optional("gpuCount", S::Int().Min(0).Max(kMaxGpusPerNode)),
          Optional("gpuMemoryMiB", S::Int().Min(0).Max(kMaxGpuMemoryMiB)),
          Optional("gpus",
                   S::Array(S::Object({
                                Required("index", S::Int().Min(0).Max(kMaxGpusPerNode - 1)),
                                Optional("uuid", S::String().MaxLength(128)),
                                Required("model", S::String().MaxLength(63)),
                                Optional("memoryMiB", S::Int().Min(0).Max(kMaxGpuMemoryMiB)),
                            }))
                       .MaxItems(kMaxGpusPerNode)),
          Optional("layout",
                   S::String().OneOf({"nvswitch", "nvlink-pairs", "nvlink-quads", "pcie"})),
          // links[a][b]: X, NVSWITCH, NVLINK, PIX, PHB or SYS (nvidia-smi topo -m).
          Optional("links", S::Array(S::Array(S::String().OneOf(
                                                  {"X", "NVSWITCH", "NVLINK", "PIX", "PHB", "SYS"}))
                                         .MaxItems(kMaxGpusPerNode))
                                .MaxItems(kMaxGpusPerNode)),
          Optional("nvlinkDomains",
                   S::Array(S::Int().Min(-1).Max(kMaxGpusPerNode)).MaxItems(kMaxGpusPerNode)),
          Optional("rack", S::String().MaxLength(63)),
          Optional("block", S::String().MaxLength(63)),
          Optional("cpuMilli", S::Int().Min(0).Max(kMaxCpuCores * 1000)),
          Optional("memoryMiB", S::Int().Min(0).Max(kMaxMemoryGiB * 1024)),
          Optional("taints", Taints()),
          Optional("pool", S::String().DnsLabel()),
          Optional("unschedulable", S::Bool()),
          // Members it runs at once (default kDefaultMaxMembersPerNode).
          Optional("maxMembers", S::Int().Positive().Max(kMaxMembersPerNode)),
          Optional("topology", S::Map(S::String().MaxLength(63))),
      }),
      {
          // Written by the node's agent with every heartbeat.
          Optional("lastHeartbeatTime", S::String()),
          Optional("gpus",
                   S::Array(S::Object({
                                Required("index", S::Int().Min(0).Max(kMaxGpusPerNode - 1)),
                                Required("health", S::String().OneOf({"Healthy", "Unhealthy"})),
                                Optional("message", S::String().MaxLength(1024)),
                                // Measured percent (DCGM_FI_DEV_GPU_UTIL's sample).
                                Optional("utilization", S::Int().Min(0).Max(100)),
                            }))
                       .MaxItems(kMaxGpusPerNode)),
      }));
  // Objects of each kind a namespace may hold, as Kubernetes' ResourceQuota: spec.hard maps
  // "count/<plural>" (a namespaced kind: trainingjobs, inferenceservices, checkpoints,
  // modelversions) to the most objects of it; a create past it is refused with 403. Written by
  // admins only (server/auth.cc); enforced by the API server (server/resource_quota.h).
  kinds.push_back(Make("ResourceQuota", "resourcequotas", true, {"Active"},
                       S::Object({
                           Required("hard", S::Map(S::Int().Min(0).Max(kMaxQuotaObjects))),
                       })));
  // One transition of an object's lifecycle, written by the controller in the
  // same transaction as the transition itself.
  kinds.push_back(Make("Event", "events", true, {"Recorded"},
                       S::Object({
                           Required("involvedObject", S::Object({
                                                          Required("kind", S::String()),
                                                          Required("name", S::String()),
                                                          Optional("namespace", S::String()),
                                                          Optional("uid", S::String()),
                                                      })),
                           Required("reason", S::String().MaxLength(128)),
                           Optional("message", S::String().MaxLength(4096)),
                           Optional("type", S::String().OneOf({"Normal", "Warning"})),
                           Optional("eventTime", S::String()),
                           Optional("generation", S::Int().Min(0)),
                       })));
  return kinds;
}

}  // namespace

const std::vector<KindInfo>& AllKinds() {
  static const std::vector<KindInfo>* kinds = new std::vector<KindInfo>(BuildKinds());
  return *kinds;
}

const KindInfo* KindByPlural(std::string_view plural) {
  for (const KindInfo& k : AllKinds()) {
    if (k.plural == plural) return &k;
  }
  return nullptr;
}

bool IsJobKind(const KindInfo& kind) {
  return kind.kind == "TrainingJob" || kind.kind == "InferenceService";
}

int64_t NodeGpuCount(const nlohmann::json& spec) {
  if (!spec.is_object()) return 0;
  if (auto g = spec.find("gpus"); g != spec.end() && g->is_array()) {
    return static_cast<int64_t>(g->size());
  }
  if (auto c = spec.find("gpuCount"); c != spec.end() && c->is_number_integer()) {
    return c->get<int64_t>();
  }
  return 0;
}

}  // namespace tessera::api
