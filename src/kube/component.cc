#include "kube/component.h"

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
#include "http/bounded_server.h"
#include "kube/kubeconfig.h"
#include "kube/leader_election.h"

namespace tessera::kube {
namespace {

// Stops with the first SIGINT/SIGTERM (0), or when `lost` is set (leadership lost: 1).
int WaitForStop(const sigset_t& sigs, const std::atomic<bool>& lost) {
  const timespec tick{0, 200L * 1000 * 1000};
  while (!lost.load()) {
    if (sigtimedwait(&sigs, nullptr, &tick) > 0) return 0;
  }
  return 1;
}

}  // namespace

void AddComponentFlags(CLI::App* c, ComponentFlags* f) {
  c->add_option("--kubeconfig", f->kubeconfig,
                "kubeconfig file (absent: the in-cluster service account)");
  c->add_option("--context", f->context, "kubeconfig context (default: current-context)");
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
  c->add_option("--kube-api-qps", f->qps, "client-side QPS limit (0: none)")->capture_default_str();
  c->add_option("--kube-api-burst", f->burst)->capture_default_str();
  c->add_option("--log-format", f->log_format, "text or json")->capture_default_str();
}

int RunComponent(const std::string& name, const ComponentFlags& f, RestOptions rest,
                 const ComponentHooks& hooks) {
  const std::string prefix = absl::StrCat("tessera ", name, ": ");
  absl::StatusOr<obs::LogFormat> fmt = obs::ParseLogFormat(f.log_format);
  if (!fmt.ok()) {
    std::cerr << prefix << "--log-format: " << fmt.status().message() << "\n";
    return 2;
  }
  obs::Logger log = obs::Logger::Stderr(*fmt, name);
  if (hooks.configure) {
    if (absl::Status s = hooks.configure(); !s.ok()) {
      std::cerr << prefix << s.message() << "\n";
      return 2;
    }
  }
  std::string host, port_text = f.metrics_addr;
  if (auto colon = f.metrics_addr.rfind(':'); colon != std::string::npos) {
    host = f.metrics_addr.substr(0, colon);
    port_text = f.metrics_addr.substr(colon + 1);
  }
  int port = 0;
  if (!f.metrics_addr.empty() &&
      (!absl::SimpleAtoi(port_text, &port) || port < 0 || port > 65535 || host.empty())) {
    std::cerr << prefix << "--metrics-addr: expected HOST:PORT, got '" << f.metrics_addr << "'\n";
    return 2;
  }

  absl::StatusOr<KubeConfig> kc = ConfigFromFlags(f.kubeconfig, f.context);
  if (!kc.ok()) {
    std::cerr << prefix << kc.status().message() << "\n";
    return 2;
  }
  rest.qps = f.qps;
  rest.burst = f.burst;
  if (rest.user_agent.empty() || rest.user_agent == RestOptions{}.user_agent) {
    rest.user_agent = "tessera-" + name;
  }
  absl::StatusOr<std::unique_ptr<RestClient>> client = RestClient::Create(*kc, rest);
  if (!client.ok()) {
    std::cerr << prefix << client.status().message() << "\n";
    return 2;
  }
  {
    absl::StatusOr<HttpResult> v = (*client)->Raw("GET", "/version");
    if (!v.ok() || v->status != 200) {
      std::cerr << prefix << "cannot use the Kubernetes API at " << kc->server << " (" << kc->source
                << "): "
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
  const std::string identity = absl::StrCat(hostname, "_", absl::Hex(rd(), absl::kZeroPad8));

  std::unique_ptr<http::BoundedServer> metrics;
  std::thread metrics_thread;
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
      std::cerr << prefix << "--metrics-addr " << f.metrics_addr << ": cannot listen\n";
      return 1;
    }
    metrics_thread = std::thread([&] { metrics->listen_after_bind(); });
  }
  std::cout << "tessera " << name << " " << identity << ": metrics "
            << (f.metrics_addr.empty() ? std::string("off")
                                       : absl::StrCat("http://", host, ":", port))
            << std::endl;

  const ComponentContext ctx{**client, clock, registry, identity, log};
  std::atomic<bool> lost{false};
  bool started = false;
  auto start = [&]() -> bool {
    if (absl::Status s = hooks.start(ctx); !s.ok()) {
      log.Error(name + " did not start", {{"error", s.ToString()}});
      return false;
    }
    started = true;
    return true;
  };
  int rc = 0;
  if (f.leader_elect) {
    LeaderElectionConfig lc;
    lc.lease_namespace = f.lease_namespace;
    lc.lease_name = f.lease_name.empty() ? "tessera-" + name : f.lease_name;
    lc.identity = identity;
    lc.lease_duration = absl::Seconds(f.lease_duration_s);
    lc.renew_deadline = absl::Seconds(f.renew_deadline_s);
    lc.retry_period = absl::Seconds(f.retry_period_s);
    lc.seed = rd();
    lc.log = log;
    std::atomic<bool> leading{false};
    lc.on_started_leading = [&] { leading = true; };
    lc.on_stopped_leading = [&] { lost = true; };
    absl::StatusOr<std::unique_ptr<LeaderElector>> le = LeaderElector::Create(**client, clock, lc);
    if (!le.ok()) {
      std::cerr << prefix << le.status().message() << "\n";
      rc = 2;
    } else {
      std::thread elect([&] { (*le)->Run(); });
      log.Info("waiting for the lease", {{"lease", lc.lease_namespace + "/" + lc.lease_name}});
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
      if (started) hooks.stop();
      (*le)->Stop();
      elect.join();
    }
  } else {
    rc = start() ? WaitForStop(sigs, lost) : 1;
    if (started) hooks.stop();
  }
  if (metrics) {
    metrics->stop();
    metrics_thread.join();
  }
  log.Info("stopped");
  return rc;
}

}  // namespace tessera::kube
