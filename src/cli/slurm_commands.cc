// Slurm's habits for HPC users (docs/control-plane.md, "Slurm habits"):
//   tessera cancel [NAME...] [-u USER] [-t STATE] [-q QUEUE] [-A]   scancel: ends the jobs (the
//       status subresource, phase Failed; the job stays, reason Cancelled, for `history`)
//   tessera hold NAME... / tessera release NAME...                  scontrol hold/release:
//       spec.suspend true/false (a held job that was running is checkpointed and requeued)
//   tessera history [-u USER] [-t STATE] [-q QUEUE] [--since 24h] [-A] [-o json]
//       sacct: every job with its state, exit code, GPUs, GPU-hours, wait and run time
// STATE takes Tessera's phases or Slurm's names (PENDING, RUNNING, COMPLETED, FAILED,
// CANCELLED), case-insensitively. The jobs are TrainingJobs and InferenceServices.
#include <algorithm>
#include <memory>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "api/job_accounting.h"
#include "api/member_status.h"
#include "api/store_layout.h"
#include "cli/cli_internal.h"
#include "common/clock.h"

namespace tessera::cli {
namespace {

struct Filter {
  std::vector<std::string> names;
  std::string user, state, queue, since;
  bool all_namespaces = false;
};

void AddFilterFlags(CLI::App* cmd, Filter* f) {
  cmd->add_option("names", f->names, "Job names");
  cmd->add_option("-u,--user", f->user, "Only jobs this user submitted");
  cmd->add_option("-t,--state", f->state,
                  "Only jobs in this state: a phase or PENDING|RUNNING|COMPLETED|FAILED|CANCELLED");
  cmd->add_option("-q,--queue", f->queue, "Only jobs of this queue");
  cmd->add_flag("-A,--all-namespaces", f->all_namespaces, "Across every namespace");
}

// Slurm's state of a job: PENDING, RUNNING, COMPLETED, FAILED or CANCELLED.
std::string SlurmState(const Json& job) {
  const std::string phase = Phase(job);
  const Json st = job.value("status", Json::object());
  if (phase == "Succeeded") return "COMPLETED";
  if (phase == "Failed") return st.value("reason", "") == "Cancelled" ? "CANCELLED" : "FAILED";
  if (phase == "Scheduled" || phase == "Running" || phase == "Deploying" || phase == "Ready" ||
      phase == "Degraded") {
    return "RUNNING";
  }
  if (phase == "Suspended") return "SUSPENDED";
  return "PENDING";
}

bool Matches(const Filter& f, const Json& job) {
  const std::string name = job["metadata"].value("name", "");
  if (!f.names.empty() && std::find(f.names.begin(), f.names.end(), name) == f.names.end()) {
    return false;
  }
  if (!f.user.empty() && SubmittedBy(job) != f.user) return false;
  if (!f.queue.empty() && job["spec"].value("queue", "default") != f.queue) return false;
  if (!f.state.empty()) {
    const std::string want = absl::AsciiStrToUpper(f.state);
    if (want != SlurmState(job) && want != absl::AsciiStrToUpper(Phase(job))) return false;
  }
  return true;
}

// The jobs of both kinds the filter selects, oldest first.
std::vector<Json> Jobs(ApiClient& client, const Filter& f) {
  std::vector<Json> out;
  for (const char* res : {"trainingjobs", "inferenceservices"}) {
    absl::StatusOr<std::vector<Json>> l =
        ListAll(client, *FindResource(res), client.config().ns, f.all_namespaces, "");
    if (!l.ok()) Die(std::string(l.status().message()));
    for (Json& j : *l) {
      if (Matches(f, j)) out.push_back(std::move(j));
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Json& a, const Json& b) {
    return a["metadata"].value("creationTimestamp", "") <
           b["metadata"].value("creationTimestamp", "");
  });
  return out;
}

std::string What(const Json& job) {
  return absl::StrCat(absl::AsciiStrToLower(job.value("kind", "")), ".tessera.dev/",
                      job["metadata"].value("name", ""));
}

// --- cancel -------------------------------------------------------------------

struct CancelFlags {
  ConfigFlags conn;
  Filter filter;
  std::string reason;
};

void RunCancel(const CancelFlags& f) {
  if (f.filter.names.empty() && f.filter.user.empty() && f.filter.state.empty() &&
      f.filter.queue.empty()) {
    Die("error: say which jobs to cancel: NAME..., --user, --state or --queue");
  }
  ApiClient client = MakeClient(f.conn);
  std::vector<Json> jobs = Jobs(client, f.filter);
  bool failed = false;
  for (const std::string& name : f.filter.names) {
    if (std::none_of(jobs.begin(), jobs.end(),
                     [&](const Json& j) { return j["metadata"].value("name", "") == name; })) {
      std::cerr << "error: no job \"" << name << "\" matches\n";
      failed = true;
    }
  }
  int cancelled = 0;
  for (const Json& job : jobs) {
    if (IsTerminal(Phase(job))) {
      if (!f.filter.names.empty()) std::cout << What(job) << " already finished\n";
      continue;
    }
    Json body = {{"status", {{"phase", "Failed"}}}};
    if (!f.reason.empty()) body["status"]["message"] = f.reason;
    absl::StatusOr<Response> res = client.Do("PUT", ObjectPath(job) + "/status", &body);
    if (!res.ok()) Die(std::string(res.status().message()));
    if (res->code == 200) {
      std::cout << What(job) << " cancelled\n";
      ++cancelled;
    } else {
      std::cerr << What(job) << ": " << ErrorText(*res) << "\n";
      failed = true;
    }
  }
  if (cancelled == 0 && f.filter.names.empty()) std::cerr << "No jobs to cancel.\n";
  if (failed) throw CLI::RuntimeError(1);
}

// --- hold / release -----------------------------------------------------------

struct HoldFlags {
  ConfigFlags conn;
  std::vector<std::string> names;
};

// Sets spec.suspend on each named job (TrainingJob first, else InferenceService), with
// optimistic concurrency.
void SetHeld(const HoldFlags& f, bool hold) {
  ApiClient client = MakeClient(f.conn);
  bool failed = false;
  for (const std::string& name : f.names) {
    bool done = false;
    for (int attempt = 0; attempt < 10 && !done; ++attempt) {
      Response cur = GetJob(client, client.config().ns, name);
      if (cur.code != 200) {
        std::cerr << ErrorText(cur) << "\n";
        failed = true;
        break;
      }
      Json job = std::move(cur.body);
      if (IsTerminal(Phase(job))) {
        std::cerr << What(job) << " has finished; nothing to " << (hold ? "hold" : "release")
                  << "\n";
        failed = true;
        break;
      }
      job["spec"]["suspend"] = hold;
      job.erase("status");
      absl::StatusOr<Response> res = client.Do("PUT", ObjectPath(job), &job);
      if (!res.ok()) Die(std::string(res.status().message()));
      if (res->code == 409) continue;
      if (res->code != 200) {
        std::cerr << ErrorText(*res) << "\n";
        failed = true;
        break;
      }
      std::cout << What(job) << (hold ? " held" : " released") << "\n";
      done = true;
    }
  }
  if (failed) throw CLI::RuntimeError(1);
}

// --- history ------------------------------------------------------------------

struct HistoryFlags {
  ConfigFlags conn;
  Filter filter;
  std::string output;
};

// The exit code sacct shows: the first failed member's (0 when every member exited 0), "-"
// while nothing finished.
std::string ExitCode(const Json& job) {
  const std::optional<int64_t> code =
      api::JobExitCode(api::MembersOf(job.value("status", Json::object())));
  return code ? std::to_string(*code) : "-";
}

std::optional<absl::Time> TimeOf(const Json& obj, const char* key) {
  absl::Time t;
  if (!obj.contains(key) || !obj[key].is_string() || !api::ParseTimestamp(obj[key], &t)) {
    return std::nullopt;
  }
  return t;
}

std::string Duration(std::optional<absl::Time> from, std::optional<absl::Time> to) {
  if (!from || !to) return "-";
  int64_t s = std::max<int64_t>(0, absl::ToInt64Seconds(*to - *from));
  // Slurm's [D-]HH:MM:SS.
  const int64_t d = s / 86400;
  s %= 86400;
  return absl::StrFormat("%s%02d:%02d:%02d", d > 0 ? absl::StrCat(d, "-") : "", s / 3600,
                         s / 60 % 60, s % 60);
}

void RunHistory(const HistoryFlags& f) {
  ApiClient client = MakeClient(f.conn);
  std::vector<Json> jobs = Jobs(client, f.filter);
  RealClock clock;
  const absl::Time now = clock.Now();
  if (!f.filter.since.empty()) {
    absl::Duration d;
    if (!absl::ParseDuration(f.filter.since, &d)) {
      Die(absl::StrCat("error: --since ", f.filter.since, ": expected a duration like 24h or 90m"));
    }
    std::erase_if(jobs, [&](const Json& j) {
      std::optional<absl::Time> created = TimeOf(j["metadata"], "creationTimestamp");
      return created && *created < now - d;
    });
  }
  Json rows = Json::array();
  for (const Json& j : jobs) {
    const Json st = j.value("status", Json::object());
    const std::optional<absl::Time> created = TimeOf(j["metadata"], "creationTimestamp");
    const std::optional<absl::Time> start = TimeOf(st, "startTime");
    std::optional<absl::Time> end = TimeOf(st, "completionTime");
    const double gpu_hours = api::GpuSecondsUsed(st, now) / 3600;
    Json row = {{"namespace", j["metadata"].value("namespace", "")},
                {"name", j["metadata"].value("name", "")},
                {"kind", j.value("kind", "")},
                {"user", SubmittedBy(j)},
                {"queue", j["spec"].value("queue", "default")},
                {"state", SlurmState(j)},
                {"phase", Phase(j)},
                {"exitCode", ExitCode(j)},
                {"gpus", RequestedGpus(j)},
                {"gpuHours", static_cast<double>(std::llround(gpu_hours * 1000)) / 1000},
                {"submitted", j["metadata"].value("creationTimestamp", "")},
                {"start", st.value("startTime", "")},
                {"end", st.value("completionTime", "")},
                {"wait", Duration(created, start ? start : (end ? end : std::optional(now)))},
                {"elapsed", Duration(start, end ? end : std::optional(now))},
                {"restarts", st.value("restarts", 0)}};
    rows.push_back(std::move(row));
  }
  if (f.output == "json") {
    std::cout << Json{{"items", rows}}.dump(2) << "\n";
    return;
  }
  if (!f.output.empty()) Die("error: -o " + f.output + ": must be json (or omitted for a table)");
  if (rows.empty()) {
    std::cerr << "No jobs.\n";
    return;
  }
  std::vector<std::vector<std::string>> table = {{"NAME", "USER", "QUEUE", "STATE", "EXIT", "GPUS",
                                                  "GPU-HOURS", "WAIT", "ELAPSED", "RESTARTS",
                                                  "END"}};
  if (f.filter.all_namespaces) table[0].insert(table[0].begin(), "NAMESPACE");
  for (const Json& r : rows) {
    table.push_back({r["name"], r["user"], r["queue"], r["state"], r["exitCode"],
                     std::to_string(r["gpus"].get<int64_t>()),
                     absl::StrFormat("%.2f", r["gpuHours"].get<double>()), r["wait"], r["elapsed"],
                     std::to_string(r["restarts"].get<int64_t>()),
                     r["end"].get<std::string>().empty() ? "-" : r["end"].get<std::string>()});
    if (f.filter.all_namespaces) table.back().insert(table.back().begin(), r["namespace"]);
  }
  PrintTable(std::cout, table);
}

}  // namespace

void RegisterSlurmCommands(CLI::App& app) {
  {
    auto f = std::make_shared<CancelFlags>();
    CLI::App* cmd =
        app.add_subcommand("cancel", "End jobs by name, user, state or queue (Slurm's scancel)");
    AddFilterFlags(cmd, &f->filter);
    cmd->add_option("--reason", f->reason, "Why (kept in the job's message)");
    AddConnectionFlags(cmd, &f->conn);
    cmd->footer(
        "Cancelled jobs stay, phase Failed with reason Cancelled, so `tessera history` shows "
        "them; `tessera delete` removes jobs.\n"
        "Examples:\n"
        "  tessera cancel llama-7b\n"
        "  tessera cancel --user alice --state pending\n"
        "  tessera cancel -q research -t running --reason 'maintenance at 18:00'");
    cmd->callback([f] { RunCancel(*f); });
  }
  for (const bool hold : {true, false}) {
    auto f = std::make_shared<HoldFlags>();
    CLI::App* cmd =
        app.add_subcommand(hold ? "hold" : "release",
                           hold ? "Keep jobs from starting: spec.suspend (Slurm's scontrol hold)"
                                : "Let held jobs start again (Slurm's scontrol release)");
    cmd->add_option("names", f->names, "Job names")->required();
    AddConnectionFlags(cmd, &f->conn);
    cmd->footer(hold ? "A held job that was running is checkpointed, its GPUs released, and it "
                       "waits until released.\nExample:\n  tessera hold llama-7b"
                     : "Example:\n  tessera release llama-7b");
    cmd->callback([f, hold] { SetHeld(*f, hold); });
  }
  {
    auto f = std::make_shared<HistoryFlags>();
    CLI::App* cmd = app.add_subcommand(
        "history", "Jobs with state, exit code, GPU-hours, wait and run time (Slurm's sacct)");
    AddFilterFlags(cmd, &f->filter);
    cmd->add_option("--since", f->filter.since, "Only jobs submitted within this (24h, 90m)");
    cmd->add_option("-o,--output", f->output, "json");
    AddConnectionFlags(cmd, &f->conn);
    cmd->footer(
        "GPU-hours count every binding the job held (shared GPUs by their share), across "
        "requeues and restarts.\n"
        "Examples:\n"
        "  tessera history --since 24h\n"
        "  tessera history -A --user alice --state failed");
    cmd->callback([f] { RunHistory(*f); });
  }
}

}  // namespace tessera::cli
