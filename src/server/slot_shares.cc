#include "server/slot_shares.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tessera::server {

SlotShares::SlotShares(std::string what, int total, int per_key)
    : what_(std::move(what)),
      total_(std::max(total, 0)),
      per_key_(per_key > 0 ? per_key : std::max(total_ / 4, 1)) {}

SlotShares::Slot::~Slot() { owner_->Release(key_); }

std::shared_ptr<SlotShares::Slot> SlotShares::Acquire(const std::string& key, std::string* why) {
  absl::MutexLock l(&mu_);
  if (held_ >= total_) {
    *why = absl::StrCat("too many open ", what_, " (", total_, " in all); retry later");
    return nullptr;
  }
  if (!key.empty()) {
    int& mine = by_key_[key];
    if (mine >= per_key_) {
      *why = absl::StrCat("this token (", key, ") holds ", mine, " open ", what_, ", its share of ",
                          total_, " (at most ", per_key_, " per token); close one or retry later");
      return nullptr;
    }
    ++mine;
  }
  ++held_;
  return std::shared_ptr<Slot>(new Slot(this, key));
}

void SlotShares::Release(const std::string& key) {
  absl::MutexLock l(&mu_);
  --held_;
  if (key.empty()) return;
  auto it = by_key_.find(key);
  if (it != by_key_.end() && --it->second <= 0) by_key_.erase(it);
}

int SlotShares::held() const {
  absl::MutexLock l(&mu_);
  return held_;
}

}  // namespace tessera::server
