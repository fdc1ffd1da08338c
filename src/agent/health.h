// GPU health classification, shared by the node agent and the Kubernetes device plugin.
//
// Algorithm (a pure state machine; no I/O, no clock of its own: every input carries its time):
//  - XID events: an XID on the ignore list changes nothing; an application XID (default 13, 31,
//    43, 45, 68, 109: faults a workload caused, the GPU itself is fine) changes nothing; every
//    other XID (48, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140, and any XID not on the application
//    list) marks the GPU unhealthy until it is reset or an operator clears it.
//  - A double-bit ECC event marks the GPU unhealthy until reset/cleared.
//  - A lost GPU or a failing event wait marks every GPU unhealthy until reset/cleared: the
//    driver can no longer vouch for any of them.
//  - A reset event or MarkHealthy() (an operator's action) clears those sticky causes.
//  - Metrics conditions: temperature at or above `max_temperature_c`, or volatile uncorrectable
//    ECC errors above `max_dbe_volatile`, or a failed row remap, mark the GPU unhealthy while the
//    condition holds; they clear when a later reading no longer shows them (temperature must fall
//    below the threshold by `temperature_hysteresis_c`).
//  A GPU is healthy when it has no sticky cause and no condition.
// Every change of the healthy/unhealthy verdict is reported to listeners with a reason such as
// "XID 79: GPU has fallen off the bus".
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/gpu_info.h"

namespace tessera::agent {

struct HealthPolicy {
  absl::flat_hash_set<uint64_t> application_xids = {13, 31, 43, 45, 68, 109};
  absl::flat_hash_set<uint64_t> ignored_xids;
  std::optional<uint32_t> max_temperature_c = 95;
  uint32_t temperature_hysteresis_c = 5;
  std::optional<uint64_t> max_dbe_volatile = 0;  // unhealthy when the count exceeds this
  bool row_remap_failure_unhealthy = true;
};

enum class XidClass { kIgnored, kApplication, kHardware };

XidClass ClassifyXid(uint64_t xid, const HealthPolicy& policy);
// NVIDIA's short description of an XID ("GPU has fallen off the bus"), or "unknown XID".
std::string XidDescription(uint64_t xid);

enum class Health { kHealthy, kUnhealthy };
std::string_view HealthName(Health h);  // "healthy" / "unhealthy"

struct GpuHealth {
  Health health = Health::kHealthy;
  std::string reason;     // why it is unhealthy; empty when healthy
  absl::Time since;       // time of the last verdict change (InfinitePast at registration)
  uint64_t last_xid = 0;  // the last XID seen, of any class (DCGM_FI_DEV_XID_ERRORS); 0: none
};

struct HealthTransition {
  std::string uuid;
  Health from = Health::kHealthy;
  Health to = Health::kHealthy;
  std::string reason;
  absl::Time time;
};

// Thread safety: all methods may be called concurrently. Listeners run on the calling thread,
// after the tracker's lock is released, in registration order; they must not block for long.
class HealthTracker {
 public:
  using Listener = std::function<void(const HealthTransition&)>;

  explicit HealthTracker(HealthPolicy policy = {});

  // Registers a GPU (healthy). Idempotent. Events for unknown UUIDs register them first.
  void AddGpu(const std::string& uuid);
  void AddListener(Listener listener);

  void OnEvent(const GpuEvent& event);
  void OnMetrics(const std::string& uuid, const GpuMetrics& metrics, absl::Time time);
  // Reset or operator action: clears sticky causes (XID, ECC event, loss) for `uuid`; metric
  // conditions stay until a reading clears them. NotFound for an unknown UUID.
  absl::Status MarkHealthy(const std::string& uuid, const std::string& reason, absl::Time time);

  absl::StatusOr<GpuHealth> Get(const std::string& uuid) const;
  bool IsHealthy(const std::string& uuid) const;
  std::vector<std::string> Uuids() const;  // sorted

 private:
  struct State {
    std::optional<std::string> sticky;  // first unrecovered XID / ECC / loss reason
    std::optional<std::string> thermal;
    std::optional<std::string> ecc;
    Health health = Health::kHealthy;
    absl::Time since = absl::InfinitePast();
    uint64_t last_xid = 0;
  };
  // Re-derives the verdict; appends a transition when it changed.
  void UpdateLocked(const std::string& uuid, State& s, absl::Time time,
                    std::vector<HealthTransition>* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  State& StateLocked(const std::string& uuid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Notify(const std::vector<HealthTransition>& transitions);

  const HealthPolicy policy_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, State> gpus_ ABSL_GUARDED_BY(mu_);
  mutable absl::Mutex listeners_mu_;
  std::vector<Listener> listeners_ ABSL_GUARDED_BY(listeners_mu_);
};

}  // namespace tessera::agent
