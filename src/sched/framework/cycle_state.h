// CycleState: scratch data for one scheduling cycle (one job), shared by the
// plugins of that cycle. A plugin stores what it computed in PreFilter and
// reads it back in Filter/Score. Also holds the members placed so far in this
// cycle, so Score plugins can keep a gang together.
// Not thread-safe; lives for one cycle.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "sched/framework/types.h"

namespace tessera::sched {

// Base for per-plugin cycle data.
class CycleData {
 public:
  virtual ~CycleData() = default;
};

class CycleState {
 public:
  // Stores `data` under `key` (normally the plugin's name), replacing any.
  void Write(absl::string_view key, std::unique_ptr<CycleData> data) {
    data_[key] = std::move(data);
  }
  // Returns the data under `key` cast to T, or nullptr.
  template <typename T>
  T* Read(absl::string_view key) const {
    auto it = data_.find(key);
    return it == data_.end() ? nullptr : static_cast<T*>(it->second.get());
  }

  // Members placed (assumed) so far in this cycle, in order.
  const std::vector<MemberPlacement>& placed() const { return placed_; }
  std::vector<MemberPlacement>& mutable_placed() { return placed_; }

  void Clear() {
    data_.clear();
    placed_.clear();
  }

 private:
  absl::flat_hash_map<std::string, std::unique_ptr<CycleData>> data_;
  std::vector<MemberPlacement> placed_;
};

}  // namespace tessera::sched
