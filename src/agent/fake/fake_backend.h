// FakeBackend: a GpuBackend that plays back a FakeConfig (see fake_config.h) against an injected
// Clock, for tests, the simulator and machines without GPUs.
//
// Time zero of the event script is the clock's time at Init(). Script entries take effect when
// the clock reaches them, observed lazily by every call: queries see the state as of
// clock.Now(), and WaitForEvent sleeps on the clock until the next entry that yields an event
// (with a ManualClock, sleeping advances it, so a test runs a whole timeline instantly).
// Event times are the scripted times, so results do not depend on when a caller looked.
// A lost GPU fails its queries with Unavailable until a reset entry; energy grows with the
// current power draw over clock time.
// Thread safety: all methods are safe to call concurrently (one internal mutex, never held while
// sleeping on the clock).
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/fake/fake_config.h"
#include "agent/gpu_backend.h"
#include "common/clock.h"

namespace tessera::agent {

class FakeBackend final : public GpuBackend {
 public:
  // `clock` must outlive the backend.
  FakeBackend(FakeConfig config, Clock& clock);
  static absl::StatusOr<std::unique_ptr<FakeBackend>> FromFile(const std::string& path,
                                                               Clock& clock);

  absl::Status Init() override;
  absl::Status Shutdown() override;
  std::string BackendName() const override { return "fake"; }
  std::string DriverVersion() override { return config_.driver_version; }
  std::string CudaDriverVersion() override { return ""; }
  absl::StatusOr<int> DeviceCount() override;
  absl::StatusOr<GpuInfo> GetDeviceInfo(int index) override;
  absl::StatusOr<GpuMetrics> GetMetrics(int index) override;
  absl::StatusOr<TopologyLevel> GetTopologyLevel(int a, int b) override;
  absl::StatusOr<std::optional<GpuEvent>> WaitForEvent(absl::Duration timeout) override;

 private:
  struct GpuState {
    GpuInfo info;
    GpuMetrics metrics;
    bool lost = false;
    double energy_mj = 0;  // accumulated up to energy_at
    absl::Time energy_at;
  };

  void ApplyDueLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ApplyLocked(const FakeEvent& e, absl::Time at) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<GpuState*> GpuLocked(int index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const FakeConfig config_;
  Clock& clock_;
  mutable absl::Mutex mu_;
  bool initialized_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time start_ ABSL_GUARDED_BY(mu_);
  size_t next_event_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<GpuState> gpus_ ABSL_GUARDED_BY(mu_);
  std::deque<GpuEvent> pending_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::agent
