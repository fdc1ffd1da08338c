#include "bench/harness/server_child.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace tessera::bench {

absl::StatusOr<std::unique_ptr<ServerChild>> ServerChild::Start(const ServerChildOptions& o) {
  // Everything the child needs is built before fork(): after it, only async-signal-safe calls.
  std::vector<std::string> args = {"tessera", "server"};
  args.insert(args.end(), o.args.begin(), o.args.end());
  args.push_back("--listen");
  args.push_back("127.0.0.1:0");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string log = o.log_path.empty() ? "/dev/null" : o.log_path;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError("server child: pipe failed");
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return absl::InternalError("server child: fork failed");
  }
  if (pid == 0) {
    dup2(fds[1], 1);
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) dup2(fd, 2);
    execv(o.binary.c_str(), argv.data());
    _exit(127);
  }
  close(fds[1]);
  // "listening on 127.0.0.1:PORT (revision ...)"
  std::string line;
  char buf[512];
  const absl::Time deadline = absl::Now() + o.start_timeout;
  while (line.find('\n') == std::string::npos && absl::Now() < deadline) {
    pollfd p{fds[0], POLLIN, 0};
    const int ms = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (poll(&p, 1, std::max(1, ms)) <= 0) break;
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    line.append(buf, n);
  }
  close(fds[0]);
  int port = 0;
  size_t at = line.find("127.0.0.1:");
  if (at == std::string::npos ||
      !absl::SimpleAtoi(line.substr(at + 10, line.find(' ', at) - at - 10), &port)) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    return absl::UnavailableError(absl::StrCat("the server did not start (its stderr: ", log, ")"));
  }
  return std::unique_ptr<ServerChild>(new ServerChild(pid, port));
}

ServerChild::~ServerChild() { Stop(); }

bool ServerChild::Stop() {
  if (stopped_) return clean_;
  stopped_ = true;
  kill(pid_, SIGTERM);
  int status = 0;
  for (int i = 0; i < 100; ++i) {
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      clean_ = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      return clean_;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, &status, 0);
  return false;
}

double ProcCpuSeconds(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t close = s.rfind(')');
  if (close == std::string::npos || close + 2 > s.size()) return 0;
  std::istringstream rest(s.substr(close + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; rest >> field; ++i) {
    if (i == 14) (void)absl::SimpleAtod(field, &utime);
    if (i == 15) {
      (void)absl::SimpleAtod(field, &stime);
      break;
    }
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

int64_t ProcStatusField(pid_t pid, const std::string& name) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (!absl::StartsWith(line, name + ":")) continue;
    std::string num;
    for (char c : line.substr(name.size() + 1)) {
      if (absl::ascii_isdigit(static_cast<unsigned char>(c))) num += c;
      if (c == 'k') break;
    }
    int64_t v = 0;
    (void)absl::SimpleAtoi(num, &v);
    return v;
  }
  return 0;
}

std::string LoadAvg() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return absl::StrCat(a, " ", b, " ", c);
}

int64_t RaiseFileLimit() {
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);
  getrlimit(RLIMIT_NOFILE, &rl);
  return static_cast<int64_t>(rl.rlim_cur);
}

}  // namespace tessera::bench
