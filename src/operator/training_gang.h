// The Kubernetes objects a TrainingJob becomes (what `tessera operator` creates for it), as pure
// functions of the job and its generation:
//   - one Pod per member, `{job}-g{G}-{group}-{i}`, with schedulerName `tessera`, its GPUs as
//     `nvidia.com/gpu` limits, its group's CPU and memory as requests, the job's node selector
//     (and `nvidia.com/gpu.product` for a gpuType), tolerations and priority class, restartPolicy
//     Never (the operator restarts the whole gang, not the kubelet one member), labelled with its
//     job, generation, group and rank, and owned by the TrainingJob (controller reference, so the
//     garbage collector deletes it with the job);
//   - one scheduler-plugins PodGroup per generation, `{job}-g{G}` (minMember: every member, or
//     spec.elastic.minReplicas / spec.gang.minMember; spec.gang.timeoutSeconds as its
//     scheduleTimeoutSeconds; spec.topology as the tessera.dev/topology annotations), which
//     `tessera scheduler` places all or nothing;
//   - one headless Service named after the job (publishNotReadyAddresses) for rendezvous: member
//     {group}-{i} answers at {group}-{i}.{service}.
// The distributed-training environment of each member (as Kubeflow's PyTorchJob sets it, so
// torchrun and plain torch.distributed both start): MASTER_ADDR (rank 0's DNS name),
// MASTER_PORT (29500), WORLD_SIZE (members), RANK (the member's rank, groups in spec order),
// torchrun's PET_NNODES ("N", or "MIN:MAX" for an elastic job), PET_NPROC_PER_NODE (the member's
// GPUs, at least 1), PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT; and Tessera's own, as the
// standalone agent passes them: TESSERA_JOB, TESSERA_GENERATION, TESSERA_WORLD_SIZE,
// TESSERA_RANK, TESSERA_CHECKPOINT_PATH (spec.checkpoint.path), TESSERA_RESUME_FROM and
// TESSERA_RESUME_STEP (the newest Ready Checkpoint when the generation started), and
// TESSERA_CHECKPOINT_INTERVAL_SECONDS (CheckpointInterval).
// Pure functions; thread-compatible.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "api/checkpoints.h"
#include "nlohmann/json.hpp"
#include "operator/json_fields.h"
#include "sched/framework/checkpoint_cadence.h"

namespace tessera::op {

using Json = nlohmann::json;

inline constexpr char kJobLabel[] = "tessera.dev/trainingjob";
inline constexpr char kGenerationLabel[] = "tessera.dev/generation";
inline constexpr char kGroupLabel[] = "tessera.dev/group";
inline constexpr char kRankLabel[] = "tessera.dev/rank";
inline constexpr char kPodGroupLabel[] = "scheduling.x-k8s.io/pod-group";
// The scheduler's: a Pod's queue (kubesched/translate.h).
inline constexpr char kQueueLabel[] = "tessera.dev/queue";
// Set by a member on its own Pod when it has written a checkpoint: the operator records it as a
// Ready Checkpoint object `{job}-step-{step}` (checkpoint_report.h).
inline constexpr char kCheckpointStepAnnotation[] = "tessera.dev/checkpoint-step";
inline constexpr char kCheckpointPathAnnotation[] = "tessera.dev/checkpoint-path";
inline constexpr int kMasterPort = 29500;

struct GangOptions {
  std::string scheduler_name = "tessera";
  // Per-GPU mean time between failures for Young/Daly checkpoint intervals
  // (sched/framework/checkpoint_cadence.h), as `tessera server --checkpoint-gpu-mtbf-hours`.
  double gpu_mtbf_s = sched::kDefaultGpuMtbfSeconds;
};

// One member of the gang; rank counts members over the groups in spec order.
struct Member {
  std::string group;
  int index = 0;
  int rank = 0;
  int gpus = 0;
};
std::vector<Member> MembersOf(const Json& spec);

// The smallest gang that may run: spec.elastic.minReplicas, else spec.gang.minMember (when > 0),
// else every member.
int MinMembers(const Json& spec, int members);

// The job's checkpoint interval in seconds: spec.checkpoint.intervalSeconds, else with
// spec.checkpoint.costSeconds the Young/Daly interval for all its GPUs (the standalone
// controller's, sched::CheckpointIntervalSeconds), else 0 (none).
int64_t CheckpointInterval(const Json& spec, const GangOptions& opts);

// What keeps the job from running on Kubernetes, every field named ("spec.image: required on
// Kubernetes (the container image of every member)"); empty when it can run.
std::vector<std::string> KubeSpecProblems(const Json& spec);

std::string PodName(const std::string& job, int64_t generation, const Member& m);
std::string PodGroupName(const std::string& job, int64_t generation);
// The job's name when it is a valid Service name (a DNS-1035 label: it starts with a letter),
// else "tj-" + the name, cut to 63 characters.
std::string ServiceName(const std::string& job);

// A job's resume point: its newest Ready Checkpoint (api/checkpoints.h).
using ResumePoint = api::CheckpointRef;

// `job` is the TrainingJob as read from the API (metadata.uid is needed for owner references).
Json DesiredService(const Json& job);
Json DesiredPodGroup(const Json& job, int64_t generation);
Json DesiredPod(const Json& job, int64_t generation, const Member& m, int world_size,
                const std::optional<ResumePoint>& resume, const GangOptions& opts);

}  // namespace tessera::op
