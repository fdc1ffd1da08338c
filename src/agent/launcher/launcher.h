// Launcher: runs job members as processes on this node and keeps track of them across agent
// restarts.
//
// Algorithm. Start() forks a *supervisor* that calls setsid() (a session and process group of its
// own, so the member outlives the agent and is signalled as a group), moves itself into the
// member's cgroup v2 directory when one could be made, redirects stdout/stderr to the member's log
// files, ignores the usual termination signals and forks the member's command (signals reset to
// default, environment with CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES set). The supervisor
// waits for the command and writes its exit code to `exit_code` in the member's state directory,
// so the code survives an agent restart. The launcher records {spec, supervisor pid, its start
// time from /proc/PID/stat} in `member.json` before returning; Adopt() reads those records back
// and treats a record as alive only when the pid exists with the same start time (pids are
// reused). Stop() sends the checkpoint signal to the process group and, after the grace period,
// Poll() sends SIGKILL; Stop(graceful=false) sends SIGKILL at once.
//
// State directory layout:
//   STATE/members/<id>/member.json   the record (written atomically by rename)
//   STATE/members/<id>/exit_code     written by the supervisor when the command ends
//   STATE/members/<id>/metrics.json  a serving replica's metrics (TESSERA_METRICS_PATH)
//   STATE/logs/<namespace>/<job>/<group>-<index>.g<generation>.{stdout,stderr}   kept after
//                                    Forget() (agent/member_logs.h reads them)
//
// Thread safety: all methods may be called concurrently (one internal mutex; never held while
// sleeping). Ownership: the launcher owns no process; members run until they exit or are stopped.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace tessera::agent {

// One member of a job, as bound to this node.
struct MemberSpec {
  std::string namespace_name;
  std::string job;
  std::string kind = "TrainingJob";  // or InferenceService
  std::string group;
  int index = 0;
  int64_t generation = 0;            // fencing generation of the binding
  std::vector<std::string> command;  // argv; command[0] is looked up in PATH
  std::map<std::string, std::string> env;
  std::string working_dir;  // empty: the member's state directory
  std::vector<int> gpu_indices;
  std::vector<std::string> gpu_uuids;  // same order as gpu_indices
  int checkpoint_signal = 10;          // SIGUSR1
  absl::Duration grace = absl::Seconds(30);
  int64_t cpu_milli = 0;   // cgroup cpu.max; 0: unlimited
  int64_t memory_mib = 0;  // cgroup memory.max; 0: unlimited

  // "<namespace>.<job>.<group>-<index>": unique per node, a valid file name.
  std::string Id() const;
  friend bool operator==(const MemberSpec&, const MemberSpec&) = default;
};

enum class MemberState { kRunning, kStopping, kExited };
std::string MemberStateName(MemberState s);

struct MemberStatus {
  MemberSpec spec;
  pid_t pid = -1;            // the supervisor (session and process-group leader)
  uint64_t start_ticks = 0;  // its start time, /proc/PID/stat field 22
  MemberState state = MemberState::kRunning;
  int exit_code = -1;    // when exited: the command's code, 128+N for signal N
  bool adopted = false;  // found in the state directory by Adopt()
  absl::Time started;
  absl::Time stop_deadline = absl::InfiniteFuture();  // kStopping: SIGKILL after this
  std::string cgroup;  // cgroup directory, empty when limits were not applied
  std::string stdout_path;
  std::string stderr_path;
};

// Reads field 22 (starttime) of /proc/PID/stat; 0 when the process does not exist or is a
// zombie.
uint64_t ProcessStartTicks(pid_t pid);

class Launcher {
 public:
  struct Options {
    std::string state_dir;
    // Parent cgroup v2 directory for members; empty disables cgroups. Members are skipped
    // silently when it cannot be created or written (no cgroup v2, no permission).
    std::string cgroup_parent = "/sys/fs/cgroup/tessera";
  };
  // `clock` must outlive the launcher.
  Launcher(Options options, Clock& clock);

  // Creates the state directories. Call once first.
  absl::Status Init();
  // Reads every record in the state directory and tracks it: alive ones as running (adopted),
  // dead ones as exited with the code their supervisor wrote (137 when none: killed). Returns the
  // adopted statuses. Idempotent.
  std::vector<MemberStatus> Adopt();
  // Starts a member. AlreadyExists when a member with this Id is tracked.
  absl::StatusOr<MemberStatus> Start(const MemberSpec& spec);
  // graceful: the checkpoint signal now, SIGKILL after spec.grace (by Poll()); else SIGKILL now.
  // A member already stopping keeps its earlier deadline unless this one is sooner.
  absl::Status Stop(const std::string& id, bool graceful);
  // Reaps exited members and enforces stop deadlines. Cheap; call every second or so.
  void Poll();
  std::vector<MemberStatus> List() const;
  absl::StatusOr<MemberStatus> Get(const std::string& id) const;
  // Drops an exited member's record (its logs stay). FailedPrecondition while it runs.
  absl::Status Forget(const std::string& id);
  // A running member carries on under `generation` (a serving replica that a resize of its
  // service left unchanged): its record says so from now on, the process is not touched (its
  // TESSERA_GENERATION stays the one it started with). FailedPrecondition unless it is running.
  absl::Status AdoptGeneration(const std::string& id, int64_t generation);
  // The file a serving replica writes its metrics to (TESSERA_METRICS_PATH, docs/agent.md): in
  // the member's state directory, removed with it by Forget().
  std::string MetricsPath(const std::string& id) const { return MemberDir(id) + "/metrics.json"; }

  const std::string& state_dir() const { return options_.state_dir; }
  std::string LogDir(const std::string& namespace_name, const std::string& job) const;

 private:
  std::string MemberDir(const std::string& id) const;
  absl::Status WriteRecord(const MemberStatus& s);
  void RefreshLocked(MemberStatus& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string MakeCgroup(const MemberSpec& spec);

  const Options options_;
  Clock& clock_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, MemberStatus> members_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::agent
