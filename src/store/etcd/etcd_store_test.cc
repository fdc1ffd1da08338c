// EtcdStore beyond the conformance suite: URL parsing and options (no etcd needed), and against a
// real etcd (EtcdStoreLive*, skipped without the bed's etcd): compaction gives the SQLite store's
// error, a lost etcd gives Unavailable and the store recovers when it is back, a watcher
// (Events + WaitForRevision) misses nothing across an etcd restart.
#include "store/etcd/etcd_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "store/etcd/etcd_store_internal.h"
#include "store/etcd/testing/etcd_process.h"
#include "store/sqlite_store.h"

namespace tessera::store {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(EtcdUrlTest, ParsesEndpointsSchemeAndPrefix) {
  auto o = ParseEtcdUrl("etcd://127.0.0.1:2379");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_THAT(o->endpoints, ElementsAre("127.0.0.1:2379"));
  EXPECT_FALSE(o->tls);
  EXPECT_EQ(o->prefix, "/tessera/");

  o = ParseEtcdUrl("etcds://a.example:2379,b.example:2380/prod/tessera/");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_THAT(o->endpoints, ElementsAre("a.example:2379", "b.example:2380"));
  EXPECT_TRUE(o->tls);
  EXPECT_EQ(o->prefix, "/prod/tessera/");
}

TEST(EtcdUrlTest, BadUrlsNameWhatIsWrong) {
  for (const char* bad : {"http://h:1", "etcd://", "etcd://h", "etcd://h:", "etcd://h:99999",
                          "etcd://h:1,", "etcd://:1", "etcd://h:1x"}) {
    auto o = ParseEtcdUrl(bad);
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(o.status().message(), HasSubstr(bad));
  }
}

TEST(EtcdUrlTest, UnreadableTlsFilesNameTheFlag) {
  EtcdStoreOptions o;
  o.endpoints = {"127.0.0.1:1"};
  o.tls = true;
  o.ca_file = "/nonexistent/ca.pem";
  auto s = EtcdStore::Open(o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("--etcd-cacert /nonexistent/ca.pem"));
  o.ca_file = "";
  o.cert_file = "/nonexistent/c.pem";
  s = EtcdStore::Open(o);
  EXPECT_THAT(s.status().message(), HasSubstr("--etcd-key"));
}

// Several callers failing on one dead member move the store off it once: with a bare increment
// per failure, three failures on m0 of three endpoints went round the ring back onto m0.
TEST(EtcdEndpointsTest, ConcurrentFailuresOfOneMemberMoveOffItOnce) {
  EtcdStore::Impl m;
  m.endpoints.resize(3);
  ASSERT_EQ(&m.Pick(), &m.endpoints[0]);
  for (int i = 0; i < 3; ++i) m.MoveOff(m.endpoints[0]);
  EXPECT_EQ(&m.Pick(), &m.endpoints[1]);
  m.MoveOff(m.endpoints[0]);  // a late failure of m0: the store is past it already
  EXPECT_EQ(&m.Pick(), &m.endpoints[1]);
  m.MoveOff(m.endpoints[1]);
  m.MoveOff(m.endpoints[2]);
  EXPECT_EQ(&m.Pick(), &m.endpoints[0]);  // round the ring, one step per failed member
  EXPECT_FALSE(m.WaitForReady());
  EtcdStore::Impl one;
  one.endpoints.resize(1);
  one.MoveOff(one.endpoints[0]);
  EXPECT_EQ(&one.Pick(), &one.endpoints[0]);
  EXPECT_TRUE(one.WaitForReady());
}

TEST(EtcdUrlTest, NoEtcdIsUnavailable) {
  EtcdStoreOptions o;
  o.endpoints = {"127.0.0.1:1"};
  o.rpc_timeout = absl::Milliseconds(300);
  auto s = EtcdStore::Open(o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnavailable) << s.status();
  EXPECT_THAT(s.status().message(), HasSubstr("127.0.0.1:1"));
}

// An etcd of the test's own (it is killed and restarted), in a temp dir.
class EtcdStoreLiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    const std::string bin = testing::EtcdProcess::FindBin(TESSERA_SOURCE_DIR, &why);
    if (bin.empty()) GTEST_SKIP() << why;
    const char* tmp = getenv("TMPDIR");
    std::string tmpl = absl::StrCat(tmp ? tmp : "/tmp", "/tessera_etcd_test_XXXXXX");
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    ASSERT_EQ(etcd_.Start(bin, dir_ + "/etcd", dir_ + "/etcd.log"), "");
    store_ = OpenStore();
    ASSERT_NE(store_, nullptr);
  }
  void TearDown() override {
    store_.reset();
    etcd_.Stop();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::unique_ptr<EtcdStore> OpenStore(bool cache = true) {
    EtcdStoreOptions o;
    o.endpoints = {etcd_.endpoint()};
    if (!cache) o.event_cache_bytes = 0;
    o.rpc_timeout = absl::Seconds(2);
    auto s = EtcdStore::Open(o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }
  // Retries `op` until it succeeds or 20 s pass (gRPC reconnects with a backoff of <= 1 s);
  // every failure must be Unavailable. Between tries it waits for the connection (and a new
  // revision, which does not come) for at most 100 ms, instead of spinning.
  template <typename F>
  void UntilOk(F op) {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (true) {
      absl::Status s = op();
      if (s.ok()) return;
      ASSERT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
      ASSERT_LT(absl::Now(), deadline) << "etcd back, the store not: " << s;
      store_->WaitForRevision(store_->CurrentRevision() + 1, absl::Now() + absl::Milliseconds(100))
          .IgnoreError();
    }
  }

  testing::EtcdProcess etcd_;
  std::string dir_;
  std::unique_ptr<EtcdStore> store_;
};

TEST_F(EtcdStoreLiveTest, CompactedEventsGiveTheSqliteStoresError) {
  auto sqlite = SqliteStore::Open(dir_ + "/sqlite");
  ASSERT_TRUE(sqlite.ok()) << sqlite.status();
  for (Store* s : {static_cast<Store*>(store_.get()), static_cast<Store*>(sqlite->get())}) {
    for (int i = 0; i < 10; ++i) ASSERT_TRUE(s->Put("/h", absl::StrCat(i)).ok());
    ASSERT_TRUE(s->Compact(4).ok());
  }
  absl::Status want = (*sqlite)->Events("/", 3, 0).status();
  absl::Status got = store_->Events("/", 3, 0).status();
  EXPECT_EQ(got.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(got, want) << "the API turns exactly this into 410";

  // A compaction by another client (another replica) is found by the next Events call that
  // reads etcd, and by a store opened later; a watch cache keeps serving what it holds.
  std::unique_ptr<EtcdStore> direct = OpenStore(/*cache=*/false);
  std::unique_ptr<EtcdStore> other = OpenStore();
  ASSERT_NE(direct, nullptr);
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(other->CompactedRevision(), 4) << "learned at Open";
  ASSERT_TRUE(other->Compact(7).ok());
  EXPECT_EQ(direct->CompactedRevision(), 4) << "not known yet";
  got = direct->Events("/", 5, 0).status();
  EXPECT_EQ(got.code(), absl::StatusCode::kOutOfRange) << got;
  EXPECT_THAT(got.message(), HasSubstr("compacted revision 7"));
  EXPECT_EQ(direct->CompactedRevision(), 7);
  auto tail = direct->Events("/", 7, 0);
  ASSERT_TRUE(tail.ok()) << tail.status();
  EXPECT_EQ(tail->events.size(), 3u);
  auto cached = store_->Events("/", 5, 0);
  ASSERT_TRUE(cached.ok()) << cached.status();
  EXPECT_EQ(cached->events.size(), 5u) << "revisions 6-10, from the cache";
}

// Another process's writes reach this store's watch cache: WaitForRevision returns when they
// arrive and Events then has them, as read from etcd directly.
TEST_F(EtcdStoreLiveTest, TheCacheFollowsOtherWriters) {
  std::unique_ptr<EtcdStore> writer = OpenStore();
  std::unique_ptr<EtcdStore> direct = OpenStore(/*cache=*/false);
  ASSERT_NE(writer, nullptr);
  ASSERT_NE(direct, nullptr);
  std::thread t([&] {
    for (int i = 0; i < 20; ++i) {
      ASSERT_TRUE(writer
                      ->Txn({Op::Put(absl::StrCat("/k/", i % 4), absl::StrCat(i)),
                             Op::Put(absl::StrCat("/j/", i), "x")})
                      .ok());
    }
    ASSERT_TRUE(writer->Delete("/k/1").ok());
  });
  ASSERT_EQ(store_->WaitForRevision(21, absl::Now() + absl::Seconds(10)), absl::OkStatus());
  t.join();
  for (int64_t since : {0, 7, 20}) {
    for (int64_t limit : {0, 3}) {
      auto got = store_->Events("/k/", since, limit);
      auto want = direct->Events("/k/", since, limit);
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_TRUE(want.ok()) << want.status();
      EXPECT_EQ(got->events, want->events) << since << " " << limit;
      EXPECT_EQ(got->revision, want->revision) << since << " " << limit;
    }
  }
  // A revision ahead of everything: refused as before.
  EXPECT_EQ(store_->Events("/", 1000, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(EtcdStoreLiveTest, LostEtcdIsUnavailableAndTheStoreRecovers) {
  ASSERT_EQ(*store_->Create("/a", "1"), 1);
  etcd_.Kill();
  auto get = store_->Get("/a");
  EXPECT_EQ(get.status().code(), absl::StatusCode::kUnavailable) << get.status();
  EXPECT_THAT(get.status().message(), HasSubstr(etcd_.endpoint()));
  EXPECT_EQ(store_->Put("/a", "2", 1).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(store_->Events("/", 0, 0).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(store_->CurrentRevision(), 1) << "the last revision seen";
  EXPECT_EQ(store_->WaitForRevision(2, absl::Now() + absl::Milliseconds(200)).code(),
            absl::StatusCode::kDeadlineExceeded);

  ASSERT_EQ(etcd_.Restart(), "");
  UntilOk([&] { return store_->Put("/a", "2", 1).status(); });
  EXPECT_EQ(store_->Get("/a")->value, "2");
  EXPECT_EQ(store_->CurrentRevision(), 2);
  auto ev = store_->Events("/", 0, 0);
  ASSERT_TRUE(ev.ok()) << ev.status();
  EXPECT_EQ(ev->events.size(), 2u);
}

// A watcher in the style of the API's watch loop (Events, then WaitForRevision when caught up)
// keeps following across an etcd crash and restart: every revision exactly once, in order.
TEST_F(EtcdStoreLiveTest, WatchContinuesAcrossAnEtcdRestart) {
  std::atomic<int64_t> stop_at{-1};
  std::vector<Event> seen;
  std::atomic<int> unavailable{0};
  std::thread watcher([&] {
    int64_t since = 0;
    const absl::Time give_up = absl::Now() + absl::Seconds(60);
    while (absl::Now() < give_up) {
      const int64_t target = stop_at.load();
      if (target >= 0 && since >= target) return;
      auto ev = store_->Events("/w/", since, 3);
      if (!ev.ok()) {
        ASSERT_EQ(ev.status().code(), absl::StatusCode::kUnavailable) << ev.status();
        unavailable++;
        // Blocks while etcd is down (up to the slice), so this is no busy loop.
        store_->WaitForRevision(since + 1, absl::Now() + absl::Milliseconds(200)).IgnoreError();
        continue;
      }
      seen.insert(seen.end(), ev->events.begin(), ev->events.end());
      if (ev->revision == since) {
        store_->WaitForRevision(since + 1, absl::Now() + absl::Milliseconds(200)).IgnoreError();
      }
      since = ev->revision;
    }
  });
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(store_->Put(absl::StrCat("/w/", i % 3), "x").ok());
  ASSERT_EQ(store_->WaitForRevision(10, absl::Now() + absl::Seconds(10)), absl::OkStatus());
  etcd_.Kill();
  ASSERT_EQ(etcd_.Restart(), "");
  UntilOk([&] { return store_->Put("/w/after", "0").status(); });
  for (int i = 1; i < 10; ++i) ASSERT_TRUE(store_->Put("/w/after", absl::StrCat(i)).ok());
  stop_at = 20;
  watcher.join();
  ASSERT_EQ(seen.size(), 20u);
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i].revision, int64_t(i) + 1);
  EXPECT_EQ(seen.back().kv.value, "9");
}

}  // namespace
}  // namespace tessera::store
