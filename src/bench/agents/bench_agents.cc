// `tessera bench agents`: N simulated node agents against a real `tessera server` process on
// loopback, speaking the real agent's protocol (docs/agent.md, "Agent <-> server"):
//   register      POST /api/v1/nodes (a Node with 8 GPUs and its 8 x 8 link matrix)
//   heartbeat     every --heartbeat (phases spread at random): GET + PUT of the Node, on a fresh
//                 connection, as the real agent's is closed by the server's 5 s keep-alive
//   bindings      one long-poll per agent, GET /api/v1/nodes/NAME/bindings?resourceVersion=R&
//                 timeoutSeconds=30, re-issued at once on the same connection
// A binder submits new one-GPU jobs pinned to random agents (spec.nodeSelector on a label each
// simulated node carries), the server's scheduler binds them, and each agent notes when its
// long-poll answer first contains the job. The agents are light: one epoll loop on one thread
// drives all of them (no per-agent thread), so the client itself stays cheap.
//
// Prints one JSON object: server CPU seconds per second, heartbeat latency p50/p99, bind ->
// agent-sees-it latency p50/p99, server RSS and threads, client CPU, load averages. This
// measures the API, the store and the bindings index under 12,500 agents; the scheduler only
// places the binder's few jobs (--binds-per-second 0 runs the server with --no-scheduler), its
// own cost is `tessera bench sched`.
#include "bench/agents/bench_agents.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <queue>
#include <random>
#include <thread>
#include <unordered_set>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/api_client.h"
#include "bench/harness/loopback_http.h"
#include "bench/harness/server_child.h"
#include "common/bench_stats.h"
#include "nlohmann/json.hpp"

namespace tessera::bench {
namespace {

using Json = nlohmann::json;
using agent::ApiClient;
using agent::ApiResponse;

struct BenchFlags {
  int agents = 12500;
  double heartbeat_s = 10;
  double seconds = 60;
  double binds_per_second = 20;
  int poll_timeout_s = 30;
  int register_concurrency = 64;
  std::string dir;
  std::vector<std::string> server_args;
  bool put_heartbeats = false;  // the older GET + PUT of the Node instead of the heartbeat route
  bool no_auth = false;         // --insecure-no-auth instead of a token per agent
};

std::string NodeName(int i) { return absl::StrCat("bench-", i); }

// With authentication on (the default), agent i presents its own node token, as a real agent
// does (role node:bench-i: its Node, its bindings), and the binder an admin token.
std::string AgentToken(int i) { return absl::StrCat("bench-agent-token-", i); }
constexpr char kBinderToken[] = "bench-binder-token";

// The tokens file the server serves with: one node token per agent and the binder's.
bool WriteTokensFile(const std::string& path, int agents) {
  std::ofstream out(path);
  out << kBinderToken << " * admin\n";
  for (int i = 0; i < agents; ++i) out << AgentToken(i) << " * node:" << NodeName(i) << "\n";
  return static_cast<bool>(out.flush());
}

// Each simulated node carries this label with its name, so the binder's jobs can be pinned to
// the agent it picked (spec.nodeSelector) and the real scheduler binds them there.
constexpr char kNodeLabel[] = "bench.tessera.dev/node";

std::string NodeBody(int i, bool with_status) {
  Json node = SimNodeObject(NodeName(i), i, 8);
  node["metadata"]["labels"][kNodeLabel] = NodeName(i);
  if (with_status) {
    Json health = Json::array();
    for (int g = 0; g < 8; ++g) health.push_back({{"index", g}, {"health", "Healthy"}});
    node["status"] = {{"lastHeartbeatTime",
                       absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone())},
                      {"gpus", health}};
  }
  return node.dump();
}

// One HTTP/1.1 connection driven by the epoll loop.
struct Conn {
  enum class Kind { kRegister, kHeartbeat, kWatch };
  Kind kind;
  int agent = 0;
  int fd = -1;
  int step = 0;  // heartbeat: 0 = GET sent, 1 = PUT sent
  std::string out;
  size_t out_off = 0;
  std::string in;
  absl::Time started;
};

struct Shared {
  std::mutex mu;
  std::vector<absl::Time> bind_t0;  // by bind id (binder thread writes, loop reads)
  std::vector<int> bind_node;
};

class Loop {
 public:
  Loop(const BenchFlags& f, int port, Shared& shared)
      : f_(f),
        port_(port),
        shared_(shared),
        rv_(f.agents, 0),
        watch_(f.agents, nullptr),
        seen_(f.agents) {
    ep_ = epoll_create1(EPOLL_CLOEXEC);
  }
  // Closes what is still open (long-polls, heartbeats in flight) when the run ends.
  ~Loop() {
    while (!open_.empty()) Close(*open_.begin());
    close(ep_);
  }

  // Registers every agent, opens its long-poll and schedules its first heartbeat.
  bool Register();
  // Runs until `until`; samples count only after `measure_from`.
  void Run(absl::Time measure_from, absl::Time until);

  std::vector<double> hb_ms, bind_ms;
  int64_t heartbeats = 0, heartbeat_errors = 0, polls = 0, poll_errors = 0, foreign = 0;
  // Heartbeats due in the window that found no connection (connect failed: out of file
  // descriptors or source ports); still in flight when the window ended.
  int64_t heartbeats_not_sent = 0, heartbeats_unanswered = 0;
  std::string first_connect_error;  // why the first connection that could not be opened failed
  int64_t seen_binds = 0;
  int watching = 0;

 private:
  Conn* Open(Conn::Kind kind, int agent, std::string request);
  void Send(Conn* c, std::string request);
  void Close(Conn* c);
  // Handles epoll events of `c` (which may be closed and deleted on return).
  void OnEvent(Conn* c, uint32_t events);
  // Returns false when it closed (deleted) `c`.
  bool OnResponse(Conn* c, int code, const std::string& body);
  void StartWatch(int agent);
  void StartHeartbeat(int agent);
  void Flush(Conn* c);
  // A request of `agent`'s, with its token unless authentication is off.
  std::string Request(int agent, const std::string& method, const std::string& path,
                      const std::string& body, bool close) const {
    return HttpRequest(method, path, body, f_.no_auth ? "" : AgentToken(agent), close);
  }

  const BenchFlags& f_;
  const int port_;
  Shared& shared_;
  int ep_ = -1;
  std::vector<int64_t> rv_;
  std::vector<Conn*> watch_;
  std::unordered_set<Conn*> open_;  // every connection Open made and Close has not deleted
  std::vector<std::vector<bool>> seen_;
  int registered_ = 0, reg_inflight_ = 0;
  bool measuring_ = false;
  std::priority_queue<std::pair<absl::Time, int>, std::vector<std::pair<absl::Time, int>>,
                      std::greater<>>
      due_;
  std::mt19937_64 rng_{42};
};

Conn* Loop::Open(Conn::Kind kind, int agent, std::string request) {
  int fd = ConnectLoopback(port_, agent);
  if (fd < 0) {
    if (first_connect_error.empty()) first_connect_error = std::strerror(errno);
    return nullptr;
  }
  auto* c = new Conn{kind, agent, fd};
  open_.insert(c);
  c->started = absl::Now();
  epoll_event ev{};
  // Edge-triggered: a connected socket is always writable, so level-triggered EPOLLOUT would
  // spin; reads and writes run until EAGAIN instead.
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  ev.data.ptr = c;
  epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev);
  Send(c, std::move(request));
  return c;
}

void Loop::Send(Conn* c, std::string request) {
  c->out = std::move(request);
  c->out_off = 0;
  Flush(c);
}

void Loop::Flush(Conn* c) {
  while (c->out_off < c->out.size()) {
    ssize_t n = write(c->fd, c->out.data() + c->out_off, c->out.size() - c->out_off);
    if (n <= 0) return;  // EAGAIN (or not connected yet): EPOLLOUT brings us back
    c->out_off += n;
  }
}

void Loop::Close(Conn* c) {
  epoll_ctl(ep_, EPOLL_CTL_DEL, c->fd, nullptr);
  close(c->fd);
  if (c->kind == Conn::Kind::kWatch && watch_[c->agent] == c) watch_[c->agent] = nullptr;
  open_.erase(c);
  delete c;
}

void Loop::StartWatch(int agent) {
  std::string path = absl::StrCat("/api/v1/nodes/", NodeName(agent), "/bindings");
  if (rv_[agent] > 0) {
    absl::StrAppend(&path, "?resourceVersion=", rv_[agent], "&timeoutSeconds=", f_.poll_timeout_s);
  }
  if (watch_[agent] == nullptr) {
    watch_[agent] = Open(Conn::Kind::kWatch, agent, Request(agent, "GET", path, "", false));
    if (watch_[agent] == nullptr) ++poll_errors;
  } else {
    Send(watch_[agent], Request(agent, "GET", path, "", false));
  }
  ++polls;
}

void Loop::StartHeartbeat(int agent) {
  std::string request;
  if (f_.put_heartbeats) {
    request = Request(agent, "GET", "/api/v1/nodes/" + NodeName(agent), "", false);
  } else {
    // The real agent's heartbeat: each GPU's health and a fresh utilization sample.
    Json gpus = Json::array();
    std::uniform_int_distribution<int> util(0, 100);
    for (int g = 0; g < 8; ++g) {
      gpus.push_back({{"index", g}, {"health", "Healthy"}, {"utilization", util(rng_)}});
    }
    request = Request(agent, "POST", "/api/v1/nodes/" + NodeName(agent) + "/heartbeat",
                      Json{{"gpus", gpus}}.dump(), /*close=*/true);
  }
  if (Open(Conn::Kind::kHeartbeat, agent, std::move(request)) == nullptr && measuring_) {
    ++heartbeats_not_sent;
  }
}

bool Loop::OnResponse(Conn* c, int code, const std::string& body) {
  switch (c->kind) {
    case Conn::Kind::kRegister:
      --reg_inflight_;
      if (code == 201 || code == 409) {
        ++registered_;
        StartWatch(c->agent);
        std::uniform_real_distribution<double> phase(0, f_.heartbeat_s);
        due_.push({absl::Now() + absl::Seconds(phase(rng_)), c->agent});
      } else {
        std::cerr << "bench agents: register " << NodeName(c->agent) << ": HTTP " << code << "\n";
      }
      Close(c);
      return false;
    case Conn::Kind::kHeartbeat:
      if (code != 200) {
        ++heartbeat_errors;
        Close(c);
        return false;
      }
      if (c->step == 0 && f_.put_heartbeats) {
        c->step = 1;
        Send(c, Request(c->agent, "PUT", "/api/v1/nodes/" + NodeName(c->agent),
                        NodeBody(c->agent, true),
                        /*close=*/true));  // the server closes: its side keeps the TIME_WAIT
        return true;
      }
      if (measuring_) {
        ++heartbeats;
        hb_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - c->started));
      }
      Close(c);
      return false;
    case Conn::Kind::kWatch: {
      if (code != 200) {
        ++poll_errors;
        StartWatch(c->agent);
        return true;
      }
      size_t at = body.rfind("\"resourceVersion\":\"");
      if (at != std::string::npos) {
        int64_t rv = 0;
        size_t from = at + 19;
        if (absl::SimpleAtoi(body.substr(from, body.find('"', from) - from), &rv)) {
          if (rv_[c->agent] == 0) ++watching;
          rv_[c->agent] = rv;
        }
      }
      // Items are jobs named bind-ID.
      for (size_t p = body.find("\"name\":\"bind-"); p != std::string::npos;
           p = body.find("\"name\":\"bind-", p + 1)) {
        size_t from = p + 13;
        int id = 0;
        if (!absl::SimpleAtoi(body.substr(from, body.find('"', from) - from), &id)) continue;
        absl::Time t0;
        int node = -1;
        {
          std::lock_guard<std::mutex> l(shared_.mu);
          if (id < 0 || id >= static_cast<int>(shared_.bind_t0.size())) continue;
          t0 = shared_.bind_t0[id];
          node = shared_.bind_node[id];
        }
        if (node != c->agent) {
          ++foreign;  // the server showed a node someone else's job
          continue;
        }
        std::vector<bool>& s = seen_[c->agent];
        if (static_cast<int>(s.size()) <= id) s.resize(id + 1);
        if (s[id]) continue;
        s[id] = true;
        ++seen_binds;
        bind_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - t0));
      }
      StartWatch(c->agent);
      return true;
    }
  }
  return true;
}

void Loop::OnEvent(Conn* c, uint32_t events) {
  if (events & EPOLLOUT) Flush(c);
  if (!(events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) return;
  const bool eof = DrainSocket(c->fd, events, c->in);
  for (HttpResponse r; TakeHttpResponse(c->in, r);) {
    if (!OnResponse(c, r.code, r.body)) return;  // c is gone
  }
  if (!eof) return;
  // The server closed a connection that still expected an answer.
  switch (c->kind) {
    case Conn::Kind::kRegister:
      --reg_inflight_;
      std::cerr << "bench agents: register " << NodeName(c->agent) << ": connection closed\n";
      Close(c);
      return;
    case Conn::Kind::kHeartbeat:
      ++heartbeat_errors;
      Close(c);
      return;
    case Conn::Kind::kWatch: {
      const int agent = c->agent;
      ++poll_errors;
      Close(c);
      StartWatch(agent);
      return;
    }
  }
}

bool Loop::Register() {
  int next = 0;
  absl::Time deadline = absl::Now() + absl::Minutes(10);
  epoll_event evs[512];
  while (registered_ < f_.agents && absl::Now() < deadline) {
    while (next < f_.agents && reg_inflight_ < f_.register_concurrency) {
      Conn* c = Open(Conn::Kind::kRegister, next,
                     Request(next, "POST", "/api/v1/nodes", NodeBody(next, false), true));
      if (c == nullptr) return false;
      ++reg_inflight_;
      ++next;
    }
    int n = epoll_wait(ep_, evs, 512, 10);
    for (int i = 0; i < n; ++i) OnEvent(static_cast<Conn*>(evs[i].data.ptr), evs[i].events);
  }
  return registered_ == f_.agents;
}

void Loop::Run(absl::Time measure_from, absl::Time until) {
  epoll_event evs[512];
  while (absl::Now() < until) {
    const absl::Time now = absl::Now();
    measuring_ = now >= measure_from;
    while (!due_.empty() && due_.top().first <= now) {
      const int agent = due_.top().second;
      due_.pop();
      StartHeartbeat(agent);
      due_.push({now + absl::Seconds(f_.heartbeat_s), agent});
    }
    int n = epoll_wait(ep_, evs, 512, 5);
    for (int i = 0; i < n; ++i) OnEvent(static_cast<Conn*>(evs[i].data.ptr), evs[i].events);
  }
  for (const Conn* c : open_) {
    if (c->kind == Conn::Kind::kHeartbeat) ++heartbeats_unanswered;
  }
}

int RunBench(const BenchFlags& f) {
  if (f.agents <= 0 || f.heartbeat_s <= 0 || f.seconds <= 0 || f.poll_timeout_s <= 0) {
    std::cerr << "bench agents: --agents, --heartbeat, --seconds and --poll-timeout must be > 0\n";
    return 2;
  }
  // Each agent holds a long-poll connection on both ends; ask for the hard limit.
  const int64_t nofile = RaiseFileLimit();
  if (f.agents + 2000 > nofile) {
    std::cerr << "bench agents: " << f.agents << " agents need ~" << f.agents + 2000
              << " file descriptors per process; the limit is " << nofile << "\n";
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  std::string dir = f.dir;
  bool remove_dir = false;
  if (dir.empty()) {
    const char* tmp = getenv("TMPDIR");
    std::string t = absl::StrCat(tmp ? tmp : "/tmp", "/tessera_bench_agents_XXXXXX");
    if (mkdtemp(t.data()) == nullptr) return 1;
    dir = t;
    remove_dir = true;
  }
  // The real server, as its own process (its CPU and RSS are read from /proc).
  ServerChildOptions so;
  // Only the control plane writes placements (status is its own): the binder's jobs are bound
  // by the server's scheduler, so it runs when there are binds to make.
  so.args = {"--data-dir", dir + "/store"};
  if (f.no_auth) {
    so.args.push_back("--insecure-no-auth");
  } else {
    const std::string tokens = dir + "/tokens";
    if (!WriteTokensFile(tokens, f.agents)) {
      std::cerr << "bench agents: cannot write " << tokens << "\n";
      if (remove_dir) std::filesystem::remove_all(dir);
      return 1;
    }
    so.args.insert(so.args.end(), {"--tokens-file", tokens});
  }
  if (f.binds_per_second <= 0) so.args.push_back("--no-scheduler");
  for (const std::string& a : f.server_args) so.args.push_back(a);
  so.log_path = dir + "/server.log";
  absl::StatusOr<std::unique_ptr<ServerChild>> child = ServerChild::Start(so);
  if (!child.ok()) {
    std::cerr << "bench agents: " << child.status().message() << "\n";
    if (remove_dir) std::filesystem::remove_all(dir);
    return 1;
  }
  const pid_t server = (*child)->pid();
  const int port = (*child)->port();
  const std::string load_before = LoadAvg();
  Shared shared;
  Loop loop(f, port, shared);
  const absl::Time t_reg = absl::Now();
  const bool registered = loop.Register();
  const absl::Duration reg_time = absl::Now() - t_reg;
  int rc = 0;
  Json out;
  if (!registered) {
    std::cerr << "bench agents: not every agent registered\n";
    rc = 1;
  } else {
    // Warm-up: every agent watching and one full heartbeat period, then the measured window.
    const absl::Time measure_from = absl::Now() + absl::Seconds(f.heartbeat_s);
    const absl::Time until = measure_from + absl::Seconds(f.seconds);
    std::atomic<bool> stop{false};
    double cpu0 = 0, cpu1 = 0;
    std::thread binder([&] {
      ApiClient api(absl::StrCat("127.0.0.1:", port), f.no_auth ? "" : kBinderToken);
      std::mt19937_64 rng(7);
      absl::SleepFor(measure_from - absl::Now());
      cpu0 = ProcCpuSeconds(server);
      const absl::Duration every = absl::Seconds(1.0 / std::max(0.01, f.binds_per_second));
      absl::Time next = absl::Now();
      for (int id = 0; f.binds_per_second > 0 && !stop && absl::Now() < until - absl::Seconds(2);
           ++id) {
        absl::SleepFor(next - absl::Now());
        next += every;
        const int node = static_cast<int>(rng() % f.agents);
        Json job = {{"apiVersion", "tessera.dev/v1"},
                    {"kind", "TrainingJob"},
                    {"metadata", {{"name", absl::StrCat("bind-", id)}, {"namespace", "bench"}}},
                    {"spec",
                     {{"command", {"/bin/true"}},
                      {"nodeSelector", {{kNodeLabel, NodeName(node)}}},
                      {"groups", {{{"name", "w"}, {"count", 1}, {"gpusPerReplica", 1}}}}}}};
        {
          std::lock_guard<std::mutex> l(shared.mu);
          shared.bind_t0.push_back(absl::Now());
          shared.bind_node.push_back(node);
        }
        absl::StatusOr<ApiResponse> r = api.Post("/api/v1/namespaces/bench/trainingjobs", job);
        if (!r.ok() || r->code != 201) std::cerr << "bench agents: bind " << id << " failed\n";
      }
    });
    loop.Run(measure_from, until);
    cpu1 = ProcCpuSeconds(server);
    stop = true;
    binder.join();
    const double window = f.seconds;
    int64_t binds = 0;
    {
      std::lock_guard<std::mutex> l(shared.mu);
      binds = static_cast<int64_t>(shared.bind_t0.size());
    }
    out = {{"benchmark", "agents"},
           {"agents", f.agents},
           {"heartbeat_s", f.heartbeat_s},
           {"heartbeat_request", f.put_heartbeats ? "GET + PUT node" : "POST heartbeat"},
           {"auth", f.no_auth ? "none" : "a node token per agent"},
           {"poll_timeout_s", f.poll_timeout_s},
           {"window_s", window},
           {"register_all_s", absl::ToDoubleSeconds(reg_time)},
           {"agents_watching", loop.watching},
           {"server_cpu_s_per_s", (cpu1 - cpu0) / window},
           {"server_rss_mib", ProcStatusField(server, "VmRSS") / 1024.0},
           {"server_peak_rss_mib", ProcStatusField(server, "VmHWM") / 1024.0},
           {"server_threads", ProcStatusField(server, "Threads")},
           {"heartbeats", loop.heartbeats},
           {"heartbeats_per_s", loop.heartbeats / window},
           {"heartbeat_errors", loop.heartbeat_errors},
           {"heartbeats_offered", static_cast<int64_t>(f.agents * (window / f.heartbeat_s))},
           {"heartbeats_not_sent", loop.heartbeats_not_sent},
           {"heartbeats_unanswered_at_end", loop.heartbeats_unanswered},
           {"first_connect_error", loop.first_connect_error},
           {"heartbeat_ms_p50", Percentile(loop.hb_ms, 0.5)},
           {"heartbeat_ms_p99", Percentile(loop.hb_ms, 0.99)},
           {"binds", binds},
           {"binds_seen", loop.seen_binds},
           {"bind_seen_ms_p50", Percentile(loop.bind_ms, 0.5)},
           {"bind_seen_ms_p99", Percentile(loop.bind_ms, 0.99)},
           {"foreign_bindings_seen", loop.foreign},
           {"polls", loop.polls},
           {"poll_errors", loop.poll_errors},
           {"client_cpu_s_per_s",
            ProcCpuSeconds(getpid()) / absl::ToDoubleSeconds(absl::Now() - t_reg)},
           {"client_peak_rss_mib", PeakRssMb()},
           {"loadavg_before", load_before},
           {"loadavg_after", LoadAvg()}};
  }
  (*child)->Stop();
  if (rc == 0) std::cout << out.dump(2) << std::endl;
  if (remove_dir) std::filesystem::remove_all(dir);
  return rc;
}

}  // namespace

void RegisterAgentsBenchCommand(CLI::App& bench) {
  auto f = std::make_shared<BenchFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "agents", "N simulated node agents (register, heartbeat, bindings long-poll) vs a server");
  cmd->add_option("--agents", f->agents, "Simulated agents (default 12500)");
  cmd->add_option("--heartbeat", f->heartbeat_s, "Heartbeat period, seconds (default 10)");
  cmd->add_option("--seconds", f->seconds, "Measured window, seconds (default 60)");
  cmd->add_option("--binds-per-second", f->binds_per_second,
                  "New one-GPU jobs pinned to random agents per second, bound by the server's "
                  "scheduler (default 20; 0: no jobs, the server runs --no-scheduler)");
  cmd->add_option("--poll-timeout", f->poll_timeout_s,
                  "Bindings long-poll timeout, seconds (default 30)");
  cmd->add_option("--register-concurrency", f->register_concurrency,
                  "Registrations in flight at once (default 64)");
  cmd->add_option("--dir", f->dir, "Server data directory (default: a temporary one, removed)");
  cmd->add_option("--server-arg", f->server_args,
                  "A further flag for the server (repeatable), e.g. --server-arg=--threads=8");
  cmd->add_flag("--no-auth", f->no_auth,
                "Serve with --insecure-no-auth (default: a tokens file with a node token per "
                "agent, each agent presenting its own, and an admin token for the binder)");
  cmd->add_flag("--put-heartbeats", f->put_heartbeats,
                "Heartbeat as GET + PUT of the Node (servers before the heartbeat route)");
  cmd->callback([f] {
    if (int rc = RunBench(*f); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace tessera::bench
