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
#include <string>
#include <vector>

namespace tessera::testing {

inline std::string TesseraBin() {
  const char* bin = getenv("TESSERA_BIN");
  return bin ? bin : "";
}

// What `tessera ARGS` printed (stdout and stderr together) and its exit code; -1 if it did not
// exit normally. ARGS is passed to the shell as is (quotes, redirections and here-documents).
struct CliResult {
  int rc = -1;
  std::string out;
};
inline CliResult RunTessera(const std::string& args) {
  const std::string cmd = "exec 2>&1; " + TesseraBin() + " " + args;
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

  // Starts `TESSERA_BIN server --listen 127.0.0.1:0 ARGS...` and waits (up to
  // 20 s) for it to listen. Returns the port, or -1 (see error()).
  int Start(const std::vector<std::string>& args) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return Fail("pipe");
    std::vector<std::string> argv_s = {TesseraBin(), "server", "--listen", "127.0.0.1:0"};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    pid_ = fork();
    if (pid_ < 0) return Fail("fork");
    if (pid_ == 0) {
      dup2(fds[1], 1);
      int err = stderr_path_.empty()
                    ? open("/dev/null", O_WRONLY)
                    : open(stderr_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      dup2(err, 2);
      std::vector<char*> argv;
      for (std::string& a : argv_s) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(fds[1]);
    std::string out;
    char buf[256];
    while (out.find('\n') == std::string::npos) {
      pollfd p{fds[0], POLLIN, 0};
      if (poll(&p, 1, 20000) <= 0) {
        close(fds[0]);
        return Fail("server did not report listening within 20 s");
      }
      ssize_t n = read(fds[0], buf, sizeof buf);
      if (n <= 0) {
        close(fds[0]);
        std::string msg("server exited before listening: ");
        msg.append(out);
        return Fail(msg);
      }
      out.append(buf, n);
    }
    close(fds[0]);  // the server prints nothing more on stdout
    size_t colon = out.find("127.0.0.1:");
    if (colon == std::string::npos) return Fail(std::string("unexpected output: ").append(out));
    port_ = atoi(out.c_str() + colon + 10);
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
  std::string line_, error_, stderr_path_;
};

}  // namespace tessera::testing
