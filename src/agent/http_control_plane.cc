#include "agent/http_control_plane.h"

#include <signal.h>

#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "model/job.h"

namespace tessera::agent {
namespace {

using Json = nlohmann::json;

std::string Ts(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

std::string Str(const Json& o, const char* key, const std::string& def = "") {
  if (!o.is_object()) return def;
  auto it = o.find(key);
  if (it == o.end() || !it->is_string()) return def;
  return it->get<std::string>();
}

int64_t Int(const Json& o, const char* key, int64_t def) {
  if (!o.is_object()) return def;
  auto it = o.find(key);
  if (it == o.end() || !it->is_number()) return def;
  return it->get<int64_t>();
}

const Json& Sub(const Json& o, const char* key) {
  static const Json kNull;
  if (!o.is_object()) return kNull;
  auto it = o.find(key);
  return it == o.end() ? kNull : *it;
}

bool BoundPhase(const std::string& p) {
  return p == "Scheduled" || p == "Running" || p == "Deploying" || p == "Ready" || p == "Degraded";
}

// The controller set the job's PreemptionPending condition: it is a victim.
bool PreemptionPending(const Json& status) {
  const Json& conds = Sub(status, "conditions");
  if (!conds.is_array()) return false;
  for (const Json& c : conds) {
    if (Str(c, "type") == "PreemptionPending") return Str(c, "status") == "True";
  }
  return false;
}

absl::Status Unexpected(const std::string& what, const ApiResponse& r) {
  if (r.code >= 500) return absl::UnavailableError(absl::StrCat(what, ": ", ApiError(r)));
  if (r.code == 404) return absl::NotFoundError(absl::StrCat(what, ": ", ApiError(r)));
  if (r.code == 401 || r.code == 403) {
    return absl::PermissionDeniedError(absl::StrCat(what, ": ", ApiError(r)));
  }
  return absl::FailedPreconditionError(absl::StrCat(what, ": ", ApiError(r)));
}

std::string ItemPath(const std::string& kind, const std::string& ns, const std::string& name) {
  return ObjectPath(kind == "InferenceService" ? "inferenceservices" : "trainingjobs", ns, name);
}

}  // namespace

int ParseSignal(const std::string& name_in) {
  std::string name = absl::AsciiStrToUpper(name_in);
  if (absl::StartsWith(name, "SIG")) name = name.substr(3);
  int n = 0;
  if (absl::SimpleAtoi(name, &n)) return n > 0 && n < 65 ? n : -1;
  static const std::map<std::string, int> kNames = {
      {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"INT", SIGINT},
      {"HUP", SIGHUP},   {"QUIT", SIGQUIT}, {"KILL", SIGKILL}};
  auto it = kNames.find(name);
  return it == kNames.end() ? -1 : it->second;
}

HttpControlPlaneClient::HttpControlPlaneClient(const std::string& server, const std::string& token,
                                               absl::Duration timeout, const TlsClientOptions& tls)
    : api_(server, token, timeout, tls) {}

absl::Status HttpControlPlaneClient::RegisterNode(const NodeRegistration& node) {
  const std::string path = "/api/v1/nodes/" + node.name;
  for (int attempt = 0; attempt < 6; ++attempt) {
    Json spec;
    if (!legacy_node_schema_) {
      Json gpus = Json::array();
      for (const NodeGpu& g : node.gpus) {
        Json j = {{"index", g.index}, {"model", g.model}, {"memoryMiB", g.memory_mib}};
        if (!g.uuid.empty()) j["uuid"] = g.uuid;
        gpus.push_back(j);
      }
      spec = {{"gpus", gpus}};
      if (!node.links.empty()) spec["links"] = node.links;
      if (!node.rack.empty()) spec["rack"] = node.rack;
      if (!node.block.empty()) spec["block"] = node.block;
    } else {
      spec = {{"gpuType", node.gpus.empty() ? "none" : node.gpus[0].model},
              {"gpuCount", node.gpus.size()}};
      Json topo = Json::object();
      if (!node.rack.empty()) topo["rack"] = node.rack;
      if (!node.block.empty()) topo["block"] = node.block;
      if (!topo.empty()) spec["topology"] = topo;
    }
    absl::StatusOr<ApiResponse> got = api_.Get(path);
    if (!got.ok()) return got.status();
    Json obj;
    bool create = got->code == 404;
    if (create) {
      obj = {
          {"apiVersion", "tessera.dev/v1"}, {"kind", "Node"}, {"metadata", {{"name", node.name}}}};
    } else if (got->code == 200) {
      obj = got->body;
      // The operator's cordon survives re-registration.
      const Json& old = Sub(obj, "spec");
      if (old.is_object() && old.contains("unschedulable"))
        spec["unschedulable"] = old["unschedulable"];
      if (old.is_object() && old.contains("taints")) spec["taints"] = old["taints"];
      if (old.is_object() && old.contains("pool")) spec["pool"] = old["pool"];
    } else {
      return Unexpected("get node " + node.name, *got);
    }
    obj["spec"] = spec;
    Json& meta = obj["metadata"];
    for (const auto& [k, v] : node.labels) meta["labels"][k] = v;
    if (!node.agent_endpoint.empty()) {
      meta["annotations"]["tessera.dev/agent-endpoint"] = node.agent_endpoint;
    }
    absl::StatusOr<ApiResponse> put =
        create ? api_.Post("/api/v1/nodes", obj) : api_.Put(path, obj);
    if (!put.ok()) return put.status();
    if (put->code == 200 || put->code == 201) return absl::OkStatus();
    if (put->code == 409) continue;  // raced with the controller or an earlier incarnation
    if (put->code == 422 && !legacy_node_schema_) {
      legacy_node_schema_ = true;
      continue;
    }
    return Unexpected("register node " + node.name, *put);
  }
  return absl::AbortedError("register node " + node.name + ": too many conflicts");
}

Json HttpControlPlaneClient::GpuStatus(const std::vector<GpuHealthReport>& gpus) const {
  Json list = Json::array();
  for (const GpuHealthReport& g : gpus) {
    Json j = {{"index", g.index}, {"health", g.healthy ? "Healthy" : "Unhealthy"}};
    if (!g.message.empty()) j["message"] = g.message.substr(0, 1024);
    if (g.utilization_percent && !no_utilization_field_) j["utilization"] = *g.utilization_percent;
    list.push_back(j);
  }
  return list;
}

absl::Status HttpControlPlaneClient::Heartbeat(const std::string& node,
                                               const std::vector<GpuHealthReport>& gpus,
                                               absl::Time now) {
  if (!no_heartbeat_route_ && !legacy_node_schema_ && !no_utilization_field_) {
    absl::StatusOr<ApiResponse> r =
        api_.Post("/api/v1/nodes/" + node + "/heartbeat", {{"gpus", GpuStatus(gpus)}});
    if (!r.ok()) return r.status();
    if (r->code == 200) return absl::OkStatus();
    const std::string why = ApiError(*r);
    if (r->code != 404 || !absl::StrContains(why, "no such path")) {
      return Unexpected("heartbeat of node " + node, *r);
    }
    no_heartbeat_route_ = true;  // an older server: PUT the Node instead
  }
  return PutHeartbeat(node, gpus, now);
}

absl::Status HttpControlPlaneClient::PutHeartbeat(const std::string& node,
                                                  const std::vector<GpuHealthReport>& gpus,
                                                  absl::Time now) {
  const std::string path = "/api/v1/nodes/" + node;
  for (int attempt = 0; attempt < 6; ++attempt) {
    absl::StatusOr<ApiResponse> got = api_.Get(path);
    if (!got.ok()) return got.status();
    if (got->code != 200) return Unexpected("get node " + node, *got);
    Json obj = got->body;
    Json& st = obj["status"];
    // The controller owns the phase (Ready / NotReady from heartbeat times); only a server
    // without a controller gets it from the agent.
    if (!legacy_node_schema_) {
      st["lastHeartbeatTime"] = Ts(now);
      st["gpus"] = GpuStatus(gpus);
    } else {
      st["phase"] = "Ready";
      Json obs = Json::object();
      obs["lastHeartbeatTime"] = Ts(now);
      for (const GpuHealthReport& g : gpus) {
        obs[absl::StrCat("gpu.", g.index, ".health")] = g.healthy ? "Healthy" : "Unhealthy";
        if (!g.message.empty()) obs[absl::StrCat("gpu.", g.index, ".message")] = g.message;
      }
      st["observed"] = obs;
    }
    absl::StatusOr<ApiResponse> put = api_.Put(path, obj);
    if (!put.ok()) return put.status();
    if (put->code == 200) return absl::OkStatus();
    if (put->code == 409) continue;
    // A server older than the field rejects it (422): drop it first, then fall back to the
    // legacy schema.
    if (put->code == 422 && !legacy_node_schema_ && !no_utilization_field_) {
      no_utilization_field_ = true;
      continue;
    }
    if (put->code == 422 && !legacy_node_schema_) {
      legacy_node_schema_ = true;
      continue;
    }
    return Unexpected("heartbeat of node " + node, *put);
  }
  return absl::AbortedError("heartbeat of node " + node + ": too many conflicts");
}

absl::StatusOr<BindingSet> HttpControlPlaneClient::ListBindings(const std::string& node) {
  return WatchBindings(node, 0, absl::ZeroDuration());
}

absl::StatusOr<BindingSet> HttpControlPlaneClient::WatchBindings(const std::string& node,
                                                                 int64_t since,
                                                                 absl::Duration timeout) {
  std::string path = absl::StrCat("/api/v1/nodes/", node, "/bindings");
  const int64_t wait_s = absl::ToInt64Seconds(timeout);
  if (since > 0 && wait_s > 0) {
    absl::StrAppend(&path, "?resourceVersion=", since, "&timeoutSeconds=", wait_s);
  }
  absl::StatusOr<ApiResponse> r = api_.Get(path);
  if (!r.ok()) return r.status();
  if (r->code == 429) return absl::UnavailableError("bindings of " + node + ": " + ApiError(*r));
  if (r->code != 200) return Unexpected("bindings of " + node, *r);
  const Json& meta = Sub(r->body, "metadata");
  BindingSet set;
  if (!absl::SimpleAtoi(Str(meta, "resourceVersion"), &set.revision)) {
    return absl::FailedPreconditionError("bindings of " + node + ": no resourceVersion");
  }
  if (meta.is_object() && meta.contains("unchanged") && meta["unchanged"] == true) {
    set.changed = false;
    return set;
  }
  std::vector<Binding>& out = set.bindings;
  const Json& items = Sub(r->body, "items");
  if (!items.is_array()) return set;
  for (const Json& job : items) {
    const std::string kind = Str(job, "kind", "TrainingJob");
    const Json& st = Sub(job, "status");
    const Json& placement = Sub(st, "placement");
    if (!BoundPhase(Str(st, "phase")) || !placement.is_array()) continue;
    const Json& meta = Sub(job, "metadata");
    const Json& spec = Sub(job, "spec");
    const Json& ann = Sub(meta, "annotations");
    Binding base;
    base.kind = kind;
    base.namespace_name = Str(meta, "namespace");
    base.job = Str(meta, "name");
    if (spec.contains("command") && spec["command"].is_array()) {
      for (const Json& c : spec["command"]) {
        if (c.is_string()) base.command.push_back(c.get<std::string>());
      }
    }
    if (std::string c = Str(ann, "tessera.dev/command"); !c.empty()) {
      Json arr = Json::parse(c, nullptr, false);
      if (arr.is_array()) {
        base.command.clear();
        for (const Json& a : arr) {
          if (a.is_string()) base.command.push_back(a.get<std::string>());
        }
      }
    }
    if (std::string e = Str(ann, "tessera.dev/env"); !e.empty()) {
      Json env = Json::parse(e, nullptr, false);
      if (env.is_object()) {
        for (auto it = env.begin(); it != env.end(); ++it) {
          if (it.value().is_string()) base.env[it.key()] = it.value().get<std::string>();
        }
      }
    }
    base.working_dir = Str(ann, "tessera.dev/working-dir");
    base.checkpoint_requested = PreemptionPending(st);
    if (std::string s = Str(ann, "tessera.dev/checkpoint-signal"); !s.empty()) {
      int sig = ParseSignal(s);
      if (sig > 0) base.checkpoint_signal = sig;
    }
    double grace = 0;
    if (absl::SimpleAtod(Str(ann, "tessera.dev/grace-seconds"), &grace) && grace >= 0) {
      base.grace = absl::Seconds(grace);
    }
    if (std::string p = Str(Sub(spec, "checkpoint"), "path"); !p.empty()) {
      base.env["TESSERA_CHECKPOINT_PATH"] = p;
    }
    if (std::string p = Str(Sub(st, "resumeFrom"), "path"); !p.empty()) {
      base.env["TESSERA_RESUME_FROM"] = p;
    }
    base.env["TESSERA_WORLD_SIZE"] = absl::StrCat(placement.size());
    const int64_t job_gen = Int(st, "generation", 0);
    int rank = 0;
    for (const Json& m : placement) {
      const int my_rank = rank++;
      if (Str(m, "node") != node) continue;
      Binding b = base;
      b.group = Str(m, "group");
      b.index = static_cast<int>(Int(m, "member", 0));
      b.generation = Int(m, "generation", job_gen);
      // docs/control-plane.md, "Fencing": only a member stamped with the job's current
      // generation may run.
      if (job_gen != 0 && b.generation != job_gen) continue;
      b.env["TESSERA_RANK"] = absl::StrCat(my_rank);
      if (m.contains("gpus") && m["gpus"].is_array()) {
        for (const Json& g : m["gpus"]) {
          if (g.is_number_integer()) b.gpus.push_back(g.get<int>());
        }
      }
      // Per-group resources become cgroup limits.
      if (spec.contains("groups") && spec["groups"].is_array()) {
        for (const Json& g : spec["groups"]) {
          if (Str(g, "name") != b.group) continue;
          const Json& res = Sub(g, "resources");
          if (res.is_object() && res.contains("cpu") && res["cpu"].is_number()) {
            b.cpu_milli = static_cast<int64_t>(res["cpu"].get<double>() * 1000);
          }
          if (res.is_object() && res.contains("memoryGiB") && res["memoryGiB"].is_number()) {
            b.memory_mib = static_cast<int64_t>(res["memoryGiB"].get<double>() * 1024);
          }
        }
      }
      if (!b.command.empty()) out.push_back(std::move(b));
    }
  }
  return set;
}

absl::Status HttpControlPlaneClient::ReportMembers(const std::string& node,
                                                   const std::vector<MemberReport>& members) {
  std::map<std::string, std::vector<const MemberReport*>> by_job;
  for (const MemberReport& m : members) {
    by_job[ItemPath(m.kind, m.namespace_name, m.job)].push_back(&m);
  }
  absl::Status result = absl::OkStatus();
  for (const auto& [path, reports] : by_job) {
    for (int attempt = 0; attempt < 6; ++attempt) {
      absl::StatusOr<ApiResponse> got = api_.Get(path);
      if (!got.ok()) return got.status();
      if (got->code == 404) break;  // deleted: nothing to report to
      if (got->code != 200) {
        result = Unexpected("get " + path, *got);
        break;
      }
      Json obj = got->body;
      Json& st = obj["status"];
      const std::string phase = Str(st, "phase");
      const int64_t job_gen = Int(st, "generation", 0);
      bool changed = false;
      for (const MemberReport* m : reports) {
        // Reports of a superseded binding would only confuse the current one.
        if (m->generation != job_gen && job_gen != 0) continue;
        std::string key = model::MemberKey(m->group, m->index);
        std::string value = m->running ? absl::StrCat("Running gen=", m->generation, " node=", node)
                                       : absl::StrCat("Exited code=", m->exit_code,
                                                      " gen=", m->generation, " node=", node);
        if (Str(Sub(st, "observed"), key.c_str()) != value) {
          st["observed"][key] = value;
          changed = true;
        }
        // A serving replica's own latency / throughput reading, for the controller's
        // autoscaler (docs/api.md, status.replicaMetrics); an exited one has none.
        if (m->running && m->metrics) {
          Json r = {{"time", Ts(m->metrics->time)}, {"node", node}, {"generation", m->generation}};
          if (m->metrics->p99_latency_ms) r["p99LatencyMs"] = *m->metrics->p99_latency_ms;
          if (m->metrics->rps) r["rps"] = *m->metrics->rps;
          st["replicaMetrics"][key] = std::move(r);
          changed = true;
        } else if (!m->running && st.contains("replicaMetrics") &&
                   st["replicaMetrics"].is_object() && st["replicaMetrics"].contains(key)) {
          st["replicaMetrics"].erase(key);
          changed = true;
        }
      }
      if (BoundPhase(phase)) {
        // Derive the job's phase from what every placed member reported.
        const Json& placement = Sub(st, "placement");
        bool any_running = false, any_failed = false,
             all_ok = placement.is_array() && !placement.empty(), all_running = all_ok;
        if (placement.is_array()) {
          for (const Json& p : placement) {
            std::string key = model::MemberKey(Str(p, "group"), Int(p, "member", 0));
            std::string v = Str(Sub(st, "observed"), key.c_str());
            const std::string gen = absl::StrCat(" gen=", Int(p, "generation", job_gen), " ");
            bool current = absl::StrContains(v, gen);
            if (current && absl::StartsWith(v, "Running")) any_running = true;
            if (!(current && absl::StartsWith(v, "Running"))) all_running = false;
            if (current && absl::StartsWith(v, "Exited code=") &&
                !absl::StartsWith(v, "Exited code=0 ")) {
              any_failed = true;
            }
            if (!(current && absl::StartsWith(v, "Exited code=0 "))) all_ok = false;
          }
        }
        std::string want = phase;
        if (PreemptionPending(st)) {
          // Exits of a victim answer its checkpoint signal; the controller
          // requeues it (Preempted), so they are neither success nor failure.
          any_failed = all_ok = false;
        }
        if (any_failed && Int(st, "restarts", 0) < Int(Sub(obj, "spec"), "maxRestarts", 0)) {
          // Restarts are left (spec.maxRestarts): the controller restarts the
          // gang at a new generation from its checkpoint; not Failed yet.
          any_failed = false;
        }
        if (Str(obj, "kind") == "InferenceService") {
          // A service does not finish: its replicas' exits are restarted by their agents
          // (NodeAgent::RestartReplica). Deploying until every placed replica serves, then
          // Ready; Degraded while one that served is down. Failed only by the controller
          // or a user.
          if (!PreemptionPending(st)) {
            const bool served = phase == "Ready" || phase == "Degraded";
            want = all_running ? "Ready" : served ? "Degraded" : "Deploying";
          }
        } else if (any_failed) {
          want = "Failed";
        } else if (all_ok) {
          want = "Succeeded";
        } else if (any_running && phase == "Scheduled") {
          want = "Running";
        }
        if (want != phase) {
          st["phase"] = want;
          changed = true;
        }
      }
      if (!changed) break;
      absl::StatusOr<ApiResponse> put = api_.Put(path, obj);
      if (!put.ok()) return put.status();
      if (put->code == 200 || put->code == 404) break;
      if (put->code == 409) continue;
      result = Unexpected("report to " + path, *put);
      break;
    }
  }
  return result;
}

}  // namespace tessera::agent
