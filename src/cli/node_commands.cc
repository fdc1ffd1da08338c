// `tessera cordon|uncordon|drain NODE...`. drain cordons the node, adds the drain taint (the
// scheduler requeues the gangs bound there, whole, and they restart elsewhere from their last
// checkpoint), lists the gangs it evicts, and waits until none is bound to the node any more
// or --timeout passes (kubectl drain's habits); each gang's new state is printed as it leaves.
#include <map>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/cli_internal.h"

namespace tessera::cli {
namespace {

constexpr char kDrainTaint[] = "tessera.dev/drain";

struct NodeFlags {
  ConfigFlags conn;
  std::vector<std::string> nodes;
  double timeout = 300;  // drain: seconds to wait for the gangs to leave; 0: do not wait
};

// Read-modify-write of a Node with optimistic concurrency (retries on 409). False, with the
// error printed, when it could not be written.
bool EditNode(ApiClient& client, const std::string& node,
              const std::function<void(Json& spec)>& edit, const std::string& done) {
  const ResourceInfo& r = *FindResource("nodes");
  for (int attempt = 0; attempt < 10; ++attempt) {
    absl::StatusOr<Response> cur = client.Do("GET", ItemPath(r, "", node));
    if (!cur.ok()) Die(std::string(cur.status().message()));  // the server is unreachable
    if (cur->code != 200) {
      std::cerr << ErrorText(*cur) << "\n";
      return false;
    }
    Json obj = std::move(cur->body);
    edit(obj["spec"]);
    obj.erase("status");  // keep the stored status (heartbeats)
    absl::StatusOr<Response> res = client.Do("PUT", ItemPath(r, "", node), &obj);
    if (!res.ok()) Die(std::string(res.status().message()));
    if (res->code == 200) {
      std::cout << "node/" << node << " " << done << "\n";
      return true;
    }
    if (res->code != 409) {
      std::cerr << ErrorText(*res) << "\n";
      return false;
    }
  }
  std::cerr << "error: node/" << node << " kept changing; try again\n";
  return false;
}

void SetDrainTaint(Json& spec, bool on) {
  Json taints = Json::array();
  if (spec.contains("taints")) {
    for (const Json& t : spec["taints"]) {
      if (t.value("key", "") != kDrainTaint) taints.push_back(t);
    }
  }
  if (on) taints.push_back({{"key", kDrainTaint}, {"effect", "NoExecute"}});
  if (taints.empty()) {
    spec.erase("taints");
  } else {
    spec["taints"] = taints;
  }
}

// "trainingjob team-a/x" for a job object.
std::string JobName(const Json& job) {
  return absl::StrCat(absl::AsciiStrToLower(job.value("kind", "")), " ",
                      job["metadata"].value("namespace", ""), "/",
                      job["metadata"].value("name", ""));
}

// The jobs bound to `node` (name -> object), and the revision they are current at.
bool Bindings(ApiClient& client, const std::string& node, const std::string& since, int wait_s,
              std::map<std::string, Json>* jobs, std::string* revision) {
  std::string path = absl::StrCat("/api/v1/nodes/", node, "/bindings");
  if (!since.empty() && wait_s > 0) {
    absl::StrAppend(&path, "?resourceVersion=", since, "&timeoutSeconds=", wait_s);
  }
  absl::StatusOr<Response> res = client.Do("GET", path);
  if (!res.ok()) Die(std::string(res.status().message()));
  if (res->code != 200) {
    std::cerr << ErrorText(*res) << "\n";
    return false;
  }
  *revision = res->body["metadata"].value("resourceVersion", since);
  if (res->body["metadata"].value("unchanged", false)) return true;
  jobs->clear();
  for (const Json& j : res->body.value("items", Json::array())) jobs->emplace(JobName(j), j);
  return true;
}

// Where a job that left the drained node stands now: "Scheduled on n3,n4", "Queued", "gone".
std::string NowAt(ApiClient& client, const Json& job) {
  const std::string path = ObjectPath(job);
  if (path.empty()) return "";
  absl::StatusOr<Response> res = client.Do("GET", path);
  if (!res.ok() || res->code == 404) return "deleted";
  if (res->code != 200) return "";
  std::vector<std::string> nodes;
  for (const Json& m : res->body["status"].value("placement", Json::array())) {
    const std::string n = m.value("node", "");
    if (std::find(nodes.begin(), nodes.end(), n) == nodes.end()) nodes.push_back(n);
  }
  std::string out = Phase(res->body);
  if (!nodes.empty()) absl::StrAppend(&out, " on ", absl::StrJoin(nodes, ","));
  return out;
}

// Drains one node: false (printed) when it could not be written or gangs were still bound
// when the timeout passed.
bool Drain(ApiClient& client, const std::string& node, double timeout_s) {
  std::map<std::string, Json> before;
  std::string revision;
  if (!Bindings(client, node, "", 0, &before, &revision)) return false;
  if (!EditNode(
          client, node,
          [](Json& spec) {
            spec["unschedulable"] = true;
            SetDrainTaint(spec, true);
          },
          "cordoned")) {
    return false;
  }
  for (const auto& [name, job] : before) std::cout << "evicting " << name << "\n";
  if (timeout_s <= 0 || before.empty()) {
    std::cout << "node/" << node << " drained"
              << (before.empty() ? "" : " (its gangs are requeued by the scheduler)") << "\n";
    return true;
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(timeout_s);
  std::map<std::string, Json> left = before;  // still bound
  std::map<std::string, Json> now = before;   // an "unchanged" answer keeps it
  while (!left.empty()) {
    const int64_t wait = absl::ToInt64Seconds(deadline - absl::Now());
    if (wait <= 0) break;
    if (!Bindings(client, node, revision, static_cast<int>(std::min<int64_t>(wait, 10)), &now,
                  &revision)) {
      return false;
    }
    for (auto it = left.begin(); it != left.end();) {
      if (now.count(it->first) == 0) {
        std::cout << it->first << " evicted (now " << NowAt(client, it->second) << ")\n";
        it = left.erase(it);
      } else {
        ++it;
      }
    }
  }
  if (!left.empty()) {
    std::vector<std::string> names;
    names.reserve(left.size());
    for (const auto& [name, job] : left) names.push_back(name);
    std::cerr << "error: node/" << node << ": timed out after " << timeout_s
              << "s waiting for: " << absl::StrJoin(names, ", ") << "\n";
    return false;
  }
  std::cout << "node/" << node << " drained\n";
  return true;
}

}  // namespace

void RegisterNodeCommands(CLI::App& app) {
  struct NodeVerb {
    const char* name;
    const char* help;
    bool unschedulable;
    int drain;  // -1 remove the drain taint, 0 leave, 1 add
    const char* done;
  };
  for (const NodeVerb& v :
       {NodeVerb{"cordon", "Mark a node unschedulable", true, 0, "cordoned"},
        NodeVerb{"uncordon", "Mark a node schedulable (and end a drain)", false, -1, "uncordoned"},
        NodeVerb{"drain",
                 "Cordon a node, requeue the gangs running on it and wait for them to leave", true,
                 1, "drained"}}) {
    auto f = std::make_shared<NodeFlags>();
    CLI::App* cmd = app.add_subcommand(v.name, v.help);
    cmd->add_option("nodes", f->nodes,
                    "Node names (each one is done; the rest go on after one "
                    "fails, and the exit code is then 1)")
        ->required();
    if (v.drain == 0) {
      cmd->footer(
          "Example:\n  tessera cordon h100-0 h100-1   # running work stays; nothing new lands");
    } else if (v.drain < 0) {
      cmd->footer("Example:\n  tessera uncordon h100-0   # also ends a drain");
    }
    if (v.drain > 0) {
      cmd->add_option("--timeout", f->timeout,
                      "Seconds to wait for the node's gangs to leave (0: do not wait)")
          ->capture_default_str();
      cmd->footer(
          "Examples:\n"
          "  tessera drain gpu-07              # lists the gangs it evicts, waits up to 5 min\n"
          "  tessera drain gpu-07 --timeout 0  # cordon and taint only");
    }
    AddConnectionFlags(cmd, &f->conn);
    cmd->callback([f, v] {
      ApiClient client = MakeClient(f->conn);
      bool failed = false;
      for (const std::string& node : f->nodes) {
        if (v.drain > 0) {
          failed |= !Drain(client, node, f->timeout);
          continue;
        }
        failed |= !EditNode(
            client, node,
            [&](Json& spec) {
              spec["unschedulable"] = v.unschedulable;
              if (v.drain != 0) SetDrainTaint(spec, v.drain > 0);
            },
            v.done);
      }
      if (failed) throw CLI::RuntimeError(1);
    });
  }
}

}  // namespace tessera::cli
