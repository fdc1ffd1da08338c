// Identifiers and placement records shared by the scheduler's parts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "model/resources.h"

namespace tessera::sched {

// Dense index of a node in ClusterState (stable for the node's lifetime).
using NodeId = int32_t;
// Interned GPU model name.
using ModelId = int16_t;
inline constexpr NodeId kNoNode = -1;
inline constexpr ModelId kNoModel = -1;

// A share of one GPU granted to a member.
struct GpuGrant {
  int8_t gpu = 0;     // index inside the node
  int16_t milli = 0;  // 1..1000
  friend bool operator==(const GpuGrant&, const GpuGrant&) = default;
};

// Where one member (pod) of a job runs.
struct MemberPlacement {
  int32_t group = 0;   // index into Job::groups
  int32_t member = 0;  // ordinal inside the group
  NodeId node = kNoNode;
  absl::InlinedVector<GpuGrant, 8> gpus;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  model::ScalarResources scalars;  // the extended resources it holds (usually none)
};

// Where a whole job runs: one entry per placed member.
struct Placement {
  std::string job_key;
  std::vector<MemberPlacement> members;
};

}  // namespace tessera::sched
