// `tessera bench api`: durable submission throughput and latency of the API
// server, and its restart time with many stored jobs. Prints one JSON object.
//
// The server runs in-process on a SqliteStore (WAL, synchronous=FULL: every
// acknowledged submission is fsynced) in a temporary directory, on a loopback
// port; clients are real HTTP clients on keep-alive connections. As `tessera server` runs by
// default, requests carry a bearer token that the server checks, and the scheduling controller
// runs on the same store, admitting each job (its Queued status and Event: the writes a job
// costs besides its own); --no-auth and --no-scheduler measure without them.
#include "bench/api/bench_api.h"

#include <httplib.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <iostream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "api/table.h"
#include "common/clock.h"
#include "controller/scheduling_controller.h"
#include "nlohmann/json.hpp"
#include "server/api_server.h"
#include "store/metered_store.h"
#include "store/sqlite_store.h"

namespace tessera::bench {
namespace {

using server::ApiServer;
using server::ApiServerOptions;
using server::Authenticator;

using Json = nlohmann::json;

struct BenchFlags {
  int clients = 100;
  double seconds = 3;
  int batch = 50;
  int restart_jobs = 50000;
  bool no_group_commit = false;
  bool no_auth = false;
  bool no_scheduler = false;
  std::string dir;
};

constexpr char kToken[] = "bench-admin-token";

Json Job(const std::string& name) {
  return {{"apiVersion", "tessera.dev/v1"},
          {"kind", "TrainingJob"},
          {"metadata", {{"name", name}, {"namespace", "bench"}, {"labels", {{"team", "bench"}}}}},
          {"spec",
           {{"queue", "default"},
            {"groups", {{{"name", "workers"}, {"count", 4}, {"gpusPerReplica", 8}}}}}}};
}

double Percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = std::min(v.size() - 1, static_cast<size_t>(q * v.size()));
  return v[i];
}

// Runs `clients` threads for `seconds`, each POSTing `batch` jobs per request
// (batch 1: one job per request to the collection; else /api/v1/batch).
Json Submit(int port, int clients, double seconds, int batch, const std::string& tag,
            const httplib::Headers& headers) {
  std::atomic<bool> stop{false};
  std::atomic<int64_t> jobs{0}, requests{0}, errors{0};
  std::vector<std::vector<double>> lat(clients);
  std::vector<std::thread> threads;
  threads.reserve(clients);
  absl::Time start = absl::Now();
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      httplib::Client cli("127.0.0.1", port);
      cli.set_keep_alive(true);
      cli.set_tcp_nodelay(true);  // as HTTP clients usually do (Go's net/http, curl)
      cli.set_read_timeout(30, 0);
      cli.set_default_headers(headers);
      for (int seq = 0; !stop; ++seq) {
        std::string body;
        if (batch == 1) {
          body = Job(absl::StrCat(tag, "-", c, "-", seq)).dump();
        } else {
          Json items = Json::array();
          for (int i = 0; i < batch; ++i)
            items.push_back(Job(absl::StrCat(tag, "-", c, "-", seq, "-", i)));
          body = Json{{"items", items}}.dump();
        }
        absl::Time t0 = absl::Now();
        auto r = batch == 1
                     ? cli.Post("/api/v1/namespaces/bench/trainingjobs", body, "application/json")
                     : cli.Post("/api/v1/batch", body, "application/json");
        lat[c].push_back(absl::ToDoubleMilliseconds(absl::Now() - t0));
        requests++;
        if (r && r->status == 201) {
          jobs += batch;
        } else {
          if (errors++ < 3) {
            std::cerr << "bench api: request failed: "
                      << (r ? absl::StrCat("HTTP ", r->status, " ", r->body)
                            : httplib::to_string(r.error()))
                      << "\n";
          }
        }
      }
    });
  }
  absl::SleepFor(absl::Seconds(seconds));
  stop = true;
  for (auto& t : threads) t.join();
  double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
  std::vector<double> all;
  for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
  return {{"batch_size", batch},
          {"submissions_per_s", jobs.load() / elapsed},
          {"requests_per_s", requests.load() / elapsed},
          {"requests", requests.load()},
          {"errors", errors.load()},
          {"p50_ms", Percentile(all, 0.50)},
          {"p99_ms", Percentile(all, 0.99)}};
}

int RunBench(const BenchFlags& f) {
  std::string dir = f.dir;
  bool temp = dir.empty();
  if (temp) {
    const char* tmp = getenv("TMPDIR");
    std::string tmpl = absl::StrCat(tmp ? tmp : "/tmp", "/tessera_bench_XXXXXX");
    if (mkdtemp(tmpl.data()) == nullptr) {
      std::cerr << "bench api: cannot create a temporary directory\n";
      return 1;
    }
    dir = tmpl;
  } else {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      std::cerr << "bench api: --dir " << dir << ": " << ec.message() << "\n";
      return 1;
    }
  }
  const std::string data = dir + "/data";
  RealClock clock;
  Json out = {{"benchmark", "api"},
              {"clients", f.clients},
              {"seconds_per_phase", f.seconds},
              {"group_commit", !f.no_group_commit}};
  {
    store::SqliteStoreOptions opts;
    opts.group_commit = !f.no_group_commit;
    auto db = store::SqliteStore::Open(data, opts);
    if (!db.ok()) {
      std::cerr << "bench api: " << db.status().message() << "\n";
      return 1;
    }
    store::MeteredStore metered(**db, clock);
    ApiServerOptions so;
    so.threads = f.clients + 8;
    ApiServer server(metered, clock,
                     f.no_auth ? Authenticator::AllowAll() : Authenticator::SingleAdmin(kToken),
                     so);
    auto port = server.Start("127.0.0.1", 0);
    if (!port.ok()) {
      std::cerr << "bench api: " << port.status().message() << "\n";
      return 1;
    }
    std::unique_ptr<controller::SchedulingController> ctl;
    if (!f.no_scheduler) {
      absl::StatusOr<std::unique_ptr<controller::SchedulingController>> c =
          controller::SchedulingController::Create(metered, clock, controller::ControllerOptions{});
      if (!c.ok()) {
        std::cerr << "bench api: " << c.status().message() << "\n";
        return 1;
      }
      ctl = *std::move(c);
      ctl->RunInBackground();
    }
    const httplib::Headers headers =
        f.no_auth ? httplib::Headers{}
                  : httplib::Headers{{"Authorization", absl::StrCat("Bearer ", kToken)}};
    out["authentication"] = !f.no_auth;
    out["scheduler"] = !f.no_scheduler;
    out["one_per_request"] = Submit(*port, f.clients, f.seconds, 1, "single", headers);
    out["batched"] = Submit(*port, f.clients, f.seconds, f.batch, "batch", headers);
    if (ctl) {
      // Whether admission kept up: the jobs the controller had admitted (phase Queued) when it
      // stopped, of all submitted.
      ctl->Stop();
      int64_t submitted = 0, queued = 0;
      store::ListOptions lo;
      lo.limit = 5000;
      while (true) {
        absl::StatusOr<store::ListResult> page = (*db)->List("/registry/trainingjobs/bench/", lo);
        if (!page.ok()) break;
        for (const store::KeyValue& kv : page->kvs) {
          ++submitted;
          if (absl::StrContains(kv.value, R"("phase":"Queued")")) ++queued;
        }
        if (!page->more) break;
        lo.continue_after = page->next_key;
      }
      out["jobs_submitted"] = submitted;
      out["jobs_admitted_when_stopped"] = queued;
    }
    store::StoreMetrics m = metered.Metrics();
    out["store"] = {
        {"txns", m.txns},
        {"commit_p50_us_bucket", absl::ToInt64Microseconds(m.CommitLatencyQuantile(0.5))},
        {"commit_p99_us_bucket", absl::ToInt64Microseconds(m.CommitLatencyQuantile(0.99))},
        {"commit_max_us", absl::ToInt64Microseconds(m.commit_latency_max)}};
    server.Stop();
  }
  // Restart: a store with exactly restart_jobs jobs (filled with batches of
  // 1000), closed, then reopened and served; then one full re-list as a
  // controller would do after a restart.
  const std::string restart_data = dir + "/restart";
  {
    auto db = store::SqliteStore::Open(restart_data);
    if (!db.ok()) {
      std::cerr << "bench api: " << db.status().message() << "\n";
      return 1;
    }
    ApiServer server(**db, clock, Authenticator::AllowAll(), {});
    auto port = server.Start("127.0.0.1", 0);
    if (!port.ok()) return 1;
    httplib::Client cli("127.0.0.1", *port);
    cli.set_read_timeout(60, 0);
    int64_t have = 0;
    for (int seq = 0; have < f.restart_jobs; ++seq) {
      Json items = Json::array();
      for (int i = 0; i < 1000 && have < f.restart_jobs; ++i, ++have) {
        items.push_back(Job(absl::StrCat("fill-", seq, "-", i)));
      }
      auto r = cli.Post("/api/v1/batch", Json{{"items", items}}.dump(), "application/json");
      if (!r || r->status != 201) {
        std::cerr << "bench api: filling the store failed\n";
        return 1;
      }
    }
    server.Stop();
  }
  absl::Time t0 = absl::Now();
  auto db = store::SqliteStore::Open(restart_data);
  if (!db.ok()) {
    std::cerr << "bench api: reopen: " << db.status().message() << "\n";
    return 1;
  }
  ApiServer server(**db, clock, Authenticator::AllowAll(), {});
  auto port = server.Start("127.0.0.1", 0);
  if (!port.ok()) return 1;
  double open_ms = absl::ToDoubleMilliseconds(absl::Now() - t0);
  httplib::Client cli("127.0.0.1", *port);
  cli.set_read_timeout(120, 0);
  auto first = cli.Get("/api/v1/namespaces/bench/trainingjobs/fill-0-0");
  double first_ms = absl::ToDoubleMilliseconds(absl::Now() - t0);
  if (!first || first->status != 200) {
    std::cerr << "bench api: the restarted server lost a job\n";
    return 1;
  }
  // A full re-list (pages of 5,000, the client's parse included): as objects, then as Tables
  // the way `tessera get` asks (api/table.h), twice: the server prepares each row once per
  // object revision, so the second Table list is what a user's repeated `get` costs.
  auto relist = [&](bool as_table, int64_t* listed) {
    const absl::Time t = absl::Now();
    *listed = 0;
    std::string cont;
    do {
      std::string path = absl::StrCat("/api/v1/namespaces/bench/trainingjobs?limit=5000",
                                      as_table ? "&includeObject=None" : "");
      if (!cont.empty()) path += "&continue=" + cont;
      httplib::Headers h;
      if (as_table) h.emplace("Accept", api::kTableAccept);
      auto r = cli.Get(path, h);
      if (!r || r->status != 200) break;
      Json page = Json::parse(r->body);
      *listed += page[as_table ? "rows" : "items"].size();
      cont = page["metadata"].value("continue", "");
    } while (!cont.empty());
    return absl::ToDoubleMilliseconds(absl::Now() - t);
  };
  int64_t listed = 0, rows_cold = 0, rows_warm = 0;
  const double list_ms = relist(false, &listed);
  const double table_cold_ms = relist(true, &rows_cold);
  const double table_warm_ms = relist(true, &rows_warm);
  out["restart"] = {{"jobs_stored", listed},
                    {"revision", (*db)->CurrentRevision()},
                    {"open_and_listen_ms", open_ms},
                    {"first_get_after_open_ms", first_ms},
                    {"full_relist_ms", list_ms},
                    {"table_relist_first_ms", table_cold_ms},
                    {"table_relist_again_ms", table_warm_ms},
                    {"table_rows", rows_warm}};
  server.Stop();
  db->reset();
  if (temp) std::filesystem::remove_all(dir);
  std::cout << out.dump(2) << std::endl;
  return 0;
}

}  // namespace

void RegisterApiBenchCommand(CLI::App& bench) {
  auto flags = std::make_shared<BenchFlags>();
  CLI::App* cmd = bench.add_subcommand("api", "API server: durable submissions/s, p99, restart");
  cmd->add_option("--clients", flags->clients, "Concurrent HTTP clients");
  cmd->add_option("--seconds", flags->seconds, "Duration of each submission phase");
  cmd->add_option("--batch", flags->batch, "Jobs per request in the batched phase");
  cmd->add_option("--restart-jobs", flags->restart_jobs, "Jobs stored for the restart test");
  cmd->add_flag("--no-group-commit", flags->no_group_commit,
                "One SQLite transaction (one fsync) per write, for comparison");
  cmd->add_flag("--no-auth", flags->no_auth, "Serve without authentication (default: a token)");
  cmd->add_flag("--no-scheduler", flags->no_scheduler,
                "Without the scheduling controller (default: it admits every job)");
  cmd->add_option("--dir", flags->dir, "Data directory (default: a temporary one, removed)");
  cmd->callback([flags] {
    if (int rc = RunBench(*flags); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace tessera::bench
