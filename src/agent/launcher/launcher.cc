#include "agent/launcher/launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

extern char** environ;

namespace tessera::agent {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool WriteFileAtomic(const std::string& path, const std::string& data) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return false;
    out << data;
    out.flush();
    if (!out) return false;
  }
  return rename(tmp.c_str(), path.c_str()) == 0;
}

bool WriteSmallFile(const std::string& path, const std::string& data) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size());
  close(fd);
  return ok;
}

// File-name-safe: [A-Za-z0-9._-], anything else becomes '_'.
std::string Safe(const std::string& s) {
  std::string out = s;
  for (char& c : out) {
    if (!(isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) c = '_';
  }
  return out.empty() ? "_" : out;
}

Json SpecToJson(const MemberSpec& s) {
  return Json{{"namespace", s.namespace_name},
              {"job", s.job},
              {"kind", s.kind},
              {"group", s.group},
              {"index", s.index},
              {"generation", s.generation},
              {"command", s.command},
              {"env", s.env},
              {"workingDir", s.working_dir},
              {"gpuIndices", s.gpu_indices},
              {"gpuUuids", s.gpu_uuids},
              {"checkpointSignal", s.checkpoint_signal},
              {"graceSeconds", absl::ToDoubleSeconds(s.grace)},
              {"cpuMilli", s.cpu_milli},
              {"memoryMiB", s.memory_mib}};
}

MemberSpec SpecFromJson(const Json& j) {
  MemberSpec s;
  s.namespace_name = j.value("namespace", "");
  s.job = j.value("job", "");
  s.kind = j.value("kind", "TrainingJob");
  s.group = j.value("group", "");
  s.index = j.value("index", 0);
  s.generation = j.value("generation", int64_t{0});
  s.command = j.value("command", std::vector<std::string>{});
  s.env = j.value("env", std::map<std::string, std::string>{});
  s.working_dir = j.value("workingDir", "");
  s.gpu_indices = j.value("gpuIndices", std::vector<int>{});
  s.gpu_uuids = j.value("gpuUuids", std::vector<std::string>{});
  s.checkpoint_signal = j.value("checkpointSignal", SIGUSR1);
  s.grace = absl::Seconds(j.value("graceSeconds", 30.0));
  s.cpu_milli = j.value("cpuMilli", int64_t{0});
  s.memory_mib = j.value("memoryMiB", int64_t{0});
  return s;
}

// Async-signal-safe decimal formatting for the supervisor.
size_t FormatInt(int v, char* buf) {
  char tmp[16];
  size_t n = 0;
  bool neg = v < 0;
  unsigned u = neg ? -static_cast<unsigned>(v) : static_cast<unsigned>(v);
  do {
    tmp[n++] = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u != 0);
  size_t k = 0;
  if (neg) buf[k++] = '-';
  while (n > 0) buf[k++] = tmp[--n];
  buf[k++] = '\n';
  return k;
}

constexpr int kSupervisorIgnored[] = {SIGUSR1, SIGUSR2, SIGTERM, SIGINT, SIGHUP, SIGPIPE};

}  // namespace

std::string MemberSpec::Id() const {
  return absl::StrCat(Safe(namespace_name), ".", Safe(job), ".", Safe(group), "-", index);
}

std::string MemberStateName(MemberState s) {
  switch (s) {
    case MemberState::kRunning:
      return "Running";
    case MemberState::kStopping:
      return "Stopping";
    case MemberState::kExited:
      return "Exited";
  }
  return "Unknown";
}

uint64_t ProcessStartTicks(pid_t pid) {
  if (pid <= 0) return 0;
  std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  // The command name (field 2) is in parentheses and may contain spaces: parse after the last ')'.
  size_t rp = stat.rfind(')');
  if (rp == std::string::npos) return 0;
  std::vector<std::string> f = absl::StrSplit(stat.substr(rp + 2), ' ', absl::SkipEmpty());
  // f[0] is field 3 (state); field 22 is f[19].
  if (f.size() < 20 || f[0] == "Z" || f[0] == "X") return 0;
  return strtoull(f[19].c_str(), nullptr, 10);
}

Launcher::Launcher(Options options, Clock& clock) : options_(std::move(options)), clock_(clock) {}

std::string Launcher::MemberDir(const std::string& id) const {
  return absl::StrCat(options_.state_dir, "/members/", id);
}

std::string Launcher::LogDir(const std::string& namespace_name, const std::string& job) const {
  return absl::StrCat(options_.state_dir, "/logs/", Safe(namespace_name), "/", Safe(job));
}

absl::Status Launcher::Init() {
  std::error_code ec;
  fs::create_directories(options_.state_dir + "/members", ec);
  if (ec)
    return absl::InternalError(absl::StrCat("state dir ", options_.state_dir, ": ", ec.message()));
  fs::create_directories(options_.state_dir + "/logs", ec);
  if (ec)
    return absl::InternalError(absl::StrCat("state dir ", options_.state_dir, ": ", ec.message()));
  return absl::OkStatus();
}

absl::Status Launcher::WriteRecord(const MemberStatus& s) {
  Json j{{"spec", SpecToJson(s.spec)},  {"pid", s.pid},
         {"startTicks", s.start_ticks}, {"started", absl::ToUnixMillis(s.started)},
         {"cgroup", s.cgroup},          {"stdout", s.stdout_path},
         {"stderr", s.stderr_path}};
  if (!WriteFileAtomic(MemberDir(s.spec.Id()) + "/member.json", j.dump(2))) {
    return absl::InternalError(absl::StrCat("cannot write record of ", s.spec.Id()));
  }
  return absl::OkStatus();
}

std::string Launcher::MakeCgroup(const MemberSpec& spec) {
  if (options_.cgroup_parent.empty()) return "";
  // Only under a cgroup v2 hierarchy (a directory above with cgroup.controllers; on hybrid hosts
  // that is /sys/fs/cgroup/unified); v1-only hosts run members without limits.
  bool v2 = false;
  for (fs::path p = fs::path(options_.cgroup_parent).parent_path(); !p.empty() && p != "/";
       p = p.parent_path()) {
    if (access((p / "cgroup.controllers").c_str(), R_OK) == 0) {
      v2 = true;
      break;
    }
  }
  if (!v2) return "";
  std::error_code ec;
  fs::create_directories(options_.cgroup_parent, ec);
  if (ec) return "";
  // Delegate cpu and memory to the children of the parent (best effort).
  WriteSmallFile(options_.cgroup_parent + "/cgroup.subtree_control", "+cpu +memory");
  std::string dir = absl::StrCat(options_.cgroup_parent, "/", spec.Id());
  fs::create_directories(dir, ec);
  if (ec || access((dir + "/cgroup.procs").c_str(), W_OK) != 0) return "";
  if (spec.memory_mib > 0) {
    WriteSmallFile(dir + "/memory.max", absl::StrCat(spec.memory_mib * 1024 * 1024));
  }
  if (spec.cpu_milli > 0) {
    WriteSmallFile(dir + "/cpu.max", absl::StrCat(spec.cpu_milli * 100, " 100000"));
  }
  return dir;
}

absl::StatusOr<MemberStatus> Launcher::Start(const MemberSpec& spec) {
  if (spec.command.empty()) return absl::InvalidArgumentError("command: must not be empty");
  if (spec.gpu_uuids.size() != spec.gpu_indices.size() && !spec.gpu_uuids.empty()) {
    return absl::InvalidArgumentError("gpu_uuids: must match gpu_indices");
  }
  const std::string id = spec.Id();
  {
    absl::MutexLock l(&mu_);
    if (members_.contains(id))
      return absl::AlreadyExistsError(absl::StrCat("member ", id, " is tracked"));
  }
  const std::string dir = MemberDir(id);
  const std::string log_dir = LogDir(spec.namespace_name, spec.job);
  std::error_code ec;
  fs::create_directories(dir, ec);
  fs::create_directories(log_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", log_dir, ": ", ec.message()));
  fs::remove(dir + "/exit_code", ec);

  MemberStatus st;
  st.spec = spec;
  // One pair of files per generation (agent/member_logs.h): a restarted or moved member's
  // earlier output stays readable as such (`tessera logs --previous`).
  const std::string base =
      absl::StrCat(log_dir, "/", Safe(spec.group), "-", spec.index, ".g", spec.generation);
  st.stdout_path = base + ".stdout";
  st.stderr_path = base + ".stderr";
  st.cgroup = MakeCgroup(spec);

  // Everything the children need is prepared here: between fork and exec only
  // async-signal-safe calls are made.
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    absl::string_view kv(*e);
    size_t eq = kv.find('=');
    if (eq == absl::string_view::npos) continue;
    env[std::string(kv.substr(0, eq))] = std::string(kv.substr(eq + 1));
  }
  for (const auto& [k, v] : spec.env) env[k] = v;
  env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
  env["CUDA_VISIBLE_DEVICES"] = absl::StrJoin(spec.gpu_indices, ",");
  env["NVIDIA_VISIBLE_DEVICES"] = spec.gpu_uuids.empty() ? absl::StrJoin(spec.gpu_indices, ",")
                                                         : absl::StrJoin(spec.gpu_uuids, ",");
  if (spec.gpu_indices.empty()) env["NVIDIA_VISIBLE_DEVICES"] = "void";
  env["TESSERA_NAMESPACE"] = spec.namespace_name;
  env["TESSERA_JOB"] = spec.job;
  env["TESSERA_GROUP"] = spec.group;
  env["TESSERA_MEMBER_INDEX"] = absl::StrCat(spec.index);
  env["TESSERA_GENERATION"] = absl::StrCat(spec.generation);
  env["TESSERA_CHECKPOINT_SIGNAL"] = absl::StrCat(spec.checkpoint_signal);
  // A serving replica reports its latency and throughput here (textfile-collector style); the
  // agent reads it for the controller's autoscaler (docs/agent.md, "Replica metrics").
  if (spec.kind == "InferenceService") env["TESSERA_METRICS_PATH"] = dir + "/metrics.json";
  std::vector<std::string> env_s;
  env_s.reserve(env.size());
  for (const auto& [k, v] : env) env_s.push_back(absl::StrCat(k, "=", v));
  std::vector<char*> envp;
  envp.reserve(env_s.size() + 1);
  for (std::string& s : env_s) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_s = spec.command;
  std::vector<char*> argv;
  argv.reserve(argv_s.size() + 1);
  for (std::string& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  const std::string workdir = spec.working_dir.empty() ? dir : spec.working_dir;
  const std::string exit_path = dir + "/exit_code";
  const std::string procs_path = st.cgroup.empty() ? "" : st.cgroup + "/cgroup.procs";

  int ready[2];
  if (pipe2(ready, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  pid_t pid = fork();
  if (pid < 0) {
    close(ready[0]);
    close(ready[1]);
    return absl::InternalError(absl::StrCat("fork failed: ", strerror(errno)));
  }
  if (pid == 0) {
    // Supervisor.
    close(ready[0]);
    setsid();
    if (!procs_path.empty()) {
      int fd = open(procs_path.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd >= 0) {
        (void)!write(fd, "0", 1);
        close(fd);
      }
    }
    int in = open("/dev/null", O_RDONLY);
    int out = open(st.stdout_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    int err = open(st.stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (in < 0 || out < 0 || err < 0) _exit(126);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    // Close every other inherited descriptor (the agent's sockets) except the ready pipe.
    for (int fd = 3; fd < 1024; ++fd) {
      if (fd != ready[1]) close(fd);
    }
    for (int sig : kSupervisorIgnored) signal(sig, SIG_IGN);
    pid_t child = fork();
    if (child == 0) {
      for (int sig : kSupervisorIgnored) signal(sig, SIG_DFL);
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      if (chdir(workdir.c_str()) != 0) _exit(126);
      // execvp looks command[0] up in the member's PATH.
      environ = envp.data();
      execvp(argv[0], argv.data());
      _exit(127);
    }
    close(ready[1]);  // tells the agent the supervisor is set up
    int status = 0;
    int code = 127;
    if (child > 0) {
      while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
      }
      code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    char buf[24];
    size_t n = FormatInt(code, buf);
    int fd = open(exit_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
      (void)!write(fd, buf, n);
      fsync(fd);
      close(fd);
    }
    _exit(code);
  }
  close(ready[1]);
  char c;
  while (read(ready[0], &c, 1) < 0 && errno == EINTR) {
  }
  close(ready[0]);
  st.pid = pid;
  st.start_ticks = ProcessStartTicks(pid);
  st.started = clock_.Now();
  st.state = MemberState::kRunning;
  absl::Status w = WriteRecord(st);
  absl::MutexLock l(&mu_);
  members_[id] = st;
  if (!w.ok()) return w;
  return st;
}

void Launcher::RefreshLocked(MemberStatus& s) {
  if (s.state == MemberState::kExited) return;
  bool dead = false;
  int code = -1;
  if (!s.adopted) {
    int status = 0;
    pid_t r = waitpid(s.pid, &status, WNOHANG);
    if (r == s.pid) {
      dead = true;
      code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    } else if (r < 0 && errno == ECHILD) {
      dead = ProcessStartTicks(s.pid) != s.start_ticks;
    }
  } else {
    dead = s.start_ticks == 0 || ProcessStartTicks(s.pid) != s.start_ticks;
  }
  if (!dead) {
    if (s.state == MemberState::kStopping && clock_.Now() >= s.stop_deadline) {
      kill(-s.pid, SIGKILL);
      kill(s.pid, SIGKILL);
    }
    return;
  }
  // The supervisor's file holds the command's own code; it is absent when the supervisor itself
  // was killed (SIGKILL of the group).
  std::string file = ReadFile(MemberDir(s.spec.Id()) + "/exit_code");
  if (!file.empty()) {
    code = atoi(file.c_str());
  } else if (code < 0) {
    code = 128 + SIGKILL;
  }
  // Anything left in the group (a member's own children) goes with it.
  kill(-s.pid, SIGKILL);
  s.state = MemberState::kExited;
  s.exit_code = code;
}

std::vector<MemberStatus> Launcher::Adopt() {
  std::vector<MemberStatus> adopted;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(options_.state_dir + "/members", ec)) {
    std::string text = ReadFile(entry.path().string() + "/member.json");
    if (text.empty()) continue;
    Json j = Json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("spec")) continue;
    MemberStatus s;
    s.spec = SpecFromJson(j["spec"]);
    s.pid = j.value("pid", -1);
    s.start_ticks = j.value("startTicks", uint64_t{0});
    s.started = absl::FromUnixMillis(j.value("started", int64_t{0}));
    s.cgroup = j.value("cgroup", "");
    s.stdout_path = j.value("stdout", "");
    s.stderr_path = j.value("stderr", "");
    s.adopted = true;
    s.state = MemberState::kRunning;
    absl::MutexLock l(&mu_);
    if (members_.contains(s.spec.Id())) continue;
    RefreshLocked(s);
    members_[s.spec.Id()] = s;
    adopted.push_back(s);
  }
  return adopted;
}

absl::Status Launcher::Stop(const std::string& id, bool graceful) {
  absl::MutexLock l(&mu_);
  auto it = members_.find(id);
  if (it == members_.end()) return absl::NotFoundError(absl::StrCat("no member ", id));
  MemberStatus& s = it->second;
  RefreshLocked(s);
  if (s.state == MemberState::kExited) return absl::OkStatus();
  if (!graceful) {
    kill(-s.pid, SIGKILL);
    kill(s.pid, SIGKILL);
    s.state = MemberState::kStopping;
    s.stop_deadline = clock_.Now();
    return absl::OkStatus();
  }
  absl::Time deadline = clock_.Now() + s.spec.grace;
  if (s.state != MemberState::kStopping) {
    kill(-s.pid, s.spec.checkpoint_signal);
    s.state = MemberState::kStopping;
    s.stop_deadline = deadline;
  } else if (deadline < s.stop_deadline) {
    s.stop_deadline = deadline;
  }
  return absl::OkStatus();
}

void Launcher::Poll() {
  absl::MutexLock l(&mu_);
  for (auto& [id, s] : members_) RefreshLocked(s);
}

std::vector<MemberStatus> Launcher::List() const {
  absl::MutexLock l(&mu_);
  std::vector<MemberStatus> out;
  for (const auto& [id, s] : members_) out.push_back(s);
  std::sort(out.begin(), out.end(),
            [](const MemberStatus& a, const MemberStatus& b) { return a.spec.Id() < b.spec.Id(); });
  return out;
}

absl::StatusOr<MemberStatus> Launcher::Get(const std::string& id) const {
  absl::MutexLock l(&mu_);
  auto it = members_.find(id);
  if (it == members_.end()) return absl::NotFoundError(absl::StrCat("no member ", id));
  return it->second;
}

absl::Status Launcher::AdoptGeneration(const std::string& id, int64_t generation) {
  absl::MutexLock l(&mu_);
  auto it = members_.find(id);
  if (it == members_.end()) return absl::NotFoundError(absl::StrCat("no member ", id));
  RefreshLocked(it->second);
  if (it->second.state != MemberState::kRunning) {
    return absl::FailedPreconditionError(absl::StrCat("member ", id, " is not running"));
  }
  MemberStatus updated = it->second;
  updated.spec.generation = generation;
  // The record first: an agent restarted now adopts the member at the new generation.
  if (absl::Status s = WriteRecord(updated); !s.ok()) return s;
  it->second = std::move(updated);
  return absl::OkStatus();
}

absl::Status Launcher::Forget(const std::string& id) {
  absl::MutexLock l(&mu_);
  auto it = members_.find(id);
  if (it == members_.end()) return absl::NotFoundError(absl::StrCat("no member ", id));
  RefreshLocked(it->second);
  if (it->second.state != MemberState::kExited) {
    return absl::FailedPreconditionError(absl::StrCat("member ", id, " is still running"));
  }
  std::error_code ec;
  if (!it->second.cgroup.empty()) rmdir(it->second.cgroup.c_str());
  fs::remove_all(MemberDir(id), ec);
  members_.erase(it);
  return absl::OkStatus();
}

}  // namespace tessera::agent
