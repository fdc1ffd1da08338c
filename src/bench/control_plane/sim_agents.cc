#include "bench/control_plane/sim_agents.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <deque>
#include <iostream>
#include <queue>
#include <random>
#include <unordered_set>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "api/member_status.h"
#include "bench/harness/loopback_http.h"
#include "model/job.h"
#include "nlohmann/json.hpp"

namespace tessera::bench {
namespace {

using Json = nlohmann::json;

enum Kind { kRegister, kHeartbeat, kWatch, kReport };

// A report write is retried this often (409 / 429 / 5xx / connection lost) before it counts as
// an error.
constexpr int kReportTries = 8;

std::string Str(const Json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

const Json& Sub(const Json& o, const char* key) {
  static const Json kNull;
  auto it = o.find(key);
  return it == o.end() ? kNull : *it;
}

int64_t Int(const Json& o, const char* key, int64_t def) {
  auto it = o.find(key);
  return it != o.end() && it->is_number_integer() ? it->get<int64_t>() : def;
}

}  // namespace

// One HTTP/1.1 connection driven by the loop.
struct SimAgents::Conn {
  int kind = kRegister;
  int agent = 0;
  int fd = -1;
  int slot = -1;      // kReport: its index in the pool
  bool busy = false;  // a request is waiting for its answer
  std::string out;
  size_t out_off = 0;
  std::string in;
};

// A members' report on its way: who sends it and what.
struct SimAgents::Report {
  int agent = 0;
  std::string job;
  int members = 0;
  std::string request;
  int tries = 0;
};

struct SimAgents::State {
  std::vector<int64_t> rv;                                 // per agent: last bindings revision
  std::vector<Conn*> watch;                                // per agent
  std::vector<absl::flat_hash_set<std::string>> reported;  // per agent: "job/generation"
  std::vector<char> double_booked;                         // per agent
  std::vector<Conn*> pool;                                 // report connections (null: closed)
  std::vector<Report> in_flight;                           // by pool slot
  std::deque<Report> reports;                              // waiting for a connection
  std::unordered_set<Conn*> open;                          // every live connection
  // (when, agent, what): 0 heartbeat, 1 re-issue the long-poll
  std::priority_queue<std::tuple<absl::Time, int, int>,
                      std::vector<std::tuple<absl::Time, int, int>>, std::greater<>>
      due;
  std::mt19937_64 rng{42};
};

std::string SimAgents::NodeName(int i) { return absl::StrCat("sim-", i); }

SimAgents::SimAgents(SimAgentsOptions options) : o_(std::move(options)) {}

SimAgents::~SimAgents() { Stop(); }

void SimAgents::Start() {
  thread_ = std::thread([this] { Loop(); });
}

absl::Status SimAgents::WaitRegistered(absl::Duration timeout) {
  std::unique_lock<std::mutex> l(mu_);
  if (!cv_.wait_for(l, absl::ToChronoSeconds(timeout), [&] { return registration_over_; })) {
    return absl::UnavailableError("agents: registration did not finish in time");
  }
  if (!registered_all_) return absl::UnavailableError("agents: not every node registered");
  return absl::OkStatus();
}

void SimAgents::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

SimAgents::Conn* SimAgents::Open(int kind, int agent, std::string request) {
  int fd = ConnectLoopback(o_.port, agent);
  if (fd < 0) return nullptr;
  auto* c = new Conn;
  c->kind = kind;
  c->agent = agent;
  c->fd = fd;
  epoll_event ev{};
  // Edge-triggered: a connected socket is always writable, so level-triggered EPOLLOUT would
  // spin; reads and writes run until EAGAIN instead.
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  ev.data.ptr = c;
  epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev);
  s_->open.insert(c);
  if (!request.empty()) Send(c, std::move(request));
  return c;
}

void SimAgents::Send(Conn* c, std::string request) {
  c->out = std::move(request);
  c->out_off = 0;
  c->busy = true;
  Flush(c);
}

void SimAgents::Flush(Conn* c) {
  while (c->out_off < c->out.size()) {
    ssize_t n = write(c->fd, c->out.data() + c->out_off, c->out.size() - c->out_off);
    if (n <= 0) return;  // EAGAIN (or not connected yet): EPOLLOUT brings us back
    c->out_off += n;
  }
}

void SimAgents::Close(Conn* c) {
  epoll_ctl(ep_, EPOLL_CTL_DEL, c->fd, nullptr);
  close(c->fd);
  if (c->kind == kWatch && s_->watch[c->agent] == c) s_->watch[c->agent] = nullptr;
  if (c->kind == kReport && s_->pool[c->slot] == c) s_->pool[c->slot] = nullptr;
  s_->open.erase(c);
  delete c;
}

void SimAgents::StartWatch(int agent) {
  std::string path = absl::StrCat("/api/v1/nodes/", NodeName(agent), "/bindings");
  if (s_->rv[agent] > 0) {
    absl::StrAppend(&path, "?resourceVersion=", s_->rv[agent],
                    "&timeoutSeconds=", o_.poll_timeout_s);
  }
  std::string req = HttpRequest("GET", path, "", o_.tokens[agent], false);
  ++stats_.polls;
  if (s_->watch[agent] == nullptr) {
    s_->watch[agent] = Open(kWatch, agent, std::move(req));
    if (s_->watch[agent] == nullptr) {
      ++stats_.poll_errors;
      s_->due.emplace(absl::Now() + absl::Seconds(1), agent, 1);
    }
  } else {
    Send(s_->watch[agent], std::move(req));
  }
}

void SimAgents::StartHeartbeat(int agent) {
  // The real agent's heartbeat: each GPU's health and a fresh utilization sample.
  Json gpus = Json::array();
  std::uniform_int_distribution<int> util(0, 100);
  for (int g = 0; g < o_.gpus_per_node; ++g) {
    gpus.push_back({{"index", g}, {"health", "Healthy"}, {"utilization", util(s_->rng)}});
  }
  if (Open(kHeartbeat, agent,
           HttpRequest("POST", absl::StrCat("/api/v1/nodes/", NodeName(agent), "/heartbeat"),
                       Json{{"gpus", gpus}}.dump(), o_.tokens[agent], /*close=*/true)) == nullptr) {
    ++stats_.heartbeat_errors;
  }
}

void SimAgents::OnBindings(int agent, const std::string& body) {
  Json doc = Json::parse(body, nullptr, false);
  if (!doc.is_object()) {
    ++stats_.poll_errors;
    return;
  }
  const Json& meta = Sub(doc, "metadata");
  int64_t rv = 0;
  if (absl::SimpleAtoi(Str(meta, "resourceVersion"), &rv)) s_->rv[agent] = rv;
  if (Sub(meta, "unchanged") == true) return;
  const std::string me = NodeName(agent);
  std::vector<std::string> owner(o_.gpus_per_node);
  const absl::Time now = absl::Now();
  const Json& items = Sub(doc, "items");
  if (!items.is_array()) return;
  for (const Json& job : items) {
    const Json& jmeta = Sub(job, "metadata");
    const Json& st = Sub(job, "status");
    const std::string name = Str(jmeta, "name");
    const int64_t gen = Int(st, "generation", 0);
    const Json& placement = Sub(st, "placement");
    if (!placement.is_array()) continue;
    Json entries = Json::array();
    for (const Json& m : placement) {
      if (Str(m, "node") != me || Int(m, "generation", gen) != gen) continue;
      const Json& gpus = Sub(m, "gpus");
      for (const Json& g : gpus.is_array() ? gpus : Json::array()) {
        if (!g.is_number_integer()) continue;
        const int i = g.get<int>();
        if (i < 0 || i >= o_.gpus_per_node) continue;
        if (!owner[i].empty() && owner[i] != name && !s_->double_booked[agent]) {
          s_->double_booked[agent] = 1;
          ++stats_.nodes_double_booked;
        }
        owner[i] = name;
      }
      api::MemberStatus e;
      e.member = model::MemberKey(Str(m, "group"), Int(m, "member", 0));
      e.generation = gen;
      e.state = api::MemberState::kRunning;
      e.time = now;
      entries.push_back(api::ToJson(e));
    }
    if (entries.empty() || !s_->reported[agent].insert(absl::StrCat(name, "/", gen)).second) {
      continue;
    }
    stats_.members_seen += static_cast<int64_t>(entries.size());
    JobReports& jr = jobs_[name];
    jr.members = static_cast<int>(placement.size());
    jr.first_seen = std::min(jr.first_seen, now);
    Report r;
    r.agent = agent;
    r.job = name;
    r.members = static_cast<int>(entries.size());
    r.request = HttpRequest("PUT",
                            absl::StrCat("/api/v1/namespaces/", Str(jmeta, "namespace"),
                                         "/trainingjobs/", name, "/status"),
                            Json{{"status", {{"members", std::move(entries)}}}}.dump(),
                            o_.tokens[agent], false);
    ++stats_.reports;
    s_->reports.push_back(std::move(r));
  }
}

void SimAgents::RetryReport(Report r) {
  if (++r.tries >= kReportTries) {
    ++stats_.report_errors;
    std::cerr << "bench control-plane: report of " << r.job << " by " << NodeName(r.agent)
              << " failed " << kReportTries << " times\n";
    return;
  }
  ++stats_.report_retries;
  s_->reports.push_back(std::move(r));
}

void SimAgents::DispatchReports() {
  for (size_t slot = 0; slot < s_->pool.size() && !s_->reports.empty(); ++slot) {
    Conn* c = s_->pool[slot];
    if (c != nullptr && c->busy) continue;
    Report r = std::move(s_->reports.front());
    s_->reports.pop_front();
    std::string req = r.request;
    s_->in_flight[slot] = std::move(r);
    if (c == nullptr) {
      c = Open(kReport, s_->in_flight[slot].agent, "");
      if (c == nullptr) {
        RetryReport(std::move(s_->in_flight[slot]));
        continue;
      }
      c->slot = static_cast<int>(slot);
      s_->pool[slot] = c;
    }
    Send(c, std::move(req));
  }
}

bool SimAgents::OnResponse(Conn* c, int code, const std::string& body) {
  c->busy = false;
  switch (c->kind) {
    case kRegister: {
      const int agent = c->agent;
      if (code == 201 || code == 409) {
        ++stats_.registered;
        StartWatch(agent);
        if (o_.heartbeat > absl::ZeroDuration()) {
          std::uniform_real_distribution<double> phase(0, absl::ToDoubleSeconds(o_.heartbeat));
          s_->due.emplace(absl::Now() + absl::Seconds(phase(s_->rng)), agent, 0);
        }
      } else {
        ++stats_.register_errors;
        std::cerr << "bench control-plane: register " << NodeName(agent) << ": HTTP " << code << " "
                  << body.substr(0, 300) << "\n";
      }
      Close(c);
      return false;
    }
    case kHeartbeat:
      if (code == 200) {
        ++stats_.heartbeats;
      } else {
        ++stats_.heartbeat_errors;
      }
      Close(c);
      return false;
    case kWatch:
      if (code == 200) {
        OnBindings(c->agent, body);
        StartWatch(c->agent);
      } else {
        // 429: too many long-polls; anything else is unexpected. Either way, again in a second.
        ++stats_.poll_errors;
        s_->due.emplace(absl::Now() + absl::Seconds(1), c->agent, 1);
      }
      return true;
    case kReport: {
      Report r = std::move(s_->in_flight[c->slot]);
      if (code == 200) {
        ++stats_.reports_ok;
        JobReports& jr = jobs_[r.job];
        if (jr.members_reported == 0) jr.first_reported = absl::Now();
        jr.members_reported += r.members;
      } else if (code == 409 || code == 429 || code >= 500) {
        RetryReport(std::move(r));
      } else {
        ++stats_.report_errors;
        std::cerr << "bench control-plane: report of " << r.job << " by " << NodeName(r.agent)
                  << ": HTTP " << code << " " << body.substr(0, 300) << "\n";
      }
      return true;
    }
  }
  return true;
}

void SimAgents::OnEvent(Conn* c, uint32_t events) {
  if (events & EPOLLOUT) Flush(c);
  if (!(events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) return;
  const bool eof = DrainSocket(c->fd, events, c->in);
  for (HttpResponse r; TakeHttpResponse(c->in, r);) {
    if (!OnResponse(c, r.code, r.body)) return;  // c is gone
  }
  if (!eof) return;
  // The server closed the connection; what was asked on it and not answered is asked again.
  const int agent = c->agent;
  const bool busy = c->busy;
  switch (c->kind) {
    case kRegister:
      ++stats_.register_errors;
      std::cerr << "bench control-plane: register " << NodeName(agent) << ": connection closed\n";
      Close(c);
      return;
    case kHeartbeat:
      ++stats_.heartbeat_errors;
      Close(c);
      return;
    case kWatch:
      ++stats_.poll_errors;
      Close(c);
      StartWatch(agent);
      return;
    case kReport: {
      const int slot = c->slot;
      Close(c);
      if (busy) RetryReport(std::move(s_->in_flight[slot]));
      return;
    }
  }
}

void SimAgents::Loop() {
  s_ = std::make_unique<State>();
  s_->rv.assign(o_.nodes, 0);
  s_->watch.assign(o_.nodes, nullptr);
  s_->reported.resize(o_.nodes);
  s_->double_booked.assign(o_.nodes, 0);
  s_->pool.assign(std::max(1, o_.report_connections), nullptr);
  s_->in_flight.resize(s_->pool.size());
  ep_ = epoll_create1(EPOLL_CLOEXEC);
  epoll_event evs[512];
  auto poll_once = [&](int ms) {
    int n = epoll_wait(ep_, evs, 512, ms);
    for (int i = 0; i < n; ++i) OnEvent(static_cast<Conn*>(evs[i].data.ptr), evs[i].events);
  };
  // Registration, register_concurrency at a time.
  int next = 0, done = 0;
  while (!stop_ && done < o_.nodes) {
    int inflight = 0;
    for (Conn* c : s_->open) inflight += c->kind == kRegister ? 1 : 0;
    while (next < o_.nodes && inflight < o_.register_concurrency) {
      Json node = SimNodeObject(NodeName(next), next, o_.gpus_per_node);
      if (Open(kRegister, next,
               HttpRequest("POST", "/api/v1/nodes", node.dump(), o_.tokens[next], true)) ==
          nullptr) {
        ++stats_.register_errors;
      }
      ++next;
      ++inflight;
    }
    poll_once(10);
    done = static_cast<int>(stats_.registered + stats_.register_errors);
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    registration_over_ = true;
    registered_all_ = stats_.registered == o_.nodes;
  }
  cv_.notify_all();
  while (!stop_) {
    const absl::Time now = absl::Now();
    while (!s_->due.empty() && std::get<0>(s_->due.top()) <= now) {
      auto [when, agent, what] = s_->due.top();
      s_->due.pop();
      if (what == 0) {
        StartHeartbeat(agent);
        s_->due.emplace(now + o_.heartbeat, agent, 0);
      } else if (s_->watch[agent] == nullptr || !s_->watch[agent]->busy) {
        StartWatch(agent);
      }
    }
    DispatchReports();
    poll_once(2);
  }
  std::vector<Conn*> all(s_->open.begin(), s_->open.end());
  for (Conn* c : all) Close(c);
  close(ep_);
  ep_ = -1;
}

}  // namespace tessera::bench
