#include "agent/health_monitor.h"

#include <algorithm>

#include "common/status_macros.h"

namespace tessera::agent {

HealthMonitor::HealthMonitor(GpuBackend& backend, HealthTracker& tracker, Clock& clock,
                             Options options)
    : backend_(backend), tracker_(tracker), clock_(clock), options_(options) {}

absl::Status HealthMonitor::Start() {
  ASSIGN_OR_RETURN(int count, backend_.DeviceCount());
  uuids_.assign(count, "");
  for (int i = 0; i < count; ++i) {
    absl::StatusOr<GpuInfo> info = backend_.GetDeviceInfo(i);
    if (!info.ok()) continue;  // lost already; reported by the first Sample()
    uuids_[i] = info->uuid;
    tracker_.AddGpu(info->uuid);
  }
  return absl::OkStatus();
}

void HealthMonitor::Feed(const GpuEvent& e) {
  // Keep the loss bookkeeping in step with events from the backend, so that a loss the backend
  // already reported is not reported again by Sample().
  for (int i = 0; i < static_cast<int>(uuids_.size()); ++i) {
    if (e.gpu_uuid.empty() || uuids_[i] != e.gpu_uuid) continue;
    if (e.kind == GpuEventKind::kGpuLost) reported_lost_.insert(i);
    if (e.kind == GpuEventKind::kGpuReset) reported_lost_.erase(i);
  }
  if (on_event_) on_event_(e);
  tracker_.OnEvent(e);
}

void HealthMonitor::Sample() {
  for (int i = 0; i < static_cast<int>(uuids_.size()); ++i) {
    absl::StatusOr<GpuMetrics> m = backend_.GetMetrics(i);
    if (m.ok()) {
      reported_lost_.erase(i);
      if (!uuids_[i].empty()) tracker_.OnMetrics(uuids_[i], *m, clock_.Now());
      continue;
    }
    if (m.status().code() == absl::StatusCode::kUnavailable && reported_lost_.insert(i).second) {
      GpuEvent e;
      e.kind = GpuEventKind::kGpuLost;
      e.gpu_uuid = uuids_[i];
      e.time = clock_.Now();
      e.detail = std::string(m.status().message());
      Feed(e);
    }
  }
}

void HealthMonitor::RunUntil(absl::Time until) {
  absl::Time next_sample = clock_.Now();
  while (!stop_.load() && clock_.Now() < until) {
    if (clock_.Now() >= next_sample) {
      Sample();
      next_sample = clock_.Now() + options_.sample_every;
    }
    const absl::Duration wait = std::min(until, next_sample) - clock_.Now();
    if (wait <= absl::ZeroDuration()) continue;
    if (!events_supported_) {
      clock_.Sleep(wait);
      continue;
    }
    absl::StatusOr<std::optional<GpuEvent>> ev = backend_.WaitForEvent(wait);
    if (!ev.ok()) {
      // No event API (or not initialized): keep sampling metrics.
      events_supported_ = false;
      continue;
    }
    if (!ev->has_value()) continue;
    Feed(**ev);
    if ((*ev)->kind == GpuEventKind::kEventWaitFailed) {
      clock_.Sleep(std::min(options_.wait_failure_backoff, until - clock_.Now()));
    }
  }
}

}  // namespace tessera::agent
