// `tessera logs JOB`: a job's member logs, read from the node agents that ran them. The server
// and token come from the same places as every other command (--server, env TESSERA_SERVER /
// TESSERA_TOKEN, ~/.tessera/config contexts). The nodes: the job's placement, its members'
// reports (status.members[].node) and every node a binding of it used (status.logNodes), so a
// finished, restarted or moved job's logs are there while its agents keep them.
//
// Which generation: each node lists its files (GET /logs?list=1, agent/member_logs.h); per member
// the CLI takes the newest generation any node has, or with --previous the newest before the
// job's current generation (the run before a restart or a move), or --generation N; then it
// asks each node for the members it holds at that generation. --since asks the agents for what
// was written in the last DURATION (their time index: about a second's precision).

#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "cli/cli_internal.h"
#include "http/client.h"

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
  bool previous = false;
  int64_t generation = -1;
  std::string since;  // a duration: "10m", "2h"
};

// The job object: of `kind`, or when none is given a TrainingJob, else an InferenceService.
Json FindJob(ApiClient& api, const LogsFlags& f, const std::string& ns, std::string* kind) {
  Response r = GetJob(api, ns, f.job, f.kind);
  if (r.code == 200) {
    *kind = r.body.value("kind", f.kind.empty() ? "TrainingJob" : f.kind);
    return r.body;
  }
  if (r.code != 404) Die(absl::StrCat("error: ", ErrorText(r)));
  Die(absl::StrCat("error: no TrainingJob or InferenceService \"", f.job, "\" in namespace ", ns));
}

// The agent endpoint of each node (empty when it has none).
std::map<std::string, std::string> Endpoints(ApiClient& api, const std::set<std::string>& nodes) {
  std::map<std::string, std::string> out;
  for (const std::string& node : nodes) {
    absl::StatusOr<Response> n = api.Do("GET", "/api/v1/nodes/" + node);
    std::string endpoint;
    if (n.ok() && n->code == 200) {
      endpoint = n->body["metadata"]
                     .value("annotations", Json::object())
                     .value("tessera.dev/agent-endpoint", "");
    }
    out[node] = endpoint;
  }
  return out;
}

http::Client AgentClient(const ApiClient& api, const std::string& endpoint, int read_s) {
  http::ClientOptions o;
  o.connect_timeout = absl::Seconds(5);
  o.read_timeout = absl::Seconds(read_s);
  // The agent checks this token with the server (may it read this job?) or against its own.
  o.bearer_token = api.config().token;
  return http::Client(endpoint, std::move(o));
}

// Why an agent's answer is not what was asked for, in words.
std::string AgentFailure(const http::ClientResponse& r, const std::string& body) {
  if (r.status != 0) return absl::StrCat("HTTP ", r.status, " ", body);
  return r.ErrorText();
}

void RunLogs(const LogsFlags& f) {
  if (f.previous && f.generation >= 0) Die("error: give --previous or --generation, not both");
  int64_t since_s = -1;
  if (!f.since.empty()) {
    absl::Duration d;
    if (!absl::ParseDuration(f.since, &d) || d < absl::ZeroDuration()) {
      Die(absl::StrCat("error: --since ", f.since, ": expected a duration like 10m or 2h"));
    }
    since_s = absl::ToInt64Seconds(d);
  }
  ApiClient api = MakeClient(f.conn);
  const std::string& ns = api.config().ns;
  std::string kind;
  const Json job = FindJob(api, f, ns, &kind);
  const Json& st = job.contains("status") ? job["status"] : Json::object();
  std::set<std::string> nodes;
  for (const Json& p : st.value("placement", Json::array())) nodes.insert(p.value("node", ""));
  for (const Json& m : st.value("members", Json::array())) nodes.insert(m.value("node", ""));
  for (const Json& n : st.value("logNodes", Json::array())) {
    if (n.is_string()) nodes.insert(n.get<std::string>());
  }
  nodes.erase("");
  if (nodes.empty()) {
    Die(absl::StrCat("error: ", kind, " ", ns, "/", f.job, " has not run on any node (phase ",
                     st.value("phase", "Pending"), ")"));
  }
  const std::map<std::string, std::string> endpoints = Endpoints(api, nodes);
  int failures = 0;
  for (const auto& [node, endpoint] : endpoints) {
    if (endpoint.empty()) {
      std::cerr << "tessera logs: node " << node << " has no agent endpoint\n";
      ++failures;
    }
  }
  const std::string query =
      absl::StrCat("/logs?namespace=", ns, "&job=", f.job, "&kind=", kind, "&stream=", f.stream);
  // What each node has: member -> generation -> nodes.
  std::map<std::string, std::map<int64_t, std::vector<std::string>>> have;
  for (const auto& [node, endpoint] : endpoints) {
    if (endpoint.empty()) continue;
    http::Client c = AgentClient(api, endpoint, 30);
    http::ClientResponse res = c.Do("GET", query + "&list=1");
    if (!res.ok() || res.status != 200) {
      std::cerr << "tessera logs: node " << node << " (" << endpoint
                << "): " << AgentFailure(res, res.body) << "\n";
      ++failures;
      continue;
    }
    Json list = Json::parse(res.body, nullptr, /*allow_exceptions=*/false);
    if (!list.is_object()) continue;
    for (const Json& file : list.value("files", Json::array())) {
      if (file.value("stream", "") != f.stream) continue;
      const std::string member = file.value("member", "");
      if (!f.member.empty() && member != f.member) continue;
      have[member][file.value("generation", int64_t{0})].push_back(node);
    }
  }
  // Per member, the generation to show; per node and generation, the members to ask for.
  const int64_t current = st.value("generation", int64_t{0});
  std::map<std::pair<std::string, int64_t>, std::vector<std::string>> asks;
  for (const auto& [member, gens] : have) {
    int64_t pick = -1;
    for (const auto& [gen, where] : gens) {
      if (f.generation >= 0 ? gen == f.generation : (!f.previous || gen < current)) pick = gen;
    }
    if (pick < 0) continue;
    for (const std::string& node : gens.at(pick)) asks[{node, pick}].push_back(member);
  }
  if (asks.empty()) {
    Die(absl::StrCat("error: no ", f.stream, " logs of ", kind, " ", ns, "/", f.job,
                     f.previous          ? absl::StrCat(" before generation ", current)
                     : f.generation >= 0 ? absl::StrCat(" at generation ", f.generation)
                                         : std::string(),
                     f.member.empty() ? "" : " for member " + f.member, " on its nodes (",
                     absl::StrJoin(nodes, ", "), ")"));
  }
  std::vector<std::thread> threads;
  std::mutex out_mu;
  for (const auto& [at, members] : asks) {
    const std::string node = at.first;
    const std::string& endpoint = endpoints.at(node);
    const std::string path =
        absl::StrCat(query, "&generation=", at.second, "&members=", absl::StrJoin(members, ","),
                     f.follow ? "&follow=1" : "", f.tail >= 0 ? absl::StrCat("&tail=", f.tail) : "",
                     since_s >= 0 ? absl::StrCat("&sinceSeconds=", since_s) : "");
    threads.emplace_back([&, node, endpoint, path] {
      http::Client c = AgentClient(api, endpoint, 3600);
      int status = 0;
      std::string error_body;
      http::ClientResponse res = c.Stream(
          path, {}, [&](int s) { status = s; },
          [&](std::string_view data) {
            if (status != 200) {
              error_body.append(data);
              return true;
            }
            std::lock_guard<std::mutex> l(out_mu);
            std::cout.write(data.data(), static_cast<std::streamsize>(data.size()));
            std::cout.flush();
            return true;
          });
      if (!res.ok() || res.status != 200) {
        std::lock_guard<std::mutex> l(out_mu);
        std::cerr << "tessera logs: node " << node << " (" << endpoint
                  << "): " << AgentFailure(res, error_body) << "\n";
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
  cmd->add_flag("-p,--previous", f->previous,
                "The run before the current generation (before a restart or a move)");
  cmd->add_option("--generation", f->generation, "The run of this generation")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--since", f->since, "Only what was written in the last DURATION (10m, 2h)");
  AddConnectionFlags(cmd, &f->conn);
  cmd->footer(
      "\nExamples:\n  tessera logs llm-pretrain -n demo -f\n"
      "  tessera logs llm-pretrain --member worker-0 --stream stderr --tail 20\n"
      "  tessera logs llm-pretrain --previous     # the run before a restart or an XID move\n"
      "  tessera logs llm-pretrain --since 10m\n"
      "Reads --server / --token / -n, env TESSERA_SERVER, TESSERA_TOKEN, TESSERA_NAMESPACE, and "
      "~/.tessera/config like every command.");
  cmd->callback([f] { RunLogs(*f); });
}

}  // namespace tessera::cli
