// EtcdElection and FencedEtcdStore against the bed's etcd (EtcdElectionLive*, skipped without it):
// of two candidates exactly one leads and a stopped leader hands over at once; a fenced Txn of a
// deposed leader writes nothing; and a leader paused with SIGSTOP past its lease (a child process,
// this binary re-run as the child) cannot write when it wakes.
#include "store/etcd/etcd_election.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "store/etcd/etcd_store.h"
#include "store/etcd/testing/etcd_process.h"

namespace tessera::store {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<EtcdStore> OpenOn(const std::string& endpoint, const std::string& prefix) {
  EtcdStoreOptions o;
  o.endpoints = {endpoint};
  o.prefix = prefix;
  auto s = EtcdStore::Open(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

// A candidate whose callbacks record what happened, for waits with bounds.
struct Candidate {
  absl::Mutex mu;
  bool leading ABSL_GUARDED_BY(mu) = false;
  std::optional<EtcdFence> fence ABSL_GUARDED_BY(mu);
  std::string stopped_why ABSL_GUARDED_BY(mu);
  std::unique_ptr<EtcdElection> election;

  Candidate(EtcdStore& store, Clock& clock, const std::string& key, const std::string& id,
            absl::Duration ttl = absl::Seconds(2)) {
    EtcdElectionOptions o;
    o.key = key;
    o.identity = id;
    o.ttl = ttl;
    o.on_started_leading = [this](const EtcdFence& f) {
      absl::MutexLock l(&mu);
      leading = true;
      fence = f;
    };
    o.on_stopped_leading = [this](const std::string& why) {
      absl::MutexLock l(&mu);
      leading = false;
      stopped_why = why;
    };
    election = std::make_unique<EtcdElection>(store, clock, o);
    election->RunInBackground();
  }
  bool WaitLeading(absl::Duration d) {
    absl::MutexLock l(&mu);
    auto c = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return leading; };
    return mu.AwaitWithTimeout(absl::Condition(&c), d);
  }
};

std::string EtcdOrSkip(std::string* why) {
  testing::EtcdProcess* etcd = testing::EtcdProcess::Shared(TESSERA_SOURCE_DIR, why);
  return etcd == nullptr ? "" : etcd->endpoint();
}

TEST(EtcdElectionLive, ExactlyOneLeadsAndAStoppedLeaderHandsOverAtOnce) {
  std::string why;
  const std::string ep = EtcdOrSkip(&why);
  if (ep.empty()) GTEST_SKIP() << why;
  const std::string prefix = absl::StrCat("/election-test-", getpid(), "/");
  auto store = OpenOn(ep, prefix);
  ASSERT_NE(store, nullptr);
  RealClock clock;
  auto a = std::make_unique<Candidate>(*store, clock, prefix + "leader", "a");
  auto b = std::make_unique<Candidate>(*store, clock, prefix + "leader", "b");
  // One of them leads within a moment; never both.
  const absl::Time t0 = absl::Now();
  while (!a->election->IsLeader() && !b->election->IsLeader()) {
    ASSERT_LT(absl::Now() - t0, absl::Seconds(10)) << "nobody leads";
    a->WaitLeading(absl::Milliseconds(50));
  }
  EXPECT_NE(a->election->IsLeader(), b->election->IsLeader());
  Candidate& leader = a->election->IsLeader() ? *a : *b;
  Candidate& standby = a->election->IsLeader() ? *b : *a;
  EtcdFence old;
  {
    absl::MutexLock l(&leader.mu);
    old = *leader.fence;
  }
  // The leader's fenced writes go through.
  ASSERT_TRUE(store->FencedTxn({Op::Put("k1", "v")}, old).ok());
  // Stopping it revokes the lease: the standby leads well before the TTL would have passed.
  const absl::Time stop = absl::Now();
  leader.election->Stop();
  ASSERT_TRUE(standby.WaitLeading(absl::Seconds(10)));
  const absl::Duration handover = absl::Now() - stop;
  std::cout << "handover after Stop: " << absl::FormatDuration(handover) << "\n";
  {
    absl::MutexLock l(&leader.mu);
    EXPECT_EQ(leader.stopped_why, "stopped");
  }
  // The old fence is void: nothing written, PermissionDenied naming the fence.
  absl::StatusOr<int64_t> late = store->FencedTxn({Op::Put("k2", "v")}, old);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kPermissionDenied) << late.status();
  EXPECT_THAT(late.status().message(), HasSubstr("fenced"));
  EXPECT_TRUE(absl::IsNotFound(store->Get("k2").status()));
  // The view without a fence refuses at once; with the new one it writes.
  FencedEtcdStore view(*store);
  EXPECT_EQ(view.Txn({Op::Put("k3", "v")}).status().code(), absl::StatusCode::kPermissionDenied);
  {
    absl::MutexLock l(&standby.mu);
    view.SetFence(standby.fence);
  }
  EXPECT_TRUE(view.Txn({Op::Put("k3", "v")}).ok());
  EXPECT_EQ(view.fenced(), 1);
  a.reset();
  b.reset();
}

// The child half of PausedLeaderCannotWriteWhenItWakes: leads, says so on stdout, waits for a
// line on stdin (meanwhile the parent pauses it past its lease, elects another leader and wakes
// it), then writes with the fence it won -- as a controller that has not yet noticed -- and prints
// the result's code. `arg`: "ENDPOINT PREFIX".
void RunFenceChild(const std::string& arg) {
  const std::string ep = arg.substr(0, arg.find(' ')), prefix = arg.substr(arg.find(' ') + 1);
  auto store = OpenOn(ep, prefix);
  ASSERT_NE(store, nullptr);
  RealClock clock;
  Candidate me(*store, clock, prefix + "leader", "child");
  ASSERT_TRUE(me.WaitLeading(absl::Seconds(20)));
  EtcdFence fence;
  {
    absl::MutexLock l(&me.mu);
    fence = *me.fence;
  }
  std::cout << "leading " << fence.create_revision << std::endl;
  std::string line;
  std::getline(std::cin, line);
  absl::StatusOr<int64_t> w = store->FencedTxn({Op::Put("late", "from the paused leader")}, fence);
  std::cout << "write " << absl::StatusCodeToString(w.status().code()) << std::endl;
}

TEST(EtcdElectionLive, PausedLeaderCannotWriteWhenItWakes) {
  // The parent re-runs this binary with TESSERA_FENCE_CHILD set: that run is the child.
  if (const char* child = getenv("TESSERA_FENCE_CHILD"); child != nullptr) {
    return RunFenceChild(child);
  }
  std::string why;
  const std::string ep = EtcdOrSkip(&why);
  if (ep.empty()) GTEST_SKIP() << why;
  const std::string prefix = absl::StrCat("/fence-test-", getpid(), "/");
  int to_child[2], from_child[2];
  ASSERT_EQ(pipe2(to_child, O_CLOEXEC), 0);
  ASSERT_EQ(pipe2(from_child, O_CLOEXEC), 0);
  const std::string env = absl::StrCat("TESSERA_FENCE_CHILD=", ep, " ", prefix);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(to_child[0], 0);
    dup2(from_child[1], 1);
    putenv(const_cast<char*>(env.c_str()));
    execl("/proc/self/exe", "child",
          "--gtest_filter=EtcdElectionLive.PausedLeaderCannotWriteWhenItWakes", nullptr);
    _exit(127);
  }
  close(to_child[0]);
  close(from_child[1]);
  FILE* out = fdopen(from_child[0], "r");
  auto read_line = [&] {
    char buf[512];
    std::string s;
    while (fgets(buf, sizeof buf, out) != nullptr) {
      s = buf;
      if (s.rfind("leading", 0) == 0 || s.rfind("write", 0) == 0) return s;
    }
    return std::string();
  };
  const std::string leading = read_line();  // gtest's own lines are skipped
  ASSERT_THAT(leading, HasSubstr("leading")) << "the child did not lead";
  // Pause the leader; a second candidate leads once the child's lease has expired in etcd.
  ASSERT_EQ(kill(pid, SIGSTOP), 0);
  auto store = OpenOn(ep, prefix);
  ASSERT_NE(store, nullptr);
  RealClock clock;
  const absl::Time paused = absl::Now();
  Candidate next(*store, clock, prefix + "leader", "next");
  ASSERT_TRUE(next.WaitLeading(absl::Seconds(20))) << "no new leader while the old one sleeps";
  std::cout << "new leader " << absl::FormatDuration(absl::Now() - paused) << " after the pause\n";
  // Wake the old leader and let it write at once, before it can notice.
  ASSERT_EQ(kill(pid, SIGCONT), 0);
  ASSERT_EQ(write(to_child[1], "go\n", 3), 3);
  const std::string result = read_line();
  EXPECT_THAT(result, HasSubstr("write PERMISSION_DENIED"));
  EXPECT_TRUE(absl::IsNotFound(store->Get("late").status())) << "the late write landed";
  close(to_child[1]);
  char buf[512];
  while (fgets(buf, sizeof buf, out) != nullptr) {
  }  // the child's own gtest lines, to its end
  fclose(out);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  next.election->Stop();
  EXPECT_TRUE(next.election->leader().empty() || next.election->leader() == "next");
}

}  // namespace
}  // namespace tessera::store
