// HealthMonitor: the loop that keeps a HealthTracker current from a GpuBackend. Shared by the
// node agent, `tessera gpus --watch` and (later) the Kubernetes device plugin.
//
// Algorithm: until the deadline, (1) every `sample_every` read every GPU's metrics and feed them
// to the tracker (thermal/ECC conditions); a GPU whose query fails with Unavailable is reported
// once as a kGpuLost event; (2) in between, block in backend.WaitForEvent and feed each event to
// the tracker. A kEventWaitFailed event is followed by a `wait_failure_backoff` pause, because a
// broken wait usually fails at once. A backend without an event API (Unimplemented) is still
// sampled; events_supported() then turns false.
// Thread safety: RunUntil runs on one thread; Stop() may be called from any thread and makes
// RunUntil return after the wait in progress (at most `sample_every`).
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "agent/gpu_backend.h"
#include "agent/health.h"
#include "common/clock.h"

namespace tessera::agent {

class HealthMonitor {
 public:
  struct Options {
    absl::Duration sample_every = absl::Seconds(5);
    absl::Duration wait_failure_backoff = absl::Seconds(1);
  };
  // Receives every event fed to the tracker (including synthesized kGpuLost), before the
  // tracker sees it.
  using EventCallback = std::function<void(const GpuEvent&)>;

  // All references must outlive the monitor. The backend must be initialized.
  HealthMonitor(GpuBackend& backend, HealthTracker& tracker, Clock& clock, Options options);
  HealthMonitor(GpuBackend& backend, HealthTracker& tracker, Clock& clock)
      : HealthMonitor(backend, tracker, clock, Options{}) {}

  void SetEventCallback(EventCallback cb) { on_event_ = std::move(cb); }

  // Registers the backend's GPUs with the tracker (by UUID). Call once before RunUntil.
  absl::Status Start();
  // Runs the loop until `until` on the clock or Stop().
  void RunUntil(absl::Time until);
  void Stop() { stop_.store(true); }

  bool events_supported() const { return events_supported_; }
  const std::vector<std::string>& uuids() const { return uuids_; }  // by index; empty if lost

 private:
  void Sample();
  void Feed(const GpuEvent& e);

  GpuBackend& backend_;
  HealthTracker& tracker_;
  Clock& clock_;
  const Options options_;
  EventCallback on_event_;
  std::vector<std::string> uuids_;
  absl::flat_hash_set<int> reported_lost_;
  bool events_supported_ = true;
  std::atomic<bool> stop_{false};
};

}  // namespace tessera::agent
