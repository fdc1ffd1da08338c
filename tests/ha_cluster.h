// The cluster of tests/server_jepsen_test.cc: a network namespace that one server replica runs in
// (so that the test can cut it off etcd), three `tessera server` replicas on fixed addresses (so
// that a restarted replica is where agents and clients look for it), and real `tessera agent`
// processes with fake GPUs. Not thread-safe except where said; the main thread owns them (their
// children die with the thread that started them).
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "agent_process.h"
#include "common/testing/child_process.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "server_process.h"

namespace tessera::testing {

using Clock = std::chrono::steady_clock;
inline double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// A network namespace joined to this machine by a veth pair: the host end `host_ip()`, the
// namespace's end `ns_ip()`. Cut() takes the host end down (the namespace can reach nothing,
// nothing reaches it), Heal() brings it up. Needs root and iproute2 (`ip`, scripts/setup.sh).
class Netns {
 public:
  ~Netns() {
    if (!name_.empty()) Ip("netns del " + name_);  // the veth pair goes with its namespace end
  }
  // "" once the namespace and its link are up, else why it cannot be (the caller skips).
  std::string Create() {
    if (geteuid() != 0) return "not root: a network namespace needs CAP_SYS_ADMIN";
    if (access(kIp, X_OK) != 0) return std::string(kIp) + " missing (iproute2; scripts/setup.sh)";
    const int id = getpid();
    const std::string ns = absl::StrCat("tjepsen", id), host = absl::StrCat("tjh", id),
                      peer = absl::StrCat("tjn", id);
    const std::string net = absl::StrCat("10.213.", id % 250, ".");
    if (std::string e = Ip("netns add " + ns); !e.empty()) return e;
    name_ = ns;
    host_dev_ = host;
    host_ip_ = net + "1";
    ns_ip_ = net + "2";
    for (const std::string& cmd :
         {absl::StrCat("link add ", host, " type veth peer name ", peer, " netns ", ns),
          absl::StrCat("addr add ", host_ip_, "/24 dev ", host),
          absl::StrCat("link set ", host, " up"),
          absl::StrCat("-n ", ns, " addr add ", ns_ip_, "/24 dev ", peer),
          absl::StrCat("-n ", ns, " link set ", peer, " up"),
          absl::StrCat("-n ", ns, " link set lo up")}) {
      if (std::string e = Ip(cmd); !e.empty()) return e;
    }
    return "";
  }
  std::string Cut() { return Ip("link set " + host_dev_ + " down"); }
  std::string Heal() { return Ip("link set " + host_dev_ + " up"); }
  // Runs `f` on a thread that joined the namespace's network (setns moves only the calling
  // thread): to ask a cut-off replica from its own side.
  template <typename F>
  void Run(F f) const {
    std::thread t([&] {
      const int fd = open(("/var/run/netns/" + name_).c_str(), O_RDONLY | O_CLOEXEC);
      if (fd >= 0 && setns(fd, CLONE_NEWNET) == 0) f();
      if (fd >= 0) close(fd);
    });
    t.join();
  }
  // What runs a program in the namespace (it execs it: the pid stays the program's).
  std::vector<std::string> Wrapper() const { return {kIp, "netns", "exec", name_}; }
  const std::string& host_ip() const { return host_ip_; }
  const std::string& ns_ip() const { return ns_ip_; }

 private:
  static constexpr const char* kIp = "/usr/sbin/ip";
  // "" or what `ip ARGS` printed when it failed.
  static std::string Ip(const std::string& args) {
    CliResult r = RunShell(std::string(kIp) + " " + args);
    return r.rc == 0 ? "" : absl::StrCat("ip ", args, ": ", r.out);
  }
  std::string name_, host_dev_, host_ip_, ns_ip_;
};

// Three `tessera server --store etcd://...` replicas, each on one address for its whole life:
// 127.0.0.1:PORT, or, for the replica in a Netns, NS_IP:PORT (reaching etcd through the host end
// of the veth pair, on which the etcd members also listen).
class Replicas {
 public:
  static constexpr int kN = 3;
  // `urls[i]`: replica i's --store. `netns`: where replica kN-1 runs (null: on loopback). The
  // replicas take `tokens` (a --tokens-file whose admin token is kAdminToken; a replica outside
  // loopback needs one).
  static constexpr const char* kAdminToken = "jepsen-admin";
  Replicas(std::vector<std::string> urls, std::string dir, const Netns* netns, std::string tokens)
      : urls_(std::move(urls)), dir_(std::move(dir)), netns_(netns), tokens_(std::move(tokens)) {
    for (int i = 0; i < kN; ++i) {
      host_[i] = netns_ != nullptr && i == kN - 1 ? netns_->ns_ip() : "127.0.0.1";
      port_[i] = FreeLoopbackPort();
    }
  }
  // Starts replica i (again, at the same address): "" or why not.
  std::string Start(int i) {
    auto& p = procs_[i];
    p = std::make_unique<ServerProcess>();
    p->set_stderr_path(absl::StrCat(dir_, "/r", i, "-", ++starts_, ".log"));
    p->set_listen(absl::StrCat(host_[i], ":", port_[i]));
    if (host_[i] != "127.0.0.1") p->set_wrapper(netns_->Wrapper());
    // The port may still be held by the killed process's sockets for a moment.
    for (int attempt = 0; attempt < 50; ++attempt) {
      if (p->Start({"--store", urls_[i], "--tokens-file", tokens_, "--node-grace-seconds", "10",
                    "--leader-lease-seconds", "2", "--replica-name", absl::StrCat("r", i)}) > 0) {
        return "";
      }
      // Its log says why; "address in use" is what a retry can mend.
      if (p->error().find("exited before listening") == std::string::npos) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return p->error();
  }
  bool alive(int i) const { return procs_[i] && procs_[i]->pid() > 0; }
  ServerProcess& proc(int i) { return *procs_[i]; }
  std::string url(int i) const { return absl::StrCat("http://", host_[i], ":", port_[i]); }
  // Every replica's URL, comma-separated (an agent's --server).
  std::string urls() const { return absl::StrCat(url(0), ",", url(1), ",", url(2)); }
  // A client of replica i; thread-safe (a new client each call).
  httplib::Client Client(int i, int read_timeout_s = 10) const {
    httplib::Client c(host_[i], port_[i]);
    c.set_connection_timeout(1, 0);
    c.set_read_timeout(read_timeout_s, 0);
    c.set_bearer_token_auth(kAdminToken);
    return c;
  }
  // tessera_leader of replica i: 1, 0, or -1 when it does not answer.
  int Leader(int i) const {
    if (!alive(i)) return -1;
    auto r = Client(i, 2).Get("/metrics");
    return r && r->status == 200 ? LeaderGauge(r->body) : -1;
  }
  // Waits (bounded) until exactly one answering replica (not `skip`) leads: its index, or -1.
  int WaitOneLeader(absl::Duration bound, int skip = -1) const {
    const auto end = Clock::now() + absl::ToChronoNanoseconds(bound);
    while (Clock::now() < end) {
      std::vector<int> leaders;
      for (int i = 0; i < kN; ++i) {
        if (i != skip && Leader(i) == 1) leaders.push_back(i);
      }
      if (leaders.size() == 1) return leaders[0];
      // A bounded wait on the replicas' state, which only a /metrics read can observe.
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }
  // Writes the replicas' controllers attempted after losing the lead, refused by the fence
  // (counted in every log: the counter on /metrics dies with its process).
  int FencedWrites() const {
    int n = 0;
    std::error_code ec;
    for (const auto& f : std::filesystem::directory_iterator(dir_, ec)) {
      const std::string name = f.path().filename().string();
      if (name.size() < 2 || name[0] != 'r' || name.find(".log") == std::string::npos) continue;
      const std::string log = Slurp(f.path().string());
      for (size_t at = 0;
           (at = log.find("fenced: this replica is not the leader", at)) != std::string::npos;
           ++at) {
        ++n;
      }
    }
    return n;
  }
  // How many answering replicas lead now.
  int Leaders() const {
    int n = 0;
    for (int i = 0; i < kN; ++i) n += Leader(i) == 1;
    return n;
  }

 private:
  std::vector<std::string> urls_;
  std::string dir_;
  const Netns* netns_;
  std::string tokens_;
  std::string host_[kN];
  int port_[kN];
  int starts_ = 0;
  std::unique_ptr<ServerProcess> procs_[kN];
};

// `tessera agent` processes with fake 8 x H100 nodes, talking to every replica. Each member they
// run is the shell script Command() gives: it appends "start|double JOB MEMBER GENERATION PWD"
// to runs.log, "double" when another process of the same member still holds the member's lock
// (the same member running twice), and sleeps.
class Agents {
 public:
  explicit Agents(std::string dir) : dir_(std::move(dir)) {
    std::filesystem::create_directories(dir_ + "/locks");
  }
  ~Agents() {
    for (auto& a : agents_) a->Kill(SIGKILL);
    // Members outlive agents by design: end them (each in its own process group).
    std::error_code ec;
    for (const auto& n : std::filesystem::directory_iterator(dir_ + "/agents", ec)) {
      for (const auto& m : std::filesystem::directory_iterator(n.path() / "members", ec)) {
        nlohmann::json j =
            nlohmann::json::parse(Slurp((m.path() / "member.json").string()), nullptr, false);
        if (j.is_object() && j.value("pid", 0) > 0) kill(-j.value("pid", 0), SIGKILL);
      }
    }
  }
  // Starts agent `name` with label role=`role` and its node token: "" or why not.
  std::string Start(const std::string& name, const std::string& role, const std::string& servers,
                    const std::string& token, const std::string& source_dir) {
    agents_.push_back(std::make_unique<AgentProcess>());
    const bool ok = agents_.back()->Start(
        {"--server",         servers,
         "--token",          token,
         "--node-name",      name,
         "--backend",        "fake",
         "--fake-config",    source_dir + "/deploy/fake-gpus/up-h100-nvswitch-8.yaml",
         "--state-dir",      dir_ + "/agents/" + name,
         "--label",          "role=" + role,
         "--heartbeat",      "1s",
         "--sync",           "10s",
         "--watch-timeout",  "5s",
         "--cgroup-parent",  "",
         "--cpu-cores",      "0",
         "--memory-gib",     "0",
         "--metrics-listen", "127.0.0.1:0"},
        dir_ + "/agent-" + name + ".log");
    return ok ? "" : "agent " + name + " did not start; see " + dir_;
  }
  // The member command: the script above, sleeping `seconds`.
  std::vector<std::string> Command(double seconds) const {
    char sleep[32];
    std::snprintf(sleep, sizeof sleep, "%.1f", seconds);
    return {"/bin/sh", "-c",
            absl::StrCat("exec 9>>", dir_, "/locks/$TESSERA_JOB.$TESSERA_MEMBER_INDEX; ",
                         "if flock -n 9; then s=start; else s=double; fi; ",
                         "echo \"$s $TESSERA_JOB $TESSERA_MEMBER_INDEX $TESSERA_GENERATION $PWD\" ",
                         ">> ", dir_, "/runs.log; sleep ", sleep)};
  }
  std::string runs_log() const { return dir_ + "/runs.log"; }

 private:
  std::string dir_;
  std::vector<std::unique_ptr<AgentProcess>> agents_;
};

}  // namespace tessera::testing
