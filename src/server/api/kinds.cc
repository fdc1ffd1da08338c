#include "server/api/kinds.h"

namespace tessera::server::api {
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

Schema Status(const std::vector<std::string>& phases) {
  return S::Object({
      Optional("phase", S::String().OneOf(phases)),
      Optional("message", S::String().MaxLength(4096)),
      Optional("conditions",
               S::Array(S::Object({
                   Required("type", S::String().MaxLength(63)),
                   Required("status", S::String().OneOf({"True", "False", "Unknown"})),
                   Optional("reason", S::String().MaxLength(256)),
                   Optional("message", S::String().MaxLength(4096)),
                   Optional("lastTransitionTime", S::String()),
               }))),
      // Free-form progress fields written by controllers and agents.
      Optional("observed", S::Map(S::String())),
  });
}

KindInfo Make(std::string kind, std::string plural, bool namespaced,
              std::vector<std::string> phases, Schema spec) {
  Schema object = S::Object({
      Required("apiVersion", S::String().OneOf({kApiVersion})),
      Required("kind", S::String().OneOf({kind})),
      Required("metadata", Metadata()),
      Required("spec", std::move(spec)),
      Optional("status", Status(phases)),
  });
  return KindInfo{std::move(kind), std::move(plural), namespaced, std::move(phases),
                  std::move(object)};
}

Schema Resources() {
  return S::Object({
      Optional("cpu", S::Number().Min(0)),
      Optional("memoryGiB", S::Number().Min(0)),
  });
}

std::vector<KindInfo> BuildKinds() {
  std::vector<KindInfo> kinds;
  const std::vector<std::string> job_phases = {"Pending",   "Queued", "Running",  "Suspended",
                                               "Succeeded", "Failed", "Preempted"};
  kinds.push_back(
      Make("TrainingJob", "trainingjobs", true, job_phases,
           S::Object({
               Optional("queue", S::String().DnsLabel()),
               Optional("priorityClassName", S::String().DnsLabel()),
               Optional("image", S::String().MaxLength(1024)),
               Optional("command", S::Array(S::String())),
               Required("groups", S::Array(S::Object({
                                               Required("name", S::String().DnsLabel()),
                                               Required("count", S::Int().Positive()),
                                               Required("gpusPerReplica", S::Int().Min(0)),
                                               Optional("gpuType", S::String().MaxLength(63)),
                                               Optional("resources", Resources()),
                                           }))
                                      .MinItems(1)),
               Optional("elastic", S::Object({
                                       Required("minReplicas", S::Int().Positive()),
                                       Required("maxReplicas", S::Int().Positive()),
                                   })),
               Optional("maxRuntimeSeconds", S::Int().Positive()),
               Optional("checkpoint", S::Object({
                                          Optional("intervalSeconds", S::Int().Positive()),
                                          Optional("path", S::String().MaxLength(1024)),
                                      })),
               Optional("suspend", S::Bool()),
           })));
  kinds.push_back(Make("InferenceService", "inferenceservices", true,
                       {"Pending", "Deploying", "Ready", "Degraded", "Failed"},
                       S::Object({
                           Required("modelVersion", S::String().DnsLabel()),
                           Optional("queue", S::String().DnsLabel()),
                           Optional("priorityClassName", S::String().DnsLabel()),
                           Required("replicas", S::Object({
                                                    Required("min", S::Int().Min(0)),
                                                    Required("max", S::Int().Positive()),
                                                })),
                           Required("gpusPerReplica", S::Int().Positive()),
                           Optional("gpuType", S::String().MaxLength(63)),
                           Optional("slo", S::Object({
                                               Optional("p99LatencyMs", S::Number().Positive()),
                                               Optional("minThroughputRps", S::Number().Positive()),
                                           })),
                       })));
  kinds.push_back(Make("GPUPool", "gpupools", true, {"Pending", "Ready", "Draining"},
                       S::Object({
                           Required("gpuType", S::String().MaxLength(63)),
                           Optional("nodeSelector", S::Map(S::String().MaxLength(63))),
                           Optional("capacity", S::Int().Min(0)),
                           Optional("queues", S::Array(S::String().DnsLabel())),
                       })));
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
                       })));
  kinds.push_back(Make("Queue", "queues", false, {"Active", "Closed"},
                       S::Object({
                           Optional("parent", S::String().DnsLabel()),
                           Optional("weight", S::Number().Positive()),
                           Optional("gpuQuota", S::Map(S::Int().Min(0))),
                           Optional("borrowing", S::Bool()),
                           Optional("namespaces", S::Array(S::String().DnsLabel())),
                       })));
  kinds.push_back(
      Make("PriorityClass", "priorityclasses", false, {"Active"},
           S::Object({
               Required("value", S::Int()),
               Optional("preemptionPolicy", S::String().OneOf({"PreemptLowerPriority", "Never"})),
               Optional("description", S::String().MaxLength(1024)),
           })));
  kinds.push_back(Make("Node", "nodes", false, {"Unknown", "Ready", "NotReady"},
                       S::Object({
                           Required("gpuType", S::String().MaxLength(63)),
                           Required("gpuCount", S::Int().Min(0)),
                           Optional("pool", S::String().DnsLabel()),
                           Optional("unschedulable", S::Bool()),
                           Optional("topology", S::Map(S::String().MaxLength(63))),
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

}  // namespace tessera::server::api
