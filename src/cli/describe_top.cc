// `tessera describe` and `tessera top`.
#include <algorithm>
#include <map>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "api/kinds.h"
#include "api/model_lineage.h"
#include "cli/cli_internal.h"
#include "cli/yaml_json.h"
#include "common/clock.h"

namespace tessera::cli {
namespace {

struct DescribeFlags {
  ConfigFlags conn;
  std::string resource;
  std::string name;
};

int64_t Rv(const Json& o) {
  int64_t v = 0;
  if (o.contains("metadata"))
    (void)absl::SimpleAtoi(o["metadata"].value("resourceVersion", "0"), &v);
  return v;
}

// Events of one object: by kind and name and, when `uid` is set, only those
// of this incarnation (as kubectl matches involvedObject.uid), not of a deleted
// object of the same name.
std::vector<Json> EventsFor(ApiClient& client, const std::string& ns, const std::string& kind,
                            const std::string& name, const std::string& uid = "") {
  absl::StatusOr<std::vector<Json>> evs =
      ListAll(client, *FindResource("events"), ns, false, absl::StrCat("involved-name=", name));
  std::vector<Json> out;
  if (!evs.ok()) return out;
  for (Json& e : *evs) {
    const Json& inv = e["spec"]["involvedObject"];
    if (inv.value("kind", "") != kind) continue;
    if (!uid.empty() && inv.contains("uid") && inv.value("uid", "") != uid) continue;
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(), [](const Json& a, const Json& b) { return Rv(a) < Rv(b); });
  return out;
}

void PrintEvents(const std::vector<Json>& evs, absl::Time now) {
  std::cout << "Events:\n";
  if (evs.empty()) {
    std::cout << "  <none>\n";
    return;
  }
  std::vector<std::vector<std::string>> rows = {{"  AGE", "TYPE", "REASON", "MESSAGE"}};
  for (const Json& e : evs) {
    const Json& s = e["spec"];
    rows.push_back({"  " + Age(s.value("eventTime", ""), now), s.value("type", ""),
                    s.value("reason", ""), s.value("message", "")});
  }
  PrintTable(std::cout, rows);
}

void PrintConditions(const Json& st, absl::Time now) {
  if (!st.contains("conditions") || st["conditions"].empty()) return;
  std::cout << "Conditions:\n";
  std::vector<std::vector<std::string>> rows = {{"  TYPE", "STATUS", "REASON", "AGE", "MESSAGE"}};
  for (const Json& c : st["conditions"]) {
    rows.push_back({"  " + c.value("type", ""), c.value("status", ""), c.value("reason", ""),
                    Age(c.value("lastTransitionTime", ""), now), c.value("message", "")});
  }
  PrintTable(std::cout, rows);
}

void DescribeJob(ApiClient& client, const ResourceInfo& r, const Json& o, absl::Time now) {
  const Json& meta = o["metadata"];
  const Json& spec = o["spec"];
  const Json st = o.contains("status") ? o["status"] : Json::object();
  const std::string phase = Phase(o);
  std::vector<std::vector<std::string>> head = {
      {"Name:", meta.value("name", "")},
      {"Namespace:", meta.value("namespace", "")},
      {"Kind:", r.kind},
      {"Created:", Age(meta.value("creationTimestamp", ""), now) + " ago"},
      {"Phase:", phase},
      {"Queue:", spec.value("queue", "default")},
      {"Priority:", st.contains("priority") ? std::to_string(st["priority"].get<int64_t>())
                                            : spec.value("priorityClassName", "<default>")},
      {"GPUs requested:", std::to_string(RequestedGpus(o))},
      {"Generation:", std::to_string(st.value("generation", 0))},
      {"Attempts:", std::to_string(st.value("attempts", 0))},
  };
  if (spec.contains("elastic") && spec["elastic"].is_object()) {
    const Json& el = spec["elastic"];
    std::string replicas =
        absl::StrCat(st.value("replicas", 0), " (elastic: minReplicas ", el.value("minReplicas", 0),
                     ", maxReplicas ", el.value("maxReplicas", 0), ")");
    if (st.contains("lastResizeTime")) {
      absl::StrAppend(&replicas, "; resized ", Age(st.value("lastResizeTime", ""), now), " ago");
    }
    head.push_back({"Replicas:", replicas});
    if (st.contains("placement")) head.push_back({"GPUs held:", std::to_string(HeldGpus(o))});
  }
  if (st.contains("cluster")) {
    // A federation hub's object (docs/federation.md): the member running it.
    std::string where = st.value("cluster", "");
    if (where.empty()) where = "<none yet>";
    absl::StrAppend(&where, " (failovers ", st.value("failovers", 0), ", requeues ",
                    st.value("requeues", 0), ")");
    head.push_back({"Cluster:", where});
    if (st.contains("specSync") && st["specSync"].is_object()) {
      const Json& ss = st["specSync"];
      head.push_back(
          {"Spec sync:", absl::StrCat(ss.value("state", ""), ": ", ss.value("message", ""))});
    }
  }
  if (spec.contains("slo") && spec["slo"].is_object() && spec["replicas"].is_object()) {
    // An autoscaled InferenceService (docs/control-plane.md, "Autoscaling").
    const Json& rep = spec["replicas"];
    const int64_t bound = st.contains("placement") && st["placement"].is_array()
                              ? static_cast<int64_t>(st["placement"].size())
                              : 0;
    std::string replicas = absl::StrCat(bound, " (desired ");
    absl::StrAppend(&replicas,
                    st.contains("desiredReplicas") ? std::to_string(st.value("desiredReplicas", 0))
                                                   : std::string("-"),
                    ", min ", rep.value("min", 0), ", max ", rep.value("max", 0), ")");
    if (st.contains("lastScaleTime")) {
      absl::StrAppend(&replicas, "; scaled ", Age(st.value("lastScaleTime", ""), now), " ago");
    }
    head.push_back({"Replicas:", replicas});
    const Json& slo = spec["slo"];
    std::vector<std::string> targets;
    if (slo.contains("p99LatencyMs")) {
      targets.push_back(absl::StrCat("p99 ", slo.value("p99LatencyMs", 0.0), " ms"));
    }
    if (slo.contains("minThroughputRps")) {
      targets.push_back(absl::StrCat("at least ", slo.value("minThroughputRps", 0.0), " rps"));
    }
    head.push_back({"SLO:", absl::StrJoin(targets, ", ")});
  }
  if (st.contains("restarts")) {
    // Gang restarts in place after a member failed (spec.maxRestarts).
    head.push_back(
        {"Restarts:", absl::StrCat(st.value("restarts", 0), " of ", spec.value("maxRestarts", 0))});
  }
  if (st.contains("preemption") && st["preemption"].is_object()) {
    // A preemption in flight: whom the job makes room for, and when it stops.
    const Json& pr = st["preemption"];
    const size_t dropping = pr.contains("dropping") ? pr["dropping"].size() : 0;
    head.push_back(
        {"Preemption:",
         absl::StrCat(dropping > 0 ? absl::StrCat(dropping, " member(s)") : "the whole job",
                      " for ", pr.value("preemptor", ""), "; checkpoint now, stopped at ",
                      pr.value("deadline", ""))});
  }
  if (st.contains("resumeFrom")) {
    const Json& rf = st["resumeFrom"];
    head.push_back(
        {"Resume from:", absl::StrCat(rf.value("checkpoint", ""), " (step ", rf.value("step", 0),
                                      ", ", rf.value("path", ""), ")")});
  }
  head.push_back({"Message:", st.value("message", "")});
  PrintTable(std::cout, head);
  PrintConditions(st, now);
  std::cout << "Placement:\n";
  if (st.contains("placement") && !st["placement"].empty()) {
    std::vector<std::vector<std::string>> rows = {
        {"  GROUP", "MEMBER", "NODE", "GPUS", "GPU MILLI", "GENERATION"}};
    for (const Json& m : st["placement"]) {
      std::vector<std::string> gpus;
      for (const Json& g : m["gpus"]) gpus.push_back(std::to_string(g.get<int>()));
      rows.push_back({"  " + m.value("group", ""), std::to_string(m.value("member", 0)),
                      m.value("node", ""), gpus.empty() ? "-" : absl::StrJoin(gpus, ","),
                      std::to_string(m.value("gpuMilli", 1000)),
                      std::to_string(m.value("generation", 0))});
    }
    PrintTable(std::cout, rows);
  } else {
    std::cout << "  <none>\n";
    if (!IsTerminal(phase)) {
      std::cout << "Waiting:\n  " << st.value("message", "not yet considered by the scheduler")
                << "\n";
    }
  }
  PrintEvents(EventsFor(client, meta.value("namespace", "default"), r.kind, meta.value("name", ""),
                        meta.value("uid", "")),
              now);
}

void DescribeNode(ApiClient& client, const Json& o, absl::Time now) {
  const Json& meta = o["metadata"];
  const Json& spec = o["spec"];
  const Json st = o.contains("status") ? o["status"] : Json::object();
  const std::string name = meta.value("name", "");
  // Liveness lives in the server's memory (the node's lease); the stored
  // status.lastHeartbeatTime is refreshed only on a change or every minute.
  std::string heartbeat = st.value("lastHeartbeatTime", "<none>");
  absl::StatusOr<Response> lease =
      client.Do("GET", absl::StrCat("/api/v1/nodes/", name, "/heartbeat"));
  if (lease.ok() && lease->code == 200 && lease->body.is_object() &&
      lease->body.value("renewTime", Json()).is_string()) {
    const std::string t = lease->body["renewTime"].get<std::string>();
    heartbeat = absl::StrCat(t, " (", Age(t, now), " ago)");
  }
  std::vector<std::vector<std::string>> head = {
      {"Name:", name},
      {"Status:", Phase(o)},
      {"Unschedulable:", spec.value("unschedulable", false) ? "true" : "false"},
      {"Rack / block:",
       absl::StrCat(spec.value("rack", "default"), " / ", spec.value("block", "default"))},
      {"Last heartbeat:", heartbeat},
  };
  std::vector<std::string> taints;
  if (spec.contains("taints")) {
    for (const Json& t : spec["taints"]) {
      taints.push_back(
          absl::StrCat(t.value("key", ""), "=", t.value("value", ""), ":", t.value("effect", "")));
    }
  }
  head.push_back({"Taints:", taints.empty() ? "<none>" : absl::StrJoin(taints, ", ")});
  PrintTable(std::cout, head);
  PrintConditions(st, now);
  // Each GPU: its identity (spec, from the agent's registration) and health and measured
  // utilization (status, from its heartbeats).
  const int64_t count = api::NodeGpuCount(spec);
  std::map<int64_t, Json> reported;
  for (const Json& g : st.value("gpus", Json::array())) {
    if (g.is_object()) reported[g.value("index", int64_t{-1})] = g;
  }
  std::cout << "GPUs:\n";
  std::vector<std::vector<std::string>> gpu_rows = {
      {"  GPU", "UUID", "MODEL", "HEALTH", "UTIL%", "MESSAGE"}};
  for (int64_t i = 0; i < count; ++i) {
    Json id = Json::object();
    if (spec.contains("gpus") && spec["gpus"].is_array()) {
      for (const Json& g : spec["gpus"]) {
        if (g.is_object() && g.value("index", int64_t{-1}) == i) id = g;
      }
    }
    const Json r = reported.count(i) ? reported[i] : Json::object();
    const int64_t util = r.value("utilization", int64_t{-1});
    gpu_rows.push_back({absl::StrCat("  ", i), id.value("uuid", "-"),
                        id.value("model", spec.value("gpuType", "-")), r.value("health", "Unknown"),
                        util >= 0 ? absl::StrCat(util) : "-", r.value("message", "")});
  }
  if (gpu_rows.size() == 1) {
    std::cout << "  <none>\n";
  } else {
    PrintTable(std::cout, gpu_rows);
  }
  // Which jobs hold GPUs here.
  std::cout << "Allocated:\n";
  std::vector<std::vector<std::string>> rows = {{"  JOB", "PHASE", "GPUS", "GENERATION"}};
  for (const char* res : {"trainingjobs", "inferenceservices"}) {
    absl::StatusOr<std::vector<Json>> jobs = ListAll(client, *FindResource(res), "", true, "");
    if (!jobs.ok()) continue;
    for (const Json& j : *jobs) {
      if (IsTerminal(Phase(j)) || !j["status"].contains("placement")) continue;
      std::vector<std::string> gpus;
      for (const Json& m : j["status"]["placement"]) {
        if (m.value("node", "") != name) continue;
        for (const Json& g : m["gpus"]) gpus.push_back(std::to_string(g.get<int>()));
      }
      if (gpus.empty()) continue;
      rows.push_back(
          {"  " + j["metadata"].value("namespace", "") + "/" + j["metadata"].value("name", ""),
           Phase(j), absl::StrJoin(gpus, ","), std::to_string(j["status"].value("generation", 0))});
    }
  }
  if (rows.size() == 1) {
    std::cout << "  <none>\n";
  } else {
    PrintTable(std::cout, rows);
  }
  PrintEvents(EventsFor(client, "default", "Node", name), now);
}

// A ModelVersion's chain, read live (not only its status, which the controller writes):
// ModelVersion -> Checkpoint (step, path, phase) -> TrainingJob (phase); the InferenceServices
// serving it (api::ServingInferenceServices, the rule that refuses its deletion).
void DescribeModelVersion(ApiClient& client, const Json& o, absl::Time now) {
  const Json& meta = o["metadata"];
  const Json spec = o.value("spec", Json::object());
  const Json st = o.contains("status") ? o["status"] : Json::object();
  const std::string ns = meta.value("namespace", "default");
  const std::string name = meta.value("name", "");
  PrintTable(std::cout, {{"Name:", name},
                         {"Namespace:", ns},
                         {"Model:", spec.value("model", "")},
                         {"Version:", spec.value("version", "")},
                         {"Phase:", Phase(o)},
                         {"Artifact:", spec.value("artifactPath", "<none>")}});
  std::cout << "Lineage:\n";
  const std::string ckpt = spec.value("checkpoint", "");
  if (ckpt.empty()) {
    std::cout << "  <none> (spec.checkpoint not set)\n";
  } else {
    std::string line = absl::StrCat("  modelversion/", name, " <- checkpoint/", ckpt);
    absl::StatusOr<Response> c = client.Do("GET", ItemPath(*FindResource("checkpoints"), ns, ckpt));
    if (!c.ok() || c->code != 200 || !c->body.is_object()) {
      absl::StrAppend(&line, " (not found)");
    } else {
      const Json cs = c->body.value("spec", Json::object());
      const std::string job = cs.value("jobName", "");
      absl::StrAppend(&line, " (step ", cs.value("step", int64_t{0}), ", path ",
                      cs.value("path", ""), ", ", Phase(c->body), ") <- trainingjob/", job);
      absl::StatusOr<Response> j =
          client.Do("GET", ItemPath(*FindResource("trainingjobs"), ns, job));
      absl::StrAppend(&line, j.ok() && j->code == 200 ? absl::StrCat(" (", Phase(j->body), ")")
                                                      : std::string(" (not found)"));
    }
    std::cout << line << "\n";
  }
  std::vector<std::string> served;
  absl::StatusOr<std::vector<Json>> svcs =
      ListAll(client, *FindResource("inferenceservices"), ns, false, "");
  if (svcs.ok()) {
    std::vector<const Json*> ptrs;
    for (const Json& s : *svcs) ptrs.push_back(&s);
    served = api::ServingInferenceServices(name, ptrs);
  }
  std::cout << "Served by:\n  "
            << (served.empty() ? "<none>"
                               : "inferenceservice/" + absl::StrJoin(served, ", inferenceservice/"))
            << "\n";
  PrintConditions(st, now);
  PrintEvents(EventsFor(client, ns, "ModelVersion", name, meta.value("uid", "")), now);
}

void RunDescribe(const DescribeFlags& f) {
  const ResourceInfo* r = FindResource(f.resource);
  if (r == nullptr) Die(absl::StrCat("error: unknown resource type \"", f.resource, "\""));
  ApiClient client = MakeClient(f.conn);
  absl::StatusOr<Response> res = client.Do("GET", ItemPath(*r, client.config().ns, f.name));
  if (!res.ok()) Die(std::string(res.status().message()));
  if (res->code != 200) Die(ErrorText(*res));
  RealClock clock;
  const absl::Time now = clock.Now();
  if (r->kind == "TrainingJob" || r->kind == "InferenceService") {
    DescribeJob(client, *r, res->body, now);
  } else if (r->kind == "Node") {
    DescribeNode(client, res->body, now);
  } else if (r->kind == "ModelVersion") {
    DescribeModelVersion(client, res->body, now);
  } else {
    std::cout << ToYaml(res->body);
    if (r->namespaced) {
      PrintEvents(EventsFor(client, client.config().ns, r->kind, f.name), now);
    }
  }
}

// --- top ------------------------------------------------------------------

struct TopFlags {
  ConfigFlags conn;
  std::string what;
};

std::vector<Json> AllJobs(ApiClient& client) {
  std::vector<Json> out;
  for (const char* res : {"trainingjobs", "inferenceservices"}) {
    absl::StatusOr<std::vector<Json>> l = ListAll(client, *FindResource(res), "", true, "");
    if (!l.ok()) Die(std::string(l.status().message()));
    for (Json& j : *l) out.push_back(std::move(j));
  }
  return out;
}

std::string Gpus(int64_t milli) {
  if (milli % 1000 == 0) return std::to_string(milli / 1000);
  return absl::StrFormat("%.1f", milli / 1000.0);
}

void RunTop(const TopFlags& f) {
  ApiClient client = MakeClient(f.conn);
  std::vector<Json> jobs = AllJobs(client);
  if (f.what == "nodes" || f.what == "node" || f.what == "no") {
    absl::StatusOr<std::vector<Json>> nodes = ListAll(client, *FindResource("nodes"), "", true, "");
    if (!nodes.ok()) Die(std::string(nodes.status().message()));
    std::map<std::string, int64_t> used;
    for (const Json& j : jobs) {
      if (IsTerminal(Phase(j))) continue;
      std::vector<std::pair<std::string, int64_t>> placed;
      AddPlacedMilli(j, &placed);
      for (auto& [n, m] : placed) used[n] += m;
    }
    // Measured utilization per GPU, live from the agents' heartbeats (the fleet summary's node
    // rows end with it, docs/dashboard.md); -1 where none was reported.
    std::map<std::string, Json> util;
    if (absl::StatusOr<Response> fleet = client.Do("GET", "/api/v1/fleet");
        fleet.ok() && fleet->code == 200) {
      for (const Json& row : fleet->body.value("nodes", Json::array())) {
        if (row.is_array() && row.size() > 9 && row[0].is_string()) util[row[0]] = row[9];
      }
    }
    std::vector<std::vector<std::string>> rows = {
        {"NAME", "GPUS", "ALLOCATED", "ALLOC%", "UTIL%", "UNHEALTHY", "STATUS"}};
    for (const Json& n : *nodes) {
      const Json& spec = n["spec"];
      const int64_t total = api::NodeGpuCount(spec);
      int64_t bad = 0;
      if (n.contains("status") && n["status"].contains("gpus")) {
        for (const Json& g : n["status"]["gpus"]) bad += g.value("health", "") == "Unhealthy";
      }
      const std::string name = n["metadata"].value("name", "");
      const int64_t u = used[name];
      std::string status = Phase(n);
      if (spec.value("unschedulable", false)) status += ",SchedulingDisabled";
      // UTIL%: the mean measured utilization of the GPUs that report one.
      std::string measured = "-";
      int64_t sum = 0, n_reported = 0;
      for (const Json& v : util[name].is_array() ? util[name] : Json::array()) {
        if (v.is_number_integer() && v.get<int64_t>() >= 0) {
          sum += v.get<int64_t>();
          ++n_reported;
        }
      }
      if (n_reported > 0) measured = absl::StrCat(sum / n_reported, "%");
      rows.push_back({name, std::to_string(total), Gpus(u),
                      total > 0 ? absl::StrCat(u / (10 * total), "%") : "-", measured,
                      std::to_string(bad), status});
    }
    PrintTable(std::cout, rows);
    return;
  }
  if (f.what == "queues" || f.what == "queue" || f.what == "q") {
    struct Q {
      int64_t running = 0, waiting = 0, used_milli = 0, waiting_gpus = 0;
      std::string quota = "-", fair_share = "-", credit = "-";
    };
    std::map<std::string, Q> qs;
    absl::StatusOr<std::vector<Json>> queues =
        ListAll(client, *FindResource("queues"), "", true, "");
    if (queues.ok()) {
      // Quota from the spec (short or full form); fair share and credit from
      // the status the scheduling controller writes.
      for (const Json& q : *queues) {
        Q& e = qs[q["metadata"].value("name", "")];
        const Json spec = q.value("spec", Json::object());
        std::map<std::string, std::string> quota;
        const bool borrow = spec.value("borrowing", false);
        const Json gpu_quota = spec.value("gpuQuota", Json::object());
        const Json quotas = spec.value("quotas", Json::object());
        for (const auto& [model, v] : gpu_quota.items()) {
          quota[model] = absl::StrCat(v.dump(), borrow ? "+" : "");
        }
        for (const auto& [res, v] : quotas.items()) {
          if (res.rfind("gpu/", 0) != 0 || !v.is_object()) continue;
          std::string t = v.contains("guaranteed") ? v["guaranteed"].dump() : "0";
          if (v.contains("borrowingLimit")) {
            absl::StrAppend(&t, "+", v["borrowingLimit"].dump());
          } else {
            absl::StrAppend(&t, "+");
          }
          quota[res.substr(4)] = t;
        }
        std::vector<std::string> parts;
        parts.reserve(quota.size());
        for (const auto& [m, t] : quota) parts.push_back(absl::StrCat(m, ":", t));
        if (!parts.empty()) e.quota = absl::StrJoin(parts, ",");
        const Json st = q.value("status", Json::object());
        if (st.contains("fairShare") && st["fairShare"].is_number()) {
          e.fair_share = absl::StrFormat("%.1f%%", 100 * st["fairShare"].get<double>());
        }
        if (st.contains("burstCreditGpuSeconds") && st["burstCreditGpuSeconds"].is_number()) {
          e.credit = absl::StrFormat("%.0f", st["burstCreditGpuSeconds"].get<double>());
        }
      }
    }
    for (const Json& j : jobs) {
      const std::string phase = Phase(j);
      if (IsTerminal(phase)) continue;
      Q& q = qs[j["spec"].value("queue", "default")];
      std::vector<std::pair<std::string, int64_t>> placed;
      AddPlacedMilli(j, &placed);
      if (placed.empty()) {
        ++q.waiting;
        q.waiting_gpus += RequestedGpus(j);
      } else {
        ++q.running;
        for (auto& [n, m] : placed) q.used_milli += m;
      }
    }
    // QUOTA: guaranteed GPUs per model, "+N" the borrowing limit, "+" no limit.
    std::vector<std::vector<std::string>> rows = {{"QUEUE", "BOUND JOBS", "WAITING JOBS",
                                                   "GPUS IN USE", "GPUS WAITING", "QUOTA",
                                                   "FAIR SHARE", "CREDIT GPU-S"}};
    for (auto& [name, q] : qs) {
      rows.push_back({name, std::to_string(q.running), std::to_string(q.waiting),
                      Gpus(q.used_milli), std::to_string(q.waiting_gpus), q.quota, q.fair_share,
                      q.credit});
    }
    PrintTable(std::cout, rows);
    return;
  }
  Die(absl::StrCat("error: top ", f.what, ": must be nodes or queues"));
}

}  // namespace

void RegisterDescribeCommands(CLI::App& app) {
  auto f = std::make_shared<DescribeFlags>();
  CLI::App* cmd =
      app.add_subcommand("describe", "Show an object in detail: placement, events, why it waits");
  cmd->add_option("resource", f->resource, "job|isvc|node|...")->required();
  cmd->add_option("name", f->name, "Name")->required();
  AddConnectionFlags(cmd, &f->conn);
  cmd->footer(
      "Examples:\n"
      "  tessera describe job llm-7b          # placement, conditions, events, why it waits\n"
      "  tessera describe node h100-0 -n ''   # GPUs, health, taints, what runs there\n"
      "  tessera describe modelversion llama-v3  # checkpoint -> job lineage, who serves it");
  cmd->callback([f] { RunDescribe(*f); });
}

void RegisterTopCommands(CLI::App& app) {
  auto f = std::make_shared<TopFlags>();
  CLI::App* cmd = app.add_subcommand("top", "GPU usage per node or per queue");
  cmd->add_option("what", f->what, "nodes|queues")->required();
  AddConnectionFlags(cmd, &f->conn);
  cmd->footer(
      "Examples:\n"
      "  tessera top nodes\n"
      "  tessera top queues   # quota, usage and fair share per queue");
  cmd->callback([f] { RunTop(*f); });
}

}  // namespace tessera::cli
