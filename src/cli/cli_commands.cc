#include "cli/cli_commands.h"

#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/cli_internal.h"
#include "cli/yaml_json.h"
#include "common/clock.h"

namespace tessera::cli {

// --- Shared helpers ---------------------------------------------------------

void Die(const std::string& msg) {
  std::cerr << msg << "\n";
  throw CLI::RuntimeError(1);
}

void AddConnectionFlags(CLI::App* cmd, ConfigFlags* f) {
  cmd->add_option("--server,-s", f->server, "API server URL (http://HOST:PORT or https://...)");
  cmd->add_option("--ca-file", f->ca_file, "PEM CA bundle to verify an https:// server with");
  cmd->add_flag("--insecure-skip-tls-verify", f->insecure_skip_tls_verify,
                "Do not verify the https:// server's certificate (testing only)");
  cmd->add_option("--token", f->token, "Bearer token");
  cmd->add_option("--namespace,-n", f->ns, "Namespace");
  cmd->add_option("--config", f->config_file, "Config file (default ~/.tessera/config)");
  cmd->add_option("--context", f->context, "Context of the config file to use");
}

ApiClient MakeClient(const ConfigFlags& flags) {
  absl::StatusOr<ClientConfig> c = ResolveConfig(flags);
  if (!c.ok()) Die(absl::StrCat("error: ", c.status().message()));
  return ApiClient(*std::move(c));
}

absl::StatusOr<std::vector<Json>> ListAll(ApiClient& client, const ResourceInfo& r,
                                          const std::string& ns, bool all_namespaces,
                                          const std::string& selector) {
  std::vector<Json> items;
  std::string cont;
  while (true) {
    std::string path = absl::StrCat(CollectionPath(r, ns, all_namespaces), "?limit=500");
    if (!selector.empty()) absl::StrAppend(&path, "&labelSelector=", QueryEscape(selector));
    if (!cont.empty()) absl::StrAppend(&path, "&continue=", QueryEscape(cont));
    absl::StatusOr<Response> res = client.Do("GET", path);
    if (!res.ok()) return res.status();
    if (res->code != 200) return absl::InternalError(ErrorText(*res));
    for (Json& item : res->body["items"]) items.push_back(std::move(item));
    const Json& meta = res->body["metadata"];
    if (!meta.contains("continue") || !meta["continue"].is_string() ||
        meta["continue"].get<std::string>().empty()) {
      return items;
    }
    cont = meta["continue"].get<std::string>();
  }
}

void PrintTable(std::ostream& out, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    out << line << "\n";
  }
}

std::string Age(const std::string& ts, absl::Time now) {
  absl::Time t;
  std::string err;
  if (!absl::ParseTime(absl::RFC3339_full, ts, &t, &err)) return "<unknown>";
  int64_t s = std::max<int64_t>(0, absl::ToInt64Seconds(now - t));
  if (s < 120) return absl::StrCat(s, "s");
  if (s < 7200) return absl::StrCat(s / 60, "m");
  if (s < 172800) return absl::StrCat(s / 3600, "h");
  return absl::StrCat(s / 86400, "d");
}

std::string Phase(const Json& obj) {
  if (obj.contains("status") && obj["status"].is_object()) {
    return obj["status"].value("phase", "");
  }
  return "";
}

bool IsTerminal(const std::string& phase) { return phase == "Succeeded" || phase == "Failed"; }

int64_t RequestedGpus(const Json& job) {
  const Json& spec = job["spec"];
  int64_t n = 0;
  if (job.value("kind", "") == "InferenceService") {
    return spec["replicas"].value("max", int64_t{0}) * spec.value("gpusPerReplica", int64_t{0});
  }
  if (spec.contains("groups")) {
    for (const Json& g : spec["groups"]) {
      n += g.value("count", int64_t{1}) * g.value("gpusPerReplica", int64_t{0});
    }
  }
  return n;
}

int64_t HeldGpus(const Json& job) {
  int64_t n = 0;
  if (!job.contains("status") || !job["status"].contains("placement")) return n;
  for (const Json& m : job["status"]["placement"]) {
    if (m.contains("gpus")) n += static_cast<int64_t>(m["gpus"].size());
  }
  return n;
}

void AddPlacedMilli(const Json& job, std::vector<std::pair<std::string, int64_t>>* out) {
  if (!job.contains("status") || !job["status"].contains("placement")) return;
  for (const Json& m : job["status"]["placement"]) {
    int64_t milli = m.value("gpuMilli", 1000) * static_cast<int64_t>(m["gpus"].size());
    out->emplace_back(m.value("node", ""), milli);
  }
}

namespace {

std::string Meta(const Json& obj, const char* key) {
  return obj.contains("metadata") ? obj["metadata"].value(key, "") : "";
}

std::string JoinNodes(const Json& obj) {
  std::vector<std::string> nodes;
  if (obj.contains("status") && obj["status"].contains("placement")) {
    for (const Json& m : obj["status"]["placement"]) {
      std::string n = m.value("node", "");
      if (std::find(nodes.begin(), nodes.end(), n) == nodes.end()) nodes.push_back(n);
    }
  }
  return nodes.empty() ? "<none>" : absl::StrJoin(nodes, ",");
}

// --- get ----------------------------------------------------------------

struct GetFlags {
  ConfigFlags conn;
  std::string resource;
  std::vector<std::string> names;
  std::string output;
  std::string selector;
  bool all_namespaces = false;
};

std::vector<std::string> Header(const ResourceInfo& r, bool wide) {
  if (r.kind == "TrainingJob" || r.kind == "InferenceService") {
    std::vector<std::string> h = {"NAME",    "PHASE",      "REASON",   "GPUS",
                                  "MEMBERS", "GENERATION", "RESTARTS", "AGE"};
    if (wide) h.insert(h.end(), {"QUEUE", "PRIORITY", "NODES", "MESSAGE"});
    return h;
  }
  if (r.kind == "Node") {
    std::vector<std::string> h = {"NAME", "STATUS", "GPUS", "MODEL", "RACK", "AGE"};
    if (wide) h.insert(h.end(), {"BLOCK", "UNHEALTHY", "HEARTBEAT", "TAINTS"});
    return h;
  }
  if (r.kind == "Event") return {"AGE", "TYPE", "REASON", "OBJECT", "MESSAGE"};
  if (r.kind == "Cluster") {
    std::vector<std::string> h = {"NAME", "STATUS", "GPUS", "FREE", "SERVER", "AGE"};
    if (wide) h.emplace_back("MESSAGE");
    return h;
  }
  return {"NAME", "PHASE", "AGE"};
}

std::vector<std::string> Row(const ResourceInfo& r, const Json& o, bool wide, absl::Time now) {
  const std::string age = Age(Meta(o, "creationTimestamp"), now);
  const Json& st = o.contains("status") ? o["status"] : Json::object();
  const Json& spec = o.contains("spec") ? o["spec"] : Json::object();
  if (r.kind == "TrainingJob" || r.kind == "InferenceService") {
    size_t placed = st.contains("placement") ? st["placement"].size() : 0;
    std::string members = std::to_string(placed);
    std::string gpus = std::to_string(RequestedGpus(o));
    if (spec.contains("elastic") && spec["elastic"].is_object()) {
      // An elastic job: current of maximum replicas ("2/4"), and while it is
      // placed the GPUs it holds of those it asks for ("6/12"): a shrunken
      // job holds fewer than it requested.
      members = absl::StrCat(st.value("replicas", static_cast<int64_t>(placed)), "/",
                             spec["elastic"].value("maxReplicas", 0));
      if (placed > 0) gpus = absl::StrCat(HeldGpus(o), "/", gpus);
    } else if (r.kind == "InferenceService" && spec.contains("slo") && spec["slo"].is_object()) {
      // An autoscaled service: replicas bound of those its autoscaler wants
      // ("2/4", as kubectl shows a Deployment's ready/desired), and the GPUs
      // held of those its replicas.max could take.
      members = absl::StrCat(placed, "/",
                             st.contains("desiredReplicas")
                                 ? std::to_string(st.value("desiredReplicas", int64_t{0}))
                                 : std::string("-"));
      if (placed > 0) gpus = absl::StrCat(HeldGpus(o), "/", gpus);
    }
    // status.reason is a bounded word (a waiting job's OverQuota, NoRoom...; a failed one's
    // Error or Killed); one that only repeats the phase says nothing.
    std::string reason = st.value("reason", "");
    if (reason.empty() || reason == Phase(o)) reason = "-";
    std::vector<std::string> row = {Meta(o, "name"),
                                    Phase(o),
                                    reason,
                                    gpus,
                                    members,
                                    std::to_string(st.value("generation", 0)),
                                    std::to_string(st.value("restarts", 0)),
                                    age};
    if (wide) {
      std::string prio = st.contains("priority") ? std::to_string(st["priority"].get<int64_t>())
                                                 : spec.value("priorityClassName", "-");
      row.insert(row.end(),
                 {spec.value("queue", "default"), prio, JoinNodes(o), st.value("message", "")});
    }
    return row;
  }
  if (r.kind == "Node") {
    std::string status = Phase(o);
    if (spec.value("unschedulable", false)) status += ",SchedulingDisabled";
    int64_t gpus = spec.contains("gpus") ? static_cast<int64_t>(spec["gpus"].size())
                                         : spec.value("gpuCount", 0);
    std::string model = spec.value("gpuType", "");
    if (model.empty() && spec.contains("gpus") && !spec["gpus"].empty()) {
      model = spec["gpus"][0].value("model", "");
    }
    std::vector<std::string> row = {
        Meta(o, "name"), status, std::to_string(gpus), model, spec.value("rack", "default"), age};
    if (wide) {
      std::vector<std::string> bad, taints;
      if (st.contains("gpus")) {
        for (const Json& g : st["gpus"]) {
          if (g.value("health", "") == "Unhealthy")
            bad.push_back(std::to_string(g.value("index", 0)));
        }
      }
      if (spec.contains("taints")) {
        for (const Json& t : spec["taints"]) {
          taints.push_back(absl::StrCat(t.value("key", ""), ":", t.value("effect", "")));
        }
      }
      row.insert(row.end(),
                 {spec.value("block", "default"), bad.empty() ? "<none>" : absl::StrJoin(bad, ","),
                  st.value("lastHeartbeatTime", "<none>"),
                  taints.empty() ? "<none>" : absl::StrJoin(taints, ",")});
    }
    return row;
  }
  if (r.kind == "Cluster") {
    // A federation member, as the hub last probed it (docs/federation.md).
    std::vector<std::string> row = {Meta(o, "name"),
                                    Phase(o).empty() ? "Unknown" : Phase(o),
                                    std::to_string(st.value("gpus", int64_t{0})),
                                    std::to_string(st.value("freeGpus", int64_t{0})),
                                    spec.value("server", ""),
                                    age};
    if (wide) row.push_back(st.value("message", ""));
    return row;
  }
  if (r.kind == "Event") {
    const Json& inv = spec["involvedObject"];
    return {Age(spec.value("eventTime", ""), now), spec.value("type", ""), spec.value("reason", ""),
            absl::StrCat(absl::AsciiStrToLower(inv.value("kind", "")), "/", inv.value("name", "")),
            spec.value("message", "")};
  }
  return {Meta(o, "name"), Phase(o), age};
}

void RunGet(const GetFlags& f) {
  const ResourceInfo* r = FindResource(f.resource);
  if (r == nullptr)
    Die(absl::StrCat("error: the server doesn't have a resource type \"", f.resource, "\""));
  const std::string out = f.output;
  if (!out.empty() && out != "wide" && out != "json" && out != "yaml" && out != "name") {
    Die(absl::StrCat("error: -o ", out, ": must be wide, json, yaml or name"));
  }
  ApiClient client = MakeClient(f.conn);
  const std::string& ns = client.config().ns;
  std::vector<Json> items;
  if (!f.names.empty()) {
    for (const std::string& name : f.names) {
      absl::StatusOr<Response> res = client.Do("GET", ItemPath(*r, ns, name));
      if (!res.ok()) Die(std::string(res.status().message()));
      if (res->code != 200) Die(ErrorText(*res));
      items.push_back(std::move(res->body));
    }
  } else {
    absl::StatusOr<std::vector<Json>> l = ListAll(client, *r, ns, f.all_namespaces, f.selector);
    if (!l.ok()) Die(std::string(l.status().message()));
    items = *std::move(l);
  }
  if (out == "json" || out == "yaml") {
    Json doc;
    if (f.names.size() == 1) {
      doc = items.front();
    } else {
      doc = {
          {"apiVersion", "v1"}, {"kind", "List"}, {"metadata", Json::object()}, {"items", items}};
    }
    std::cout << (out == "json" ? doc.dump(2) + "\n" : ToYaml(doc));
    return;
  }
  if (out == "name") {
    for (const Json& o : items) {
      std::cout << absl::AsciiStrToLower(r->kind) << "/" << Meta(o, "name") << "\n";
    }
    return;
  }
  if (items.empty()) {
    std::cerr << "No resources found"
              << (r->namespaced && !f.all_namespaces ? absl::StrCat(" in ", ns, " namespace") : "")
              << ".\n";
    return;
  }
  RealClock clock;
  const absl::Time now = clock.Now();
  const bool wide = out == "wide";
  const bool show_ns = r->namespaced && f.all_namespaces;
  std::vector<std::vector<std::string>> rows;
  rows.push_back(Header(*r, wide));
  if (show_ns) rows.back().insert(rows.back().begin(), "NAMESPACE");
  for (const Json& o : items) {
    rows.push_back(Row(*r, o, wide, now));
    if (show_ns) rows.back().insert(rows.back().begin(), Meta(o, "namespace"));
  }
  PrintTable(std::cout, rows);
}

// --- delete -------------------------------------------------------------

struct DeleteFlags {
  ConfigFlags conn;
  std::string resource;
  std::vector<std::string> names;
};

void RunDelete(const DeleteFlags& f) {
  const ResourceInfo* r = FindResource(f.resource);
  if (r == nullptr) Die(absl::StrCat("error: unknown resource type \"", f.resource, "\""));
  ApiClient client = MakeClient(f.conn);
  bool failed = false;
  for (const std::string& name : f.names) {
    absl::StatusOr<Response> res = client.Do("DELETE", ItemPath(*r, client.config().ns, name));
    if (!res.ok()) Die(std::string(res.status().message()));
    if (res->code == 200) {
      std::cout << absl::AsciiStrToLower(r->kind) << ".tessera.dev \"" << name << "\" deleted\n";
    } else {
      std::cerr << ErrorText(*res) << "\n";
      failed = true;
    }
  }
  if (failed) throw CLI::RuntimeError(1);
}

// --- cordon / uncordon / drain -------------------------------------------

constexpr char kDrainTaint[] = "tessera.dev/drain";

struct NodeFlags {
  ConfigFlags conn;
  std::vector<std::string> nodes;
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

}  // namespace

void RegisterCliCommands(CLI::App& app) {
  RegisterApplyCommand(app);
  {
    auto f = std::make_shared<GetFlags>();
    CLI::App* cmd = app.add_subcommand("get", "List objects, or show some by name");
    cmd->add_option("resource", f->resource, "jobs|inferenceservices|nodes|queues|...")->required();
    cmd->add_option("names", f->names, "Names");
    cmd->add_option("-o,--output", f->output, "wide|json|yaml|name");
    cmd->add_option("-l,--selector", f->selector, "Label selector (k=v,k!=v,k in (a,b))");
    cmd->add_flag("-A,--all-namespaces", f->all_namespaces, "List across every namespace");
    AddConnectionFlags(cmd, &f->conn);
    cmd->callback([f] { RunGet(*f); });
  }
  {
    auto f = std::make_shared<DeleteFlags>();
    CLI::App* cmd = app.add_subcommand("delete", "Delete objects by name");
    cmd->add_option("resource", f->resource, "Resource type")->required();
    cmd->add_option("names", f->names, "Names")->required();
    AddConnectionFlags(cmd, &f->conn);
    cmd->callback([f] { RunDelete(*f); });
  }
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
        NodeVerb{"drain", "Cordon a node and requeue the gangs running on it", true, 1,
                 "drained (its gangs are requeued by the scheduler)"}}) {
    auto f = std::make_shared<NodeFlags>();
    CLI::App* cmd = app.add_subcommand(v.name, v.help);
    cmd->add_option("nodes", f->nodes,
                    "Node names (each one is done; the rest go on after one "
                    "fails, and the exit code is then 1)")
        ->required();
    AddConnectionFlags(cmd, &f->conn);
    cmd->callback([f, v] {
      ApiClient client = MakeClient(f->conn);
      bool failed = false;
      for (const std::string& node : f->nodes) {
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
  RegisterDescribeCommands(app);
  RegisterTopCommands(app);
  RegisterLogsCommand(app);
}

}  // namespace tessera::cli
