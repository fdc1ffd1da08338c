#include "agent/node_command.h"

#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/api_client.h"
#include "agent/binding_watcher.h"
#include "agent/dcgm_metrics.h"
#include "agent/discovery.h"
#include "agent/endpoint_auth.h"
#include "agent/fake/fake_backend.h"
#include "agent/health.h"
#include "agent/health_monitor.h"
#include "agent/http_control_plane.h"
#include "agent/launcher/launcher.h"
#include "agent/member_logs.h"
#include "agent/node_agent.h"
#include "agent/nvml/nvml_backend.h"
#include "agent/up_command.h"
#include "common/clock.h"
#include "http/bounded_server.h"
#include "obs/log.h"

namespace tessera::agent {
namespace {

using Json = nlohmann::json;

std::atomic<bool> g_stop{false};  // set by SIGINT/SIGTERM (the only process-wide state)
void OnSignal(int) { g_stop.store(true); }

struct AgentFlags {
  std::string server;
  std::string token;
  std::string node_name;
  std::string backend = "nvml";
  std::string fake_config;
  std::string nvml_lib;
  std::string state_dir;
  std::string listen = "127.0.0.1:0";
  std::string rack, block;
  std::vector<std::string> labels;
  std::string heartbeat = "10s";
  std::string sync = "60s";
  std::string watch_timeout = "30s";
  std::string replica_backoff = "10s";
  std::string endpoint_token_file;
  bool open_metrics = false;
  TlsClientOptions tls;  // how an https:// --server is verified
  std::string sample = "1s";
  std::vector<uint64_t> ignore_xids;
  std::string cgroup_parent = "/sys/fs/cgroup/tessera";
  std::string log_format = "text";
  double cpu_cores = -1;  // -1: this machine's
  double memory_gib = -1;
};

// This machine's online CPUs and MemTotal, what a node offers by default.
int64_t HostCpuMilli() {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int64_t>(n) * 1000 : 0;
}
int64_t HostMemoryMiB() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  while (in >> key >> kb) {
    if (key == "MemTotal:") return kb / 1024;
    in.ignore(256, '\n');
  }
  return 0;
}

std::string Hostname() {
  char buf[256] = {0};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

Json MembersJson(const Launcher& launcher) {
  Json out = Json::array();
  for (const MemberStatus& m : launcher.List()) {
    out.push_back({{"id", m.spec.Id()},
                   {"namespace", m.spec.namespace_name},
                   {"job", m.spec.job},
                   {"group", m.spec.group},
                   {"index", m.spec.index},
                   {"generation", m.spec.generation},
                   {"gpus", m.spec.gpu_indices},
                   {"pid", m.pid},
                   {"state", MemberStateName(m.state)},
                   {"exitCode", m.exit_code},
                   {"adopted", m.adopted},
                   {"cgroup", m.cgroup},
                   {"stdout", m.stdout_path}});
  }
  return out;
}

int RunAgent(const AgentFlags& f) {
  RealClock clock;
  absl::StatusOr<obs::LogFormat> format = obs::ParseLogFormat(f.log_format);
  if (!format.ok()) {
    std::cerr << "tessera agent: " << format.status().message() << "\n";
    return 2;
  }
  const obs::Logger log = obs::Logger::Stderr(*format, "agent");
  if (f.server.empty() || f.node_name.empty()) {
    log.Error(absl::StrCat("tessera agent: --server and --node-name are required"),
              {{"node", f.node_name}});
    return 2;
  }
  absl::Duration heartbeat, sync, sample;
  if (!absl::ParseDuration(f.heartbeat, &heartbeat) || heartbeat <= absl::ZeroDuration()) {
    log.Error(absl::StrCat("--heartbeat: expected a duration such as 10s, got '", f.heartbeat, "'"),
              {{"node", f.node_name}});
    return 2;
  }
  if (!absl::ParseDuration(f.sync, &sync) || sync <= absl::ZeroDuration()) {
    log.Error(absl::StrCat("--sync: expected a duration such as 2s, got '", f.sync, "'"),
              {{"node", f.node_name}});
    return 2;
  }
  absl::Duration replica_backoff;
  if (!absl::ParseDuration(f.replica_backoff, &replica_backoff) ||
      replica_backoff <= absl::ZeroDuration()) {
    log.Error(absl::StrCat("--replica-restart-backoff: expected a duration such as 10s, got '",
                           f.replica_backoff, "'"),
              {{"node", f.node_name}});
    return 2;
  }
  absl::Duration watch_timeout;
  if (!absl::ParseDuration(f.watch_timeout, &watch_timeout) || watch_timeout < absl::Seconds(1)) {
    std::cerr << "--watch-timeout: expected a duration of at least 1s, got '" << f.watch_timeout
              << "'\n";
    return 2;
  }
  EndpointAuth::Options eo;
  eo.open_metrics = f.open_metrics;
  if (!f.endpoint_token_file.empty()) {
    std::ifstream in(f.endpoint_token_file);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) {
      std::cerr << "--endpoint-token-file: cannot read " << f.endpoint_token_file << "\n";
      return 2;
    }
    eo.agent_tokens = EndpointAuth::ParseTokens(text.str());
  }
  if (!absl::ParseDuration(f.sample, &sample) || sample <= absl::ZeroDuration()) {
    log.Error(absl::StrCat("--sample: expected a duration such as 1s, got '", f.sample, "'"),
              {{"node", f.node_name}});
    return 2;
  }
  std::map<std::string, std::string> labels;
  for (const std::string& l : f.labels) {
    std::pair<std::string, std::string> kv = absl::StrSplit(l, absl::MaxSplits('=', 1));
    if (kv.first.empty()) {
      log.Error(absl::StrCat("--label: expected k=v, got '", l, "'"), {{"node", f.node_name}});
      return 2;
    }
    labels[kv.first] = kv.second;
  }
  std::unique_ptr<GpuBackend> backend;
  FakeBackend* fake = nullptr;
  if (f.backend == "fake") {
    if (f.fake_config.empty()) {
      log.Error(absl::StrCat("--fake-config: required with --backend fake (see deploy/fake-gpus/)"),
                {{"node", f.node_name}});
      return 2;
    }
    absl::StatusOr<std::unique_ptr<FakeBackend>> fb = FakeBackend::FromFile(f.fake_config, clock);
    if (!fb.ok()) {
      log.Error(absl::StrCat("--fake-config: ", std::string(fb.status().message())),
                {{"node", f.node_name}});
      return 2;
    }
    fake = fb->get();
    backend = *std::move(fb);
  } else {
    backend = std::make_unique<NvmlBackend>(clock, f.nvml_lib);
  }
  if (absl::Status s = backend->Init(); !s.ok()) {
    log.Error(absl::StrCat("GPU backend ", f.backend, ": ", std::string(s.message())),
              {{"node", f.node_name}});
    return 1;
  }
  std::string state_dir =
      f.state_dir.empty() ? "/var/lib/tessera/agent/" + f.node_name : f.state_dir;
  Launcher::Options lo;
  lo.state_dir = state_dir;
  lo.cgroup_parent = f.cgroup_parent.empty() ? "" : f.cgroup_parent + "/" + f.node_name;
  Launcher launcher(lo, clock);
  if (absl::Status s = launcher.Init(); !s.ok()) {
    log.Error(absl::StrCat("--state-dir: ", std::string(s.message())), {{"node", f.node_name}});
    return 1;
  }
  HealthPolicy policy;
  for (uint64_t x : f.ignore_xids) policy.ignored_xids.insert(x);
  HealthTracker tracker(policy);
  HealthMonitor::Options mo;
  mo.sample_every = sample;
  HealthMonitor monitor(*backend, tracker, clock, mo);
  if (absl::Status s = monitor.Start(); !s.ok()) {
    log.Error(absl::StrCat("health monitor: ", std::string(s.message())), {{"node", f.node_name}});
    return 1;
  }

  // The HTTP endpoint first: its address goes into the Node object.
  // Bounded per request (headers within 10 s, 64 KiB; bodies within 60 s): a client trickling
  // bytes cannot hold the agent's threads (src/http/bounded_server.h).
  tessera::http::BoundedServer http{tessera::http::ConnectionLimits{}};
  std::vector<std::string> hp = absl::StrSplit(f.listen, absl::MaxSplits(':', 1));
  int port = 0;
  if (hp.size() != 2 || !absl::SimpleAtoi(hp[1], &port)) {
    log.Error(absl::StrCat("--metrics-listen: expected HOST:PORT, got '", f.listen, "'"),
              {{"node", f.node_name}});
    return 2;
  }
  int bound =
      port == 0 ? http.bind_to_any_port(hp[0]) : (http.bind_to_port(hp[0], port) ? port : -1);
  if (bound <= 0) {
    log.Error(absl::StrCat("--metrics-listen: cannot listen on ", f.listen),
              {{"node", f.node_name}});
    return 1;
  }
  NodeAgentOptions ao;
  ao.node_name = f.node_name;
  ao.rack = f.rack;
  ao.block = f.block;
  ao.labels = labels;
  ao.heartbeat_interval = heartbeat;
  ao.sync_interval = sync;
  ao.replica_restart_backoff = replica_backoff;
  ao.agent_endpoint = absl::StrCat("http://", hp[0], ":", bound);
  ao.cpu_milli = f.cpu_cores >= 0 ? static_cast<int64_t>(f.cpu_cores * 1000) : HostCpuMilli();
  ao.memory_mib = f.memory_gib >= 0 ? static_cast<int64_t>(f.memory_gib * 1024) : HostMemoryMiB();
  ao.seed = std::hash<std::string>()(f.node_name);
  ao.log = log;
  HttpControlPlaneClient client(f.server, f.token, absl::Seconds(10), f.tls);
  NodeAgent agent(*backend, tracker, launcher, client, clock, ao);
  if (absl::Status s = agent.Init(); !s.ok()) {
    log.Error(absl::StrCat("agent: ", std::string(s.message())), {{"node", f.node_name}});
    return 1;
  }
  // The bindings long-poll has its own connection (and thread): it sleeps in the server most of
  // the time while the agent heartbeats on the other.
  HttpControlPlaneClient watch_client(f.server, f.token, watch_timeout + absl::Seconds(15), f.tls);
  BindingWatcher watcher(
      watch_client, agent, f.node_name, watch_timeout, [&watch_client] { watch_client.Cancel(); },
      ao.seed + 1);
  // Who may read logs: the agent's tokens, or whatever the server lets read the job.
  EndpointAuth auth(eo, [&f](const std::string& token, const std::string& kind,
                             const std::string& ns, const std::string& job) {
    ApiClient api(f.server, token, absl::Seconds(5), f.tls);
    const char* plural = kind == "InferenceService" ? "inferenceservices" : "trainingjobs";
    // Admin: the server's /metrics is admin-only.
    absl::StatusOr<ApiResponse> r =
        job.empty() ? api.Get("/metrics")
                    : api.Get(ObjectPath(plural, ns.empty() ? "default" : ns, job));
    if (!r.ok()) return 0;
    return r->code == 404 ? 403 : r->code;  // a job it cannot see is not its logs
  });
  http.set_pre_routing_handler([&auth](const httplib::Request& req, httplib::Response& res) {
    EndpointRequest er;
    er.path = req.path;
    er.authorization = req.get_header_value("Authorization");
    er.name_space = req.has_param("namespace") ? req.get_param_value("namespace") : "default";
    er.job = req.get_param_value("job");
    if (req.has_param("kind")) er.kind = req.get_param_value("kind");
    EndpointVerdict v = auth.Check(er);
    if (v.code == 200) return httplib::Server::HandlerResponse::Unhandled;
    res.status = v.code;
    if (v.code == 401) res.set_header("WWW-Authenticate", "Bearer");
    res.set_content(v.message + "\n", "text/plain");
    return httplib::Server::HandlerResponse::Handled;
  });
  tracker.AddListener([&agent, &log, &f](const HealthTransition& t) {
    log.Log(t.to == Health::kHealthy ? obs::LogLevel::kInfo : obs::LogLevel::kWarn,
            "GPU health changed",
            {{"node", f.node_name},
             {"gpu_uuid", t.uuid},
             {"from", HealthName(t.from)},
             {"to", HealthName(t.to)},
             {"reason", t.reason}});
    agent.Wake();
  });
  // Several fake nodes share one machine: their metrics are told apart by node name.
  const std::string hostname = fake != nullptr ? f.node_name : Hostname();
  // Every 4xx/5xx says why, also those cpp-httplib answers itself (an unknown path, a body it
  // could not read).
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string why = "the request failed";
    if (res.status == 404) why = absl::StrCat("no such path ", req.path);
    if (res.status == 405) why = absl::StrCat(req.method, " is not allowed on ", req.path);
    if (res.status == 400) why = "the request could not be read (malformed, or its body cut short)";
    if (res.status == 413) why = "the request body is too large";
    res.set_content(absl::StrCat("HTTP ", res.status, ": ", why, "\n"), "text/plain");
  });
  http.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  http.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    absl::StatusOr<NodeSnapshot> snap = Discover(*backend);
    if (!snap.ok()) {
      res.status = 500;
      res.set_content(std::string(snap.status().message()), "text/plain");
      return;
    }
    DcgmRenderOptions r;
    r.hostname = hostname;
    r.workloads = agent.Workloads();
    for (const GpuSnapshot& g : snap->gpus) {
      absl::StatusOr<GpuHealth> h = tracker.Get(g.info.uuid);
      if (h.ok()) r.last_xid[g.info.uuid] = h->last_xid;
    }
    res.set_content(RenderDcgmMetrics(snap->gpus, r), "text/plain; version=0.0.4");
  });
  http.Get("/members", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(MembersJson(launcher).dump(2), "application/json");
  });
  http.Get("/logs", [&](const httplib::Request& req, httplib::Response& res) {
    ServeLogs(req, res, launcher, g_stop);
  });
  if (fake != nullptr) {
    // A content-reader handler: cpp-httplib otherwise reads a POST without Content-Length until
    // the connection closes (and answers 400 when curl, keeping it open, times out), although
    // such a request has no body (RFC 9112 6.3). A body that is sent is drained and ignored.
    http.Post("/fake/event", [&](const httplib::Request& req, httplib::Response& res,
                                 const httplib::ContentReader& content) {
      if (req.has_header("Content-Length") || req.has_header("Transfer-Encoding")) {
        content([](const char*, size_t) { return true; });
      }
      int gpu = -1;
      if (!absl::SimpleAtoi(req.get_param_value("gpu"), &gpu) || gpu < 0 ||
          gpu >= static_cast<int>(agent.registration().gpus.size())) {
        res.status = 400;
        res.set_content("gpu: expected a GPU index\n", "text/plain");
        return;
      }
      GpuEvent e;
      e.gpu_uuid = agent.registration().gpus[gpu].uuid;
      e.time = clock.Now();
      const std::string type = req.get_param_value("type");
      if (type == "reset") {
        e.kind = GpuEventKind::kGpuReset;
      } else {
        e.kind = GpuEventKind::kXid;
        if (!absl::SimpleAtoi(req.get_param_value("xid"), &e.xid)) {
          res.status = 400;
          res.set_content("xid: expected a number\n", "text/plain");
          return;
        }
      }
      log.Info("injected GPU event", {{"node", f.node_name},
                                      {"gpu", gpu},
                                      {"gpu_uuid", e.gpu_uuid},
                                      {"event", GpuEventKindName(e.kind)},
                                      {"xid", static_cast<int64_t>(e.xid)}});
      tracker.OnEvent(e);
      res.set_content("ok\n", "text/plain");
    });
  }
  std::thread http_thread([&http] { http.listen_after_bind(); });
  std::thread monitor_thread([&monitor] { monitor.RunUntil(absl::InfiniteFuture()); });
  // The logs' time index (member_logs.h): each running member's files, sampled every second.
  std::thread log_index_thread([&launcher, &clock] {
    LogIndexer indexer;
    while (!g_stop.load()) {
      std::vector<std::string> paths;
      for (const MemberStatus& m : launcher.List()) {
        if (m.state == MemberState::kExited) continue;
        paths.push_back(m.stdout_path);
        paths.push_back(m.stderr_path);
      }
      indexer.Sample(paths, clock.Now());
      for (int i = 0; i < 10 && !g_stop.load(); ++i) usleep(100 * 1000);
    }
  });

  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::cout << "agent " << f.node_name << ": " << agent.registration().gpus.size() << " GPUs ("
            << backend->BackendName() << "), endpoint " << ao.agent_endpoint << ", state "
            << state_dir << ", server " << f.server << std::endl;
  std::thread stopper([&agent] {
    while (!g_stop.load()) usleep(100 * 1000);
    agent.Stop();
  });
  watcher.Start();
  agent.Run();
  watcher.Stop();
  // Members keep running: they are in their own sessions and are re-adopted on restart.
  monitor.Stop();
  http.stop();
  stopper.join();
  monitor_thread.join();
  log_index_thread.join();
  http_thread.join();
  backend->Shutdown().IgnoreError();
  log.Info("stopped; members left running for the next agent",
           {{"node", f.node_name}, {"members", static_cast<int64_t>(launcher.List().size())}});
  return 0;
}

}  // namespace

void RegisterNodeCommands(CLI::App& app) {
  RegisterUpCommand(app);
  auto f = std::make_shared<AgentFlags>();
  CLI::App* a =
      app.add_subcommand("agent", "Run the node agent: register, heartbeat, run bound members");
  a->add_option("--server", f->server,
                "tessera server URL (http://HOST:PORT); replicas: several, comma-separated, tried "
                "in turn when one cannot be reached")
      ->required();
  a->add_option("--token", f->token, "Bearer token (role node:NAME)");
  a->add_option("--ca-file", f->tls.ca_file, "PEM CA bundle to verify an https:// --server with");
  a->add_flag("--insecure-skip-tls-verify", f->tls.insecure_skip_verify,
              "Do not verify an https:// server's certificate (testing only)");
  a->add_option("--node-name", f->node_name, "This node's name")->required();
  a->add_option("--backend", f->backend, "GPU backend: nvml or fake")
      ->check(CLI::IsMember({"nvml", "fake"}));
  a->add_option("--fake-config", f->fake_config, "YAML node description for --backend fake");
  a->add_option("--nvml-lib", f->nvml_lib, "NVML library to load");
  a->add_option("--state-dir", f->state_dir,
                "Member records and logs (default /var/lib/tessera/agent/NODE)");
  a->add_option("--metrics-listen", f->listen,
                "HOST:PORT for /metrics, /logs, /members (default 127.0.0.1:0: loopback, "
                "any port)");
  a->add_option("--cpu-cores", f->cpu_cores,
                "CPU cores this node offers its members (default: this machine's; 0: unlimited)")
      ->check(CLI::Range(0.0, 4096.0));
  a->add_option("--memory-gib", f->memory_gib,
                "Memory in GiB this node offers its members (default: this machine's; 0: "
                "unlimited)")
      ->check(CLI::Range(0.0, 65536.0));
  a->add_option("--rack", f->rack, "Rack of this node");
  a->add_option("--block", f->block, "Block (spine domain) of this node");
  a->add_option("--label", f->labels, "Node label k=v (repeatable)");
  a->add_option("--heartbeat", f->heartbeat, "Heartbeat interval (default 10s)");
  a->add_option("--sync", f->sync,
                "Full binding re-list interval, a safety net under the watch (default 60s)");
  a->add_option("--replica-restart-backoff", f->replica_backoff,
                "First wait before a serving replica that exited is started again; doubles per "
                "restart up to 5m (default 10s)");
  a->add_option("--watch-timeout", f->watch_timeout,
                "How long one bindings long-poll waits in the server (default 30s)");
  a->add_option("--endpoint-token-file", f->endpoint_token_file,
                "Tokens (one a line) accepted by this agent's endpoint besides server tokens");
  a->add_flag("--open-metrics", f->open_metrics,
              "Serve /metrics and /healthz without a token (default: the agent's token or a "
              "server admin token, as /members)");
  a->add_option("--sample", f->sample, "GPU metrics sampling interval (default 1s)");
  a->add_option("--ignore-xid", f->ignore_xids, "XIDs that never affect health")->delimiter(',');
  a->add_option("--cgroup-parent", f->cgroup_parent,
                "cgroup v2 directory for members (empty: no cgroups)");
  a->add_option("--log-format", f->log_format,
                "Log lines on stderr: text, or json (one object per line)");
  a->footer(
      "Examples:\n"
      "  tessera agent --server https://cp:7420 --token $(cat node.token) --node-name gpu-07\n"
      "  tessera agent --server http://127.0.0.1:7420 --token T --node-name fake-0 \\\n"
      "      --backend fake --fake-config deploy/fake-gpus/h100-nvswitch-8.yaml");
  a->callback([f]() {
    int code = RunAgent(*f);
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace tessera::agent
