// ServerProcess: runs the real `tessera server` binary (env TESSERA_BIN) for
// integration tests, and learns its port from the "listening on" line.
// Not thread-safe; one owner.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace tessera::testing {

inline std::string TesseraBin() {
  const char* bin = getenv("TESSERA_BIN");
  return bin ? bin : "";
}

// What `tessera ARGS` (or a shell COMMAND) printed, stdout and stderr together, and its exit
// code; -1 if it did not exit normally. ARGS is passed to the shell as is (quotes, redirections
// and here-documents).
struct CliResult {
  int rc = -1;
  std::string out;
};
// `shell` (optional) runs first in the same shell ("ulimit -v 1048576; ").
inline CliResult RunShell(const std::string& command, const std::string& shell = "") {
  const std::string cmd = shell + "exec 2>&1; " + command;
  CliResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}
inline CliResult RunTessera(const std::string& args, const std::string& shell = "") {
  return RunShell(TesseraBin() + " " + args, shell);
}

// The tessera_leader gauge in a server's /metrics text: 1 (it leads), 0, or -1 when absent.
inline int LeaderGauge(const std::string& metrics) {
  const size_t at = metrics.find("\ntessera_leader ");
  return at == std::string::npos || at + 16 >= metrics.size() ? -1 : metrics[at + 16] - '0';
}

// The whole file at `path` ("" when unreadable).
inline std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A child whose first line of stdout was awaited (SpawnForFirstLine).
struct FirstLine {
  pid_t pid = -1;          // -1: the pipe or the fork failed
  std::string out;         // what stdout gave until its first newline
  bool timed_out = false;  // no newline within the time; else stdout ended first
};
// Forks `argv` with stdout on a pipe and stderr appended to `stderr_path`
// (/dev/null when empty), then reads stdout until its first full line, for at
// most `timeout_ms`. The pipe is closed afterwards: the child must print
// nothing more on stdout.
inline FirstLine SpawnForFirstLine(std::vector<std::string> argv, const std::string& stderr_path,
                                   int timeout_ms) {
  FirstLine r;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return r;
  r.pid = fork();
  if (r.pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return r;
  }
  if (r.pid == 0) {
    dup2(fds[1], 1);
    int err = stderr_path.empty() ? open("/dev/null", O_WRONLY)
                                  : open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(err, 2);
    std::vector<char*> args;
    for (std::string& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  char buf[512];
  while (r.out.find('\n') == std::string::npos) {
    pollfd p{fds[0], POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) {
      r.timed_out = true;
      break;
    }
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    r.out.append(buf, n);
  }
  close(fds[0]);
  return r;
}

inline std::string MakeTempDir(const char* tag) {
  const char* tmp = getenv("TMPDIR");
  std::string tmpl(tmp ? tmp : "/tmp");
  tmpl.append("/").append(tag).append("_XXXXXX");
  if (mkdtemp(tmpl.data()) == nullptr) return "";
  return tmpl;
}

class ServerProcess {
 public:
  ~ServerProcess() { Kill(SIGKILL); }

  // Starts `[WRAPPER...] TESSERA_BIN server --listen LISTEN ARGS...` (LISTEN 127.0.0.1:0
  // unless set_listen) and waits (up to 20 s) for it to listen. Returns the port, or -1 (see
  // error()).
  int Start(const std::vector<std::string>& args) {
    std::vector<std::string> argv = wrapper_;
    for (const std::string& a :
         {TesseraBin(), std::string("server"), std::string("--listen"), listen_}) {
      argv.push_back(a);
    }
    argv.insert(argv.end(), args.begin(), args.end());
    FirstLine first = SpawnForFirstLine(std::move(argv), stderr_path_, 20000);
    pid_ = first.pid;
    if (pid_ < 0) return Fail("pipe or fork failed");
    const std::string& out = first.out;
    if (out.find('\n') == std::string::npos) {
      return Fail(first.timed_out ? "server did not report listening within 20 s"
                                  : "server exited before listening: " + out);
    }
    const std::string host = listen_.substr(0, listen_.rfind(':') + 1);
    size_t colon = out.find(host);
    if (colon == std::string::npos) return Fail(std::string("unexpected output: ").append(out));
    port_ = atoi(out.c_str() + colon + host.size());
    line_ = out.substr(0, out.find('\n'));
    return port_;
  }

  // Sends `sig` and reaps the process; returns its wait status (or -1).
  int Kill(int sig) {
    if (pid_ <= 0) return -1;
    kill(pid_, sig);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

  // Where the server's stderr (its log) goes; set before Start. Empty: /dev/null.
  void set_stderr_path(std::string path) { stderr_path_ = std::move(path); }
  // The --listen address, HOST:PORT (default 127.0.0.1:0, any free port); set before Start.
  void set_listen(std::string host_port) { listen_ = std::move(host_port); }
  // A command the server runs under, argv[0] a path (`/usr/sbin/ip netns exec NS`: in a network
  // namespace; it must exec the server, so that pid() is the server's); set before Start.
  void set_wrapper(std::vector<std::string> argv) { wrapper_ = std::move(argv); }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  const std::string& listening_line() const { return line_; }
  const std::string& error() const { return error_; }

 private:
  int Fail(std::string why) {
    error_ = std::move(why);
    Kill(SIGKILL);
    return -1;
  }
  pid_t pid_ = -1;
  int port_ = -1;
  std::string line_, error_, stderr_path_, listen_ = "127.0.0.1:0";
  std::vector<std::string> wrapper_;
};

}  // namespace tessera::testing
