#include "common/testing/child_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

namespace tessera::testing {

pid_t SpawnProcess(const std::vector<std::string>& argv, const std::string& log) {
  // Everything the child needs is prepared before fork: a multi-threaded process must not
  // allocate in the child.
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  const int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    // Dies with the test (a crashed or timed-out test leaves no child behind). The parent
    // may already be gone by now: then exit at once.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    dup2(fd, 1);
    dup2(fd, 2);
    dup2(null, 0);
    execv(args[0], args.data());
    _exit(127);
  }
  if (pid > 0) setpgid(pid, pid);  // no race with Kill before the child's own setpgid
  close(fd);
  close(null);
  return pid;
}

void KillProcess(pid_t& pid, absl::Duration grace) {
  if (pid <= 0) return;
  kill(-pid, grace > absl::ZeroDuration() ? SIGTERM : SIGKILL);
  int status = 0;
  for (int i = 0; i < absl::ToInt64Milliseconds(grace) / 50; ++i) {
    if (waitpid(pid, &status, WNOHANG) == pid) {
      kill(-pid, SIGKILL);  // anything it left in its group
      pid = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(-pid, SIGKILL);
  waitpid(pid, &status, 0);
  pid = -1;
}

int FreeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    close(fd);
    return -1;
  }
  const int port = ntohs(a.sin_port);
  close(fd);
  return port;
}

std::string TailFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  return s.size() > 3000 ? s.substr(s.size() - 3000) : s;
}

std::string FindBedBin(const std::string& source_dir, const std::string& binary, std::string* why) {
  auto has = [&](const std::string& dir) {
    return access((dir + "/" + binary).c_str(), X_OK) == 0;
  };
  if (const char* env = getenv("TESSERA_KUBE_BED_BIN"); env != nullptr && *env != '\0') {
    if (has(env)) return env;
    *why = std::string("TESSERA_KUBE_BED_BIN=") + env + " has no " + binary;
    return "";
  }
  const std::string script =
      (source_dir.empty() ? std::string(".") : source_dir) + "/scripts/kube-bed.sh";
  std::string out;
  FILE* p = popen((script + " --check 2>&1").c_str(), "r");
  if (p != nullptr) {
    char buf[512];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    const int st = pclose(p);
    while (!out.empty() && out.back() == '\n') out.pop_back();
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && !out.empty() && has(out)) return out;
  }
  *why =
      "the Kubernetes test bed is not built: run scripts/kube-bed.sh (it needs Go >= 1.26 "
      "and the Go module proxy; scripts/test.sh runs it)" +
      (out.empty() ? std::string() : " [" + script + ": " + out + "]");
  return "";
}

}  // namespace tessera::testing
