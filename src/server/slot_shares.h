// SlotShares: fair shares of a bounded pool of long-lived request slots (watch streams, node
// binding long-polls). Each such request holds a request thread for as long as it is open, so the
// pool is bounded (`total`); and so that one token cannot take the whole pool while others wait,
// no one key (a token's Principal::id) holds more than `per_key` of it. A request past either
// bound is refused (the API answers 429 with the message, naming the bound), never queued.
//
// The empty key is not counted per key: with authentication off every request is the same
// principal, and only `total` applies.
//
// Thread-safe. A Slot must not outlive its SlotShares.
#pragma once

#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace tessera::server {

class SlotShares {
 public:
  // `what` names the slots in messages ("watches"). per_key <= 0: total / 4, at least 1.
  SlotShares(std::string what, int total, int per_key);
  SlotShares(const SlotShares&) = delete;
  SlotShares& operator=(const SlotShares&) = delete;

  // Held while the request is open; the destructor frees the slot.
  class Slot {
   public:
    ~Slot();
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;

   private:
    friend class SlotShares;
    Slot(SlotShares* owner, std::string key) : owner_(owner), key_(std::move(key)) {}
    SlotShares* owner_;
    std::string key_;
  };

  // A slot for `key`, or null with `*why` saying which bound was hit (for the 429).
  std::shared_ptr<Slot> Acquire(const std::string& key, std::string* why);

  int held() const;  // slots held now, all keys
  int total() const { return total_; }
  int per_key() const { return per_key_; }

 private:
  void Release(const std::string& key);

  const std::string what_;
  const int total_;
  const int per_key_;
  mutable absl::Mutex mu_;
  int held_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, int> by_key_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::server
