#include "store/etcd/event_window.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "store/memory_store.h"

namespace tessera::store {
namespace {

Event Put(int64_t rev, std::string key, std::string value = "v") {
  Event e;
  e.revision = rev;
  e.kv = KeyValue{std::move(key), std::move(value), rev, rev};
  return e;
}

std::vector<int64_t> Revisions(const EventsResult& r) {
  std::vector<int64_t> out;
  for (const Event& e : r.events) out.push_back(e.revision);
  return out;
}

TEST(EventWindowTest, ReadsByPrefixAfterSince) {
  EventWindow w(1 << 20, 10);
  w.Append({Put(11, "/a/1"), Put(11, "/b/1"), Put(12, "/a/2")}, 12);
  w.Append({}, 14);  // revisions without this store's events
  EXPECT_EQ(w.from(), 10);
  EXPECT_EQ(w.to(), 14);
  EventsResult r = w.Read("/a/", 10, 0);
  EXPECT_EQ(Revisions(r), (std::vector<int64_t>{11, 12}));
  EXPECT_EQ(r.revision, 14);
  EXPECT_EQ(Revisions(w.Read("/", 11, 0)), (std::vector<int64_t>{12}));
  EXPECT_TRUE(w.Read("/", 14, 0).events.empty());
  EXPECT_EQ(w.Read("/", 14, 0).revision, 14);
}

TEST(EventWindowTest, LimitNeverSplitsATxn) {
  EventWindow w(1 << 20, 0);
  w.Append({Put(1, "/x"), Put(2, "/a"), Put(2, "/b"), Put(2, "/c"), Put(3, "/d")}, 3);
  EventsResult r = w.Read("/", 0, 2);
  EXPECT_EQ(Revisions(r), (std::vector<int64_t>{1, 2, 2, 2}));
  EXPECT_EQ(r.revision, 2);
  r = w.Read("/", 0, 1);
  EXPECT_EQ(Revisions(r), (std::vector<int64_t>{1}));
  EXPECT_EQ(r.revision, 1);
  r = w.Read("/", 2, 1);
  EXPECT_EQ(Revisions(r), (std::vector<int64_t>{3}));
  EXPECT_EQ(r.revision, 3);
}

TEST(EventWindowTest, BudgetDropsWholeOldestRevisionsAndKeepsTheNewest) {
  const std::string big(1000, 'x');
  EventWindow w(3000, 0);
  w.Append({Put(1, "/a", big), Put(1, "/b", big)}, 1);
  w.Append({Put(2, "/a", big), Put(2, "/b", big)}, 2);
  EXPECT_EQ(w.from(), 1) << "revision 1 went as a whole";
  EXPECT_EQ(w.size(), 2u);
  w.Append({Put(3, "/a", std::string(10000, 'y'))}, 3);
  EXPECT_EQ(w.from(), 2);
  EXPECT_EQ(w.size(), 1u) << "the newest revision stays even over the budget";
  EXPECT_EQ(Revisions(w.Read("/", 2, 0)), (std::vector<int64_t>{3}));
}

TEST(EventWindowTest, AppendIgnoresOldAndResetForgets) {
  EventWindow w(1 << 20, 5);
  w.Append({Put(4, "/old"), Put(6, "/a")}, 6);
  EXPECT_EQ(w.size(), 1u);
  w.Append({Put(6, "/again")}, 6);
  EXPECT_EQ(w.size(), 1u) << "complete_to not above to(): nothing changes";
  w.Reset(20);
  EXPECT_EQ(w.from(), 20);
  EXPECT_EQ(w.to(), 20);
  EXPECT_EQ(w.size(), 0u);
  EXPECT_EQ(w.bytes(), 0u);
}

// Property: the window answers every (prefix, since, limit) inside it exactly as a MemoryStore
// holding the same history does, whatever the budget dropped.
TEST(EventWindowTest, AnswersAsTheStoreDoesInsideTheWindow) {
  std::mt19937 rng(7);
  for (int round = 0; round < 20; ++round) {
    MemoryStore store;
    EventWindow w(static_cast<size_t>(200 + rng() % 4000), 0);
    for (int t = 0; t < 60; ++t) {
      std::vector<Op> ops;
      const int n = 1 + static_cast<int>(rng() % 3);
      for (int i = 0; i < n; ++i) {
        std::string key = absl::StrCat(rng() % 2 ? "/a/" : "/b/", t, "-", i);
        ops.push_back(Op::Put(std::move(key), std::string(rng() % 100, 'v')));
      }
      auto rev = store.Txn(ops);
      ASSERT_TRUE(rev.ok()) << rev.status();
      auto ev = store.Events("/", *rev - 1, 0);
      ASSERT_TRUE(ev.ok());
      w.Append(ev->events, *rev);
    }
    for (int64_t since = w.from(); since <= w.to(); ++since) {
      for (std::string prefix : {"/", "/a/", "/b/"}) {
        for (int64_t limit : {0, 1, 2, 5}) {
          auto want = store.Events(prefix, since, limit);
          ASSERT_TRUE(want.ok());
          EventsResult got = w.Read(prefix, since, limit);
          ASSERT_EQ(got.events, want->events) << prefix << " since " << since << " limit " << limit;
          if (limit == 0 || got.revision == want->revision) continue;
          // A limited page may end at a different revision; it must still be complete there.
          ASSERT_GE(got.revision, since);
        }
      }
    }
  }
}

}  // namespace
}  // namespace tessera::store
