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
    std::vector<std::string> argv = {TesseraBin(), "agent"};
    argv.insert(argv.end(), args.begin(), args.end());
    FirstLine first = SpawnForFirstLine(std::move(argv), log, 30000);
    pid_ = first.pid;
    const std::string& out = first.out;
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
