// Child processes for tests and test beds (KubeBed, EtcdProcess): spawn a binary in a process
// group of its own that dies with its starter, kill and reap it, pick a free loopback port, read
// the tail of a log, find the binaries scripts/kube-bed.sh built.
// Functions only; each pid belongs to the caller that spawned it.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/time/time.h"

namespace tessera::testing {

// Forks `argv` (argv[0] a path) in a process group of its own, stdout and stderr appended to
// `log`, stdin /dev/null. The child gets SIGKILL when the thread that spawned it exits
// (PR_SET_PDEATHSIG follows the forking thread, not the process): spawn from a thread that
// outlives the child. Returns the pid (-1 when fork failed).
pid_t SpawnProcess(const std::vector<std::string>& argv, const std::string& log);

// SIGTERM to the group, SIGKILL after `grace` (at once when zero); reaps the leader and sets
// `pid` to -1. No-op when pid <= 0.
void KillProcess(pid_t& pid, absl::Duration grace = absl::Seconds(2));

// A TCP port on 127.0.0.1 that was free a moment ago (-1 on failure).
int FreeLoopbackPort();

// The last 3000 bytes of a file (a child's log), for error messages.
std::string TailFile(const std::string& path);

// The bin dir of the test bed (scripts/kube-bed.sh) when it holds `binary`: env
// TESSERA_KUBE_BED_BIN, else what `<source_dir>/scripts/kube-bed.sh --check` prints ("" = the
// current directory). "" with `why` saying what to run otherwise.
std::string FindBedBin(const std::string& source_dir, const std::string& binary, std::string* why);

}  // namespace tessera::testing
