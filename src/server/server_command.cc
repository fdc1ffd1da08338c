#include "server/server_command.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/clock.h"
#include "config/profile_yaml.h"
#include "config/queue_config.h"
#include "controller/node_leases.h"
#include "controller/queue_codec.h"
#include "controller/scheduling_controller.h"
#include "federation/dispatcher.h"
#include "metrics/registry.h"
#include "obs/log.h"
#include "obs/otlp_exporter.h"
#include "sched/pack/plugin_set.h"
#include "server/admin_token.h"
#include "server/api_server.h"
#include "server/auth.h"
#include "server/dashboard.h"
#include "store/etcd/etcd_election.h"
#include "store/etcd/etcd_store.h"
#include "store/metered_store.h"
#include "store/sqlite_store.h"

namespace tessera::server {
namespace {

struct ServerFlags {
  std::string data_dir;
  // "sqlite" (in --data-dir) or etcd://host:port[,host:port...][/prefix] (etcds:// for TLS).
  std::string store = "sqlite";
  std::string etcd_cacert, etcd_cert, etcd_key;
  // Replicas on etcd: the leader lease's TTL and this replica's name in the election key.
  double leader_lease_s = 3;
  std::string replica_name;
  std::string listen = "127.0.0.1:7420";
  std::string tokens_file;
  bool insecure_no_auth = false;
  int64_t retain_revisions = 100000;
  int threads = 16;
  int max_watches = 64;
  int max_connections = 50000;
  int io_threads = 2;
  double header_timeout_s = 10;
  bool scheduler = true;
  double node_grace_s = 40;
  double node_status_s = 60;
  double event_ttl_s = 3600;
  double eviction_s = 300;
  double elastic_grow_s = 60;
  double checkpoint_gpu_mtbf_h = 0;  // 0: observed failure rate, else 50,000 h
  // InferenceService autoscaling (controller/autoscaler.h).
  double autoscale_window_s = 300;
  double autoscale_tolerance = 0.1;
  double autoscale_freshness_s = 30;
  std::string queue_config;
  std::string profile;
  std::string tls_cert, tls_key;
  std::string log_format = "text";
  std::string otlp_endpoint;
  bool federation = false;
  std::string federation_name = "hub";
  double federation_failover_s = 60;
  double federation_requeue_s = 300;
};

// Queue objects must keep the tree valid together with the queue YAML; the
// check reads the stored queues (a concurrent write of another Queue is not
// serialised with it: the controller then keeps the previous tree and says
// so in the Queue's status).
absl::Status AdmitQueue(store::Store& store, const sched::QueueManagerConfig& base,
                        const std::string& name, const Json* obj) {
  std::vector<Json> stored;
  store::ListOptions opts;
  while (true) {
    absl::StatusOr<store::ListResult> page = store.List(controller::kQueuesPrefix, opts);
    if (!page.ok()) return page.status();
    for (const store::KeyValue& kv : page->kvs) {
      if (absl::StatusOr<Json> o = controller::ParseStored(kv.value); o.ok()) stored.push_back(*o);
    }
    if (!page->more) break;
    opts.continue_after = page->next_key;
  }
  return controller::ValidateQueueChange(base, stored, name, obj);
}

// The store --store names: SQLite in --data-dir (the default) or etcd. Logs what is wrong;
// InvalidArgument for bad flags (exit 2), other codes when the store does not open (exit 1).
absl::StatusOr<std::unique_ptr<store::Store>> OpenStore(const ServerFlags& f,
                                                        const obs::Logger& log) {
  if (f.store == "sqlite") {
    if (f.data_dir.empty()) {
      log.Error("--data-dir is required with the SQLite store (or give --store etcd://HOST:PORT)");
      return absl::InvalidArgumentError("--data-dir");
    }
    store::SqliteStoreOptions opts;
    opts.retain_revisions = f.retain_revisions;
    absl::StatusOr<std::unique_ptr<store::SqliteStore>> db =
        store::SqliteStore::Open(f.data_dir, opts);
    if (!db.ok()) {
      log.Error(db.status().message(), {{"data_dir", f.data_dir}});
      return absl::UnavailableError("sqlite");
    }
    return std::unique_ptr<store::Store>(std::move(*db));
  }
  store::EtcdStoreOptions base;
  base.retain_revisions = f.retain_revisions;
  base.ca_file = f.etcd_cacert;
  base.cert_file = f.etcd_cert;
  base.key_file = f.etcd_key;
  absl::StatusOr<store::EtcdStoreOptions> o = store::ParseEtcdUrl(f.store, base);
  if (!o.ok()) {
    log.Error(absl::StrCat("--store: ", o.status().message(),
                           "; or --store sqlite (the default) with --data-dir"));
    return o.status();
  }
  if (!f.etcd_cacert.empty() || !f.etcd_cert.empty() || !f.etcd_key.empty()) o->tls = true;
  absl::StatusOr<std::unique_ptr<store::EtcdStore>> db = store::EtcdStore::Open(*o);
  if (!db.ok()) {
    log.Error(db.status().message(), {{"store", f.store}});
    return absl::IsInvalidArgument(db.status()) ? db.status() : absl::UnavailableError("etcd");
  }
  log.Info("store: etcd", {{"endpoints", absl::StrJoin(o->endpoints, ",")}, {"prefix", o->prefix}});
  return std::unique_ptr<store::Store>(std::move(*db));
}

int RunServer(const ServerFlags& f) {
  absl::StatusOr<obs::LogFormat> format = obs::ParseLogFormat(f.log_format);
  if (!format.ok()) {
    std::cerr << "tessera server: " << format.status().message() << "\n";
    return 2;
  }
  const obs::Logger log = obs::Logger::Stderr(*format, "server");
  size_t colon = f.listen.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(f.listen.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    log.Error("--listen: expected HOST:PORT", {{"listen", f.listen}});
    return 2;
  }
  const std::string host = f.listen.substr(0, colon);
  // Authentication is on unless asked otherwise, and never off beyond this machine.
  if (f.insecure_no_auth && !f.tokens_file.empty()) {
    log.Error("--insecure-no-auth and --tokens-file contradict each other: choose one");
    return 2;
  }
  if (f.insecure_no_auth && !IsLoopbackHost(host)) {
    log.Error(
        "--insecure-no-auth serves without authentication and is refused on a non-loopback "
        "address; listen on 127.0.0.1 or give --tokens-file (or neither: the server then keeps "
        "an admin token in its data dir)",
        {{"listen", f.listen}});
    return 2;
  }
  Authenticator auth = Authenticator::AllowAll();
  if (!f.tokens_file.empty()) {
    absl::StatusOr<Authenticator> a = Authenticator::LoadFile(f.tokens_file);
    if (!a.ok()) {
      log.Error(a.status().message());
      return 2;
    }
    auth = *std::move(a);
  } else if (f.insecure_no_auth) {
    log.Warn("--insecure-no-auth: authentication is DISABLED (loopback only)");
  }

  // Signals go to one waiting thread, never to a request thread.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);

  sched::QueueManagerConfig queues;
  if (!f.queue_config.empty()) {
    absl::StatusOr<sched::QueueManagerConfig> c = config::LoadQueueConfigFile(f.queue_config);
    if (!c.ok()) {
      std::cerr << "tessera server: --queue-config " << c.status().message() << "\n";
      return 2;
    }
    queues = *std::move(c);
  }

  // The scheduler profile (deploy/profiles/): validated against every plugin the server can run
  // (sched/pack/plugin_set.h); a bad one refuses to start, naming the field.
  std::optional<sched::Profile> profile;
  if (!f.profile.empty()) {
    absl::StatusOr<sched::Profile> p =
        config::LoadProfileFile(f.profile, sched::pack::PluginSet().Registry());
    if (!p.ok()) {
      std::cerr << "tessera server: --profile " << p.status().message() << "\n";
      return 2;
    }
    profile = *std::move(p);
  }

  absl::Time t0 = absl::Now();
  absl::StatusOr<std::unique_ptr<store::Store>> db = OpenStore(f, log);
  if (!db.ok()) return absl::IsInvalidArgument(db.status()) ? 2 : 1;
  // Durable commits (fsyncs) are SQLite's; null for etcd.
  auto* sqlite = dynamic_cast<store::SqliteStore*>(db->get());
  if (f.tokens_file.empty() && !f.insecure_no_auth) {
    if (f.data_dir.empty()) {
      log.Error("--store " + f.store +
                ": give --tokens-file (or --data-dir, where the server keeps its admin token)");
      return 2;
    }
    // After the store opened: the data dir exists and is ours.
    absl::StatusOr<AdminToken> admin = LoadOrCreateAdminToken(f.data_dir);
    if (!admin.ok()) {
      log.Error(admin.status().message());
      return 1;
    }
    auth = Authenticator::SingleAdmin(admin->token);
    log.Warn(admin->created ? "no --tokens-file: created an admin token (mode 0600)"
                            : "no --tokens-file: serving with the admin token",
             {{"file", admin->path}, {"use", "TESSERA_TOKEN=$(cat " + admin->path + ")"}});
  }
  RealClock clock;
  store::MeteredStore metered(**db, clock);
  // On etcd, replicas: the controller runs only on the elected leader, through a fenced view of
  // the store (etcd_election.h) with metrics of its own, rendered together with the API's.
  auto* etcd = dynamic_cast<store::EtcdStore*>(db->get());
  std::unique_ptr<store::FencedEtcdStore> fenced;
  std::unique_ptr<store::MeteredStore> fenced_metered;
  std::string etcd_prefix, replica_name = f.replica_name;
  if (etcd != nullptr) {
    fenced = std::make_unique<store::FencedEtcdStore>(*etcd);
    fenced_metered = std::make_unique<store::MeteredStore>(*fenced, clock);
    etcd_prefix = etcd->prefix();
    if (replica_name.empty()) {
      char hostname[256] = {};
      gethostname(hostname, sizeof hostname - 1);
      replica_name = absl::StrCat(hostname, "-", getpid());
    }
  }
  // Set once the election exists (below); read by the heartbeat handler and /metrics.
  std::atomic<store::EtcdElection*> elected{nullptr};
  // Node heartbeats renew these in memory; the controller reads them (node_leases.h).
  controller::NodeLeases leases;
  ApiServerOptions so;
  so.threads = f.threads;
  so.max_watches = f.max_watches;
  so.max_connections = f.max_connections;
  so.io_threads = f.io_threads;
  so.header_timeout = absl::Seconds(f.header_timeout_s);
  so.node_leases = &leases;
  // Their utilization samples, live for the dashboard (gpu_samples.h).
  GpuSamples samples;
  so.gpu_samples = &samples;
  so.node_status_interval = absl::Seconds(f.node_status_s);
  if (etcd != nullptr) {
    so.is_leader = [&elected] {
      store::EtcdElection* e = elected.load();
      return e != nullptr && e->IsLeader();
    };
    // The leader learns of heartbeats that reach another replica from the Node's write.
    if (f.node_grace_s > 0) so.standby_node_status_interval = absl::Seconds(f.node_grace_s / 3);
  }
  so.uid_seed = std::random_device{}();
  so.tls_cert_file = f.tls_cert;
  so.tls_key_file = f.tls_key;
  // Scheduling and fleet metrics (the controller's), rendered with the store's.
  metrics::Registry registry;
  // Durable commits (fsyncs) next to the store's Txn counts: group commit makes them differ.
  so.extra_metrics = [&metered, &registry, sqlite, &fenced, &fenced_metered, &elected] {
    if (sqlite == nullptr) {
      store::StoreMetrics m = metered.Metrics();
      std::string replica;
      if (fenced_metered) {
        m += fenced_metered->Metrics();
        store::EtcdElection* e = elected.load();
        absl::StrAppend(
            &replica,
            "# HELP tessera_leader 1 while this replica leads (runs the controller), else 0.\n"
            "# TYPE tessera_leader gauge\ntessera_leader ",
            e != nullptr && e->IsLeader() ? 1 : 0,
            "\n# HELP tessera_leader_terms_total Times this replica became the leader.\n"
            "# TYPE tessera_leader_terms_total counter\ntessera_leader_terms_total ",
            e != nullptr ? e->terms() : 0,
            "\n# HELP tessera_fenced_writes_total Controller writes refused by the leader "
            "fence (this replica was no longer the leader).\n"
            "# TYPE tessera_fenced_writes_total counter\ntessera_fenced_writes_total ",
            fenced->fenced(), "\n");
      }
      return absl::StrCat(store::FormatPrometheus(m), replica, registry.Render());
    }
    return absl::StrCat(store::FormatPrometheus(metered.Metrics()),
                        "# HELP tessera_store_durable_commits_total SQLite transactions committed "
                        "(one WAL fsync each; a group commit holds many store transactions).\n"
                        "# TYPE tessera_store_durable_commits_total counter\n"
                        "tessera_store_durable_commits_total ",
                        sqlite->DurableCommits(), "\n", registry.Render());
  };
  // The web dashboard and its fleet summary (docs/dashboard.md).
  so.extra_routes = [&metered, &samples, auth, &f](httplib::Server& http) {
    RegisterDashboardRoutes(http, metered, auth, &samples, absl::Seconds(f.autoscale_freshness_s));
  };
  so.admit = [&metered, &queues](const std::string& kind, const std::string& name,
                                 const Json* obj) {
    return kind == "Queue" ? AdmitQueue(metered, queues, name, obj) : absl::OkStatus();
  };
  // Decision spans to an OpenTelemetry collector, off the scheduling thread.
  std::unique_ptr<obs::OtlpExporter> otlp;
  if (!f.otlp_endpoint.empty()) {
    obs::OtlpExporterOptions oo;
    oo.endpoint = f.otlp_endpoint;
    oo.seed = std::random_device{}();
    oo.metrics = &registry;
    absl::StatusOr<std::unique_ptr<obs::OtlpExporter>> e = obs::OtlpExporter::Create(oo);
    if (!e.ok()) {
      log.Error(e.status().message());
      return 2;
    }
    otlp = *std::move(e);
    log.Info("exporting decision spans", {{"otlp_endpoint", f.otlp_endpoint}});
  }
  ApiServer server(metered, clock, std::move(auth), so);
  absl::StatusOr<int> bound = server.Start(host, port);
  if (!bound.ok()) {
    log.Error(bound.status().message());
    return 1;
  }
  std::cout << "listening on " << (f.tls_cert.empty() ? "" : "https://") << host << ":" << *bound
            << " (revision " << metered.CurrentRevision() << ", opened in "
            << absl::ToDoubleMilliseconds(absl::Now() - t0) << " ms)" << std::endl;
  // What only one process may run: the scheduling controller (or a federation hub's dispatcher),
  // with its node lease timers. On SQLite it runs here for the process's life; on etcd only while
  // this replica leads the election (docs/control-plane.md, "Replicas"), writing through a fenced
  // view of the store.
  std::unique_ptr<controller::SchedulingController> ctl;
  // A federation hub hands jobs to member clusters instead of scheduling them
  // itself (src/federation/dispatcher.h).
  std::unique_ptr<federation::Dispatcher> hub;
  auto start_leader_work = [&](store::Store& st) -> absl::Status {
    if (f.federation) {
      federation::DispatcherOptions fo;
      fo.hub_name = f.federation_name;
      fo.failover_after = absl::Seconds(f.federation_failover_s);
      fo.requeue_after = absl::Seconds(f.federation_requeue_s);
      fo.event_ttl = absl::Seconds(f.event_ttl_s);
      fo.log = log.WithComponent("federation");
      fo.metrics = &registry;
      hub = std::make_unique<federation::Dispatcher>(st, clock, fo);
      hub->RunInBackground();
    } else if (f.scheduler) {
      controller::ControllerOptions co;
      co.node_grace = absl::Seconds(f.node_grace_s);
      co.leases = &leases;
      co.event_ttl = absl::Seconds(f.event_ttl_s);
      co.eviction_delay = absl::Seconds(f.eviction_s);
      co.elastic_grow_interval = absl::Seconds(f.elastic_grow_s);
      co.checkpoint_gpu_mtbf = absl::Hours(f.checkpoint_gpu_mtbf_h);
      co.autoscaler.stabilization = absl::Seconds(f.autoscale_window_s);
      co.autoscaler.tolerance = f.autoscale_tolerance;
      co.autoscaler.freshness = absl::Seconds(f.autoscale_freshness_s);
      co.metrics = &registry;
      co.queues = queues;
      if (profile) co.profile = *profile;
      co.log = log.WithComponent("controller");
      if (otlp) co.on_decision = [&otlp](obs::TraceRecord t) { otlp->Export(std::move(t)); };
      absl::StatusOr<std::unique_ptr<controller::SchedulingController>> c =
          controller::SchedulingController::Create(st, clock, co);
      if (!c.ok()) return c.status();
      ctl = *std::move(c);
      ctl->RunInBackground();
    }
    return absl::OkStatus();
  };
  auto stop_leader_work = [&] {
    if (ctl) ctl->Stop();
    ctl.reset();
    if (hub) hub->Stop();
    hub.reset();
  };
  std::unique_ptr<store::EtcdElection> election;
  std::atomic<bool> leader_work_failed{false};
  if (etcd == nullptr) {
    if (absl::Status s = start_leader_work(metered); !s.ok()) {
      log.Error(s.message());
      server.Stop();
      return 1;
    }
  } else if (f.federation || f.scheduler) {
    store::EtcdElectionOptions eo;
    eo.key = etcd_prefix + "leader";
    eo.identity = absl::StrCat(replica_name, " api=", f.tls_cert.empty() ? "http://" : "https://",
                               host, ":", *bound);
    eo.ttl = absl::Seconds(f.leader_lease_s);
    const obs::Logger elog = log.WithComponent("election");
    eo.on_started_leading = [&, elog](const store::EtcdFence& fence) {
      fenced->SetFence(fence);
      elog.Info("leading: the controller starts here",
                {{"replica", replica_name}, {"fence_revision", fence.create_revision}});
      if (absl::Status s = start_leader_work(*fenced_metered); !s.ok()) {
        // A bad option, the same on every replica: exit (releasing the lease) as the SQLite
        // path does, rather than lead without a controller.
        elog.Error(s.message());
        leader_work_failed = true;
        server.Stop();
      }
    };
    eo.on_stopped_leading = [&, elog](const std::string& why) {
      // Stop writing first (the fence would refuse the writes anyway), then the controller.
      fenced->SetFence(std::nullopt);
      elog.Warn("not leading: the controller stops here",
                {{"replica", replica_name}, {"why", why}});
      stop_leader_work();
    };
    eo.on_new_leader = [elog](const std::string& holder) {
      elog.Info("leader", {{"holder", holder.empty() ? std::string("(none)") : holder}});
    };
    election = std::make_unique<store::EtcdElection>(*etcd, clock, eo);
    elected = election.get();
    election->RunInBackground();
  }
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&sigs, &sig);
    // Leadership first (the lease revoked, the controller stopped): a standby takes over while
    // this replica finishes its requests.
    if (election) election->Stop();
    server.Stop();
  });
  server.Wait();
  // Wake the waiter if the server stopped by itself.
  // SIGTERM is blocked in every thread and only sigwait takes it, so this
  // ends the waiter's sigwait; it terminates nothing.
  pthread_kill(waiter.native_handle(), SIGTERM);  // NOLINT(bugprone-bad-signal-to-kill-thread)
  waiter.join();
  if (election) {
    election->Stop();  // stops the controller and hands leadership over at once
    elected = nullptr;
  } else {
    stop_leader_work();
  }
  log.Info("stopped");
  return leader_work_failed ? 1 : 0;
}

}  // namespace

void RegisterServerCommands(CLI::App& app) {
  auto flags = std::make_shared<ServerFlags>();
  CLI::App* cmd = app.add_subcommand("server", "Run the control-plane API server");
  cmd->add_option("--data-dir", flags->data_dir,
                  "Directory of the durable SQLite store (and of the admin token); required "
                  "unless --store is etcd");
  cmd->add_option("--store", flags->store,
                  "The store: sqlite (default, in --data-dir) or "
                  "etcd://HOST:PORT[,HOST:PORT...][/PREFIX] (etcds:// for TLS; keys under PREFIX, "
                  "default /tessera/)");
  cmd->add_option("--etcd-cacert", flags->etcd_cacert,
                  "PEM CA bundle verifying etcd's serving certificate (implies TLS)");
  cmd->add_option("--etcd-cert", flags->etcd_cert,
                  "PEM client certificate presented to etcd (with --etcd-key; implies TLS)");
  cmd->add_option("--etcd-key", flags->etcd_key, "PEM key of --etcd-cert");
  cmd->add_option("--leader-lease-seconds", flags->leader_lease_s,
                  "etcd only: replicas on one etcd prefix elect a leader, the one that runs the "
                  "controller, on an etcd lease of this TTL; a crashed leader is replaced after "
                  "about this long (etcd's minimum is 2 s by default)")
      ->check(CLI::Range(1.0, 60.0))
      ->capture_default_str();
  cmd->add_option("--replica-name", flags->replica_name,
                  "etcd only: this replica's name in the leader election (default HOSTNAME-PID)");
  cmd->add_option("--listen", flags->listen, "HOST:PORT to serve on (port 0: any free port)");
  cmd->add_option("--tokens-file", flags->tokens_file,
                  "Bearer tokens: lines of TOKEN NAMESPACE admin|user|node:NAME. Without it the "
                  "server creates an admin token in DATA_DIR/admin-token (mode 0600) at first "
                  "start, says where on stderr, and serves with that");
  cmd->add_flag("--insecure-no-auth", flags->insecure_no_auth,
                "Serve without authentication (every request acts as admin); refused unless "
                "--listen is a loopback address");
  cmd->add_option("--retain-revisions", flags->retain_revisions,
                  "Watch history kept, in revisions (older: 410 Gone)");
  cmd->add_option("--threads", flags->threads,
                  "Worker threads running requests (connections and long-polls hold none)");
  cmd->add_option("--max-watches", flags->max_watches,
                  "Open watch streams at most (each holds a thread while it streams; 429 past it)");
  cmd->add_option("--io-threads", flags->io_threads,
                  "Threads that accept, read and write connections (event-driven)");
  cmd->add_option("--max-connections", flags->max_connections,
                  "Open connections at most (503 past it)");
  cmd->add_option("--header-timeout-seconds", flags->header_timeout_s,
                  "A request's line and headers (and a TLS handshake) must arrive within this "
                  "long of their first byte, however they trickle; then 400 and the connection "
                  "is closed")
      ->check(CLI::Range(0.1, 3600.0));
  cmd->add_flag("!--no-scheduler", flags->scheduler, "Serve the API only; do not schedule");
  cmd->add_flag("--federation", flags->federation,
                "Be the hub of a federation: hand jobs to the member clusters named by Cluster "
                "objects instead of scheduling them here (docs/federation.md)");
  cmd->add_option("--federation-name", flags->federation_name,
                  "This hub's name, labelled on the copies it creates in members (default hub)");
  cmd->add_option("--federation-failover-seconds", flags->federation_failover_s,
                  "A member not answering this long loses its jobs to other members");
  cmd->add_option(
         "--federation-requeue-seconds", flags->federation_requeue_s,
         "A job its member accepted but has not placed for this long moves to another "
         "member that fits it now (0: never; the wait doubles with each move of a job; a placed "
         "or running job never moves)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--node-grace-seconds", flags->node_grace_s,
                  "A node without a heartbeat this long turns NotReady (0: never)");
  cmd->add_option("--node-status-seconds", flags->node_status_s,
                  "A heartbeat that changes nothing writes the Node only when its stored "
                  "lastHeartbeatTime is this old (liveness is kept in memory)");
  cmd->add_option("--event-ttl-seconds", flags->event_ttl_s,
                  "Event objects older than this are deleted (0: kept forever)");
  cmd->add_option("--eviction-seconds", flags->eviction_s,
                  "A NotReady node loses its gangs after this long");
  cmd->add_option("--checkpoint-gpu-mtbf-hours", flags->checkpoint_gpu_mtbf_h,
                  "per-GPU mean time between failures for the checkpoint interval chosen for "
                  "TrainingJobs with spec.checkpoint.costSeconds (Young/Daly); 0: the fleet's "
                  "observed rate once 3 GPUs failed, else 50,000 h")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--elastic-grow-seconds", flags->elastic_grow_s,
                  "An elastic TrainingJob below maxReplicas grows back at most this often "
                  "(each resize restarts its members from the last checkpoint)");
  cmd->add_option("--autoscale-window-seconds", flags->autoscale_window_s,
                  "An autoscaled InferenceService scales down to the largest replica count "
                  "recommended over this window (Kubernetes HPA's stabilization)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--autoscale-tolerance", flags->autoscale_tolerance,
                  "Latency within this fraction of an InferenceService's p99 target changes "
                  "nothing")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--autoscale-freshness-seconds", flags->autoscale_freshness_s,
                  "Replica metrics older than this are not an autoscaling signal")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--tls-cert", flags->tls_cert,
                  "Serve HTTPS with this PEM certificate (chain): TLS 1.2+ with forward-secret "
                  "suites only (ECDHE/DHE for TLS 1.2, TLS 1.3)");
  cmd->add_option("--tls-key", flags->tls_key,
                  "PEM private key of --tls-cert: RSA of at least 2048 bits or EC of at least 256");
  cmd->add_option("--profile", flags->profile,
                  "Scheduler profile YAML (deploy/profiles/; the built-in and packing plugins, "
                  "docs/scheduler.md); default: the built-in default profile");
  cmd->add_option("--queue-config", flags->queue_config,
                  "Queueing YAML: fair share, priority classes, preemption, backfill, queues "
                  "(docs/queueing.md); Queue objects add to its queues");
  cmd->add_option("--log-format", flags->log_format,
                  "Log lines on stderr: text, or json (one object per line)");
  cmd->add_option("--otlp-endpoint", flags->otlp_endpoint,
                  "Export scheduling decision spans as OTLP/HTTP JSON to this collector "
                  "(http://HOST:4318)");
  cmd->footer(
      "Limits at the edge (docs/api.md): request bodies at most 1 MiB in any transfer encoding "
      "(413; read only after the token is checked, 401 first); open watches at most --max-watches, "
      "binding long-polls at most 20000, and no token more than a quarter of either (429).\n"
      "Examples:\n"
      "  tessera server --data-dir /var/lib/tessera   # an admin token in DATA_DIR/admin-token\n"
      "  tessera server --data-dir d --listen 0.0.0.0:7420 --tokens-file tokens \\\n"
      "      --tls-cert cert.pem --tls-key key.pem --queue-config queues.yaml");
  cmd->callback([flags] {
    if (int rc = RunServer(*flags); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace tessera::server
