#include "server/gpu_samples.h"

#include <algorithm>

namespace tessera::server {

bool GpuSamples::Report(absl::string_view node, Samples samples) {
  absl::MutexLock lock(&mu_);
  Entry& e = nodes_[node];
  if (e.version > 0 && e.samples == samples) return false;
  e.samples = std::move(samples);
  e.version = ++version_;
  return true;
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
