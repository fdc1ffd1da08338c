// Store: the control plane's durable key/value store, shaped after etcd v3 so
// that an etcd backend can implement it later.
//
// Model
//   * Keys are strings ("/jobs/<ns>/<name>"), values are opaque bytes.
//   * One global revision (int64, starts at 0 for an empty store). Every
//     successful write -- a Put, a Delete or a whole Txn -- bumps it by exactly
//     one. A Txn of several operations commits ALL of them at ONE revision (as
//     in etcd), so every event of that Txn carries the same revision.
//   * Each key remembers create_revision (revision of the write that created
//     it) and mod_revision (revision of its last write). Deleting and
//     re-creating a key gives it a new create_revision.
//   * Compare-and-swap on mod_revision: `expected_revision` of a write is
//       kAnyRevision (-1)  unconditional,
//       kMustNotExist (0)  the key must not exist,
//       N > 0              the key must exist with mod_revision == N.
//     A mismatch fails with FailedPrecondition (or AlreadyExists when the key
//     was required not to exist, NotFound when a delete/CAS names a missing key)
//     and a message naming the key and both revisions; nothing is written.
//   * History: the change events of every revision after the compacted
//     revision are retained. Events(prefix, since) returns all events with
//     revision > since, in (revision, position within Txn) order: no gaps, no
//     repeats. A `since` below CompactedRevision() fails with OutOfRange (etcd's
//     "required revision has been compacted"); the client re-lists and watches
//     from the list's revision.
//
// Thread safety: every method of every implementation is safe to call
// concurrently from any number of threads. A Store owns its data and any
// files; callers own the Store (usually through std::unique_ptr) and must not
// destroy it while calls are in flight.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tessera::store {

// Values of `expected_revision`.
inline constexpr int64_t kAnyRevision = -1;
inline constexpr int64_t kMustNotExist = 0;

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;

  friend bool operator==(const KeyValue&, const KeyValue&) = default;
};

struct ListOptions {
  // At most this many keys; 0 = no limit.
  int64_t limit = 0;
  // Resume after this key (exclusive): pass the previous page's `next_key`.
  std::string continue_after;
};

struct ListResult {
  // Keys in ascending byte order.
  std::vector<KeyValue> kvs;
  // The store revision the page was read at (a consistent snapshot).
  int64_t revision = 0;
  // True when more keys follow; then `next_key` is the continue_after for the
  // next page. Later pages are read at their own (possibly newer) revision.
  bool more = false;
  std::string next_key;
};

// One write inside a Txn.
struct Op {
  enum class Kind { kPut, kDelete };
  Kind kind = Kind::kPut;
  std::string key;
  std::string value;  // kPut only.
  int64_t expected_revision = kAnyRevision;

  static Op Put(std::string key, std::string value, int64_t expected = kAnyRevision) {
    return Op{Kind::kPut, std::move(key), std::move(value), expected};
  }
  static Op Create(std::string key, std::string value) {
    return Op{Kind::kPut, std::move(key), std::move(value), kMustNotExist};
  }
  static Op Delete(std::string key, int64_t expected = kAnyRevision) {
    return Op{Kind::kDelete, std::move(key), "", expected};
  }
};

struct Event {
  enum class Type { kPut, kDelete };
  Type type = Type::kPut;
  // For kPut: the key as written (create_revision/mod_revision set; a put with
  // create_revision == mod_revision is a creation). For kDelete: the key,
  // value, create_revision of the deleted object and mod_revision == revision
  // of the delete.
  KeyValue kv;
  // For kPut of an existing key and for kDelete: the previous mod_revision.
  // 0 for a creation.
  int64_t prev_mod_revision = 0;
  int64_t revision = 0;

  friend bool operator==(const Event&, const Event&) = default;
};

struct EventsResult {
  std::vector<Event> events;
  // Events are complete up to and including this revision: the next call
  // should pass it as `since_revision`. Always >= the `since` passed in.
  int64_t revision = 0;
};

class Store {
 public:
  virtual ~Store() = default;

  // The key's current value. NotFound when absent.
  virtual absl::StatusOr<KeyValue> Get(std::string_view key) = 0;

  // Keys starting with `prefix`, in key order, read at one revision.
  virtual absl::StatusOr<ListResult> List(std::string_view prefix,
                                          const ListOptions& options = {}) = 0;

  // Applies every op of `ops` atomically at one new revision, or none of them.
  // Each op's expected_revision is checked against the state before the Txn.
  // A key may appear at most once per Txn (InvalidArgument otherwise). An
  // empty Txn is InvalidArgument. Returns the new revision.
  virtual absl::StatusOr<int64_t> Txn(const std::vector<Op>& ops) = 0;

  // Events with revision > since_revision and key starting with `prefix`, at
  // most about `limit` of them (0 = no limit; a Txn's events are never split,
  // so a page may exceed the limit by the rest of one Txn). OutOfRange when
  // since_revision < CompactedRevision(). InvalidArgument when since_revision
  // is in the future or negative.
  virtual absl::StatusOr<EventsResult> Events(std::string_view prefix, int64_t since_revision,
                                              int64_t limit = 0) = 0;

  // Blocks until CurrentRevision() >= revision (returns OK) or until
  // `deadline` (DeadlineExceeded). Uses real time: this is a wait, not a
  // timer. Callers that must stop promptly (a server shutting down) wait in
  // short slices and check their own stop flag between them.
  virtual absl::Status WaitForRevision(int64_t revision, absl::Time deadline) = 0;

  // The revision of the latest committed write (0 for a new store).
  virtual int64_t CurrentRevision() = 0;
  // Events at or below this revision are gone (0 = nothing compacted).
  virtual int64_t CompactedRevision() = 0;
  // Drops the history of revisions <= `revision`. OutOfRange if `revision` is
  // above CurrentRevision(); compacting below the current compaction is a no-op.
  virtual absl::Status Compact(int64_t revision) = 0;

  // The most operations one Txn may hold; 0 = no limit. A larger Txn fails with InvalidArgument
  // and writes nothing. Writers that batch only for speed split their writes into runs of at most
  // this many operations (TxnRuns, txn_runs.h); writes that must be atomic are refused.
  virtual size_t MaxTxnOps() const { return 0; }

  // Conveniences over Txn, identical in semantics.
  absl::StatusOr<int64_t> Create(std::string key, std::string value) {
    return Txn({Op::Create(std::move(key), std::move(value))});
  }
  absl::StatusOr<int64_t> Put(std::string key, std::string value,
                              int64_t expected_revision = kAnyRevision) {
    return Txn({Op::Put(std::move(key), std::move(value), expected_revision)});
  }
  absl::StatusOr<int64_t> Delete(std::string key, int64_t expected_revision = kAnyRevision) {
    return Txn({Op::Delete(std::move(key), expected_revision)});
  }
};

// True when `key` starts with `prefix`.
inline bool HasPrefix(std::string_view key, std::string_view prefix) {
  return key.substr(0, prefix.size()) == prefix;
}

}  // namespace tessera::store
