#include "kubesched/scheduler_command.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <memory>
#include <random>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "config/profile_yaml.h"
#include "config/queue_config.h"
#include "http/bounded_server.h"
#include "kube/kubeconfig.h"
#include "kube/leader_election.h"
#include "kubesched/kube_scheduler.h"
#include "sched/pack/plugin_set.h"

namespace tessera::kubesched {
namespace {

struct Flags {
  std::string kubeconfig, context;
  std::string scheduler_name = "tessera";
  std::string profile, queue_config;
  bool leader_elect = true;
  std::string lease_namespace = "tessera-system", lease_name = "tessera-scheduler";
  double lease_duration_s = 15, renew_deadline_s = 10, retry_period_s = 2;
  std::string metrics_addr = "127.0.0.1:10259";
  std::string rack_label = "tessera.dev/rack", block_label = "tessera.dev/block";
  int api_writers = KubeSchedulerOptions{}.api_writers;
  double qps = 0;
  int burst = 100;
  std::string log_format = "text";
};

// Stops with the first SIGINT/SIGTERM, or when `lost` is set (leadership lost).
int WaitForStop(const sigset_t& sigs, const std::atomic<bool>& lost) {
  const timespec tick{0, 200L * 1000 * 1000};
  while (!lost.load()) {
    if (sigtimedwait(&sigs, nullptr, &tick) > 0) return 0;
  }
  return 1;
}

int Run(const Flags& f) {
  absl::StatusOr<obs::LogFormat> fmt = obs::ParseLogFormat(f.log_format);
  if (!fmt.ok()) {
    std::cerr << "tessera scheduler: --log-format: " << fmt.status().message() << "\n";
    return 2;
  }
  obs::Logger log = obs::Logger::Stderr(*fmt, "scheduler");
  KubeSchedulerOptions opts;
  opts.scheduler_name = f.scheduler_name;
  opts.labels.rack = f.rack_label;
  opts.labels.block = f.block_label;
  opts.api_writers = f.api_writers;
  opts.log = log;
  if (!f.queue_config.empty()) {
    absl::StatusOr<sched::QueueManagerConfig> c = config::LoadQueueConfigFile(f.queue_config);
    if (!c.ok()) {
      std::cerr << "tessera scheduler: --queue-config " << c.status().message() << "\n";
      return 2;
    }
    opts.queues = *std::move(c);
  }
  // The profile, validated against every plugin the scheduler can run (the pack policies too);
  // a bad one refuses to start, naming the field.
  auto plugins = std::make_shared<sched::pack::PluginSet>();
  if (!f.profile.empty()) {
    absl::StatusOr<sched::Profile> p = config::LoadProfileFile(f.profile, plugins->Registry());
    if (!p.ok()) {
      std::cerr << "tessera scheduler: --profile " << p.status().message() << "\n";
      return 2;
    }
    opts.queues.profile = *std::move(p);
  }
  opts.queues.extra_plugins = [plugins](sched::PluginRegistry* r) { return plugins->Register(r); };
  std::string host, port_text = f.metrics_addr;
  if (auto colon = f.metrics_addr.rfind(':'); colon != std::string::npos) {
    host = f.metrics_addr.substr(0, colon);
    port_text = f.metrics_addr.substr(colon + 1);
  }
  int port = 0;
  if (!f.metrics_addr.empty() &&
      (!absl::SimpleAtoi(port_text, &port) || port < 0 || port > 65535 || host.empty())) {
    std::cerr << "tessera scheduler: --metrics-addr: expected HOST:PORT, got '" << f.metrics_addr
              << "'\n";
    return 2;
  }

  absl::StatusOr<kube::KubeConfig> kc =
      f.kubeconfig.empty() && f.context.empty()
          ? kube::InClusterConfig(kube::ProcessEnv())
          : kube::LoadKubeconfig({f.kubeconfig, f.context, nullptr});
  if (!kc.ok()) {
    std::cerr << "tessera scheduler: " << kc.status().message()
              << (f.kubeconfig.empty() ? " (no --kubeconfig: tried the in-cluster config)" : "")
              << "\n";
    return 2;
  }
  kube::RestOptions ro;
  ro.qps = f.qps;
  ro.burst = f.burst;
  ro.max_idle_connections = f.api_writers + 8;
  ro.user_agent = "tessera-scheduler";
  absl::StatusOr<std::unique_ptr<kube::RestClient>> client = kube::RestClient::Create(*kc, ro);
  if (!client.ok()) {
    std::cerr << "tessera scheduler: " << client.status().message() << "\n";
    return 2;
  }

  // Reach the apiserver once before anything else: a wrong CA, address or credential is then one
  // clear error at start, not informers backing off until the sync timeout.
  {
    absl::StatusOr<kube::HttpResult> v = (*client)->Raw("GET", "/version");
    if (!v.ok() || v->status != 200) {
      std::cerr << "tessera scheduler: cannot use the Kubernetes API at " << kc->server << " ("
                << kc->source << "): "
                << (v.ok() ? absl::StrCat("GET /version answered HTTP ", v->status)
                           : std::string(v.status().message()))
                << "\n";
      return 1;
    }
  }
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  RealClock clock;
  metrics::Registry registry;
  char hostname[256] = {};
  gethostname(hostname, sizeof(hostname) - 1);
  std::random_device rd;
  opts.identity = absl::StrCat(hostname, "_", absl::Hex(rd(), absl::kZeroPad8));
  absl::StatusOr<std::unique_ptr<KubeScheduler>> sched =
      KubeScheduler::Create(**client, clock, registry, opts);
  if (!sched.ok()) {
    std::cerr << "tessera scheduler: " << sched.status().message() << "\n";
    return 2;
  }

  std::unique_ptr<http::BoundedServer> metrics;
  std::thread metrics_thread;
  std::atomic<bool> started{false};
  if (!f.metrics_addr.empty()) {
    metrics = std::make_unique<http::BoundedServer>(http::ConnectionLimits{});
    metrics->Get("/metrics", [&registry](const httplib::Request&, httplib::Response& res) {
      res.set_content(registry.Render(), "text/plain; version=0.0.4");
    });
    metrics->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("ok", "text/plain");
    });
    if (port == 0) {
      port = metrics->bind_to_any_port(host);
    } else if (!metrics->bind_to_port(host, port)) {
      port = -1;
    }
    if (port <= 0) {
      std::cerr << "tessera scheduler: --metrics-addr " << f.metrics_addr << ": cannot listen\n";
      return 1;
    }
    metrics_thread = std::thread([&] { metrics->listen_after_bind(); });
  }
  // One line on stdout once the process is up (tests and scripts read the metrics address).
  std::cout << "tessera scheduler " << opts.identity << ": metrics "
            << (f.metrics_addr.empty() ? std::string("off")
                                       : absl::StrCat("http://", host, ":", port))
            << std::endl;

  std::atomic<bool> lost{false};
  int rc = 0;
  auto start = [&]() -> bool {
    if (absl::Status s = (*sched)->Start(); !s.ok()) {
      log.Error("scheduler did not start", {{"error", s.ToString()}});
      return false;
    }
    started = true;
    log.Info("scheduling", {{"schedulerName", f.scheduler_name}, {"identity", opts.identity}});
    return true;
  };
  if (f.leader_elect) {
    kube::LeaderElectionConfig lc;
    lc.lease_namespace = f.lease_namespace;
    lc.lease_name = f.lease_name;
    lc.identity = opts.identity;
    lc.lease_duration = absl::Seconds(f.lease_duration_s);
    lc.renew_deadline = absl::Seconds(f.renew_deadline_s);
    lc.retry_period = absl::Seconds(f.retry_period_s);
    lc.seed = rd();
    lc.log = log;
    std::atomic<bool> leading{false};
    lc.on_started_leading = [&] { leading = true; };
    // As kube-scheduler: a replica that loses its lease exits, and a fresh one starts standing by.
    lc.on_stopped_leading = [&] { lost = true; };
    absl::StatusOr<std::unique_ptr<kube::LeaderElector>> le =
        kube::LeaderElector::Create(**client, clock, lc);
    if (!le.ok()) {
      std::cerr << "tessera scheduler: " << le.status().message() << "\n";
      return 2;
    }
    std::thread elect([&] { (*le)->Run(); });
    log.Info("waiting for the lease", {{"lease", f.lease_namespace + "/" + f.lease_name}});
    const timespec tick{0, 100L * 1000 * 1000};
    bool stop = false;
    while (!leading.load() && !lost.load()) {
      if (sigtimedwait(&sigs, nullptr, &tick) > 0) {
        stop = true;
        break;
      }
    }
    if (!stop && leading.load() && !lost.load()) {
      rc = start() ? WaitForStop(sigs, lost) : 1;
      if (lost.load()) log.Error("leader election lost; exiting");
    }
    (*sched)->Stop();
    (*le)->Stop();
    elect.join();
  } else {
    rc = start() ? WaitForStop(sigs, lost) : 1;
    (*sched)->Stop();
  }
  if (metrics) {
    metrics->stop();
    metrics_thread.join();
  }
  log.Info("stopped");
  return rc;
}

}  // namespace

void RegisterSchedulerCommand(CLI::App& app) {
  auto f = std::make_shared<Flags>();
  CLI::App* c = app.add_subcommand(
      "scheduler", "Schedule Kubernetes Pods (spec.schedulerName: tessera) with Tessera's core");
  c->footer(
      "Examples:\n"
      "  tessera scheduler --kubeconfig ~/.kube/config\n"
      "  tessera scheduler --kubeconfig admin.kubeconfig --leader-elect=false \\\n"
      "      --profile deploy/profiles/tessera.yaml --metrics-addr 127.0.0.1:10259\n"
      "  # in a Pod (deploy/kubernetes/scheduler/): the in-cluster config, two replicas\n"
      "  tessera scheduler --lease-namespace tessera-system\n");
  c->add_option("--kubeconfig", f->kubeconfig,
                "kubeconfig file (absent: the in-cluster service account)");
  c->add_option("--context", f->context, "kubeconfig context (default: current-context)");
  c->add_option("--scheduler-name", f->scheduler_name, "Pods' spec.schedulerName to schedule")
      ->capture_default_str();
  c->add_option("--profile", f->profile, "scheduling profile YAML (deploy/profiles/)");
  c->add_option("--queue-config", f->queue_config,
                "queue tree and priority classes YAML (tessera.dev Queue objects add to it)");
  c->add_option("--leader-elect", f->leader_elect, "run only while holding the Lease")
      ->capture_default_str();
  c->add_option("--lease-namespace", f->lease_namespace)->capture_default_str();
  c->add_option("--lease-name", f->lease_name)->capture_default_str();
  c->add_option("--leader-elect-lease-duration", f->lease_duration_s,
                "seconds a standby waits after the leader's last renewal")
      ->capture_default_str();
  c->add_option("--leader-elect-renew-deadline", f->renew_deadline_s,
                "seconds the leader tries to renew before it gives up leading")
      ->capture_default_str();
  c->add_option("--leader-elect-retry-period", f->retry_period_s,
                "seconds between attempts to acquire or renew")
      ->capture_default_str();
  c->add_option("--metrics-addr", f->metrics_addr,
                "HOST:PORT for /metrics and /healthz (plain HTTP; \"\" for none)")
      ->capture_default_str();
  c->add_option("--rack-label", f->rack_label, "node label naming a node's rack")
      ->capture_default_str();
  c->add_option("--block-label", f->block_label, "node label naming a node's block")
      ->capture_default_str();
  c->add_option("--api-writers", f->api_writers, "concurrent API writes (bindings, status)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  c->add_option("--kube-api-qps", f->qps, "client-side QPS limit (0: none)")->capture_default_str();
  c->add_option("--kube-api-burst", f->burst)->capture_default_str();
  c->add_option("--log-format", f->log_format, "text or json")->capture_default_str();
  c->callback([f] {
    if (int rc = Run(*f); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace tessera::kubesched
