// MemberCapacity: what one member cluster of a federation can take now, read
// from its GET /api/v1/fleet summary (src/server/fleet.h), and whether a job
// fits it.
//
// The fit is the dispatcher's estimate, not a placement: every member must get
// its whole GPUs (or, for a share, one GPU with that many milli-GPU free) on
// one Ready, schedulable node of an allowed model; members are taken largest
// first, first fit. The member cluster's own scheduler then places the job
// (topology, quotas, CPU and memory are its business); a job the estimate
// admits but the member cannot place waits there until the dispatcher moves
// it to another member (requeue.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/job.h"
#include "nlohmann/json.hpp"

namespace tessera::federation {

using Json = nlohmann::json;

struct MemberCapacity {
  struct Node {
    std::string name;
    std::string model;
    std::vector<int64_t> free_milli;  // per GPU; healthy GPUs only
  };
  std::vector<Node> nodes;  // Ready and schedulable
  int64_t gpus = 0;         // healthy GPUs on those nodes
  int64_t free_gpus = 0;    // of those, GPUs no placement uses
};

// From a full fleet summary ({"nodes": [...], "jobs": [...]}). InvalidArgument
// naming the row when it is not one.
absl::StatusOr<MemberCapacity> CapacityFromFleet(const Json& fleet);

// One member of a job: whole GPUs, or a share (milli < 1000) of one GPU.
struct MemberDemand {
  int64_t gpus = 0;
  int64_t milli = 1000;
};
struct JobDemand {
  std::vector<MemberDemand> members;
  std::vector<std::string> models;  // allowed GPU models; empty: any
  int64_t gpus() const;             // whole-GPU equivalents, shares rounded up per member
};
// The demand of a job as the scheduler decodes it (controller::JobFromObject):
// every member of a TrainingJob; an InferenceService (`service`) needs its
// gang minimum (replicas.min) to start.
JobDemand DemandOf(const model::Job& job, bool service);

bool Fits(const MemberCapacity& c, const JobDemand& d);
// Fits, and if so takes the demand out of `c` (so that the next job dispatched
// in the same pass sees less room); `c` is unchanged otherwise.
bool Take(MemberCapacity* c, const JobDemand& d);

}  // namespace tessera::federation
