// One conformance suite for every Store implementation: the semantics in
// store.h are checked identically against MemoryStore, SqliteStore and
// EtcdStore (and any future backend: add a row to kBackends). The etcd rows
// run against one etcd for the binary (EtcdProcess::Shared), each test in a
// key prefix of its own; they are skipped when the bed's etcd is not built.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "store/etcd/etcd_store.h"
#include "store/etcd/testing/etcd_process.h"
#include "store/memory_store.h"
#include "store/sqlite_store.h"
#include "store/store.h"

namespace tessera::store {
namespace {

using ::testing::HasSubstr;

struct Backend {
  std::string name;
  // Opens the store kept in `dir` (ignored by in-memory backends).
  std::function<std::unique_ptr<Store>(const std::string& dir, int64_t retain)> open;
  bool durable;
  // Why the backend cannot run here ("" or unset: it can); the test is skipped with the reason.
  std::function<std::string()> unavailable = nullptr;
};

std::string EtcdUnavailable() {
  std::string why;
  return testing::EtcdProcess::Shared(TESSERA_SOURCE_DIR, &why) ? "" : why;
}

const Backend kBackends[] = {
    {"Memory",
     [](const std::string&, int64_t retain) -> std::unique_ptr<Store> {
       return std::make_unique<MemoryStore>(MemoryStoreOptions{.retain_revisions = retain});
     },
     false},
    {"Sqlite",
     [](const std::string& dir, int64_t retain) -> std::unique_ptr<Store> {
       SqliteStoreOptions o;
       o.retain_revisions = retain;
       auto s = SqliteStore::Open(dir, o);
       EXPECT_TRUE(s.ok()) << s.status();
       return s.ok() ? std::move(*s) : nullptr;
     },
     true},
    {"SqliteNoGroupCommit",
     [](const std::string& dir, int64_t retain) -> std::unique_ptr<Store> {
       SqliteStoreOptions o;
       o.retain_revisions = retain;
       o.group_commit = false;
       auto s = SqliteStore::Open(dir, o);
       EXPECT_TRUE(s.ok()) << s.status();
       return s.ok() ? std::move(*s) : nullptr;
     },
     true},
    {"Etcd",
     [](const std::string& dir, int64_t retain) -> std::unique_ptr<Store> {
       std::string why;
       testing::EtcdProcess* etcd = testing::EtcdProcess::Shared(TESSERA_SOURCE_DIR, &why);
       if (etcd == nullptr) {
         ADD_FAILURE() << why;
         return nullptr;
       }
       EtcdStoreOptions o;
       o.endpoints = {etcd->endpoint()};
       o.prefix = absl::StrCat("/conformance", dir, "/");  // the same dir reopens the same store
       o.retain_revisions = retain;
       auto s = EtcdStore::Open(o);
       EXPECT_TRUE(s.ok()) << s.status();
       return s.ok() ? std::move(*s) : nullptr;
     },
     true, EtcdUnavailable},
};

class StoreConformanceTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    const char* tmp = getenv("TMPDIR");
    std::string tmpl = absl::StrCat(tmp ? tmp : "/tmp", "/tessera_store_XXXXXX");
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl + "/data";
    if (GetParam().unavailable) {
      if (std::string why = GetParam().unavailable(); !why.empty()) GTEST_SKIP() << why;
    }
    Open();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(std::filesystem::path(dir_).parent_path());
  }
  void Open(int64_t retain = 0) {
    store_.reset();
    store_ = GetParam().open(dir_, retain);
    ASSERT_NE(store_, nullptr);
  }

  std::string dir_;
  std::unique_ptr<Store> store_;
};

TEST_P(StoreConformanceTest, EmptyStore) {
  EXPECT_EQ(store_->CurrentRevision(), 0);
  EXPECT_EQ(store_->CompactedRevision(), 0);
  EXPECT_EQ(store_->Get("/x").status().code(), absl::StatusCode::kNotFound);
  auto list = store_->List("/", {});
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->kvs.empty());
  EXPECT_EQ(list->revision, 0);
  auto ev = store_->Events("", 0);
  ASSERT_TRUE(ev.ok()) << ev.status();
  EXPECT_TRUE(ev->events.empty());
}

TEST_P(StoreConformanceTest, CreateGetAndCompareAndSwap) {
  ASSERT_EQ(*store_->Create("/jobs/a", "v1"), 1);
  auto again = store_->Create("/jobs/a", "v2");
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(again.status().message(), HasSubstr("/jobs/a"));
  auto kv = store_->Get("/jobs/a");
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(*kv, (KeyValue{"/jobs/a", "v1", 1, 1}));

  ASSERT_EQ(*store_->Put("/jobs/a", "v3", 1), 2);
  auto stale = store_->Put("/jobs/a", "v4", 1);
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(stale.status().message(), HasSubstr("mod_revision is 2, expected 1"));
  EXPECT_EQ(store_->Put("/jobs/a", "v4", kMustNotExist).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(store_->Put("/jobs/missing", "v", 7).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->CurrentRevision(), 2) << "failed writes must not bump the revision";

  ASSERT_EQ(*store_->Put("/jobs/a", "v5"), 3);  // unconditional
  ASSERT_EQ(*store_->Put("/jobs/b", "b1"), 4);  // unconditional create
  kv = store_->Get("/jobs/a");
  EXPECT_EQ(*kv, (KeyValue{"/jobs/a", "v5", 1, 3}));
  EXPECT_EQ(store_->Get("/jobs/b")->create_revision, 4);
}

TEST_P(StoreConformanceTest, BinaryValuesRoundTrip) {
  std::string value("a\0b\xff\x01", 5);
  ASSERT_TRUE(store_->Create("/bin", value).ok());
  EXPECT_EQ(store_->Get("/bin")->value, value);
  ASSERT_TRUE(store_->Put("/empty", "").ok());
  EXPECT_EQ(store_->Get("/empty")->value, "");
}

TEST_P(StoreConformanceTest, DeleteWithCompareAndSwap) {
  ASSERT_TRUE(store_->Create("/k", "v").ok());
  ASSERT_TRUE(store_->Put("/k", "w").ok());  // rev 2
  EXPECT_EQ(store_->Delete("/k", 1).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->Delete("/nope").status().code(), absl::StatusCode::kNotFound);
  ASSERT_EQ(*store_->Delete("/k", 2), 3);
  EXPECT_EQ(store_->Get("/k").status().code(), absl::StatusCode::kNotFound);
  ASSERT_EQ(*store_->Create("/k", "again"), 4);
  EXPECT_EQ(store_->Get("/k")->create_revision, 4) << "re-creation gets a new create_revision";
}

TEST_P(StoreConformanceTest, RevisionIsMonotonic) {
  int64_t last = 0;
  for (int i = 0; i < 50; ++i) {
    auto rev = store_->Put(absl::StrCat("/k", i % 7), absl::StrCat(i));
    ASSERT_TRUE(rev.ok());
    EXPECT_EQ(*rev, last + 1);
    last = *rev;
    EXPECT_EQ(store_->CurrentRevision(), last);
  }
}

TEST_P(StoreConformanceTest, ListPaginatesInKeyOrderWithinPrefix) {
  std::set<std::string> want;
  for (int i = 0; i < 25; ++i) {
    std::string key = absl::StrCat("/a/", 100 + i * 7 % 25);
    want.insert(key);
    ASSERT_TRUE(store_->Put(key, "x").ok());
  }
  ASSERT_TRUE(store_->Put("/a", "not under /a/").ok());
  ASSERT_TRUE(store_->Put("/b/1", "other prefix").ok());
  ASSERT_TRUE(store_->Put("/a0", "sibling").ok());
  std::vector<std::string> got;
  ListOptions opts;
  opts.limit = 7;
  int pages = 0;
  while (true) {
    auto page = store_->List("/a/", opts);
    ASSERT_TRUE(page.ok()) << page.status();
    EXPECT_EQ(page->revision, 28);
    EXPECT_LE(page->kvs.size(), 7u);
    for (auto& kv : page->kvs) got.push_back(kv.key);
    ++pages;
    if (!page->more) break;
    opts.continue_after = page->next_key;
  }
  EXPECT_EQ(pages, 4);
  EXPECT_EQ(got, std::vector<std::string>(want.begin(), want.end()));

  auto all = store_->List("", {});
  EXPECT_EQ(all->kvs.size(), 28u);
  EXPECT_FALSE(all->more);
  ListOptions all25;
  all25.limit = 25;
  auto exact = store_->List("/a/", all25);
  EXPECT_EQ(exact->kvs.size(), 25u);
  EXPECT_FALSE(exact->more) << "a full last page must not claim more";
}

TEST_P(StoreConformanceTest, ListPrefixWithHighBytes) {
  std::string p("/\xff\xff", 3);
  ASSERT_TRUE(store_->Put(p + "a", "1").ok());
  ASSERT_TRUE(store_->Put(p + "\xff", "2").ok());
  ASSERT_TRUE(store_->Put("/\xfe", "3").ok());
  auto list = store_->List(p, {});
  ASSERT_EQ(list->kvs.size(), 2u);
  EXPECT_EQ(list->kvs[0].key, p + "a");
}

TEST_P(StoreConformanceTest, TxnIsAllOrNothingAtOneRevision) {
  ASSERT_TRUE(store_->Create("/q/a", "1").ok());  // rev 1
  // The second op's CAS fails: nothing of the Txn may be applied.
  auto bad = store_->Txn({Op::Create("/q/b", "2"), Op::Put("/q/a", "x", 99), Op::Delete("/q/a")});
  EXPECT_FALSE(bad.ok());
  bad = store_->Txn({Op::Create("/q/b", "2"), Op::Put("/q/a", "x", 99)});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->Get("/q/b").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->CurrentRevision(), 1);

  EXPECT_EQ(store_->Txn({}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Txn({Op::Put("/d", "1"), Op::Put("/d", "2")}).status().code(),
            absl::StatusCode::kInvalidArgument);

  auto rev = store_->Txn({Op::Create("/q/b", "2"), Op::Put("/q/a", "y", 1), Op::Create("/q/c", "3"),
                          Op::Delete("/q/a", 1)});
  EXPECT_EQ(rev.status().code(), absl::StatusCode::kInvalidArgument) << "duplicate key /q/a";
  rev = store_->Txn({Op::Create("/q/b", "2"), Op::Put("/q/a", "y", 1), Op::Create("/q/c", "3")});
  ASSERT_TRUE(rev.ok()) << rev.status();
  EXPECT_EQ(*rev, 2);
  auto list = store_->List("/q/", {});
  ASSERT_EQ(list->kvs.size(), 3u);
  for (auto& kv : list->kvs) EXPECT_EQ(kv.mod_revision, 2) << kv.key;
  auto ev = store_->Events("/q/", 1);
  ASSERT_EQ(ev->events.size(), 3u);
  for (auto& e : ev->events) EXPECT_EQ(e.revision, 2);
}

TEST_P(StoreConformanceTest, EventsReturnExactlyTheTailAfterARevision) {
  ASSERT_TRUE(store_->Create("/w/a", "a1").ok());                                       // 1
  ASSERT_TRUE(store_->Put("/w/a", "a2", 1).ok());                                       // 2
  ASSERT_TRUE(store_->Create("/other", "o").ok());                                      // 3
  ASSERT_TRUE(store_->Txn({Op::Create("/w/b", "b1"), Op::Create("/w/c", "c1")}).ok());  // 4
  ASSERT_TRUE(store_->Delete("/w/a").ok());                                             // 5

  auto all = store_->Events("/w/", 0);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->revision, 5);
  ASSERT_EQ(all->events.size(), 5u);
  EXPECT_EQ(all->events[0], (Event{Event::Type::kPut, {"/w/a", "a1", 1, 1}, 0, 1}));
  EXPECT_EQ(all->events[1], (Event{Event::Type::kPut, {"/w/a", "a2", 1, 2}, 1, 2}));
  EXPECT_EQ(all->events[2].kv.key, "/w/b");
  EXPECT_EQ(all->events[3].kv.key, "/w/c");
  // A delete carries the deleted value and the previous mod_revision.
  EXPECT_EQ(all->events[4], (Event{Event::Type::kDelete, {"/w/a", "a2", 1, 5}, 2, 5}));

  for (int64_t since = 0; since <= 5; ++since) {
    auto tail = store_->Events("/w/", since);
    ASSERT_TRUE(tail.ok());
    std::vector<Event> want;
    for (auto& e : all->events) {
      if (e.revision > since) want.push_back(e);
    }
    EXPECT_EQ(tail->events, want) << "since " << since;
  }
  EXPECT_EQ(store_->Events("/w/", 6).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Events("/w/", -1).status().code(), absl::StatusCode::kInvalidArgument);

  // Paging with a limit never splits a Txn and resumes without gaps.
  std::vector<Event> paged;
  int64_t since = 0;
  while (since < store_->CurrentRevision()) {
    auto page = store_->Events("/w/", since, 1);
    ASSERT_TRUE(page.ok());
    ASSERT_GT(page->revision, since);
    paged.insert(paged.end(), page->events.begin(), page->events.end());
    since = page->revision;
  }
  EXPECT_EQ(paged, all->events);
}

TEST_P(StoreConformanceTest, WaitForRevisionBlocksUntilAWrite) {
  EXPECT_EQ(store_->WaitForRevision(1, absl::Now() + absl::Milliseconds(20)).code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(store_->WaitForRevision(0, absl::Now()).ok());
  std::thread writer([&] {
    absl::SleepFor(absl::Milliseconds(30));
    ASSERT_TRUE(store_->Put("/late", "x").ok());
  });
  EXPECT_TRUE(store_->WaitForRevision(1, absl::Now() + absl::Seconds(30)).ok());
  writer.join();
}

// Several threads write (creates, CAS updates, deletes) while a watcher
// follows with Events + WaitForRevision. The watcher must see every revision
// exactly once, in order, and replaying its events must give the final state.
TEST_P(StoreConformanceTest, WatchMissesNothingUnderConcurrentWriters) {
  constexpr int kThreads = 6, kOpsPerThread = 150;
  std::atomic<bool> done{false};
  std::vector<Event> seen;
  std::thread watcher([&] {
    int64_t since = 0;
    while (true) {
      bool finished = done.load();
      auto ev = store_->Events("/c/", since, 17);
      ASSERT_TRUE(ev.ok()) << ev.status();
      seen.insert(seen.end(), ev->events.begin(), ev->events.end());
      if (ev->revision == since) {
        if (finished) break;
        store_->WaitForRevision(since + 1, absl::Now() + absl::Milliseconds(5)).IgnoreError();
      }
      since = ev->revision;
    }
  });
  std::atomic<int64_t> acked{0};
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      for (int i = 0; i < kOpsPerThread; ++i) {
        std::string key = absl::StrCat("/c/", rng() % 20);
        auto cur = store_->Get(key);
        absl::StatusOr<int64_t> r;
        switch (rng() % 4) {
          case 0:
            r = store_->Create(key, absl::StrCat(t, ":", i));
            break;
          case 1:
            r = cur.ok() ? store_->Delete(key, cur->mod_revision) : store_->Create(key, "x");
            break;
          case 2:
            r = store_->Txn({Op::Put(key, absl::StrCat(t, "/", i)),
                             Op::Put(absl::StrCat("/c/t", t), absl::StrCat(i))});
            break;
          default:
            r = store_->Put(key, absl::StrCat(t, "-", i), cur.ok() ? cur->mod_revision : 0);
        }
        if (r.ok()) {
          acked++;
        } else {
          EXPECT_TRUE(absl::IsAlreadyExists(r.status()) || absl::IsFailedPrecondition(r.status()) ||
                      absl::IsNotFound(r.status()))
              << r.status();
        }
      }
    });
  }
  for (auto& w : writers) w.join();
  done = true;
  watcher.join();

  const int64_t final_rev = store_->CurrentRevision();
  EXPECT_EQ(final_rev, acked.load()) << "one revision per successful write";
  std::set<int64_t> revs;
  std::set<std::pair<int64_t, std::string>> uniq;
  std::map<std::string, std::string> replay;
  int64_t prev = 0;
  for (const Event& e : seen) {
    ASSERT_GE(e.revision, prev) << "events out of order";
    prev = e.revision;
    ASSERT_TRUE(uniq.insert({e.revision, e.kv.key}).second) << "repeated event";
    revs.insert(e.revision);
    if (e.type == Event::Type::kPut) {
      replay[e.kv.key] = e.kv.value;
    } else {
      ASSERT_EQ(replay.erase(e.kv.key), 1u) << "delete of a key never put";
    }
  }
  EXPECT_EQ(static_cast<int64_t>(revs.size()), final_rev) << "a revision is missing";
  std::map<std::string, std::string> state;
  auto list = store_->List("/c/", {});
  ASSERT_TRUE(list.ok());
  for (auto& kv : list->kvs) state[kv.key] = kv.value;
  EXPECT_EQ(replay, state);
}

TEST_P(StoreConformanceTest, CompactedHistoryIsOutOfRange) {
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(store_->Put("/h", absl::StrCat(i)).ok());
  ASSERT_TRUE(store_->Compact(4).ok());
  EXPECT_EQ(store_->CompactedRevision(), 4);
  auto gone = store_->Events("/", 3);
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(gone.status().message(), HasSubstr("compacted"));
  auto ok = store_->Events("/", 4);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->events.size(), 6u);
  EXPECT_EQ(ok->events.front().revision, 5);
  EXPECT_TRUE(store_->Compact(2).ok()) << "compacting below is a no-op";
  EXPECT_EQ(store_->CompactedRevision(), 4);
  EXPECT_EQ(store_->Compact(11).code(), absl::StatusCode::kOutOfRange);
  // Keys are unaffected by compaction.
  EXPECT_EQ(store_->Get("/h")->value, "9");
}

TEST_P(StoreConformanceTest, RetainedWindowCompactsAutomatically) {
  Open(/*retain=*/10);
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(store_->Put("/r", absl::StrCat(i)).ok());
  const int64_t comp = store_->CompactedRevision();
  EXPECT_GE(comp, 80);
  EXPECT_LE(comp, 90);
  EXPECT_EQ(store_->Events("/", comp - 1).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(store_->Events("/", 90)->events.size(), 10u);
}

// The durability checks run against the backends that keep data across a restart only (not
// skipped for the others: never instantiated for them).
class DurableStoreTest : public StoreConformanceTest {};

TEST_P(DurableStoreTest, RestartKeepsEveryAcknowledgedWrite) {
  std::map<std::string, std::string> acked;
  absl::Mutex mu;
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        std::string key = absl::StrCat("/d/", t, "/", i % 30);
        std::string value = absl::StrCat(i);
        if (store_->Put(key, value).ok()) {
          absl::MutexLock l(&mu);
          acked[key] = value;
        }
      }
    });
  }
  for (auto& w : writers) w.join();
  ASSERT_TRUE(store_->Delete("/d/0/0").ok());
  acked.erase("/d/0/0");
  ASSERT_TRUE(store_->Compact(5).ok());
  const int64_t rev = store_->CurrentRevision();
  auto events_before = store_->Events("/", 5);
  ASSERT_TRUE(events_before.ok());

  Open();  // close and reopen the same directory
  EXPECT_EQ(store_->CurrentRevision(), rev);
  EXPECT_EQ(store_->CompactedRevision(), 5);
  std::map<std::string, std::string> got;
  auto list = store_->List("/d/", {});
  ASSERT_TRUE(list.ok());
  for (auto& kv : list->kvs) got[kv.key] = kv.value;
  EXPECT_EQ(got, acked);
  auto events_after = store_->Events("/", 5);
  ASSERT_TRUE(events_after.ok());
  EXPECT_EQ(events_after->events, events_before->events);
  EXPECT_EQ(*store_->Put("/d/next", "x"), rev + 1) << "the revision continues after restart";
}

INSTANTIATE_TEST_SUITE_P(AllBackends, StoreConformanceTest, ::testing::ValuesIn(kBackends),
                         [](const auto& info) { return info.param.name; });

std::vector<Backend> DurableBackends() {
  std::vector<Backend> out;
  for (const Backend& b : kBackends) {
    if (b.durable) out.push_back(b);
  }
  return out;
}
INSTANTIATE_TEST_SUITE_P(DurableBackends, DurableStoreTest, ::testing::ValuesIn(DurableBackends()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace tessera::store
