#include "store/sqlite_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "store/txn_check.h"

namespace tessera::store {
namespace {

constexpr int64_t kSchemaVersion = 1;
// Reader connections (Impl::Reader): reads run concurrently up to this many.
constexpr int kReaders = 4;
// The writer checkpoints by itself only past this many WAL pages (the checkpointer thread keeps
// the WAL well below it); SQLite's default is 1,000.
constexpr int kWriterCheckpointPages = 50000;

// One prepared statement, reset after each use. Not thread-safe; each is used
// under the mutex of its connection.
class Stmt {
 public:
  Stmt() = default;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  ~Stmt() { sqlite3_finalize(stmt_); }

  absl::Status Prepare(sqlite3* db, const char* sql) {
    db_ = db;
    if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr) != SQLITE_OK) {
      return absl::InternalError(
          absl::StrCat("sqlite prepare \"", sql, "\": ", sqlite3_errmsg(db)));
    }
    return absl::OkStatus();
  }
  // Binds and returns *this so calls chain; bind errors surface at Step().
  Stmt& Bind(int i, std::string_view blob) {
    sqlite3_bind_blob64(stmt_, i, blob.data(), blob.size(), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& BindText(int i, std::string_view text) {
    sqlite3_bind_text64(stmt_, i, text.data(), text.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
    return *this;
  }
  Stmt& Bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  // SQLITE_ROW -> true, SQLITE_DONE -> false, otherwise an error.
  absl::StatusOr<bool> Step() {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return absl::InternalError(absl::StrCat("sqlite: ", sqlite3_errmsg(db_)));
  }
  absl::Status Run() {
    absl::StatusOr<bool> r = Step();
    Reset();
    return r.status();
  }
  void Reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  std::string Blob(int col) {
    const void* p = sqlite3_column_blob(stmt_, col);
    int n = sqlite3_column_bytes(stmt_, col);
    return p == nullptr ? std::string() : std::string(static_cast<const char*>(p), n);
  }
  int64_t Int(int col) { return sqlite3_column_int64(stmt_, col); }

 private:
  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
};

absl::Status Exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    absl::Status s = absl::InternalError(absl::StrCat("sqlite \"", sql, "\": ", err ? err : "?"));
    sqlite3_free(err);
    return s;
  }
  return absl::OkStatus();
}

// The smallest string greater than every string with prefix `p`, or nullopt
// when there is none (empty or all-0xff prefix).
std::optional<std::string> PrefixEnd(std::string_view p) {
  std::string end(p);
  while (!end.empty()) {
    unsigned char c = static_cast<unsigned char>(end.back());
    if (c != 0xff) {
      end.back() = static_cast<char>(c + 1);
      return end;
    }
    end.pop_back();
  }
  return std::nullopt;
}

}  // namespace

struct SqliteStore::Impl {
  SqliteStoreOptions options;
  std::string dir;
  int lock_fd = -1;

  // Writer connection: only the group-commit leader (or Compact) uses it.
  absl::Mutex write_mu;
  sqlite3* wdb ABSL_GUARDED_BY(write_mu) = nullptr;
  std::unique_ptr<Stmt> w_get_kv, w_upsert_kv, w_delete_kv, w_insert_event, w_set_meta,
      w_delete_events, w_begin, w_commit, w_rollback;
  int64_t committed ABSL_GUARDED_BY(write_mu) = 0;  // last revision in the database
  int64_t compacted_w ABSL_GUARDED_BY(write_mu) = 0;
  std::atomic<int64_t> durable_commits{0};  // successful COMMITs of the writer connection

  // Reader connections: a few, so that concurrent reads (a fleet's heartbeats each read their
  // Node) do not queue on one connection's lock. Each sees a WAL snapshot of its own.
  struct Reader {
    sqlite3* db = nullptr;
    std::unique_ptr<Stmt> get_kv, list_from, list_range, events, get_meta, begin, commit;
    ~Reader() {
      get_kv.reset(), list_from.reset(), list_range.reset(), events.reset();
      get_meta.reset(), begin.reset(), commit.reset();
      if (db) sqlite3_close_v2(db);
    }
    // Reads meta `name`; `dir` names the store in errors.
    absl::StatusOr<int64_t> ReadMeta(const char* name, const std::string& dir);
  };
  // Borrows a free reader for its lifetime (waits for one).
  class ReaderLease {
   public:
    explicit ReaderLease(Impl& m) : m_(m) {
      absl::MutexLock l(&m_.read_mu);
      m_.read_mu.Await(absl::Condition(
          +[](std::vector<Reader*>* f) { return !f->empty(); }, &m_.free_readers));
      r_ = m_.free_readers.back();
      m_.free_readers.pop_back();
    }
    ~ReaderLease() {
      absl::MutexLock l(&m_.read_mu);
      m_.free_readers.push_back(r_);
    }
    ReaderLease(const ReaderLease&) = delete;
    ReaderLease& operator=(const ReaderLease&) = delete;
    Reader* operator->() const { return r_; }

   private:
    Impl& m_;
    Reader* r_;
  };
  std::vector<std::unique_ptr<Reader>> readers;  // set by OpenFiles, then fixed
  absl::Mutex read_mu;
  std::vector<Reader*> free_readers ABSL_GUARDED_BY(read_mu);

  // Published state: what readers and waiters may rely on.
  absl::Mutex rev_mu;
  int64_t revision ABSL_GUARDED_BY(rev_mu) = 0;
  int64_t compacted ABSL_GUARDED_BY(rev_mu) = 0;

  // Checkpoints: copying the WAL back into the database file (and fsyncing it) ran inside the
  // commit that crossed SQLite's 1,000-page threshold, stalling that group commit and every
  // writer queued behind it for the copy. A thread of its own checkpoints instead (PASSIVE: it
  // never waits for readers or the writer), on a connection of its own; the writer's automatic
  // checkpoint stays as a backstop at kWriterCheckpointPages.
  sqlite3* cdb = nullptr;
  std::thread checkpointer;
  absl::Mutex ckpt_mu;
  bool ckpt_stop ABSL_GUARDED_BY(ckpt_mu) = false;
  void Checkpoints() {
    absl::MutexLock l(&ckpt_mu);
    while (!ckpt_mu.AwaitWithTimeout(absl::Condition(&ckpt_stop), absl::Milliseconds(200))) {
      ckpt_mu.Unlock();
      sqlite3_wal_checkpoint_v2(cdb, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
      ckpt_mu.Lock();
    }
  }
  void StopCheckpoints() {
    {
      absl::MutexLock l(&ckpt_mu);
      ckpt_stop = true;
    }
    if (checkpointer.joinable()) checkpointer.join();
    if (cdb) sqlite3_close_v2(cdb);
    cdb = nullptr;
  }

  // Group commit queue.
  struct Pending {
    const std::vector<Op>* ops;
    absl::StatusOr<int64_t> result = absl::InternalError("not committed");
    bool done = false;
  };
  absl::Mutex queue_mu;
  std::deque<Pending*> queue ABSL_GUARDED_BY(queue_mu);
  bool leader_active ABSL_GUARDED_BY(queue_mu) = false;

  ~Impl() {
    StopCheckpoints();
    // Finalize statements before closing their connections.
    w_get_kv.reset(), w_upsert_kv.reset(), w_delete_kv.reset(), w_insert_event.reset();
    w_set_meta.reset(), w_delete_events.reset(), w_begin.reset(), w_commit.reset();
    w_rollback.reset();
    {
      absl::MutexLock l(&write_mu);
      if (wdb) sqlite3_close_v2(wdb);
    }
    readers.clear();
    if (lock_fd >= 0) close(lock_fd);  // releases the flock
  }

  static absl::StatusOr<std::unique_ptr<Stmt>> Prep(sqlite3* db, const char* sql) {
    auto s = std::make_unique<Stmt>();
    if (absl::Status st = s->Prepare(db, sql); !st.ok()) return st;
    return s;
  }

  absl::Status OpenFiles();
  absl::Status CommitBatch(std::vector<Pending*>& batch);
  absl::Status ApplyOne(const std::vector<Op>& ops, int64_t rev)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu);
  absl::StatusOr<std::optional<KeyValue>> WriterGet(const std::string& key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu);
  absl::Status WriteMeta(const char* name, int64_t v) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu) {
    return w_set_meta->BindText(1, name).Bind(2, v).Run();
  }
  void Publish(int64_t rev, int64_t comp) {
    absl::MutexLock l(&rev_mu);
    if (rev > revision) revision = rev;
    if (comp > compacted) compacted = comp;
  }
};

absl::Status SqliteStore::Impl::OpenFiles() {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) {
      return absl::FailedPreconditionError(
          absl::StrCat("data dir ", dir, ": ", std::strerror(errno)));
    }
    if (!options.create_if_missing) {
      return absl::NotFoundError(absl::StrCat("data dir ", dir, " does not exist"));
    }
    if (mkdir(dir.c_str(), 0755) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("data dir ", dir, ": cannot create: ", std::strerror(errno)));
    }
  } else if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat("data dir ", dir, " is not a directory"));
  }
  std::string lock_path = dir + "/LOCK";
  lock_fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("data dir ", dir, ": cannot open LOCK: ", std::strerror(errno)));
  }
  if (flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("data dir ", dir, " is in use by another tessera process"));
  }
  std::string db_path = dir + "/store.db";
  bool exists = access(db_path.c_str(), F_OK) == 0;
  if (!exists && !options.create_if_missing) {
    return absl::NotFoundError(absl::StrCat("data dir ", dir, " has no store.db"));
  }
  absl::MutexLock wl(&write_mu);
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  if (sqlite3_open_v2(db_path.c_str(), &wdb, flags, nullptr) != SQLITE_OK) {
    return absl::InternalError(absl::StrCat("open ", db_path, ": ", sqlite3_errmsg(wdb)));
  }
  sqlite3_extended_result_codes(wdb, 1);
  sqlite3_busy_timeout(wdb, 10000);
  // The first statement reads the header: a garbage file fails here.
  char* err = nullptr;
  if (sqlite3_exec(wdb, "PRAGMA journal_mode=WAL", nullptr, nullptr, &err) != SQLITE_OK) {
    absl::Status s = absl::DataLossError(absl::StrCat(
        "data dir ", dir, ": store.db is not a usable SQLite database: ", err ? err : "?"));
    sqlite3_free(err);
    return s;
  }
  // Someone else's SQLite database is not ours to add tables to. (An empty
  // one is: a crash during the very first open leaves no tables.)
  {
    sqlite3_stmt* q = nullptr;
    sqlite3_prepare_v2(
        wdb, "SELECT count(*), sum(name = 'meta') FROM sqlite_master WHERE type = 'table'", -1, &q,
        nullptr);
    int64_t tables = 0, meta = 0;
    if (q != nullptr && sqlite3_step(q) == SQLITE_ROW) {
      tables = sqlite3_column_int64(q, 0);
      meta = sqlite3_column_int64(q, 1);
    }
    sqlite3_finalize(q);
    if (tables > 0 && meta == 0) {
      return absl::DataLossError(
          absl::StrCat("data dir ", dir, ": store.db is an SQLite database but not Tessera's"));
    }
  }
  if (absl::Status s = Exec(wdb,
                            "PRAGMA synchronous=FULL;"
                            "BEGIN IMMEDIATE;"
                            "CREATE TABLE IF NOT EXISTS meta(name TEXT PRIMARY KEY, value INTEGER);"
                            "CREATE TABLE IF NOT EXISTS kv(key BLOB PRIMARY KEY, value BLOB,"
                            " create_rev INTEGER, mod_rev INTEGER) WITHOUT ROWID;"
                            "CREATE TABLE IF NOT EXISTS events(rev INTEGER, idx INTEGER,"
                            " type INTEGER, key BLOB, value BLOB, create_rev INTEGER,"
                            " prev_mod_rev INTEGER, PRIMARY KEY(rev, idx)) WITHOUT ROWID;"
                            "INSERT OR IGNORE INTO meta VALUES('schema_version', 1);"
                            "INSERT OR IGNORE INTO meta VALUES('revision', 0);"
                            "INSERT OR IGNORE INTO meta VALUES('compacted', 0);"
                            "COMMIT;");
      !s.ok()) {
    return absl::DataLossError(absl::StrCat("data dir ", dir, ": ", s.message()));
  }

#define PREP(var, db, sql)            \
  do {                                \
    auto _s = Prep(db, sql);          \
    if (!_s.ok()) return _s.status(); \
    (var) = std::move(*_s);           \
  } while (0)
  PREP(w_get_kv, wdb, "SELECT value, create_rev, mod_rev FROM kv WHERE key=?1");
  PREP(w_upsert_kv, wdb, "INSERT OR REPLACE INTO kv VALUES(?1, ?2, ?3, ?4)");
  PREP(w_delete_kv, wdb, "DELETE FROM kv WHERE key=?1");
  PREP(w_insert_event, wdb, "INSERT INTO events VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)");
  PREP(w_set_meta, wdb, "INSERT OR REPLACE INTO meta VALUES(?1, ?2)");
  PREP(w_delete_events, wdb, "DELETE FROM events WHERE rev <= ?1");
  PREP(w_begin, wdb, "BEGIN IMMEDIATE");
  PREP(w_commit, wdb, "COMMIT");
  PREP(w_rollback, wdb, "ROLLBACK");
  for (int i = 0; i < kReaders; ++i) {
    auto r = std::make_unique<Reader>();
    if (sqlite3_open_v2(db_path.c_str(), &r->db, flags, nullptr) != SQLITE_OK) {
      return absl::InternalError(absl::StrCat("open ", db_path, ": ", sqlite3_errmsg(r->db)));
    }
    sqlite3_busy_timeout(r->db, 10000);
    PREP(r->get_kv, r->db, "SELECT value, create_rev, mod_rev FROM kv WHERE key=?1");
    PREP(r->list_from, r->db,
         "SELECT key, value, create_rev, mod_rev FROM kv WHERE key > ?1 AND key >= ?2"
         " ORDER BY key LIMIT ?3");
    PREP(r->list_range, r->db,
         "SELECT key, value, create_rev, mod_rev FROM kv WHERE key > ?1 AND key >= ?2"
         " AND key < ?4 ORDER BY key LIMIT ?3");
    PREP(r->events, r->db,
         "SELECT rev, type, key, value, create_rev, prev_mod_rev FROM events WHERE rev > ?1"
         " ORDER BY rev, idx");
    PREP(r->get_meta, r->db, "SELECT value FROM meta WHERE name=?1");
    PREP(r->begin, r->db, "BEGIN");
    PREP(r->commit, r->db, "COMMIT");
    readers.push_back(std::move(r));
  }
#undef PREP
  {
    absl::MutexLock l(&read_mu);
    for (auto& r : readers) free_readers.push_back(r.get());
  }
  if (sqlite3_open_v2(db_path.c_str(), &cdb, flags, nullptr) != SQLITE_OK) {
    return absl::InternalError(absl::StrCat("open ", db_path, ": ", sqlite3_errmsg(cdb)));
  }
  sqlite3_busy_timeout(cdb, 1000);
  // A connection learns that the database is in WAL mode only when it first reads it; until
  // then sqlite3_wal_checkpoint_v2 does nothing and says so only through -1 frame counts. This
  // one never reads, so it is told.
  if (absl::Status s = Exec(cdb, "PRAGMA journal_mode=WAL"); !s.ok()) {
    return absl::InternalError(absl::StrCat("open ", db_path, " to checkpoint: ", s.message()));
  }
  sqlite3_wal_autocheckpoint(wdb, kWriterCheckpointPages);
  checkpointer = std::thread([this] { Checkpoints(); });
  Reader& reader = *readers.front();
  auto ReadMeta = [&](const char* name) { return reader.ReadMeta(name, dir); };
  absl::StatusOr<int64_t> version = ReadMeta("schema_version");
  if (!version.ok()) return version.status();
  if (*version != kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "data dir ", dir, ": schema version ", *version, ", this binary reads ", kSchemaVersion));
  }
  absl::StatusOr<int64_t> rev = ReadMeta("revision");
  if (!rev.ok()) return rev.status();
  absl::StatusOr<int64_t> comp = ReadMeta("compacted");
  if (!comp.ok()) return comp.status();
  committed = *rev;
  compacted_w = *comp;
  Publish(*rev, *comp);
  return absl::OkStatus();
}

absl::StatusOr<std::optional<KeyValue>> SqliteStore::Impl::WriterGet(const std::string& key) {
  w_get_kv->Bind(1, key);
  absl::StatusOr<bool> row = w_get_kv->Step();
  std::optional<KeyValue> kv;
  if (row.ok() && *row) {
    kv = KeyValue{key, w_get_kv->Blob(0), w_get_kv->Int(1), w_get_kv->Int(2)};
  }
  w_get_kv->Reset();
  if (!row.ok()) return row.status();
  return kv;
}

absl::Status SqliteStore::Impl::ApplyOne(const std::vector<Op>& ops, int64_t rev) {
  int64_t idx = 0;
  for (const Op& op : ops) {
    absl::StatusOr<std::optional<KeyValue>> cur = WriterGet(op.key);
    if (!cur.ok()) return cur.status();
    Event::Type type = op.kind == Op::Kind::kPut ? Event::Type::kPut : Event::Type::kDelete;
    int64_t prev_mod = *cur ? (*cur)->mod_revision : 0;
    int64_t create_rev = *cur ? (*cur)->create_revision : rev;
    std::string_view value = op.value;
    if (type == Event::Type::kPut) {
      if (absl::Status s =
              w_upsert_kv->Bind(1, op.key).Bind(2, op.value).Bind(3, create_rev).Bind(4, rev).Run();
          !s.ok()) {
        return s;
      }
    } else {
      value = (*cur)->value;
      if (absl::Status s = w_delete_kv->Bind(1, op.key).Run(); !s.ok()) return s;
    }
    if (absl::Status s = w_insert_event->Bind(1, rev)
                             .Bind(2, idx++)
                             .Bind(3, static_cast<int64_t>(type))
                             .Bind(4, op.key)
                             .Bind(5, value)
                             .Bind(6, create_rev)
                             .Bind(7, prev_mod)
                             .Run();
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> SqliteStore::Impl::Reader::ReadMeta(const char* name,
                                                            const std::string& dir) {
  get_meta->BindText(1, name);
  absl::StatusOr<bool> row = get_meta->Step();
  int64_t v = row.ok() && *row ? get_meta->Int(0) : -1;
  get_meta->Reset();
  if (!row.ok()) return row.status();
  if (v < 0)
    return absl::DataLossError(absl::StrCat("data dir ", dir, ": meta ", name, " missing"));
  return v;
}

// Commits every request of `batch` in one SQLite transaction. Each request
// gets its own CAS check (against the state left by the requests before it)
// and its own revision. On an SQLite error nothing of the batch is kept and
// every request fails with that error.
absl::Status SqliteStore::Impl::CommitBatch(std::vector<Pending*>& batch) {
  absl::MutexLock l(&write_mu);
  auto fail_all = [&](const absl::Status& s) {
    w_rollback->Run().IgnoreError();
    for (Pending* p : batch) p->result = s;
    return s;
  };
  if (absl::Status s = w_begin->Run(); !s.ok()) return fail_all(s);
  int64_t rev = committed;
  for (Pending* p : batch) {
    absl::Status check = absl::OkStatus();
    for (const Op& op : *p->ops) {
      absl::StatusOr<std::optional<KeyValue>> cur = WriterGet(op.key);
      if (!cur.ok()) return fail_all(cur.status());
      check = CheckOp(op, *cur ? &**cur : nullptr);
      if (!check.ok()) break;
    }
    if (!check.ok()) {
      p->result = check;
      continue;
    }
    if (absl::Status s = ApplyOne(*p->ops, rev + 1); !s.ok()) return fail_all(s);
    p->result = ++rev;
  }
  if (rev == committed) {  // every request failed its check: nothing to write
    w_rollback->Run().IgnoreError();
    return absl::OkStatus();
  }
  if (absl::Status s = WriteMeta("revision", rev); !s.ok()) return fail_all(s);
  int64_t comp = compacted_w;
  int64_t retain = options.retain_revisions;
  // Compact in steps of ~10% of the window so the delete is amortized.
  if (retain > 0 && rev - compacted_w > retain + retain / 10) {
    comp = rev - retain;
    if (absl::Status s = w_delete_events->Bind(1, comp).Run(); !s.ok()) return fail_all(s);
    if (absl::Status s = WriteMeta("compacted", comp); !s.ok()) return fail_all(s);
  }
  if (absl::Status s = w_commit->Run(); !s.ok()) return fail_all(s);
  durable_commits.fetch_add(1, std::memory_order_relaxed);
  committed = rev;
  compacted_w = comp;
  Publish(rev, comp);
  return absl::OkStatus();
}

SqliteStore::SqliteStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SqliteStore::~SqliteStore() = default;

absl::StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::Open(const std::string& dir,
                                                               SqliteStoreOptions options) {
  if (dir.empty()) return absl::InvalidArgumentError("data dir: empty path");
  // SQLite's memory statistics take one process-wide mutex on every allocation, which every
  // connection's reads then queue on. Nothing here reads them. (Takes effect only before SQLite
  // initializes; later calls are refused and harmless.)
  static std::once_flag no_memstatus;
  std::call_once(no_memstatus, [] { sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); });
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->dir = dir;
  if (absl::Status s = impl->OpenFiles(); !s.ok()) return s;
  return std::unique_ptr<SqliteStore>(new SqliteStore(std::move(impl)));
}

absl::StatusOr<KeyValue> SqliteStore::Get(std::string_view key) {
  Impl::ReaderLease r(*impl_);
  Stmt& s = *r->get_kv;
  s.Bind(1, key);
  absl::StatusOr<bool> row = s.Step();
  std::optional<KeyValue> kv;
  if (row.ok() && *row) kv = KeyValue{std::string(key), s.Blob(0), s.Int(1), s.Int(2)};
  s.Reset();
  if (!row.ok()) return row.status();
  if (!kv) return absl::NotFoundError(absl::StrCat("key ", std::string(key), " not found"));
  return *std::move(kv);
}

absl::StatusOr<ListResult> SqliteStore::List(std::string_view prefix, const ListOptions& options) {
  if (options.limit < 0) return absl::InvalidArgumentError("list: negative limit");
  std::optional<std::string> end = PrefixEnd(prefix);
  Impl& m = *impl_;
  Impl::ReaderLease r(m);
  // A read transaction pins one WAL snapshot for the revision and the rows.
  if (absl::Status s = r->begin->Run(); !s.ok()) return s;
  ListResult result;
  absl::Status status = absl::OkStatus();
  if (absl::StatusOr<int64_t> rev = r->ReadMeta("revision", m.dir); rev.ok()) {
    result.revision = *rev;
  } else {
    status = rev.status();
  }
  Stmt& s = end ? *r->list_range : *r->list_from;
  if (!status.ok()) {
    r->commit->Run().IgnoreError();
    return status;
  }
  s.Bind(1, std::string_view(options.continue_after)).Bind(2, prefix);
  s.Bind(3, options.limit > 0 ? options.limit + 1 : int64_t{-1});
  if (end) s.Bind(4, std::string_view(*end));
  while (true) {
    absl::StatusOr<bool> row = s.Step();
    if (!row.ok()) {
      status = row.status();
      break;
    }
    if (!*row) break;
    if (options.limit > 0 && static_cast<int64_t>(result.kvs.size()) == options.limit) {
      result.more = true;
      result.next_key = result.kvs.back().key;
      break;
    }
    result.kvs.push_back(KeyValue{s.Blob(0), s.Blob(1), s.Int(2), s.Int(3)});
  }
  s.Reset();
  r->commit->Run().IgnoreError();
  if (!status.ok()) return status;
  return result;
}

absl::StatusOr<int64_t> SqliteStore::Txn(const std::vector<Op>& ops) {
  if (absl::Status s = ValidateTxnShape(ops); !s.ok()) return s;
  Impl& m = *impl_;
  Impl::Pending self{&ops};
  if (!m.options.group_commit) {
    std::vector<Impl::Pending*> batch{&self};
    m.CommitBatch(batch).IgnoreError();  // the error is in self.result
    return self.result;
  }
  absl::MutexLock l(&m.queue_mu);
  m.queue.push_back(&self);
  while (!self.done) {
    if (!m.leader_active) {
      // Lead: take everything queued so far and commit it with one fsync.
      m.leader_active = true;
      std::vector<Impl::Pending*> batch(m.queue.begin(), m.queue.end());
      m.queue.clear();
      m.queue_mu.Unlock();
      m.CommitBatch(batch).IgnoreError();
      m.queue_mu.Lock();
      for (Impl::Pending* p : batch) p->done = true;
      m.leader_active = false;
    } else {
      auto ready = [&]() ABSL_SHARED_LOCKS_REQUIRED(m.queue_mu) {
        return self.done || !m.leader_active;
      };
      m.queue_mu.Await(absl::Condition(&ready));
    }
  }
  return self.result;
}

absl::StatusOr<EventsResult> SqliteStore::Events(std::string_view prefix, int64_t since_revision,
                                                 int64_t limit) {
  Impl& m = *impl_;
  Impl::ReaderLease r(m);
  if (absl::Status s = r->begin->Run(); !s.ok()) return s;
  auto finish = [&](absl::StatusOr<EventsResult> res) {
    r->commit->Run().IgnoreError();
    return res;
  };
  absl::StatusOr<int64_t> rev_or = r->ReadMeta("revision", m.dir);
  if (!rev_or.ok()) return finish(rev_or.status());
  absl::StatusOr<int64_t> comp_or = r->ReadMeta("compacted", m.dir);
  if (!comp_or.ok()) return finish(comp_or.status());
  const int64_t rev = *rev_or, comp = *comp_or;
  if (since_revision < 0 || since_revision > rev) {
    return finish(absl::InvalidArgumentError(
        absl::StrCat("events: revision ", since_revision, " is not in [0, ", rev, "]")));
  }
  if (since_revision < comp) {
    return finish(
        absl::OutOfRangeError(absl::StrCat("required revision ", since_revision,
                                           " has been compacted (compacted revision ", comp, ")")));
  }
  EventsResult result;
  result.revision = rev;
  Stmt& s = *r->events;
  s.Bind(1, since_revision);
  absl::Status status = absl::OkStatus();
  while (true) {
    absl::StatusOr<bool> row = s.Step();
    if (!row.ok()) {
      status = row.status();
      break;
    }
    if (!*row) break;
    int64_t ev_rev = s.Int(0);
    if (limit > 0 && static_cast<int64_t>(result.events.size()) >= limit &&
        ev_rev != result.events.back().revision) {
      result.revision = ev_rev - 1;
      break;
    }
    std::string key = s.Blob(2);
    if (!HasPrefix(key, prefix)) continue;
    Event e;
    e.revision = ev_rev;
    e.type = s.Int(1) == static_cast<int64_t>(Event::Type::kPut) ? Event::Type::kPut
                                                                 : Event::Type::kDelete;
    e.kv = KeyValue{std::move(key), s.Blob(3), s.Int(4), ev_rev};
    e.prev_mod_revision = s.Int(5);
    result.events.push_back(std::move(e));
  }
  s.Reset();
  if (!status.ok()) return finish(status);
  return finish(std::move(result));
}

absl::Status SqliteStore::WaitForRevision(int64_t revision, absl::Time deadline) {
  absl::MutexLock l(&impl_->rev_mu);
  auto reached = [this, revision]() ABSL_SHARED_LOCKS_REQUIRED(impl_->rev_mu) {
    return impl_->revision >= revision;
  };
  if (impl_->rev_mu.AwaitWithDeadline(absl::Condition(&reached), deadline)) {
    return absl::OkStatus();
  }
  return absl::DeadlineExceededError(absl::StrCat("revision ", revision, " not reached"));
}

int64_t SqliteStore::CurrentRevision() {
  absl::MutexLock l(&impl_->rev_mu);
  return impl_->revision;
}

int64_t SqliteStore::CompactedRevision() {
  absl::MutexLock l(&impl_->rev_mu);
  return impl_->compacted;
}

absl::Status SqliteStore::Compact(int64_t revision) {
  Impl& m = *impl_;
  absl::MutexLock l(&m.write_mu);
  if (revision > m.committed) {
    return absl::OutOfRangeError(
        absl::StrCat("compact: revision ", revision, " is above current revision ", m.committed));
  }
  if (revision <= m.compacted_w) return absl::OkStatus();
  if (absl::Status s = m.w_begin->Run(); !s.ok()) return s;
  absl::Status s = m.w_delete_events->Bind(1, revision).Run();
  if (s.ok()) s = m.WriteMeta("compacted", revision);
  if (s.ok()) s = m.w_commit->Run();
  if (!s.ok()) {
    m.w_rollback->Run().IgnoreError();
    return s;
  }
  m.durable_commits.fetch_add(1, std::memory_order_relaxed);
  m.compacted_w = revision;
  m.Publish(m.committed, revision);
  return absl::OkStatus();
}

int64_t SqliteStore::DurableCommits() const {
  return impl_->durable_commits.load(std::memory_order_relaxed);
}

}  // namespace tessera::store
