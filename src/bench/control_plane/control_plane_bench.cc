// `tessera bench control-plane` (control_plane_bench.h):
//   1. a temporary directory with a tokens file (one admin token, one node token per node) and
//      the store; `tessera server --tokens-file ... --data-dir ...` started as a child process
//      (server_child.h) with its controller on, as shipped;
//   2. the simulated agents register their nodes with their node tokens and keep their bindings
//      long-polls and heartbeats going (sim_agents.h); the bench waits until the controller
//      counts every GPU (`tessera_gpus_capacity` on /metrics);
//   3. an admin watch on the bench namespace's TrainingJobs timestamps each job's first bound
//      phase (Scheduled, as written by the controller) and its Running (written by the
//      controller once the agents' member reports were accepted);
//   4. --clients threads submit the jobs (single-GPU, 8-GPU, 64-GPU gangs of 8 x 8, shuffled)
//      through POST on keep-alive connections (agent::ApiClient), at --rate or as fast as the
//      server answers, each submission timestamped before it is sent;
//   5. when every job runs, or after --seconds, the server's /metrics and /proc are read, every
//      job's placement is listed and checked (members, GPUs, no GPU in two placements), and one
//      JSON object is printed. The server is stopped and the directory removed.
#include "bench/control_plane/control_plane_bench.h"

#include <httplib.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/api_client.h"
#include "bench/control_plane/sim_agents.h"
#include "bench/harness/server_child.h"
#include "common/bench_stats.h"
#include "nlohmann/json.hpp"

namespace tessera::bench {
namespace {

using Json = nlohmann::json;

struct Flags {
  int nodes = 12500;
  int gpus_per_node = 8;
  int single = 20000;
  int eight = 4000;
  int gangs = 500;
  int clients = 8;
  int batch = 1;    // jobs per request: 1 posts each job, more go through POST /api/v1/batch
  double rate = 0;  // submissions per second; 0: as fast as the server answers
  double seconds = 120;
  double heartbeat_s = 10;
  double ready_timeout_s = 300;  // for the controller to count every registered GPU
  int poll_timeout_s = 30;
  int register_concurrency = 64;
  int report_connections = 64;
  std::string server_binary = "/proc/self/exe";
  std::string dir;
  std::string store = "sqlite";  // the server's --store: sqlite, or etcd://HOST:PORT[/prefix]
};

// The three job sizes.
enum Size { kSingle = 0, kEight = 1, kGang = 2 };
constexpr const char* kSizeName[] = {"single_gpu", "eight_gpu", "gang_64_gpu"};
constexpr int kMembers[] = {1, 1, 8};
constexpr int kGpusPerMember[] = {1, 8, 8};
constexpr const char* kNamespace = "bench";

std::string JobName(int id) { return absl::StrCat("cp-", id); }

// The id of a job named by JobName, or -1.
int JobId(const std::string& name) {
  int id = -1;
  if (name.size() < 4 || name.compare(0, 3, "cp-") != 0 || !absl::SimpleAtoi(name.substr(3), &id)) {
    return -1;
  }
  return id;
}

Json JobObject(int id, Size size) {
  return {
      {"apiVersion", "tessera.dev/v1"},
      {"kind", "TrainingJob"},
      {"metadata", {{"name", JobName(id)}, {"namespace", kNamespace}}},
      {"spec",
       {{"command", {"/bin/true"}},
        {"groups",
         {{{"name", "w"}, {"count", kMembers[size]}, {"gpusPerReplica", kGpusPerMember[size]}}}}}}};
}

// Every flag error at once, each naming its flag.
std::vector<std::string> Validate(const Flags& f) {
  std::vector<std::string> errs;
  if (f.nodes <= 0) errs.push_back("--nodes must be > 0");
  if (f.gpus_per_node < 8 || f.gpus_per_node > 64) {
    errs.push_back("--gpus-per-node must be in [8, 64] (8-GPU jobs and gang members)");
  }
  if (f.single < 0 || f.eight < 0 || f.gangs < 0) {
    errs.push_back("--single, --eight and --gangs must be >= 0");
  }
  if (f.single + f.eight + f.gangs <= 0) errs.push_back("--single, --eight, --gangs: no jobs");
  if (f.clients <= 0) errs.push_back("--clients must be > 0");
  if (f.batch <= 0 || f.batch > 1000) errs.push_back("--batch must be in [1, 1000]");
  if (f.rate < 0) errs.push_back("--rate must be >= 0");
  if (f.seconds <= 0) errs.push_back("--seconds must be > 0");
  if (f.heartbeat_s < 0) errs.push_back("--heartbeat must be >= 0");
  if (f.poll_timeout_s <= 0) errs.push_back("--poll-timeout must be > 0");
  if (f.ready_timeout_s <= 0) errs.push_back("--ready-timeout must be > 0");
  if (f.register_concurrency <= 0) errs.push_back("--register-concurrency must be > 0");
  if (f.report_connections <= 0) errs.push_back("--report-connections must be > 0");
  const int64_t need = int64_t{f.single} + 8LL * f.eight + 64LL * f.gangs;
  const int64_t have = int64_t{f.nodes} * f.gpus_per_node;
  if (f.nodes > 0 && need > have) {
    errs.push_back(absl::StrCat("the jobs need ", need, " GPUs, --nodes x --gpus-per-node is ",
                                have, " (jobs do not finish in this benchmark)"));
  }
  return errs;
}

std::string RandomHex(std::mt19937_64& rng) {
  return absl::StrCat(absl::Hex(rng(), absl::kZeroPad16));
}

// The server's /metrics, summed by series name (labels dropped), as an admin.
std::map<std::string, double> Scrape(int port, const std::string& token) {
  std::map<std::string, double> out;
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60, 0);
  auto r = c.Get("/metrics", {{"Authorization", "Bearer " + token}});
  if (!r || r->status != 200) return out;
  size_t pos = 0;
  const std::string& t = r->body;
  while (pos < t.size()) {
    size_t eol = t.find('\n', pos);
    if (eol == std::string::npos) eol = t.size();
    if (t[pos] != '#') {
      size_t sp = t.rfind(' ', eol);
      size_t name_end = std::min(t.find('{', pos), t.find(' ', pos));
      double v = 0;
      if (sp != std::string::npos && sp > pos && name_end <= sp &&
          absl::SimpleAtod(t.substr(sp + 1, eol - sp - 1), &v)) {
        std::string key = t.substr(pos, name_end - pos);
        // Two labelled series the benchmark reads by label.
        if (t.compare(name_end, 20, "{result=\"scheduled\"}") == 0) key += "{scheduled}";
        out[key] += v;
      }
    }
    pos = eol + 1;
  }
  return out;
}

double Get(const std::map<std::string, double>& m, const std::string& k) {
  auto it = m.find(k);
  return it == m.end() ? 0 : it->second;
}

// Per job: when it was submitted, first seen bound, first seen Running.
struct Tracker {
  explicit Tracker(size_t n)
      : size(n),
        submitted(n, absl::InfiniteFuture()),
        bound(n, absl::InfiniteFuture()),
        running(n, absl::InfiniteFuture()) {}
  std::vector<Size> size;
  std::vector<absl::Time> submitted;  // written by the submitter of the job
  std::vector<absl::Time> bound;      // written by the watcher
  std::vector<absl::Time> running;    // written by the watcher
  std::atomic<int64_t> n_submitted{0}, n_bound{0}, n_running{0}, submit_errors{0};
};

// The admin watch on the bench namespace's TrainingJobs; resumes from the last resourceVersion
// when its stream ends. Stop() ends it (httplib::Client::stop is callable from another thread).
class Watcher {
 public:
  Watcher(int port, std::string token, int64_t from, Tracker& t)
      : cli_("127.0.0.1", port), token_(std::move(token)), rv_(from), t_(t) {
    cli_.set_read_timeout(60, 0);
    thread_ = std::thread([this] { Run(); });
  }
  ~Watcher() { Stop(); }
  void Stop() {
    stop_ = true;
    cli_.stop();
    if (thread_.joinable()) thread_.join();
  }
  int64_t restarts() const { return restarts_; }

 private:
  void Run() {
    const httplib::Headers h = {{"Authorization", "Bearer " + token_}};
    while (!stop_) {
      std::string buf;
      cli_.Get(
          absl::StrCat("/api/v1/namespaces/", kNamespace,
                       "/trainingjobs?watch=true&allowWatchBookmarks=true&resourceVersion=", rv_),
          h, [&](const char* data, size_t len) {
            buf.append(data, len);
            size_t start = 0;
            for (size_t nl; (nl = buf.find('\n', start)) != std::string::npos; start = nl + 1) {
              OnLine(buf.substr(start, nl - start));
            }
            buf.erase(0, start);
            return !stop_.load();
          });
      if (stop_) break;
      ++restarts_;
      absl::SleepFor(absl::Milliseconds(100));
    }
  }

  void OnLine(const std::string& line) {
    if (line.empty()) return;
    const absl::Time now = absl::Now();
    Json ev = Json::parse(line, nullptr, false);
    if (!ev.is_object() || !ev.contains("object")) return;
    const Json& obj = ev["object"];
    const Json meta = obj.value("metadata", Json::object());
    int64_t rv = 0;
    if (absl::SimpleAtoi(meta.value("resourceVersion", std::string()), &rv)) rv_ = rv;
    const int id = JobId(meta.value("name", std::string()));
    if (id < 0 || id >= static_cast<int>(t_.bound.size())) return;
    const std::string phase = obj.value("status", Json::object()).value("phase", std::string());
    const bool bound = phase == "Scheduled" || phase == "Running";
    if (bound && t_.bound[id] == absl::InfiniteFuture()) {
      t_.bound[id] = now;
      ++t_.n_bound;
    }
    if (phase == "Running" && t_.running[id] == absl::InfiniteFuture()) {
      t_.running[id] = now;
      ++t_.n_running;
    }
  }

  httplib::Client cli_;
  const std::string token_;
  int64_t rv_;  // watcher thread only
  Tracker& t_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> restarts_{0};
  std::thread thread_;
};

// Lists every bench job and checks its placement: Running, the members its size asks for, each
// with its GPUs, and no (node, GPU) in two placements.
Json CheckPlacements(int port, const std::string& token, const Flags& f, const Tracker& t) {
  agent::ApiClient api(absl::StrCat("127.0.0.1:", port), token, absl::Seconds(120));
  std::vector<char> used(static_cast<size_t>(f.nodes) * f.gpus_per_node, 0);
  int64_t jobs = 0, running = 0, gpus = 0, double_booked = 0, misplaced = 0;
  std::string cont;
  bool listed = true;
  do {
    std::string path = absl::StrCat("/api/v1/namespaces/", kNamespace, "/trainingjobs?limit=5000");
    if (!cont.empty()) absl::StrAppend(&path, "&continue=", cont);
    absl::StatusOr<agent::ApiResponse> r = api.Get(path);
    if (!r.ok() || r->code != 200) {
      listed = false;
      break;
    }
    for (const Json& job : r->body.value("items", Json::array())) {
      const int id = JobId(job["metadata"].value("name", std::string()));
      if (id < 0 || id >= static_cast<int>(t.size.size())) continue;
      ++jobs;
      const Json st = job.value("status", Json::object());
      if (st.value("phase", std::string()) == "Running") ++running;
      const Json placement = st.value("placement", Json::array());
      const Size size = t.size[id];
      bool ok = static_cast<int>(placement.size()) == kMembers[size];
      for (const Json& m : placement) {
        int node = -1;
        const std::string n = m.value("node", std::string());
        if (n.size() < 5 || !absl::SimpleAtoi(n.substr(4), &node) || node < 0 || node >= f.nodes) {
          ok = false;
          continue;
        }
        const Json g = m.value("gpus", Json::array());
        if (static_cast<int>(g.size()) != kGpusPerMember[size]) ok = false;
        for (const Json& i : g) {
          const int gi = i.is_number_integer() ? i.get<int>() : -1;
          if (gi < 0 || gi >= f.gpus_per_node) {
            ok = false;
            continue;
          }
          char& u = used[static_cast<size_t>(node) * f.gpus_per_node + gi];
          if (u) ++double_booked;
          u = 1;
          ++gpus;
        }
      }
      if (!ok) ++misplaced;
    }
    cont = r->body["metadata"].value("continue", std::string());
  } while (!cont.empty());
  return {{"listed", listed},
          {"jobs", jobs},
          {"running", running},
          {"gpus_bound", gpus},
          {"gpus_double_booked", double_booked},
          {"jobs_misplaced", misplaced}};
}

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

// Jobs per second of `times` (completion instants) counted from `from`: over the whole run
// (the last one) and over the middle 80% (10th to 90th percentile), which leaves out the ramps.
Json Rates(std::vector<absl::Time> times, absl::Time from) {
  std::sort(times.begin(), times.end());
  Json out = {{"per_s", 0}, {"steady_per_s", 0}};
  if (times.empty()) return out;
  const double all = absl::ToDoubleSeconds(times.back() - from);
  if (all > 0) out["per_s"] = static_cast<double>(times.size()) / all;
  const size_t a = times.size() / 10, b = times.size() * 9 / 10;
  const double mid = absl::ToDoubleSeconds(times[b == times.size() ? b - 1 : b] - times[a]);
  if (b > a && mid > 0) out["steady_per_s"] = static_cast<double>(b - a) / mid;
  return out;
}

Json Latencies(const std::vector<double>& ms) {
  return {{"p50", Percentile(ms, 0.5)},
          {"p99", Percentile(ms, 0.99)},
          {"max", ms.empty() ? 0 : *std::max_element(ms.begin(), ms.end())}};
}

// The benchmark in `dir` (which the caller removes).
int RunIn(const Flags& f, const std::string& dir) {
  // Tokens: one admin (the submitters, the watch, /metrics), one per node.
  std::mt19937_64 rng(std::random_device{}());
  const std::string admin = absl::StrCat("admin-", RandomHex(rng));
  std::vector<std::string> node_tokens;
  node_tokens.reserve(f.nodes);
  {
    std::ofstream tokens(dir + "/tokens");
    tokens << admin << " * admin\n";
    for (int i = 0; i < f.nodes; ++i) {
      node_tokens.push_back(absl::StrCat("node-", i, "-", RandomHex(rng)));
      tokens << node_tokens.back() << " * node:" << SimAgents::NodeName(i) << "\n";
    }
    if (!tokens) {
      std::cerr << "bench control-plane: cannot write " << dir << "/tokens\n";
      return 1;
    }
  }
  const std::string load_before = LoadAvg();
  ServerChildOptions so;
  so.binary = f.server_binary;
  so.args = {"--data-dir", dir + "/store", "--tokens-file", dir + "/tokens", "--store", f.store};
  so.log_path = dir + "/server.log";
  absl::StatusOr<std::unique_ptr<ServerChild>> server = ServerChild::Start(so);
  if (!server.ok()) {
    std::cerr << "bench control-plane: " << server.status().message() << "\n";
    return 1;
  }
  const int port = (*server)->port();
  const pid_t pid = (*server)->pid();
  auto fail = [&](const std::string& why) {
    std::cerr << "bench control-plane: " << why << "\n";
    std::ifstream log(dir + "/server.log");
    std::string line, last;
    for (int n = 0; std::getline(log, line) && n < 100000; ++n) last = line;
    if (!last.empty())
      std::cerr << "bench control-plane: the server's last log line: " << last << "\n";
    return 1;
  };

  // Agents: register every node, then long-polls and heartbeats.
  SimAgentsOptions ao;
  ao.port = port;
  ao.nodes = f.nodes;
  ao.gpus_per_node = f.gpus_per_node;
  ao.tokens = node_tokens;
  ao.heartbeat = absl::Seconds(f.heartbeat_s);
  ao.poll_timeout_s = f.poll_timeout_s;
  ao.register_concurrency = f.register_concurrency;
  ao.report_connections = f.report_connections;
  SimAgents agents(ao);
  const absl::Time t_reg = absl::Now();
  agents.Start();
  if (absl::Status s = agents.WaitRegistered(absl::Minutes(10)); !s.ok()) {
    return fail(std::string(s.message()));
  }
  const absl::Duration reg_time = absl::Now() - t_reg;
  // The controller knows every GPU before the first submission.
  const double gpus = static_cast<double>(f.nodes) * f.gpus_per_node;
  const absl::Time ready_deadline = absl::Now() + absl::Seconds(f.ready_timeout_s);
  for (double counted = 0; counted < gpus;
       counted = Get(Scrape(port, admin), "tessera_gpus_capacity")) {
    if (absl::Now() > ready_deadline) {
      // What was measured up to here is a result too: how far the controller got.
      std::cout << Json{{"benchmark", "control-plane"},
                        {"complete", false},
                        {"error", "the controller did not count every GPU in --ready-timeout"},
                        {"nodes", f.nodes},
                        {"register_s", absl::ToDoubleSeconds(reg_time)},
                        {"waited_s", absl::ToDoubleSeconds(absl::Now() - t_reg)},
                        {"gpus", static_cast<int64_t>(gpus)},
                        {"gpus_counted_by_controller", counted},
                        {"server",
                         {{"cpu_s", ProcCpuSeconds(pid)},
                          {"peak_rss_mib", ProcStatusField(pid, "VmHWM") / 1024.0},
                          {"threads", ProcStatusField(pid, "Threads")}}},
                        {"loadavg_before", load_before},
                        {"loadavg_after", LoadAvg()}}
                       .dump(2)
                << std::endl;
      return fail("the controller did not count every GPU");
    }
    absl::SleepFor(absl::Milliseconds(500));
  }
  const absl::Duration ready_time = absl::Now() - t_reg;

  // Jobs, shuffled so that the sizes interleave.
  std::vector<Size> order;
  order.insert(order.end(), f.single, kSingle);
  order.insert(order.end(), f.eight, kEight);
  order.insert(order.end(), f.gangs, kGang);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(1));
  const int total = static_cast<int>(order.size());
  Tracker t(order.size());
  t.size = order;

  agent::ApiClient probe(absl::StrCat("127.0.0.1:", port), admin, absl::Seconds(30));
  absl::StatusOr<agent::ApiResponse> list =
      probe.Get(absl::StrCat("/api/v1/namespaces/", kNamespace, "/trainingjobs?limit=1"));
  int64_t from_rv = 0;
  if (!list.ok() || list->code != 200 ||
      !absl::SimpleAtoi(list->body["metadata"].value("resourceVersion", std::string()), &from_rv)) {
    return fail("cannot list the bench namespace's jobs");
  }
  const std::map<std::string, double> m0 = Scrape(port, admin);
  const double cpu0 = ProcCpuSeconds(pid);
  const double client_cpu0 = ProcCpuSeconds(getpid());
  Watcher watcher(port, admin, from_rv, t);

  const absl::Time t0 = absl::Now();
  const absl::Time deadline = t0 + absl::Seconds(f.seconds);
  std::atomic<int> next{0};
  std::vector<std::thread> submitters;
  for (int c = 0; c < f.clients; ++c) {
    submitters.emplace_back([&] {
      agent::ApiClient api(absl::StrCat("127.0.0.1:", port), admin, absl::Seconds(30));
      const std::string path = absl::StrCat("/api/v1/namespaces/", kNamespace, "/trainingjobs");
      // Each client takes the next --batch ids; a batch is created all or nothing.
      for (int first = next.fetch_add(f.batch); first < total && absl::Now() < deadline;
           first = next.fetch_add(f.batch)) {
        const int end = std::min(total, first + f.batch);
        if (f.rate > 0) absl::SleepFor(t0 + absl::Seconds(first / f.rate) - absl::Now());
        Json items = Json::array();
        for (int id = first; id < end; ++id) items.push_back(JobObject(id, order[id]));
        const absl::Time sent = absl::Now();
        for (int id = first; id < end; ++id) t.submitted[id] = sent;
        absl::StatusOr<agent::ApiResponse> r =
            f.batch == 1 ? api.Post(path, items[0])
                         : api.Post("/api/v1/batch", Json{{"items", std::move(items)}});
        if (r.ok() && r->code == 201) {
          t.n_submitted += end - first;
        } else if (t.submit_errors++ < 5) {
          std::cerr << "bench control-plane: submit " << JobName(first)
                    << (end - first > 1 ? absl::StrCat(" .. ", JobName(end - 1)) : "") << ": "
                    << (r.ok() ? agent::ApiError(*r) : std::string(r.status().message())) << "\n";
        }
      }
    });
  }
  for (std::thread& s : submitters) s.join();
  const absl::Time t_submitted = absl::Now();
  while (absl::Now() < deadline && t.n_running.load() < t.n_submitted.load()) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  // A last look: what was bound by now is counted even if the watch is behind.
  const std::map<std::string, double> m1 = Scrape(port, admin);
  const double cpu1 = ProcCpuSeconds(pid);
  const double client_cpu1 = ProcCpuSeconds(getpid());
  const absl::Time t_end = absl::Now();
  watcher.Stop();
  const int64_t peak_rss_kib = ProcStatusField(pid, "VmHWM");
  const int64_t rss_kib = ProcStatusField(pid, "VmRSS");
  const int64_t threads = ProcStatusField(pid, "Threads");
  const Json placements = CheckPlacements(port, admin, f, t);
  agents.Stop();
  const bool clean_stop = (*server)->Stop();

  // Figures.
  Json by_size = Json::object();
  std::vector<absl::Time> all_bound, all_running;
  const absl::flat_hash_map<std::string, JobReports>& reports = agents.job_reports();
  for (int s = kSingle; s <= kGang; ++s) {
    std::vector<absl::Time> bound, running;
    std::vector<double> to_bound, to_running, to_seen, reported_to_running;
    int64_t count = 0;
    for (int id = 0; id < total; ++id) {
      if (order[id] != s) continue;
      ++count;
      if (t.bound[id] != absl::InfiniteFuture()) {
        bound.push_back(t.bound[id]);
        to_bound.push_back(Ms(t.bound[id] - t.submitted[id]));
      }
      if (t.running[id] != absl::InfiniteFuture()) {
        running.push_back(t.running[id]);
        to_running.push_back(Ms(t.running[id] - t.submitted[id]));
      }
      auto it = reports.find(JobName(id));
      if (it == reports.end()) continue;
      if (t.bound[id] != absl::InfiniteFuture() &&
          it->second.first_seen != absl::InfiniteFuture()) {
        to_seen.push_back(Ms(it->second.first_seen - t.bound[id]));
      }
      // The agent's 200 and the watch's event race: a few ms below zero happen.
      if (t.running[id] != absl::InfiniteFuture() &&
          it->second.first_reported != absl::InfiniteFuture()) {
        reported_to_running.push_back(Ms(t.running[id] - it->second.first_reported));
      }
    }
    Json bound_rate = Rates(bound, t0), running_rate = Rates(running, t0);
    by_size[kSizeName[s]] = {{"jobs", count},
                             {"gpus_per_job", kMembers[s] * kGpusPerMember[s]},
                             {"bound", static_cast<int64_t>(bound.size())},
                             {"running", static_cast<int64_t>(running.size())},
                             {"bound_per_s", bound_rate["per_s"]},
                             {"bound_per_s_steady", bound_rate["steady_per_s"]},
                             {"running_per_s", running_rate["per_s"]},
                             {"running_per_s_steady", running_rate["steady_per_s"]},
                             {"submit_to_bound_ms", Latencies(to_bound)},
                             {"submit_to_running_ms", Latencies(to_running)},
                             {"bound_to_agent_saw_ms", Latencies(to_seen)},
                             {"first_report_to_running_ms", Latencies(reported_to_running)}};
    all_bound.insert(all_bound.end(), bound.begin(), bound.end());
    all_running.insert(all_running.end(), running.begin(), running.end());
  }
  Json bound_rate = Rates(all_bound, t0), running_rate = Rates(all_running, t0);
  const double window = absl::ToDoubleSeconds(t_end - t0);
  const double commits = Get(m1, "tessera_store_durable_commits_total") -
                         Get(m0, "tessera_store_durable_commits_total");
  const double txns = Get(m1, "tessera_store_txns_total") - Get(m0, "tessera_store_txns_total");
  const double bindings = Get(m1, "tessera_scheduling_attempts_total{scheduled}") -
                          Get(m0, "tessera_scheduling_attempts_total{scheduled}");
  // MeteredStore's Txn latency (a group commit's wait included).
  const double commit_s = Get(m1, "tessera_store_commit_latency_seconds_sum") -
                          Get(m0, "tessera_store_commit_latency_seconds_sum");
  const double commit_n = Get(m1, "tessera_store_commit_latency_seconds_count") -
                          Get(m0, "tessera_store_commit_latency_seconds_count");
  const double cycles = Get(m1, "tessera_scheduling_duration_seconds_count{scheduled}") -
                        Get(m0, "tessera_scheduling_duration_seconds_count{scheduled}");
  const SimAgentsStats& as = agents.stats();
  const int64_t n_bound = static_cast<int64_t>(all_bound.size());
  const int64_t n_running = static_cast<int64_t>(all_running.size());
  Json out = {
      {"benchmark", "control-plane"},
      {"complete", n_running == total && placements["jobs_misplaced"] == 0 &&
                       placements["gpus_double_booked"] == 0 && as.nodes_double_booked == 0},
      {"nodes", f.nodes},
      {"gpus_per_node", f.gpus_per_node},
      {"gpus", static_cast<int64_t>(gpus)},
      {"jobs", total},
      {"store_backend", f.store},
      {"clients", f.clients},
      {"batch", f.batch},
      {"rate_limit_per_s", f.rate},
      {"heartbeat_s", f.heartbeat_s},
      {"register_s", absl::ToDoubleSeconds(reg_time)},
      {"fleet_ready_s", absl::ToDoubleSeconds(ready_time)},
      {"submitted", t.n_submitted.load()},
      {"submit_errors", t.submit_errors.load()},
      {"submit_s", absl::ToDoubleSeconds(t_submitted - t0)},
      {"submitted_per_s",
       t.n_submitted.load() / std::max(1e-9, absl::ToDoubleSeconds(t_submitted - t0))},
      {"bound", n_bound},
      {"running", n_running},
      {"window_s", window},
      {"bound_per_s", bound_rate["per_s"]},
      {"bound_per_s_steady", bound_rate["steady_per_s"]},
      {"running_per_s", running_rate["per_s"]},
      {"running_per_s_steady", running_rate["steady_per_s"]},
      {"by_size", by_size},
      {"store",
       {{"txns", txns},
        {"durable_commits", commits},
        {"bindings", bindings},
        {"scheduling_cycles_that_bound", cycles},
        {"bindings_per_cycle", cycles > 0 ? bindings / cycles : 0},
        {"durable_commits_per_binding", bindings > 0 ? commits / bindings : 0},
        {"durable_commits_per_cycle", cycles > 0 ? commits / cycles : 0},
        {"txns_per_durable_commit", commits > 0 ? txns / commits : 0},
        {"txn_latency_ms_mean", commit_n > 0 ? 1000 * commit_s / commit_n : 0}}},
      {"server",
       {{"cpu_s", cpu1 - cpu0},
        {"cpu_s_per_s", window > 0 ? (cpu1 - cpu0) / window : 0},
        {"peak_rss_mib", peak_rss_kib / 1024.0},
        {"rss_mib", rss_kib / 1024.0},
        {"threads", threads},
        {"stopped_cleanly", clean_stop}}},
      {"client",
       {{"cpu_s", client_cpu1 - client_cpu0},
        {"peak_rss_mib", PeakRssMb()},
        {"watch_restarts", watcher.restarts()}}},
      {"agents",
       {{"registered", as.registered},
        {"register_errors", as.register_errors},
        {"polls", as.polls},
        {"poll_errors", as.poll_errors},
        {"members_seen", as.members_seen},
        {"reports", as.reports},
        {"reports_ok", as.reports_ok},
        {"report_retries", as.report_retries},
        {"report_errors", as.report_errors},
        {"heartbeats", as.heartbeats},
        {"heartbeat_errors", as.heartbeat_errors},
        {"nodes_double_booked", as.nodes_double_booked}}},
      {"placements", placements},
      {"loadavg_before", load_before},
      {"loadavg_after", LoadAvg()}};
  std::cout << out.dump(2) << std::endl;
  return 0;
}

int RunBench(const Flags& f) {
  if (std::vector<std::string> errs = Validate(f); !errs.empty()) {
    std::cerr << "bench control-plane: " << absl::StrJoin(errs, "; ") << "\n";
    return 2;
  }
  const int64_t nofile = RaiseFileLimit();
  const int64_t fds_needed = int64_t{f.nodes} + f.report_connections + f.clients + 2000;
  if (fds_needed > nofile) {
    std::cerr << "bench control-plane: " << f.nodes << " agents need ~" << fds_needed
              << " file descriptors per process; the limit is " << nofile << "\n";
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  std::string dir = f.dir;
  const bool remove_dir = dir.empty();
  if (remove_dir) {
    const char* tmp = getenv("TMPDIR");
    std::string t = absl::StrCat(tmp ? tmp : "/tmp", "/tessera_bench_cp_XXXXXX");
    if (mkdtemp(t.data()) == nullptr) {
      std::cerr << "bench control-plane: cannot create a temporary directory\n";
      return 1;
    }
    dir = t;
  } else if (std::error_code ec; !std::filesystem::create_directories(dir, ec) && ec) {
    std::cerr << "bench control-plane: --dir " << dir << ": " << ec.message() << "\n";
    return 1;
  }
  int rc = RunIn(f, dir);
  if (remove_dir) std::filesystem::remove_all(dir);
  return rc;
}

}  // namespace

void RegisterControlPlaneBenchCommand(CLI::App& bench) {
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = bench.add_subcommand(
      "control-plane",
      "Submit -> bound -> running end to end: a real server (auth, SQLite, controller) and "
      "simulated agents with node tokens");
  cmd->add_option("--nodes", f->nodes, "Simulated nodes, each with its agent (default 12500)");
  cmd->add_option("--gpus-per-node", f->gpus_per_node, "GPUs per node (default 8)");
  cmd->add_option("--single", f->single, "Single-GPU jobs (default 20000)");
  cmd->add_option("--eight", f->eight, "8-GPU jobs (default 4000)");
  cmd->add_option("--gangs", f->gangs, "64-GPU gangs, 8 members x 8 GPUs (default 500)");
  cmd->add_option("--clients", f->clients, "Submitting clients, one keep-alive connection each");
  cmd->add_option("--batch", f->batch,
                  "Jobs per request (default 1; more are sent through POST /api/v1/batch)");
  cmd->add_option("--rate", f->rate, "Submissions per second (default 0: as fast as answered)");
  cmd->add_option("--seconds", f->seconds,
                  "Longest wait from the first submission for every job to run (default 120)");
  cmd->add_option("--heartbeat", f->heartbeat_s, "Agent heartbeat period, s (0: none; default 10)");
  cmd->add_option("--ready-timeout", f->ready_timeout_s,
                  "Longest wait after registration for the controller to count every GPU, s "
                  "(default 300)");
  cmd->add_option("--poll-timeout", f->poll_timeout_s,
                  "Bindings long-poll timeout, s (default 30)");
  cmd->add_option("--register-concurrency", f->register_concurrency,
                  "Node registrations in flight at once (default 64)");
  cmd->add_option("--report-connections", f->report_connections,
                  "Keep-alive connections the agents' member reports share (default 64)");
  cmd->add_option("--server-binary", f->server_binary,
                  "The tessera binary to run as the server (default: this one)");
  cmd->add_option("--store", f->store,
                  "The server's store: sqlite (default) or etcd://HOST:PORT[/prefix] "
                  "(tessera server --store)");
  cmd->add_option("--dir", f->dir,
                  "Directory for the store, tokens and server log (default: a "
                  "temporary one, removed)");
  cmd->callback([f] {
    if (int rc = RunBench(*f); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace tessera::bench
