// Observability end to end, all real processes on loopback: `tessera server`
// (JSON logs, OTLP export to a receiver inside this test) and one `tessera
// agent` with 8 fake H100s (JSON logs), scraped by a real Prometheus server
// (Debian's package) every second. Asserts through Prometheus' HTTP query API
// that the series exist with the right labels (up for both targets,
// scheduling attempts, API requests by verb and code, DCGM readings per GPU
// with UUID / Hostname and the workload's tessera_job, no exported_job),
// that the OTLP receiver got each decision's spans with parent links, and
// that every line either process logged is one JSON object with the fields
// of the event (job / namespace / node).
//
// Prometheus missing is a failure, not a skip: CI installs it (scripts/setup.sh).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent_process.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "obs/testing/otlp_receiver.h"
#include "server_process.h"
#include "yaml-cpp/yaml.h"

namespace tessera::testing {
namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;

// A loopback port nothing listens on now (bound to 0, read back, closed).
int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

template <typename F>
bool WaitFor(F f, absl::Duration limit) {
  absl::Time end = absl::Now() + limit;
  while (absl::Now() < end) {
    if (f()) return true;
    absl::SleepFor(absl::Milliseconds(200));
  }
  return f();
}

// Every span `otlp` received, each with its request's resource attributes
// merged in (service.name as "_service").
std::vector<Json> Spans(obs::testing::OtlpReceiver& otlp) {
  std::vector<Json> out;
  for (const std::string& b : otlp.bodies()) {
    Json req = Json::parse(b, nullptr, false);
    if (!req.is_object()) continue;
    for (const Json& rs : req["resourceSpans"]) {
      std::string service;
      for (const Json& a : rs["resource"]["attributes"]) {
        if (a["key"] == "service.name") service = a["value"]["stringValue"];
      }
      for (const Json& ss : rs["scopeSpans"]) {
        for (Json sp : ss["spans"]) {
          sp["_service"] = service;
          out.push_back(std::move(sp));
        }
      }
    }
  }
  return out;
}

std::string Attr(const Json& span, const std::string& key) {
  for (const Json& a : span["attributes"]) {
    if (a["key"] != key) continue;
    const Json& v = a["value"];
    if (v.contains("stringValue")) return v["stringValue"];
    if (v.contains("intValue")) return v["intValue"];
    return v.dump();
  }
  return "";
}

class Prometheus {
 public:
  ~Prometheus() { Stop(); }
  // `tokens`: a job's bearer token (the agent's endpoint wants one for /metrics).
  bool Start(const std::string& dir, const std::vector<std::string>& targets_by_job,
             const std::map<std::string, std::string>& tokens = {}) {
    port_ = FreePort();
    std::ofstream cfg(dir + "/prometheus.yml");
    cfg << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        << "rule_files:\n  - " << TESSERA_SOURCE_DIR << "/deploy/prometheus/tessera-alerts.yaml\n"
        << "scrape_configs:\n";
    for (size_t i = 0; i + 1 < targets_by_job.size(); i += 2) {
      cfg << "  - job_name: " << targets_by_job[i] << "\n    static_configs:\n"
          << "      - targets: ['" << targets_by_job[i + 1] << "']\n";
      if (auto t = tokens.find(targets_by_job[i]); t != tokens.end()) {
        cfg << "    authorization:\n      credentials: " << t->second << "\n";
      }
    }
    cfg.close();
    std::vector<std::string> argv_s = {"prometheus", "--config.file=" + dir + "/prometheus.yml",
                                       "--storage.tsdb.path=" + dir + "/tsdb",
                                       absl::StrCat("--web.listen-address=127.0.0.1:", port_),
                                       "--log.level=warn"};
    pid_ = fork();
    if (pid_ == 0) {
      int fd = open((dir + "/prometheus.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      std::vector<char*> argv;
      for (std::string& a : argv_s) argv.push_back(a.data());
      argv.push_back(nullptr);
      execvp(argv[0], argv.data());
      _exit(127);
    }
    client_ = std::make_unique<httplib::Client>("127.0.0.1", port_);
    client_->set_connection_timeout(2, 0);
    client_->set_read_timeout(5, 0);
    return WaitFor(
        [&] {
          auto r = client_->Get("/-/ready");
          return r && r->status == 200;
        },
        absl::Seconds(30));
  }
  void Stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    int st;
    waitpid(pid_, &st, 0);
    pid_ = -1;
  }
  // The `result` array of an instant query (empty on any error).
  Json Query(const std::string& promql) {
    auto r = client_->Get("/api/v1/query", httplib::Params{{"query", promql}}, httplib::Headers{});
    if (!r || r->status != 200) return Json::array();
    Json j = Json::parse(r->body, nullptr, false);
    if (!j.is_object() || j.value("status", "") != "success") return Json::array();
    return j["data"]["result"];
  }
  // Waits until the query returns at least `n` series.
  Json QueryUntil(const std::string& promql, size_t n = 1) {
    Json out = Json::array();
    // Once something failed, ask once: waiting on every later query would
    // only stretch the failure toward the CTest timeout.
    if (::testing::Test::HasFailure()) return Query(promql);
    WaitFor(
        [&] {
          out = Query(promql);
          return out.size() >= n;
        },
        absl::Seconds(30));
    return out;
  }
  Json Get(const std::string& path) {
    auto r = client_->Get(path);
    if (!r || r->status != 200) return Json();
    return Json::parse(r->body, nullptr, false);
  }

 private:
  pid_t pid_ = -1;
  int port_ = -1;
  std::unique_ptr<httplib::Client> client_;
};

// SIGTERM, then up to 20 s for a clean exit (its last log lines); SIGKILL and
// a failure if it hangs. The owner's own Kill() afterwards finds nothing to reap.
void StopGracefully(pid_t pid, const char* what) {
  if (pid <= 0) return;
  kill(pid, SIGTERM);
  int st = 0;
  for (int i = 0; i < 200; ++i) {
    if (waitpid(pid, &st, WNOHANG) == pid) return;
    usleep(100 * 1000);
  }
  ADD_FAILURE() << what << " did not stop within 20 s of SIGTERM";
  kill(pid, SIGKILL);
  waitpid(pid, &st, 0);
}

// Every line of a log file must be one JSON object with ts, level, msg.
std::vector<Json> ParseJsonLog(const std::string& path) {
  std::vector<Json> out;
  std::ifstream in(path);
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    Json j = Json::parse(line, nullptr, false);
    EXPECT_TRUE(j.is_object()) << path << ":" << n << " is not a JSON object: " << line;
    if (!j.is_object()) continue;
    for (const char* k : {"ts", "level", "msg", "component"}) {
      EXPECT_TRUE(j.contains(k) && j[k].is_string()) << path << ":" << n << " lacks " << k;
    }
    out.push_back(std::move(j));
  }
  return out;
}

// The first line matching every key/value of `want` (values compared as JSON).
const Json* FindLine(const std::vector<Json>& lines, const Json& want) {
  for (const Json& l : lines) {
    bool ok = true;
    for (const auto& [k, v] : want.items()) {
      if (!l.contains(k) || l[k] != v) ok = false;
    }
    if (ok) return &l;
  }
  return nullptr;
}

std::string Dump(const std::vector<Json>& lines) {
  std::string out;
  for (const Json& l : lines) out += l.dump() + "\n";
  return out;
}

// The series names the shipped Grafana dashboard and alert rules query: every metric name in
// every panel's and rule's expression (label matchers and label names in `by (...)` are not
// metric names, so the matchers are cut out first and only known prefixes count).
std::set<std::string> DeployedSeries() {
  std::vector<std::string> exprs;
  std::ifstream dash(TESSERA_SOURCE_DIR "/deploy/grafana/tessera-fleet.json");
  const Json d = Json::parse(dash, nullptr, false);
  EXPECT_TRUE(d.is_object()) << "deploy/grafana/tessera-fleet.json is not JSON";
  if (d.is_object()) {
    for (const Json& p : d["panels"]) {
      for (const Json& t : p.value("targets", Json::array())) exprs.push_back(t.value("expr", ""));
    }
  }
  const YAML::Node rules =
      YAML::LoadFile(TESSERA_SOURCE_DIR "/deploy/prometheus/tessera-alerts.yaml");
  for (const YAML::Node& g : rules["groups"]) {
    for (const YAML::Node& r : g["rules"]) exprs.push_back(r["expr"].as<std::string>());
  }
  const std::regex matchers(R"(\{[^}]*\})"), by(R"(\b(by|on|without|ignoring)\s*\([^)]*\))");
  const std::regex metric(R"(\b(tessera_[a-z0-9_]+|DCGM_FI_[A-Z0-9_]+)\b)");
  std::set<std::string> out;
  for (std::string e : exprs) {
    e = std::regex_replace(std::regex_replace(e, matchers, " "), by, " ");
    for (auto it = std::sregex_iterator(e.begin(), e.end(), metric); it != std::sregex_iterator();
         ++it) {
      out.insert((*it)[1]);
    }
  }
  return out;
}

TEST(ObservabilityTest, PrometheusOtlpAndJsonLogsOnARealCluster) {
  ASSERT_FALSE(TesseraBin().empty()) << "TESSERA_BIN is not set";
  ASSERT_EQ(system("command -v prometheus >/dev/null 2>&1"), 0)
      << "prometheus is not installed (scripts/setup.sh installs Debian's prometheus package)";
  const std::string dir = MakeTempDir("tessera_obs");
  ASSERT_FALSE(dir.empty());
  obs::testing::OtlpReceiver otlp;
  ASSERT_GT(otlp.port(), 0);

  ServerProcess server;
  server.set_stderr_path(dir + "/server.log");
  const int port =
      server.Start({"--data-dir", dir + "/store", "--insecure-no-auth", "--log-format", "json",
                    "--otlp-endpoint", absl::StrCat("http://127.0.0.1:", otlp.port())});
  ASSERT_GT(port, 0) << server.error();
  const std::string url = absl::StrCat("http://127.0.0.1:", port);
  httplib::Client api("127.0.0.1", port);

  // The agent's own endpoint wants a token for /fake/event (endpoint_auth.h).
  const std::string agent_token = "obs-agent-endpoint-token";
  std::ofstream(dir + "/agent-tokens") << agent_token << "\n";
  AgentProcess agent;
  ASSERT_TRUE(
      agent.Start({"--endpoint-token-file",
                   dir + "/agent-tokens",
                   "--server",
                   url,
                   "--node-name",
                   "obs-n1",
                   "--backend",
                   "fake",
                   "--fake-config",
                   std::string(TESSERA_SOURCE_DIR) + "/deploy/fake-gpus/up-h100-nvswitch-8.yaml",
                   "--state-dir",
                   dir + "/agent",
                   "--label",
                   "pool=training",
                   "--heartbeat",
                   "1s",
                   "--sync",
                   "300ms",
                   "--sample",
                   "500ms",
                   "--cgroup-parent",
                   "",
                   "--metrics-listen",
                   "127.0.0.1:0",
                   "--log-format",
                   "json"},
                  dir + "/agent.log"))
      << "agent did not start; see " << dir;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto r = api.Get("/api/v1/nodes/obs-n1");
        return r && r->status == 200 &&
               Json::parse(r->body)["status"].value("phase", "") == "Ready";
      },
      absl::Seconds(30)))
      << "node not Ready";

  // A queue with a quota, as the dashboard's queue panels and the over-quota alert assume.
  Json queue = {{"apiVersion", "tessera.dev/v1"},
                {"kind", "Queue"},
                {"metadata", {{"name", "default"}}},
                {"spec", {{"gpuQuota", {{"H100", 16}}}, {"weight", 1}}}};
  auto qr = api.Post("/api/v1/queues", queue.dump(), "application/json");
  ASSERT_TRUE(qr && qr->status == 201) << (qr ? qr->body : "no answer");

  // A job that runs for a few seconds, and one that cannot fit (16 GPUs on an 8-GPU node).
  auto submit = [&](const std::string& name, int gpus, const std::string& script, int count = 1) {
    Json job = {{"apiVersion", "tessera.dev/v1"},
                {"kind", "TrainingJob"},
                {"metadata", {{"name", name}, {"namespace", "obs"}}},
                {"spec",
                 {{"groups", {{{"name", "worker"}, {"count", count}, {"gpusPerReplica", gpus}}}},
                  {"command", {"/bin/sh", "-c", script}}}}};
    auto r = api.Post("/api/v1/namespaces/obs/trainingjobs", job.dump(), "application/json");
    return r ? r->status : -1;
  };
  // "train" runs until the test has seen its GPUs busy in Prometheus (a fixed
  // sleep raced Prometheus' start on a loaded machine), then exits 0.
  const std::string release = dir + "/release-train";
  ASSERT_EQ(submit("train", 2, absl::StrCat("while [ ! -e '", release, "' ]; do sleep 0.2; done")),
            201);
  // Three 8-GPU members on an 8-GPU fleet: each member fits a node, the gang never fits.
  ASSERT_EQ(submit("huge", 8, "true", 3), 201);

  const std::string agent_target = agent.endpoint().substr(std::string("http://").size());
  Prometheus prom;
  ASSERT_TRUE(prom.Start(
      dir, {"tessera-server", absl::StrCat("127.0.0.1:", port), "tessera-agent", agent_target},
      {{"tessera-agent", agent_token}}))
      << "prometheus not ready; see " << dir << "/prometheus.log:\n"
      << Slurp(dir + "/prometheus.log");

  // Both targets scraped and up.
  for (const char* job : {"tessera-server", "tessera-agent"}) {
    Json up = prom.QueryUntil(absl::StrCat("up{job=\"", job, "\"} == 1"));
    ASSERT_EQ(up.size(), 1u) << job << " not up; targets: " << prom.Get("/api/v1/targets").dump();
  }
  // While the job runs: its two GPUs carry the workload labels, and `job`
  // stays Prometheus' target label (no exported_job anywhere).
  Json busy = prom.QueryUntil(
      "max_over_time(DCGM_FI_DEV_GPU_UTIL{tessera_namespace=\"obs\",tessera_job=\"train\"}[5m])",
      2);
  ASSERT_EQ(busy.size(), 2u) << busy.dump();
  for (const Json& s : busy) {
    EXPECT_EQ(s["metric"]["job"], "tessera-agent");
    EXPECT_EQ(s["metric"]["Hostname"], "obs-n1");
  }
  EXPECT_EQ(prom.Query("{exported_job!=\"\"}").size(), 0u);

  // DCGM temperature: one series per GPU, each with its UUID and the node's hostname.
  Json temps = prom.QueryUntil("DCGM_FI_DEV_GPU_TEMP{job=\"tessera-agent\"}", 8);
  ASSERT_EQ(temps.size(), 8u) << temps.dump();
  std::set<std::string> uuids, gpus;
  for (const Json& s : temps) {
    const Json& m = s["metric"];
    ASSERT_TRUE(m.contains("UUID") && m.contains("gpu") && m.contains("modelName")) << m.dump();
    EXPECT_EQ(m["Hostname"], "obs-n1");
    EXPECT_EQ(m["instance"], agent_target);
    uuids.insert(m["UUID"].get<std::string>());
    gpus.insert(m["gpu"].get<std::string>());
  }
  EXPECT_EQ(uuids.size(), 8u);
  EXPECT_EQ(gpus.size(), 8u);

  // Server series: scheduling attempts by result, API requests by verb /
  // resource / code and their latency, store commit latency, allocation by
  // model and pool, node readiness.
  EXPECT_EQ(prom.QueryUntil("tessera_scheduling_attempts_total{job=\"tessera-server\","
                            "result=\"scheduled\"} >= 1")
                .size(),
            1u);
  EXPECT_EQ(
      prom.QueryUntil("tessera_scheduling_attempts_total{result=\"unschedulable\"} >= 1").size(),
      1u);
  EXPECT_EQ(prom.QueryUntil("tessera_api_requests_total{verb=\"create\","
                            "resource=\"trainingjobs\",code=\"201\"} >= 2")
                .size(),
            1u);
  EXPECT_GE(prom.QueryUntil("tessera_api_request_duration_seconds_count{verb=\"create\"}").size(),
            1u);
  EXPECT_EQ(prom.QueryUntil("tessera_store_commit_latency_seconds_count > 0").size(), 1u);
  EXPECT_EQ(prom.QueryUntil("tessera_pool_gpus_capacity{pool=\"training\"} == 8").size(), 1u);
  EXPECT_EQ(prom.QueryUntil("tessera_node_ready{node=\"obs-n1\"} == 1").size(), 1u);
  EXPECT_EQ(prom.QueryUntil("tessera_otlp_spans_exported_total > 0").size(), 1u);
  EXPECT_EQ(prom.Query("tessera_otlp_spans_dropped_total > 0").size(), 0u);
  // The alert rules loaded into the real server.
  Json rules = prom.Get("/api/v1/rules");
  ASSERT_TRUE(rules.is_object());
  EXPECT_GE(rules["data"]["groups"].size(), 1u) << rules.dump();

  { std::ofstream(release) << "done\n"; }
  // The job ends (member exit), then GPU 7 takes an XID 79: both show up in
  // the agent's log, the server's log and the health series.
  ASSERT_TRUE(WaitFor(
      [&] {
        auto r = api.Get("/api/v1/namespaces/obs/trainingjobs/train");
        return r && r->status == 200 &&
               Json::parse(r->body)["status"].value("phase", "") == "Succeeded";
      },
      absl::Seconds(40)))
      << "job did not succeed";
  httplib::Client agent_http(agent.endpoint());
  agent_http.set_bearer_token_auth(agent_token);
  auto inj = agent_http.Post("/fake/event?gpu=7&type=xid&xid=79", "", "text/plain");
  ASSERT_TRUE(inj && inj->status == 200);
  EXPECT_EQ(prom.QueryUntil("tessera_node_gpus_unhealthy{node=\"obs-n1\"} == 1").size(), 1u);
  EXPECT_EQ(prom.QueryUntil("DCGM_FI_DEV_XID_ERRORS{gpu=\"7\"} == 79").size(), 1u);
  // The waiting job's series carries the bounded class of its reason, not the prose.
  EXPECT_EQ(
      prom.QueryUntil("tessera_job_pending_seconds{name=\"huge\",reason=\"Unschedulable\"}").size(),
      1u);

  // Every series a shipped dashboard panel or alert rule queries is one these real processes
  // export (panels once charted series no server ever had).
  const std::set<std::string> deployed = DeployedSeries();
  ASSERT_GE(deployed.size(), 15u);
  std::string names;
  for (const std::string& n : deployed) names += (names.empty() ? "" : "|") + n;
  Json found = prom.QueryUntil(absl::StrCat("count by (__name__) ({__name__=~\"", names, "\"})"),
                               deployed.size());
  std::set<std::string> have;
  for (const Json& s : found) have.insert(s["metric"].value("__name__", ""));
  for (const std::string& n : deployed) {
    EXPECT_TRUE(have.count(n)) << n << " is queried by deploy/ but exported by neither process";
  }

  // OTLP: every decision is one trace whose root "schedule" span parents the
  // phase spans; the resource names the service.
  std::vector<Json> spans;
  ASSERT_TRUE(WaitFor(
      [&] {
        spans = Spans(otlp);
        for (const Json& s : spans) {
          if (s["name"] == "schedule" && Attr(s, "tessera.result") == "unschedulable") return true;
        }
        return false;
      },
      absl::Seconds(20)))
      << "no unschedulable decision exported";
  std::map<std::string, Json> by_id;
  for (const Json& s : spans) by_id[s["spanId"].get<std::string>()] = s;
  const Json* placed = nullptr;
  for (const Json& s : spans) {
    if (s["name"] == "schedule" && Attr(s, "tessera.job") == "train") placed = &s;
  }
  ASSERT_NE(placed, nullptr);
  EXPECT_EQ((*placed)["_service"], "tessera-server");
  EXPECT_EQ(Attr(*placed, "tessera.result"), "scheduled");
  EXPECT_EQ(Attr(*placed, "tessera.namespace"), "obs");
  EXPECT_EQ(Attr(*placed, "tessera.nodes"), "obs-n1");
  std::set<std::string> children;
  for (const Json& s : spans) {
    if (s.value("parentSpanId", "") != (*placed)["spanId"]) continue;
    EXPECT_EQ(s["traceId"], (*placed)["traceId"]);
    children.insert(s["name"].get<std::string>());
    if (s["name"] == "filter") {
      EXPECT_EQ(Attr(s, "tessera.candidates"), "1");
      EXPECT_EQ(Attr(s, "tessera.feasible"), "1");
    }
  }
  EXPECT_EQ(children, (std::set<std::string>{"queue_sort", "prefilter", "filter", "score",
                                             "reserve", "permit", "bind"}));

  // Stop both (SIGTERM: their last lines are logged too), then read the logs.
  prom.Stop();
  StopGracefully(agent.pid(), "tessera agent");
  StopGracefully(server.pid(), "tessera server");
  std::vector<Json> slog = ParseJsonLog(dir + "/server.log");
  std::vector<Json> alog = ParseJsonLog(dir + "/agent.log");
  EXPECT_NE(FindLine(slog, {{"component", "controller"},
                            {"reason", "Scheduled"},
                            {"job", "train"},
                            {"namespace", "obs"},
                            {"nodes", "obs-n1"},
                            {"level", "info"}}),
            nullptr)
      << Dump(slog);
  EXPECT_NE(FindLine(slog, {{"reason", "Registered"}, {"node", "obs-n1"}}), nullptr);
  EXPECT_NE(FindLine(slog, {{"reason", "Unschedulable"}, {"job", "huge"}, {"namespace", "obs"}}),
            nullptr);
  EXPECT_NE(
      FindLine(slog,
               {{"reason", "GpuUnhealthy"}, {"node", "obs-n1"}, {"gpu", 7}, {"level", "warning"}}),
      nullptr)
      << Dump(slog);
  EXPECT_NE(FindLine(slog, {{"component", "server"}, {"msg", "stopped"}}), nullptr);
  EXPECT_NE(
      FindLine(
          alog,
          {{"msg", "started member"}, {"job", "train"}, {"namespace", "obs"}, {"node", "obs-n1"}}),
      nullptr)
      << Dump(alog);
  EXPECT_NE(FindLine(alog, {{"msg", "member exited"}, {"job", "train"}, {"exit_code", 0}}), nullptr)
      << Dump(alog);
  EXPECT_NE(FindLine(alog, {{"msg", "GPU health changed"},
                            {"node", "obs-n1"},
                            {"to", "unhealthy"},
                            {"level", "warning"}}),
            nullptr)
      << Dump(alog);
  if (!HasFailure()) fs::remove_all(dir);
}

}  // namespace
}  // namespace tessera::testing
