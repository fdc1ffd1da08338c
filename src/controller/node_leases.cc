#include "controller/node_leases.h"

namespace tessera::controller {

void NodeLeases::Renew(absl::string_view node, absl::Time at) {
  absl::MutexLock l(&mu_);
  auto [it, inserted] = renewed_.try_emplace(node, at);
  if (!inserted && at <= it->second) return;
  it->second = at;
  fresh_[node] = at;
}

absl::flat_hash_map<std::string, absl::Time> NodeLeases::TakeRenewals() {
  absl::flat_hash_map<std::string, absl::Time> out;
  absl::MutexLock l(&mu_);
  out.swap(fresh_);
  return out;
}

std::optional<absl::Time> NodeLeases::LastRenew(absl::string_view node) const {
  absl::MutexLock l(&mu_);
  auto it = renewed_.find(node);
  if (it == renewed_.end()) return std::nullopt;
  return it->second;
}

}  // namespace tessera::controller
