#include "agent/fake/fake_backend.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace tessera::agent {
namespace {

// Assigns every field `src` has.
void MergeMetrics(GpuMetrics& dst, const GpuMetrics& src) {
#define TESSERA_MERGE(f) \
  if (src.f) dst.f = src.f
  TESSERA_MERGE(gpu_util_percent);
  TESSERA_MERGE(mem_copy_util_percent);
  TESSERA_MERGE(fb_used_bytes);
  TESSERA_MERGE(fb_free_bytes);
  TESSERA_MERGE(temperature_c);
  TESSERA_MERGE(power_watts);
  TESSERA_MERGE(total_energy_mj);
  TESSERA_MERGE(sm_clock_mhz);
  TESSERA_MERGE(mem_clock_mhz);
  TESSERA_MERGE(throttle_reasons);
  TESSERA_MERGE(ecc_sbe_volatile);
  TESSERA_MERGE(ecc_dbe_volatile);
  TESSERA_MERGE(ecc_sbe_aggregate);
  TESSERA_MERGE(ecc_dbe_aggregate);
  TESSERA_MERGE(remapped_rows_correctable);
  TESSERA_MERGE(remapped_rows_uncorrectable);
  TESSERA_MERGE(row_remap_pending);
  TESSERA_MERGE(row_remap_failure);
  TESSERA_MERGE(pcie_tx_bytes_per_s);
  TESSERA_MERGE(pcie_rx_bytes_per_s);
  TESSERA_MERGE(nvlink_tx_bytes_per_s);
  TESSERA_MERGE(nvlink_rx_bytes_per_s);
#undef TESSERA_MERGE
}

constexpr uint64_t kMiB = 1024ULL * 1024ULL;

}  // namespace

FakeBackend::FakeBackend(FakeConfig config, Clock& clock)
    : config_(std::move(config)), clock_(clock) {}

absl::StatusOr<std::unique_ptr<FakeBackend>> FakeBackend::FromFile(const std::string& path,
                                                                   Clock& clock) {
  ASSIGN_OR_RETURN(FakeConfig cfg, LoadFakeConfig(path));
  return std::make_unique<FakeBackend>(std::move(cfg), clock);
}

absl::Status FakeBackend::Init() {
  absl::MutexLock l(&mu_);
  if (initialized_) return absl::OkStatus();
  start_ = clock_.Now();
  next_event_ = 0;
  pending_.clear();
  gpus_.clear();
  for (const FakeGpu& g : config_.gpus) {
    GpuState s;
    s.info = g.info;
    s.metrics = g.metrics;
    s.energy_mj = static_cast<double>(g.metrics.total_energy_mj.value_or(0));
    s.energy_at = start_;
    gpus_.push_back(std::move(s));
  }
  initialized_ = true;
  return absl::OkStatus();
}

absl::Status FakeBackend::Shutdown() {
  absl::MutexLock l(&mu_);
  initialized_ = false;
  gpus_.clear();
  pending_.clear();
  return absl::OkStatus();
}

absl::StatusOr<int> FakeBackend::DeviceCount() {
  absl::MutexLock l(&mu_);
  if (!initialized_) return absl::FailedPreconditionError("fake GPU backend not initialized");
  return static_cast<int>(gpus_.size());
}

absl::StatusOr<FakeBackend::GpuState*> FakeBackend::GpuLocked(int index) {
  if (!initialized_) return absl::FailedPreconditionError("fake GPU backend not initialized");
  if (index < 0 || index >= static_cast<int>(gpus_.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("gpu index ", index, " out of range [0, ", gpus_.size(), ")"));
  }
  ApplyDueLocked(clock_.Now());
  GpuState& s = gpus_[index];
  if (s.lost) return absl::UnavailableError(absl::StrCat("GPU ", s.info.uuid, " is lost"));
  return &s;
}

void FakeBackend::ApplyDueLocked(absl::Time now) {
  while (next_event_ < config_.events.size() && start_ + config_.events[next_event_].at <= now) {
    const FakeEvent& e = config_.events[next_event_++];
    ApplyLocked(e, start_ + e.at);
  }
}

void FakeBackend::ApplyLocked(const FakeEvent& e, absl::Time at) {
  GpuEvent out;
  out.time = at;
  out.detail = e.detail;
  GpuState* s = e.gpu >= 0 ? &gpus_[e.gpu] : nullptr;
  if (s) out.gpu_uuid = s->info.uuid;
  auto fold_energy = [&]() {
    if (s->metrics.power_watts) {
      s->energy_mj += *s->metrics.power_watts * absl::ToDoubleSeconds(at - s->energy_at) * 1000.0;
    }
    s->energy_at = at;
  };
  switch (e.type) {
    case FakeEventType::kXid:
      out.kind = GpuEventKind::kXid;
      out.xid = e.xid;
      pending_.push_back(std::move(out));
      break;
    case FakeEventType::kEccDbe:
      s->metrics.ecc_dbe_volatile = s->metrics.ecc_dbe_volatile.value_or(0) + e.count;
      s->metrics.ecc_dbe_aggregate = s->metrics.ecc_dbe_aggregate.value_or(0) + e.count;
      out.kind = GpuEventKind::kEccDoubleBit;
      pending_.push_back(std::move(out));
      break;
    case FakeEventType::kEccSbe:
      s->metrics.ecc_sbe_volatile = s->metrics.ecc_sbe_volatile.value_or(0) + e.count;
      s->metrics.ecc_sbe_aggregate = s->metrics.ecc_sbe_aggregate.value_or(0) + e.count;
      break;
    case FakeEventType::kTemperature:
      s->metrics.temperature_c = e.value;
      break;
    case FakeEventType::kMetrics:
      fold_energy();
      MergeMetrics(s->metrics, e.set);
      if (e.set.total_energy_mj) s->energy_mj = static_cast<double>(*e.set.total_energy_mj);
      if (e.set_used_mib && s->info.memory) {
        uint64_t used = std::min(*e.set_used_mib * kMiB, s->info.memory->total_bytes);
        s->info.memory->used_bytes = used;
        s->info.memory->free_bytes = s->info.memory->total_bytes - used;
        s->metrics.fb_used_bytes = used;
        s->metrics.fb_free_bytes = s->info.memory->free_bytes;
      }
      break;
    case FakeEventType::kLost:
      s->lost = true;
      out.kind = GpuEventKind::kGpuLost;
      pending_.push_back(std::move(out));
      break;
    case FakeEventType::kReset:
      s->lost = false;
      // A reset clears the volatile ECC counters, as on real GPUs.
      if (s->metrics.ecc_sbe_volatile) s->metrics.ecc_sbe_volatile = 0;
      if (s->metrics.ecc_dbe_volatile) s->metrics.ecc_dbe_volatile = 0;
      out.kind = GpuEventKind::kGpuReset;
      pending_.push_back(std::move(out));
      break;
    case FakeEventType::kWaitError:
      out.kind = GpuEventKind::kEventWaitFailed;
      if (out.detail.empty()) out.detail = "scripted event wait failure";
      pending_.push_back(std::move(out));
      break;
  }
}

absl::StatusOr<GpuInfo> FakeBackend::GetDeviceInfo(int index) {
  absl::MutexLock l(&mu_);
  ASSIGN_OR_RETURN(GpuState * s, GpuLocked(index));
  return s->info;
}

absl::StatusOr<GpuMetrics> FakeBackend::GetMetrics(int index) {
  absl::MutexLock l(&mu_);
  ASSIGN_OR_RETURN(GpuState * s, GpuLocked(index));
  GpuMetrics m = s->metrics;
  if (m.total_energy_mj || m.power_watts) {
    double e = s->energy_mj;
    if (m.power_watts) {
      e += *m.power_watts * absl::ToDoubleSeconds(clock_.Now() - s->energy_at) * 1000.0;
    }
    m.total_energy_mj = static_cast<uint64_t>(std::llround(e));
  }
  return m;
}

absl::StatusOr<TopologyLevel> FakeBackend::GetTopologyLevel(int a, int b) {
  absl::MutexLock l(&mu_);
  ASSIGN_OR_RETURN(GpuState * sa, GpuLocked(a));
  ASSIGN_OR_RETURN(GpuState * sb, GpuLocked(b));
  (void)sa;
  (void)sb;
  return config_.levels[a][b];
}

absl::StatusOr<std::optional<GpuEvent>> FakeBackend::WaitForEvent(absl::Duration timeout) {
  const absl::Time deadline = clock_.Now() + timeout;
  while (true) {
    absl::Time next = absl::InfiniteFuture();
    {
      absl::MutexLock l(&mu_);
      if (!initialized_) return absl::FailedPreconditionError("fake GPU backend not initialized");
      ApplyDueLocked(clock_.Now());
      if (!pending_.empty()) {
        GpuEvent e = std::move(pending_.front());
        pending_.pop_front();
        return std::optional<GpuEvent>(std::move(e));
      }
      if (next_event_ < config_.events.size()) next = start_ + config_.events[next_event_].at;
    }
    const absl::Time now = clock_.Now();
    if (now >= deadline) return std::optional<GpuEvent>();
    // Sleep until the next script entry or the deadline, whichever is first; never hold mu_.
    clock_.Sleep(std::min(next, deadline) - now);
  }
}

}  // namespace tessera::agent
