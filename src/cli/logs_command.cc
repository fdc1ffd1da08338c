// `tessera logs JOB`: a job's member logs, read from the node agents that ran them. The server
// and token come from the same places as every other command (--server, env TESSERA_SERVER /
// TESSERA_TOKEN, ~/.tessera/config contexts); the job's nodes from its placement while it runs
// and from its members' reports (status.members[].node) once it has finished, so a failed or
// completed job's logs are still there while its agents keep them.
#include <httplib.h>

#include <iostream>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/cli_internal.h"

namespace tessera::cli {
namespace {

struct LogsFlags {
  ConfigFlags conn;
  std::string job;
  bool follow = false;
  std::string member;
  std::string stream = "stdout";
  std::string kind;  // empty: TrainingJob, else InferenceService
  int tail = -1;     // the last N lines of each member; -1: all
};

// The job object: of `kind`, or when none is given a TrainingJob, else an InferenceService.
Json FindJob(ApiClient& api, const LogsFlags& f, const std::string& ns, std::string* kind) {
  std::vector<std::string> kinds = {"TrainingJob", "InferenceService"};
  if (!f.kind.empty()) kinds = {f.kind};
  for (const std::string& k : kinds) {
    const char* plural = k == "InferenceService" ? "inferenceservices" : "trainingjobs";
    absl::StatusOr<Response> r =
        api.Do("GET", absl::StrCat("/api/v1/namespaces/", ns, "/", plural, "/", f.job));
    if (!r.ok()) Die(absl::StrCat("error: ", r.status().message()));
    if (r->code == 200) {
      *kind = k;
      return r->body;
    }
    if (r->code != 404) Die(absl::StrCat("error: ", ErrorText(*r)));
  }
  Die(absl::StrCat("error: no TrainingJob or InferenceService \"", f.job, "\" in namespace ", ns));
}

void RunLogs(const LogsFlags& f) {
  ApiClient api = MakeClient(f.conn);
  const std::string& ns = api.config().ns;
  std::string kind;
  const Json job = FindJob(api, f, ns, &kind);
  const Json& st = job.contains("status") ? job["status"] : Json::object();
  std::set<std::string> nodes;
  for (const Json& p : st.value("placement", Json::array())) nodes.insert(p.value("node", ""));
  for (const Json& m : st.value("members", Json::array())) nodes.insert(m.value("node", ""));
  nodes.erase("");
  if (nodes.empty()) {
    Die(absl::StrCat("error: ", kind, " ", ns, "/", f.job, " has not run on any node (phase ",
                     st.value("phase", "Pending"), ")"));
  }
  std::vector<std::thread> threads;
  std::mutex out_mu;
  int failures = 0;
  for (const std::string& node : nodes) {
    absl::StatusOr<Response> n = api.Do("GET", "/api/v1/nodes/" + node);
    std::string endpoint;
    if (n.ok() && n->code == 200) {
      endpoint = n->body["metadata"]
                     .value("annotations", Json::object())
                     .value("tessera.dev/agent-endpoint", "");
    }
    if (endpoint.empty()) {
      std::cerr << "tessera logs: node " << node << " has no agent endpoint\n";
      ++failures;
      continue;
    }
    threads.emplace_back([&, endpoint, node] {
      httplib::Client c(endpoint);
      c.set_read_timeout(3600, 0);
      // The agent checks this token with the server (may it read this job?) or against its own.
      if (!api.config().token.empty()) c.set_bearer_token_auth(api.config().token);
      std::string path =
          absl::StrCat("/logs?namespace=", ns, "&job=", f.job, "&kind=", kind, "&stream=", f.stream,
                       f.follow ? "&follow=1" : "", f.member.empty() ? "" : "&member=" + f.member,
                       f.tail >= 0 ? absl::StrCat("&tail=", f.tail) : "");
      auto res = c.Get(path, [&](const char* data, size_t len) {
        std::lock_guard<std::mutex> l(out_mu);
        std::cout.write(data, static_cast<std::streamsize>(len));
        std::cout.flush();
        return true;
      });
      if (!res || res->status != 200) {
        std::lock_guard<std::mutex> l(out_mu);
        std::cerr << "tessera logs: node " << node << " (" << endpoint << "): "
                  << (res ? absl::StrCat("HTTP ", res->status, " ", res->body)
                          : httplib::to_string(res.error()))
                  << "\n";
        ++failures;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  if (failures > 0) throw CLI::RuntimeError(1);
}

}  // namespace

void RegisterLogsCommand(CLI::App& app) {
  auto f = std::make_shared<LogsFlags>();
  CLI::App* cmd = app.add_subcommand(
      "logs", "Print (or follow) a job's member logs, from the agents that ran them");
  cmd->add_option("job", f->job, "Job name (a TrainingJob, else an InferenceService)")->required();
  cmd->add_flag("-f,--follow", f->follow, "Keep streaming while the members run");
  cmd->add_option("--member", f->member, "Only this member (GROUP-INDEX)");
  cmd->add_option("--stream", f->stream, "stdout or stderr")
      ->check(CLI::IsMember({"stdout", "stderr"}));
  cmd->add_option("--kind", f->kind, "TrainingJob or InferenceService (default: either)")
      ->check(CLI::IsMember({"TrainingJob", "InferenceService"}));
  cmd->add_option("--tail", f->tail, "Only the last N lines of each member (then -f goes on)")
      ->check(CLI::NonNegativeNumber);
  AddConnectionFlags(cmd, &f->conn);
  cmd->footer(
      "\nExamples:\n  tessera logs llm-pretrain -n demo -f\n"
      "  tessera logs llm-pretrain --member worker-0 --stream stderr --tail 20\n"
      "Reads --server / --token / -n, env TESSERA_SERVER, TESSERA_TOKEN, TESSERA_NAMESPACE, and "
      "~/.tessera/config like every command.");
  cmd->callback([f] { RunLogs(*f); });
}

}  // namespace tessera::cli
