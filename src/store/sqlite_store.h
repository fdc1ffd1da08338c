// SqliteStore: the durable Store, one SQLite database in a data directory.
//
// Durability: WAL journal with `synchronous=FULL`, so a Txn that returned OK
// has been fsynced and survives a crash or power loss. Opening an existing
// directory restores the keys, the revision and the retained history.
//
// Layout (schema version 1) in DIR/store.db:
//   kv(key BLOB PRIMARY KEY, value, create_rev, mod_rev)    current state
//   events(rev, idx, type, key, value, create_rev, prev_mod_rev) history
//   meta(name PRIMARY KEY, value)  "revision", "compacted", "schema_version"
// DIR/LOCK is flock()ed while open, so two processes never share a directory.
//
// Group commit: concurrent Txn callers queue their requests; one of them
// (the leader) commits everything queued in ONE SQLite transaction -- each
// request still gets its own revision and its own CAS outcome -- and so many
// writers share one fsync. Reads use a second connection and see a consistent
// WAL snapshot without waiting for a commit in progress.
//
// Thread safety: all methods are thread-safe (see store.h).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "store/store.h"

namespace tessera::store {

struct SqliteStoreOptions {
  // Create the directory (one level) and database when missing. When false, a
  // missing directory or database is NotFound.
  bool create_if_missing = true;
  // Keep the events of at most this many most recent revisions; older history
  // is compacted automatically. 0 = keep everything (until Compact()).
  int64_t retain_revisions = 0;
  // Commit concurrent Txns together (one fsync for many). Off = one SQLite
  // transaction per Txn (for measuring the difference).
  bool group_commit = true;
};

class SqliteStore final : public Store {
 public:
  // Opens (or creates) the store in `dir`. Errors name the directory and say
  // what is wrong: NotFound (missing and !create_if_missing), FailedPrecondition
  // (not a directory, locked by another process), DataLoss (not a Tessera
  // database or corrupt), Internal (other SQLite errors).
  static absl::StatusOr<std::unique_ptr<SqliteStore>> Open(const std::string& dir,
                                                           SqliteStoreOptions options = {});
  ~SqliteStore() override;

  absl::StatusOr<KeyValue> Get(std::string_view key) override;
  absl::StatusOr<ListResult> List(std::string_view prefix, const ListOptions& options) override;
  absl::StatusOr<int64_t> Txn(const std::vector<Op>& ops) override;
  absl::StatusOr<EventsResult> Events(std::string_view prefix, int64_t since_revision,
                                      int64_t limit) override;
  absl::Status WaitForRevision(int64_t revision, absl::Time deadline) override;
  int64_t CurrentRevision() override;
  int64_t CompactedRevision() override;
  absl::Status Compact(int64_t revision) override;

  // SQLite transactions committed since Open: each is one WAL fsync (synchronous=FULL), and a
  // group commit puts many Txns in one, so this counts fsyncs where Txn calls do not.
  // Thread-safe.
  int64_t DurableCommits() const;

  struct Impl;

 private:
  explicit SqliteStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::store
