// ServerChild: a real `tessera server` as a child process on loopback, for the benchmarks that
// measure the server from outside (`bench agents`, `bench control-plane`): its CPU and memory
// are read from /proc, so the clients' own cost is not counted as the server's.
//
// Ownership: owns the child; the destructor stops it (SIGTERM, then SIGKILL after 10 s).
// Thread safety: Start/Stop from one thread; the /proc readers are thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tessera::bench {

struct ServerChildOptions {
  // The tessera binary (default: this process's own).
  std::string binary = "/proc/self/exe";
  // Arguments after `server` (e.g. --data-dir D --tokens-file F); `--listen 127.0.0.1:0` is added.
  std::vector<std::string> args;
  // Where the child's stderr goes (appended); empty: /dev/null.
  std::string log_path;
  // How long to wait for its "listening on 127.0.0.1:PORT" line.
  absl::Duration start_timeout = absl::Seconds(60);
};

class ServerChild {
 public:
  // Starts the child and waits until it listens. Unavailable (naming the log) when it does not.
  static absl::StatusOr<std::unique_ptr<ServerChild>> Start(const ServerChildOptions& options);
  ~ServerChild();
  ServerChild(const ServerChild&) = delete;
  ServerChild& operator=(const ServerChild&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  // SIGTERM, wait up to 10 s, then SIGKILL. Returns true when it exited by itself with code 0.
  // Idempotent.
  bool Stop();

 private:
  ServerChild(pid_t pid, int port) : pid_(pid), port_(port) {}
  pid_t pid_ = -1;
  int port_ = 0;
  bool stopped_ = false;
  bool clean_ = false;
};

// /proc/PID/stat utime + stime, in seconds (0 when unreadable).
double ProcCpuSeconds(pid_t pid);
// A numeric field of /proc/PID/status ("VmRSS", "VmHWM": kB; "Threads"); 0 when absent.
int64_t ProcStatusField(pid_t pid, const std::string& name);
// The three load averages of /proc/loadavg, "1.00 0.50 0.25".
std::string LoadAvg();
// Raises RLIMIT_NOFILE to its hard limit; returns the limit now in force.
int64_t RaiseFileLimit();

}  // namespace tessera::bench
