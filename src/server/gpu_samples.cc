#include "server/gpu_samples.h"

#include <algorithm>

namespace tessera::server {

bool GpuSamples::Report(absl::string_view node, Samples samples, absl::Time now) {
  absl::MutexLock lock(&mu_);
  Entry& e = nodes_[node];
  if (now != absl::InfinitePast()) {
    if (e.ring.empty()) e.ring.resize(kHistoryMinutes);
    const int64_t minute = absl::ToUnixSeconds(now) / 60;
    Minute& m = e.ring[static_cast<size_t>(minute % kHistoryMinutes)];
    if (m.minute != minute) {
      m.minute = minute;
      m.sum.assign(samples.size(), 0);
      m.count.assign(samples.size(), 0);
    }
    if (m.sum.size() < samples.size()) {
      m.sum.resize(samples.size(), 0);
      m.count.resize(samples.size(), 0);
    }
    for (size_t g = 0; g < samples.size(); ++g) {
      // A heartbeat every second at most fills a minute with 60 samples: no overflow.
      if (samples[g] < 0 || m.count[g] == 255) continue;
      m.sum[g] = static_cast<uint16_t>(m.sum[g] + std::min(samples[g], 100));
      ++m.count[g];
    }
  }
  if (e.version > 0 && e.samples == samples) return false;
  e.samples = std::move(samples);
  e.version = ++version_;
  return true;
}

std::vector<std::vector<int>> GpuSamples::History(absl::string_view node, absl::Time now) const {
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end() || it->second.ring.empty()) return {};
  const Entry& e = it->second;
  size_t gpus = e.samples.size();
  for (const Minute& m : e.ring) gpus = std::max(gpus, m.sum.size());
  std::vector<std::vector<int>> out(gpus, std::vector<int>(kHistoryMinutes, -1));
  const int64_t last = absl::ToUnixSeconds(now) / 60;
  for (int k = 0; k < kHistoryMinutes; ++k) {
    const int64_t minute = last - (kHistoryMinutes - 1) + k;
    if (minute < 0) continue;
    const Minute& m = e.ring[static_cast<size_t>(minute % kHistoryMinutes)];
    if (m.minute != minute) continue;
    for (size_t g = 0; g < m.sum.size(); ++g) {
      if (m.count[g] > 0) out[g][static_cast<size_t>(k)] = (m.sum[g] + m.count[g] / 2) / m.count[g];
    }
  }
  return out;
}

GpuSamples::Samples GpuSamples::Get(absl::string_view node) const {
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(node);
  return it == nodes_.end() ? Samples() : it->second.samples;
}

GpuSamples::Changes GpuSamples::Since(int64_t since) const {
  Changes out;
  absl::MutexLock lock(&mu_);
  out.version = version_;
  if (since > version_) since = 0;  // a version of another process: everything
  for (const auto& [name, e] : nodes_) {
    if (e.version > since) out.nodes.emplace_back(name, e.samples);
  }
  std::sort(out.nodes.begin(), out.nodes.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

int64_t GpuSamples::version() const {
  absl::MutexLock lock(&mu_);
  return version_;
}

bool GpuSamples::WaitForChange(int64_t since, absl::Time deadline) const {
  absl::MutexLock lock(&mu_);
  auto changed = [this, since]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return version_ != since; };
  return mu_.AwaitWithDeadline(absl::Condition(&changed), deadline);
}

}  // namespace tessera::server
