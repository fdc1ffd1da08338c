#include "agent/launcher/launcher.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/time/clock.h"
#include "common/clock.h"
#include "gtest/gtest.h"

namespace tessera::agent {
namespace {

std::string TempDir() {
  std::string t = "/tmp/launcher_test_XXXXXX";
  EXPECT_NE(mkdtemp(t.data()), nullptr);
  return t;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

MemberSpec Spec(const std::string& script) {
  MemberSpec s;
  s.namespace_name = "team-a";
  s.job = "train";
  s.group = "worker";
  s.index = 1;
  s.generation = 7;
  s.command = {"/bin/sh", "-c", script};
  s.gpu_indices = {2, 5};
  s.gpu_uuids = {"GPU-2", "GPU-5"};
  s.env = {{"FOO", "bar"}};
  s.grace = absl::Seconds(5);
  return s;
}

// Polls until the member exits (real time; at most `limit`).
MemberStatus WaitExit(Launcher& l, const std::string& id,
                      absl::Duration limit = absl::Seconds(20)) {
  absl::Time end = absl::Now() + limit;
  while (absl::Now() < end) {
    l.Poll();
    absl::StatusOr<MemberStatus> s = l.Get(id);
    if (s.ok() && s->state == MemberState::kExited) return *s;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return *l.Get(id);
}

bool WaitForFile(const std::string& path, absl::Duration limit = absl::Seconds(20)) {
  absl::Time end = absl::Now() + limit;
  while (absl::Now() < end) {
    if (std::filesystem::exists(path) && !Slurp(path).empty()) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return false;
}

class LauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir();
    options_.state_dir = dir_ + "/state";
    options_.cgroup_parent = "";  // tests never touch the host's cgroups
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
  Launcher::Options options_;
  RealClock clock_;
};

TEST_F(LauncherTest, EnvironmentLogsAndExitCode) {
  Launcher l(options_, clock_);
  ASSERT_TRUE(l.Init().ok());
  absl::StatusOr<MemberStatus> s = l.Start(Spec(
      "echo CUDA=$CUDA_VISIBLE_DEVICES NV=$NVIDIA_VISIBLE_DEVICES FOO=$FOO "
      "GEN=$TESSERA_GENERATION JOB=$TESSERA_JOB IDX=$TESSERA_MEMBER_INDEX; echo oops >&2; exit 3"));
  ASSERT_TRUE(s.ok()) << s.status();
  MemberStatus done = WaitExit(l, s->spec.Id());
  EXPECT_EQ(done.state, MemberState::kExited);
  EXPECT_EQ(done.exit_code, 3);
  EXPECT_EQ(Slurp(done.stdout_path), "CUDA=2,5 NV=GPU-2,GPU-5 FOO=bar GEN=7 JOB=train IDX=1\n");
  EXPECT_EQ(Slurp(done.stderr_path), "oops\n");
  EXPECT_EQ(done.stdout_path, l.LogDir("team-a", "train") + "/worker-1.g7.stdout");
  EXPECT_FALSE(l.Start(Spec("true")).ok());  // still tracked: AlreadyExists
  EXPECT_TRUE(l.Forget(done.spec.Id()).ok());
  EXPECT_TRUE(std::filesystem::exists(done.stdout_path));  // logs outlive the record
}

TEST_F(LauncherTest, RunsInItsOwnSession) {
  Launcher l(options_, clock_);
  ASSERT_TRUE(l.Init().ok());
  absl::StatusOr<MemberStatus> s = l.Start(Spec("echo $(cut -d' ' -f6 /proc/$$/stat)"));
  ASSERT_TRUE(s.ok()) << s.status();
  MemberStatus done = WaitExit(l, s->spec.Id());
  // The member's session id is its supervisor's pid, not the test's session.
  EXPECT_EQ(Slurp(done.stdout_path), std::to_string(s->pid) + "\n");
  EXPECT_NE(getsid(0), s->pid);
}

TEST_F(LauncherTest, CheckpointSignalThenGraceThenKill) {
  Launcher l(options_, clock_);
  ASSERT_TRUE(l.Init().ok());
  // Writes a checkpoint on SIGUSR1 and keeps running: only SIGKILL after the grace ends it.
  MemberSpec spec =
      Spec("trap 'echo checkpoint > ckpt' USR1; echo up > up; while true; do sleep 0.05; done");
  spec.working_dir = dir_;
  spec.grace = absl::Milliseconds(500);
  absl::StatusOr<MemberStatus> s = l.Start(spec);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE(WaitForFile(dir_ + "/up"));
  absl::Time t0 = absl::Now();
  ASSERT_TRUE(l.Stop(s->spec.Id(), /*graceful=*/true).ok());
  EXPECT_EQ(l.Get(s->spec.Id())->state, MemberState::kStopping);
  MemberStatus done = WaitExit(l, s->spec.Id());
  EXPECT_GE(absl::Now() - t0, absl::Milliseconds(500));
  EXPECT_EQ(done.state, MemberState::kExited);
  EXPECT_EQ(done.exit_code, 128 + SIGKILL);
  EXPECT_EQ(Slurp(dir_ + "/ckpt"), "checkpoint\n");
}

TEST_F(LauncherTest, ConfigurableCheckpointSignalEndsAWellBehavedMember) {
  Launcher l(options_, clock_);
  ASSERT_TRUE(l.Init().ok());
  MemberSpec spec =
      Spec("trap 'echo saved > ckpt; exit 0' TERM; touch up; while true; do sleep 0.05; done");
  spec.working_dir = dir_;
  spec.checkpoint_signal = SIGTERM;
  spec.grace = absl::Seconds(30);
  absl::StatusOr<MemberStatus> s = l.Start(spec);
  ASSERT_TRUE(s.ok()) << s.status();
  absl::Time end = absl::Now() + absl::Seconds(20);
  while (!std::filesystem::exists(dir_ + "/up") && absl::Now() < end)
    absl::SleepFor(absl::Milliseconds(20));
  ASSERT_TRUE(l.Stop(s->spec.Id(), true).ok());
  MemberStatus done = WaitExit(l, s->spec.Id());
  EXPECT_EQ(done.exit_code, 0);  // the supervisor survived SIGTERM and reported the command's code
  EXPECT_EQ(Slurp(dir_ + "/ckpt"), "saved\n");
}

TEST_F(LauncherTest, ReadoptsRunningMembersFromTheStateDirectory) {
  MemberStatus first;
  {
    Launcher l(options_, clock_);
    ASSERT_TRUE(l.Init().ok());
    MemberSpec spec = Spec("while [ ! -f stop ]; do sleep 0.05; done; exit 4");
    spec.working_dir = dir_;
    absl::StatusOr<MemberStatus> s = l.Start(spec);
    ASSERT_TRUE(s.ok()) << s.status();
    first = *s;
  }  // the "agent" goes away; the member keeps running
  ASSERT_EQ(kill(first.pid, 0), 0);
  Launcher l2(options_, clock_);
  ASSERT_TRUE(l2.Init().ok());
  std::vector<MemberStatus> adopted = l2.Adopt();
  ASSERT_EQ(adopted.size(), 1u);
  EXPECT_TRUE(adopted[0].adopted);
  EXPECT_EQ(adopted[0].state, MemberState::kRunning);
  EXPECT_EQ(adopted[0].pid, first.pid);
  EXPECT_EQ(adopted[0].spec.generation, 7);
  EXPECT_EQ(adopted[0].spec.gpu_uuids, first.spec.gpu_uuids);
  std::ofstream(dir_ + "/stop") << "x";
  // Not its child now, but the code written by the supervisor is still reported. The supervisor
  // is still the test's child here, so reap it as init would.
  absl::Time end = absl::Now() + absl::Seconds(20);
  while (absl::Now() < end) {
    int st;
    if (waitpid(first.pid, &st, WNOHANG) == first.pid) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  MemberStatus done = WaitExit(l2, first.spec.Id());
  EXPECT_EQ(done.state, MemberState::kExited);
  EXPECT_EQ(done.exit_code, 4);
}

TEST_F(LauncherTest, ARecordWhosePidWasReusedIsNotAdoptedAsRunning) {
  Launcher l(options_, clock_);
  ASSERT_TRUE(l.Init().ok());
  absl::StatusOr<MemberStatus> s = l.Start(Spec("exit 0"));
  ASSERT_TRUE(s.ok());
  WaitExit(l, s->spec.Id());
  // Forge a record naming a live process (this test) with a different start time.
  std::string rec = options_.state_dir + "/members/" + s->spec.Id() + "/member.json";
  std::string text = Slurp(rec);
  size_t p = text.find("\"pid\":");
  ASSERT_NE(p, std::string::npos);
  size_t e = text.find_first_of(",\n}", p);
  text = text.substr(0, p) + "\"pid\": " + std::to_string(getpid()) + text.substr(e);
  std::ofstream(rec) << text;
  Launcher l2(options_, clock_);
  std::vector<MemberStatus> adopted = l2.Adopt();
  ASSERT_EQ(adopted.size(), 1u);
  EXPECT_EQ(adopted[0].state, MemberState::kExited);
}

TEST_F(LauncherTest, KillNowStopsAnUnboundMember) {
  Launcher l(options_, clock_);
  ASSERT_TRUE(l.Init().ok());
  absl::StatusOr<MemberStatus> s = l.Start(Spec("trap '' USR1; sleep 1000 & wait"));
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(l.Stop(s->spec.Id(), /*graceful=*/false).ok());
  MemberStatus done = WaitExit(l, s->spec.Id());
  EXPECT_EQ(done.state, MemberState::kExited);
  EXPECT_EQ(done.exit_code, 128 + SIGKILL);
}

TEST_F(LauncherTest, JoinsACgroupV2WhenOneIsWritable) {
  const std::string root = access("/sys/fs/cgroup/cgroup.controllers", W_OK) == 0
                               ? "/sys/fs/cgroup"
                               : "/sys/fs/cgroup/unified";
  if (access((root + "/cgroup.procs").c_str(), W_OK) != 0) {
    GTEST_SKIP() << "no writable cgroup v2 hierarchy here";
  }
  options_.cgroup_parent = root + "/tessera-launcher-test-" + std::to_string(getpid());
  Launcher l(options_, clock_);
  ASSERT_TRUE(l.Init().ok());
  MemberSpec spec = Spec("cat /proc/self/cgroup | grep '^0::'");
  spec.memory_mib = 256;
  absl::StatusOr<MemberStatus> s = l.Start(spec);
  ASSERT_TRUE(s.ok()) << s.status();
  MemberStatus done = WaitExit(l, s->spec.Id());
  if (done.cgroup.empty()) {
    rmdir(options_.cgroup_parent.c_str());
    GTEST_SKIP() << "cgroup could not be created under " << root;
  }
  const std::string rel = done.cgroup.substr(root.size());
  EXPECT_EQ(Slurp(done.stdout_path), "0::" + rel + "\n");
  EXPECT_TRUE(l.Forget(done.spec.Id()).ok());
  EXPECT_FALSE(std::filesystem::exists(done.cgroup));
  rmdir(options_.cgroup_parent.c_str());
}

TEST_F(LauncherTest, RejectsAnEmptyCommand) {
  Launcher l(options_, clock_);
  ASSERT_TRUE(l.Init().ok());
  MemberSpec spec = Spec("true");
  spec.command.clear();
  EXPECT_EQ(l.Start(spec).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera::agent
