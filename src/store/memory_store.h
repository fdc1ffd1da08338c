// MemoryStore: the in-memory Store, for tests and the simulator. Nothing
// survives the object. Same semantics as every Store (see store.h).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>

#include "absl/synchronization/mutex.h"
#include "store/store.h"

namespace tessera::store {

struct MemoryStoreOptions {
  // Keep the events of at most this many most recent revisions; older history
  // is compacted automatically. 0 = keep everything (until Compact()).
  int64_t retain_revisions = 0;
};

class MemoryStore final : public Store {
 public:
  explicit MemoryStore(MemoryStoreOptions options = {}) : options_(options) {}

  absl::StatusOr<KeyValue> Get(std::string_view key) override;
  absl::StatusOr<ListResult> List(std::string_view prefix, const ListOptions& options) override;
  absl::StatusOr<int64_t> Txn(const std::vector<Op>& ops) override;
  absl::StatusOr<EventsResult> Events(std::string_view prefix, int64_t since_revision,
                                      int64_t limit) override;
  absl::Status WaitForRevision(int64_t revision, absl::Time deadline) override;
  int64_t CurrentRevision() override;
  int64_t CompactedRevision() override;
  absl::Status Compact(int64_t revision) override;

 private:
  void CompactLocked(int64_t revision) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const MemoryStoreOptions options_;
  absl::Mutex mu_;
  std::map<std::string, KeyValue, std::less<>> kvs_ ABSL_GUARDED_BY(mu_);
  // Retained history, in order; every event has revision > compacted_.
  std::deque<Event> history_ ABSL_GUARDED_BY(mu_);
  int64_t revision_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t compacted_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tessera::store
