// The API's limits, declared once: the schema (kinds.cc) and the cross-field checks
// (object_codec.cc) refuse anything beyond them with 422 naming the field and the limit, so no
// stored object can ask the controller or an agent for more than they represent. The agent
// applies the same grace limit to what it reads (defence in depth).
//
// Sizes are chosen for the largest real machines with room to spare, not for today's fleet:
// 16 GPUs per node (HGX-2 class), 4,096 cores and 64 TiB per node, a job of 16,384 members
// (a 131,072-GPU gang of 8-GPU members).
#pragma once

#include <cstdint>

namespace tessera::api {

inline constexpr int64_t kMaxGpusPerNode = 16;
inline constexpr int64_t kMaxMembersPerJob = 16384;   // sum of spec.groups[].count; replicas.max
inline constexpr int64_t kMaxCpuCores = 4096;         // resources.cpu; a Node's cpuMilli / 1000
inline constexpr int64_t kMaxMemoryGiB = 65536;       // resources.memoryGiB; a Node's memoryMiB
inline constexpr int64_t kMaxGpuMemoryMiB = 1 << 22;  // 4 TiB: gpuMemoryMiB, a GPU's memoryMiB
inline constexpr int64_t kMaxGpuMilli = 1000;         // gpuMilli: a share of one GPU, 1..1000
inline constexpr int64_t kMaxRuntimeSeconds = 366LL * 24 * 3600;  // maxRuntimeSeconds
inline constexpr int64_t kMaxRestarts = 1000;
// A TrainingJob's spec.checkpoint.keep: Ready Checkpoints retention keeps (0: all).
inline constexpr int64_t kMaxCheckpointsKept = 100000;
// A member's graceful stop (annotation tessera.dev/grace-seconds): the checkpoint signal, then
// SIGKILL after at most this long, whatever the job asks.
inline constexpr int64_t kMaxGraceSeconds = 600;
inline constexpr char kGraceAnnotation[] = "tessera.dev/grace-seconds";
inline constexpr int64_t kMaxPriority = 1000000000;  // |priority|, PriorityClass value
inline constexpr int64_t kMaxQuotaGpus = 10000000;   // a Queue's gpuQuota / quotas values
// A ResourceQuota's spec.hard values (objects of one kind in one namespace).
inline constexpr int64_t kMaxQuotaObjects = 10000000;
inline constexpr int64_t kMaxCommandArgs = 4096;  // command[] entries
inline constexpr int64_t kMaxListItems = 4096;    // other lists (tolerations, taints, ...)
// Members one node runs at once (a Node's spec.maxMembers; kubelet's max-pods is 110 by default):
// the default leaves room for fractional GPUs (8 GPUs shared 10 ways) beside CPU members.
inline constexpr int64_t kDefaultMaxMembersPerNode = 256;
inline constexpr int64_t kMaxMembersPerNode = 4096;

}  // namespace tessera::api
