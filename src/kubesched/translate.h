// Kubernetes objects as the scheduling core sees them: a Node as a model::Node, a Pod's requests
// as a model::ResourceRequest, its node selector, required node affinity and tolerations on a
// model::Job, and the gang a Pod belongs to.
//
// Conventions read from the objects (docs/kubernetes.md, "tessera scheduler"):
// - GPUs: capacity `nvidia.com/gpu`, those beyond allocatable marked unhealthy; model from the
// label `nvidia.com/gpu.product` (GPU feature
//   discovery; "gpu" without it), memory per GPU in MiB from `nvidia.com/gpu.memory`;
//   NVLink islands from the annotation `tessera.dev/nvlink-domains` that `tessera device-plugin`
//   writes ("0,0,0,0,1,1,1,1": an island id per GPU index, -1 for none). Without it each GPU is
//   its own island (no pair is known to be closer than another).
// - Rack and block from configurable label keys (TopologyLabels). A node that is NotReady or
//   cordoned is not schedulable; its running Pods still count.
// - CPU in milli-cores, memory in MiB (rounded up), `pods` as the node's member limit.
// - Extended resources (domain-prefixed names: MIG profiles such as nvidia.com/mig-1g.10gb as
//   the device plugin's mixed strategy advertises them, rdma/ib, ...): the node's allocatable
//   count, the Pod's whole-unit request, as model::ScalarResources.
// Pure functions; no I/O; thread-compatible.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kube/gang_objects.h"
#include "kube/objects.h"
#include "model/job.h"
#include "model/node.h"

namespace tessera::kubesched {

inline constexpr char kGpuResource[] = "nvidia.com/gpu";
inline constexpr char kGpuProductLabel[] = "nvidia.com/gpu.product";
inline constexpr char kGpuMemoryLabel[] = "nvidia.com/gpu.memory";
inline constexpr char kNvlinkDomainsAnnotation[] = "tessera.dev/nvlink-domains";
// A Pod's queue (a tessera.dev/v1 Queue); absent: "default".
inline constexpr char kQueueLabel[] = "tessera.dev/queue";
// Written through the binding onto each Pod Tessera binds: its job (the gang's key) and the GPU
// indices chosen on the node ("0,1"), so a restarted scheduler rebuilds exactly what it decided
// and a device plugin may honour the choice.
inline constexpr char kJobAnnotation[] = "tessera.dev/job";
inline constexpr char kGpusAnnotation[] = "tessera.dev/gpus";
// Set by a workload (or its operator) on its Pods: when it last wrote a checkpoint (RFC 3339).
// Preemption prefers victims that lose the least work.
inline constexpr char kLastCheckpointAnnotation[] = "tessera.dev/last-checkpoint";
// On a Pod (the first Pod of a gang speaks for it): "Spread" prefers the emptiest nodes, "Pack"
// (the default) the fullest, as a standalone job's spec.placement. `tessera operator` sets
// Spread on an InferenceService's replicas and copies a TrainingJob's spec.placement.
inline constexpr char kPlacementAnnotation[] = "tessera.dev/placement";
// On a gang's PodGroup (either API): the topology level its Pods must share ("rack", "block",
// "node") and whether it is "required" (default) or "preferred".
inline constexpr char kTopologyAnnotation[] = "tessera.dev/topology";
inline constexpr char kTopologyPolicyAnnotation[] = "tessera.dev/topology-policy";

struct TopologyLabels {
  std::string rack = "tessera.dev/rack";
  std::string block = "tessera.dev/block";
};

// The node as the scheduler places work on it. InvalidArgument names the field (more than 16
// GPUs, a malformed islands annotation).
absl::StatusOr<model::Node> NodeFromKube(const kube::Node& n, const TopologyLabels& labels);

// Sets `node`'s GPUs and its topology: NVLink inside an island (`domains[i]`, -1 for none), the
// host bridge between islands. InvalidArgument when they do not make a topology.
absl::Status SetGpus(std::vector<model::Gpu> gpus, const std::vector<int>& domains,
                     model::Node* node);

// Ready=True (a node without a Ready condition counts as ready: created by hand or a test).
bool NodeReady(const kube::Node& n);

// What a Pod asks: per resource, the larger of its containers' sum and its largest init
// container, plus the Pod overhead; requests, or limits where a container states no request.
// Extended resources become model::ScalarResources. InvalidArgument names each resource the
// scheduler cannot place (a name without a domain it does not know, a fraction of an extended
// resource, more than 16 GPUs); ephemeral-storage and hugepages are not modelled.
absl::StatusOr<model::ResourceRequest> PodRequest(const kube::Pod& p);

// The Pod's node selector, required node affinity and tolerations onto `job`; InvalidArgument
// names the field of a rule that cannot be evaluated.
absl::Status ApplyPodConstraints(const kube::Pod& p, model::Job* job);

// The GPU indices of the Pod's tessera.dev/gpus annotation (empty without one); entries that are
// not numbers are skipped (the caller checks the count against the request).
std::vector<int> AnnotatedGpus(const kube::Pod& p);

// Terminal (Succeeded or Failed) Pods hold no resources.
bool PodTerminal(const kube::Pod& p);

// The gang a Pod belongs to: `kind` "x" for scheduler-plugins' PodGroup (label
// scheduling.x-k8s.io/pod-group), "k" for KEP-4671's (spec.schedulingGroup.podGroupName); nullopt
// for a Pod of its own.
struct GangRef {
  std::string kind;  // "x" or "k"
  std::string ns, name;
  std::string Key() const { return kind + ":" + ns + "/" + name; }
  friend bool operator==(const GangRef&, const GangRef&) = default;
};
std::optional<GangRef> GangOf(const kube::Pod& p);

// What a PodGroup object asks of its gang.
struct GangSpec {
  int32_t min_member = 1;
  absl::Duration timeout = absl::ZeroDuration();  // 0: waits forever
  model::TopologyConstraint topology;
  std::optional<int32_t> priority;
};
// `topology_keys` of a KEP-4671 PodGroup map to a level when the key is the rack or block label
// (or kubernetes.io/hostname); the tessera.dev/topology annotation wins. InvalidArgument names it.
absl::StatusOr<GangSpec> GangSpecOf(const kube::CoschedulingPodGroup& g,
                                    const TopologyLabels& labels);
absl::StatusOr<GangSpec> GangSpecOf(const kube::PodGroup& g, const TopologyLabels& labels);

}  // namespace tessera::kubesched
