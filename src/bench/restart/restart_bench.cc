#include "bench/restart/restart_bench.h"

#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <iostream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "api/kinds.h"
#include "api/store_layout.h"
#include "common/bench_stats.h"
#include "common/clock.h"
#include "controller/scheduling_controller.h"
#include "store/sqlite_store.h"

namespace tessera::bench {
namespace {

using api::kApiVersion;
using api::ObjectKey;
using api::Timestamp;
using controller::ControllerOptions;
using controller::SchedulingController;
using Json = nlohmann::json;

struct RestartBenchFlags {
  int nodes = 12500;
  int gpus_per_node = 8;
  int jobs = 50000;
  int nodes_per_rack = 32;
  std::string dir;  // empty: a fresh temporary directory
};

// Writes nodes and jobs whose stored placements cover the fleet: job i has
// `gpus_per_node * nodes / jobs` GPUs (at least 1) on one node; the last job is Queued, its GPUs
// free, so that the first step after the restart binds it.
absl::Status Populate(store::Store& s, const RestartBenchFlags& f, int* per_job) {
  const std::string now = Timestamp(absl::Now());
  std::vector<store::Op> batch;
  auto flush = [&]() -> absl::Status {
    if (batch.empty()) return absl::OkStatus();
    absl::StatusOr<int64_t> r = s.Txn(batch);
    batch.clear();
    return r.status();
  };
  for (int n = 0; n < f.nodes; ++n) {
    std::string name = absl::StrCat("n", n);
    Json node = {{"apiVersion", kApiVersion},
                 {"kind", "Node"},
                 {"metadata", {{"name", name}, {"uid", name}, {"creationTimestamp", now}}},
                 {"spec",
                  {{"gpuType", "H100"},
                   {"gpuCount", f.gpus_per_node},
                   {"rack", absl::StrCat("r", n / f.nodes_per_rack)},
                   {"block", absl::StrCat("b", n / (f.nodes_per_rack * 8))}}},
                 {"status", {{"phase", "Ready"}}}};
    batch.push_back(store::Op::Create(ObjectKey("nodes", "", name), api::ToStored(node)));
    if (batch.size() >= 2000) {
      if (absl::Status st = flush(); !st.ok()) return st;
    }
  }
  const int per_node = f.gpus_per_node / *per_job;
  for (int j = 0; j < f.jobs; ++j) {
    const int node = j / std::max(1, per_node);
    std::string name = absl::StrCat("job-", j);
    Json spec = {{"queue", "default"},
                 {"groups", {{{"name", "w"}, {"count", 1}, {"gpusPerReplica", *per_job}}}}};
    Json status = {{"phase", "Running"}, {"generation", 1}};
    // The last job is left queued on free GPUs: the restart is timed to its binding.
    if (node < f.nodes && j + 1 < f.jobs) {
      Json gpus = Json::array();
      for (int g = 0; g < *per_job; ++g) gpus.push_back((j % per_node) * *per_job + g);
      status["placement"] = {{{"group", "w"},
                              {"member", 0},
                              {"node", absl::StrCat("n", node)},
                              {"gpus", gpus},
                              {"gpuMilli", 1000},
                              {"generation", 1}}};
    } else {
      status = {{"phase", "Queued"}};
    }
    Json job = {
        {"apiVersion", kApiVersion},
        {"kind", "TrainingJob"},
        {"metadata",
         {{"name", name}, {"namespace", "bench"}, {"uid", name}, {"creationTimestamp", now}}},
        {"spec", spec},
        {"status", status}};
    batch.push_back(
        store::Op::Create(ObjectKey("trainingjobs", "bench", name), api::ToStored(job)));
    if (batch.size() >= 2000) {
      if (absl::Status st = flush(); !st.ok()) return st;
    }
  }
  return flush();
}

// CPU time (user + system, all threads) of this process so far. On a shared
// machine the wall time of a restart mostly measures how long it waited for
// a core; the CPU time is the work done.
absl::Duration ProcessCpu() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return absl::DurationFromTimeval(ru.ru_utime) + absl::DurationFromTimeval(ru.ru_stime);
}

int Run(const RestartBenchFlags& f) {
  std::string dir = f.dir;
  if (dir.empty()) {
    const char* tmp = getenv("TMPDIR");
    std::string tmpl = absl::StrCat(tmp ? tmp : "/tmp", "/tessera_restart_XXXXXX");
    if (mkdtemp(tmpl.data()) == nullptr) {
      std::cerr << "bench restart: cannot create a temporary directory\n";
      return 1;
    }
    dir = tmpl;
  }
  const int64_t fleet_gpus = int64_t{f.nodes} * f.gpus_per_node;
  int per_job = static_cast<int>(std::max<int64_t>(1, fleet_gpus / std::max(1, f.jobs)));
  per_job = std::min(per_job, f.gpus_per_node);
  // Populated in a child process, so that the measured part starts, as a restarted server does,
  // with a heap that has not grown yet (page faults and all).
  absl::Duration populate;
  {
    const absl::Time t0 = absl::Now();
    const pid_t child = fork();
    if (child < 0) {
      std::cerr << "bench restart: fork failed\n";
      return 1;
    }
    if (child == 0) {
      absl::StatusOr<std::unique_ptr<store::SqliteStore>> db = store::SqliteStore::Open(dir, {});
      absl::Status s = db.status();
      if (s.ok() && (*db)->CurrentRevision() == 0) s = Populate(**db, f, &per_job);
      if (!s.ok()) std::cerr << "bench restart: " << s.message() << "\n";
      db = absl::UnknownError("closed");  // closes the store before exiting
      _exit(s.ok() ? 0 : 1);
    }
    int status = 0;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      return 1;
    }
    populate = absl::Now() - t0;
  }
  // The measured part: open the store as a restarted server would, list,
  // rebuild, and run the first step.
  absl::Time t0 = absl::Now();
  const absl::Duration cpu0 = ProcessCpu();
  absl::StatusOr<std::unique_ptr<store::SqliteStore>> db = store::SqliteStore::Open(dir, {});
  if (!db.ok()) {
    std::cerr << "bench restart: " << db.status().message() << "\n";
    return 1;
  }
  const absl::Duration open = absl::Now() - t0;
  RealClock clock;
  ControllerOptions co;
  absl::StatusOr<std::unique_ptr<SchedulingController>> c =
      SchedulingController::Create(**db, clock, co);
  if (!c.ok()) {
    std::cerr << "bench restart: " << c.status().message() << "\n";
    return 1;
  }
  absl::Status s = (*c)->Start();
  const absl::Time started = absl::Now();
  if (s.ok()) s = (*c)->Step();
  const absl::Duration total = absl::Now() - t0;
  const absl::Duration first_step = absl::Now() - started;
  const absl::Duration cpu = ProcessCpu() - cpu0;
  if (!s.ok()) {
    std::cerr << "bench restart: " << s.message() << "\n";
    return 1;
  }
  Json out = {{"bench", "restart"},
              {"nodes", (*c)->cluster().num_nodes()},
              {"gpus", (*c)->cluster().total_gpus()},
              {"jobs_stored", f.jobs},
              {"gpus_per_job", per_job},
              {"placements_restored", (*c)->stats().restored},
              {"allocated_gpus", (*c)->cluster().allocated_milli() / 1000},
              {"populate_s", absl::ToDoubleSeconds(populate)},
              {"store_open_ms", absl::ToDoubleMilliseconds(open)},
              {"controller_start_ms", absl::ToDoubleMilliseconds((*c)->stats().start_time)},
              {"store_read_ms", absl::ToDoubleMilliseconds((*c)->stats().start_read_time)},
              {"decode_and_rebuild_ms", absl::ToDoubleMilliseconds((*c)->stats().start_time -
                                                                   (*c)->stats().start_read_time)},
              {"first_step_ms", absl::ToDoubleMilliseconds(first_step)},
              {"bound_in_first_step", (*c)->stats().bound},
              {"restart_to_scheduling_ms", absl::ToDoubleMilliseconds(total)},
              {"restart_cpu_ms", absl::ToDoubleMilliseconds(cpu)},
              {"peak_rss_mb", PeakRssMb()},
              {"dir", dir}};
  std::cout << out.dump() << std::endl;
  return 0;
}

}  // namespace

void RegisterRestartBenchCommands(CLI::App& bench) {
  auto f = std::make_shared<RestartBenchFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "restart", "Controller restart-to-scheduling time on a large stored fleet (SQLite)");
  cmd->add_option("--nodes", f->nodes, "Nodes stored");
  cmd->add_option("--gpus-per-node", f->gpus_per_node, "GPUs per node");
  cmd->add_option("--jobs", f->jobs, "Jobs stored, each bound to GPUs of one node");
  cmd->add_option("--nodes-per-rack", f->nodes_per_rack, "Nodes per rack");
  cmd->add_option("--dir", f->dir, "Store directory (reused if it holds data)");
  cmd->callback([f] {
    if (int rc = Run(*f); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace tessera::bench
