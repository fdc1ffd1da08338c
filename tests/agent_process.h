// AgentProcess: runs the real `tessera agent` binary (env TESSERA_BIN) for
// integration tests, its stderr (the log) appended to a file, and learns its
// HTTP endpoint from the "agent NAME: ... endpoint URL," line on stdout.
// Not thread-safe; one owner.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "server_process.h"

namespace tessera::testing {

class AgentProcess {
 public:
  ~AgentProcess() { Kill(SIGKILL); }
  // Starts the agent and waits for its "agent NAME: ... endpoint URL" line.
  bool Start(const std::vector<std::string>& args, const std::string& log) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return false;
    std::vector<std::string> argv_s = {TesseraBin(), "agent"};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    pid_ = fork();
    if (pid_ == 0) {
      int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      dup2(fd, 2);
      dup2(fds[1], 1);
      std::vector<char*> argv;
      for (std::string& a : argv_s) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(fds[1]);
    std::string out;
    char buf[512];
    while (out.find('\n') == std::string::npos) {
      pollfd p{fds[0], POLLIN, 0};
      if (poll(&p, 1, 30000) <= 0) break;
      ssize_t n = read(fds[0], buf, sizeof buf);
      if (n <= 0) break;
      out.append(buf, n);
    }
    close(fds[0]);
    size_t at = out.find("endpoint ");
    if (at == std::string::npos) return false;
    endpoint_ = out.substr(at + 9, out.find(',', at) - at - 9);
    return true;
  }
  int Kill(int sig) {
    if (pid_ <= 0) return -1;
    kill(pid_, sig);
    if (sig == SIGSTOP || sig == SIGCONT) return 0;
    int st = 0;
    waitpid(pid_, &st, 0);
    pid_ = -1;
    return st;
  }
  pid_t pid() const { return pid_; }
  const std::string& endpoint() const { return endpoint_; }

 private:
  pid_t pid_ = -1;
  std::string endpoint_;
};

}  // namespace tessera::testing
