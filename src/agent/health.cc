#include "agent/health.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tessera::agent {

XidClass ClassifyXid(uint64_t xid, const HealthPolicy& policy) {
  if (policy.ignored_xids.contains(xid)) return XidClass::kIgnored;
  if (policy.application_xids.contains(xid)) return XidClass::kApplication;
  return XidClass::kHardware;
}

std::string XidDescription(uint64_t xid) {
  switch (xid) {
    case 8:
      return "GPU stopped processing";
    case 13:
      return "Graphics Engine Exception";
    case 31:
      return "GPU memory page fault";
    case 32:
      return "Invalid or corrupted push buffer stream";
    case 43:
      return "GPU stopped processing";
    case 45:
      return "Preemptive cleanup, due to previous errors";
    case 48:
      return "Double Bit ECC Error";
    case 61:
      return "Internal micro-controller breakpoint/warning";
    case 62:
      return "Internal micro-controller halt";
    case 63:
      return "ECC page retirement or row remapping recording event";
    case 64:
      return "ECC page retirement or row remapper recording failure";
    case 68:
      return "NVDEC0 Exception";
    case 69:
      return "Graphics Engine class error";
    case 74:
      return "NVLINK Error";
    case 79:
      return "GPU has fallen off the bus";
    case 92:
      return "High single-bit ECC error rate";
    case 94:
      return "Contained ECC error";
    case 95:
      return "Uncontained ECC error";
    case 109:
      return "Context Switch Timeout Error";
    case 119:
      return "GSP RPC Timeout";
    case 120:
      return "GSP Error";
    case 121:
      return "C2C Link Error";
    case 140:
      return "Unrecovered ECC Error";
    default:
      return "unknown XID";
  }
}

std::string_view HealthName(Health h) { return h == Health::kHealthy ? "healthy" : "unhealthy"; }

HealthTracker::HealthTracker(HealthPolicy policy) : policy_(std::move(policy)) {}

void HealthTracker::AddGpu(const std::string& uuid) {
  absl::MutexLock l(&mu_);
  StateLocked(uuid);
}

void HealthTracker::AddListener(Listener listener) {
  absl::MutexLock l(&listeners_mu_);
  listeners_.push_back(std::move(listener));
}

HealthTracker::State& HealthTracker::StateLocked(const std::string& uuid) { return gpus_[uuid]; }

void HealthTracker::UpdateLocked(const std::string& uuid, State& s, absl::Time time,
                                 std::vector<HealthTransition>* out) {
  const std::string* reason = s.sticky    ? &*s.sticky
                              : s.ecc     ? &*s.ecc
                              : s.thermal ? &*s.thermal
                                          : nullptr;
  Health now = reason ? Health::kUnhealthy : Health::kHealthy;
  if (now == s.health) return;
  out->push_back(HealthTransition{uuid, s.health, now, reason ? *reason : "recovered", time});
  s.health = now;
  s.since = time;
}

void HealthTracker::Notify(const std::vector<HealthTransition>& transitions) {
  if (transitions.empty()) return;
  std::vector<Listener> listeners;
  {
    absl::MutexLock l(&listeners_mu_);
    listeners = listeners_;
  }
  for (const HealthTransition& t : transitions) {
    for (const Listener& fn : listeners) fn(t);
  }
}

void HealthTracker::OnEvent(const GpuEvent& event) {
  std::vector<HealthTransition> out;
  {
    absl::MutexLock l(&mu_);
    auto mark_all = [&](const std::string& reason) {
      if (!event.gpu_uuid.empty()) StateLocked(event.gpu_uuid);
      for (auto& [uuid, s] : gpus_) {
        if (!s.sticky) s.sticky = reason;
      }
      std::vector<std::string> uuids;
      for (auto& [uuid, s] : gpus_) uuids.push_back(uuid);
      std::sort(uuids.begin(), uuids.end());
      for (const std::string& u : uuids) UpdateLocked(u, gpus_[u], event.time, &out);
    };
    switch (event.kind) {
      case GpuEventKind::kXid: {
        if (!event.gpu_uuid.empty()) StateLocked(event.gpu_uuid).last_xid = event.xid;
        if (ClassifyXid(event.xid, policy_) != XidClass::kHardware) break;
        std::string reason = absl::StrCat("XID ", event.xid, ": ", XidDescription(event.xid));
        if (event.gpu_uuid.empty()) {
          mark_all(reason);  // an XID NVML could not attribute to one GPU
          break;
        }
        State& s = StateLocked(event.gpu_uuid);
        if (!s.sticky) s.sticky = reason;
        UpdateLocked(event.gpu_uuid, s, event.time, &out);
        break;
      }
      case GpuEventKind::kEccDoubleBit: {
        if (event.gpu_uuid.empty()) break;
        State& s = StateLocked(event.gpu_uuid);
        if (!s.sticky) s.sticky = "double-bit ECC error";
        UpdateLocked(event.gpu_uuid, s, event.time, &out);
        break;
      }
      case GpuEventKind::kGpuLost:
        mark_all(event.gpu_uuid.empty() ? std::string("a GPU was lost")
                                        : absl::StrCat("GPU ", event.gpu_uuid, " was lost"));
        break;
      case GpuEventKind::kEventWaitFailed:
        mark_all(event.detail.empty() ? std::string("GPU event wait failed")
                                      : absl::StrCat("GPU event wait failed: ", event.detail));
        break;
      case GpuEventKind::kGpuReset: {
        if (event.gpu_uuid.empty()) break;
        State& s = StateLocked(event.gpu_uuid);
        s.sticky.reset();
        UpdateLocked(event.gpu_uuid, s, event.time, &out);
        if (!out.empty() && out.back().to == Health::kHealthy) {
          out.back().reason = event.detail.empty() ? "GPU reset" : "GPU reset: " + event.detail;
        }
        break;
      }
    }
  }
  Notify(out);
}

void HealthTracker::OnMetrics(const std::string& uuid, const GpuMetrics& m, absl::Time time) {
  std::vector<HealthTransition> out;
  {
    absl::MutexLock l(&mu_);
    State& s = StateLocked(uuid);
    if (policy_.max_temperature_c && m.temperature_c) {
      uint32_t limit = *policy_.max_temperature_c;
      if (*m.temperature_c >= limit) {
        s.thermal = absl::StrCat("temperature ", *m.temperature_c, "C at or above ", limit, "C");
      } else if (s.thermal && *m.temperature_c + policy_.temperature_hysteresis_c < limit) {
        s.thermal.reset();
      }
    }
    std::optional<std::string> ecc;
    if (policy_.max_dbe_volatile && m.ecc_dbe_volatile &&
        *m.ecc_dbe_volatile > *policy_.max_dbe_volatile) {
      ecc = absl::StrCat(*m.ecc_dbe_volatile, " uncorrectable (volatile) ECC errors");
    } else if (policy_.row_remap_failure_unhealthy && m.row_remap_failure.value_or(false)) {
      ecc = "row remapping failed";
    }
    // Only a reading that reports the counters may clear an ECC condition.
    if (ecc || m.ecc_dbe_volatile || m.row_remap_failure) s.ecc = ecc;
    UpdateLocked(uuid, s, time, &out);
  }
  Notify(out);
}

absl::Status HealthTracker::MarkHealthy(const std::string& uuid, const std::string& reason,
                                        absl::Time time) {
  std::vector<HealthTransition> out;
  {
    absl::MutexLock l(&mu_);
    auto it = gpus_.find(uuid);
    if (it == gpus_.end()) return absl::NotFoundError(absl::StrCat("unknown GPU uuid ", uuid));
    it->second.sticky.reset();
    UpdateLocked(uuid, it->second, time, &out);
    for (HealthTransition& t : out) {
      if (t.to == Health::kHealthy) t.reason = reason;
    }
  }
  Notify(out);
  return absl::OkStatus();
}

absl::StatusOr<GpuHealth> HealthTracker::Get(const std::string& uuid) const {
  absl::MutexLock l(&mu_);
  auto it = gpus_.find(uuid);
  if (it == gpus_.end()) return absl::NotFoundError(absl::StrCat("unknown GPU uuid ", uuid));
  const State& s = it->second;
  GpuHealth h;
  h.health = s.health;
  h.since = s.since;
  h.last_xid = s.last_xid;
  if (s.sticky) {
    h.reason = *s.sticky;
  } else if (s.ecc) {
    h.reason = *s.ecc;
  } else if (s.thermal) {
    h.reason = *s.thermal;
  }
  return h;
}

bool HealthTracker::IsHealthy(const std::string& uuid) const {
  absl::StatusOr<GpuHealth> h = Get(uuid);
  return h.ok() && h->health == Health::kHealthy;
}

std::vector<std::string> HealthTracker::Uuids() const {
  absl::MutexLock l(&mu_);
  std::vector<std::string> out;
  for (const auto& [uuid, s] : gpus_) out.push_back(uuid);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace tessera::agent
