#include "agent/http_control_plane.h"

#include <signal.h>

#include <algorithm>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "api/limits.h"
#include "api/member_status.h"
#include "api/store_layout.h"
#include "model/job.h"
#include "model/node_topology.h"

namespace tessera::agent {
namespace {

using Json = nlohmann::json;

std::string Ts(absl::Time t) { return api::Timestamp(t); }

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
  Json gpus = Json::array();
  for (const NodeGpu& g : node.gpus) {
    Json j = {{"index", g.index}, {"model", g.model}, {"memoryMiB", g.memory_mib}};
    if (!g.uuid.empty()) j["uuid"] = g.uuid;
    gpus.push_back(j);
  }
  Json spec = {{"gpus", gpus}};
  if (!node.links.empty()) {
    spec["links"] = node.links;
    // The islands the links make (model::NvLinkIslands, the scheduler's own derivation),
    // stated so that the Node says what the GPU chooser will see.
    const int n = static_cast<int>(node.links.size());
    std::vector<model::LinkClass> lc;
    for (const std::vector<std::string>& row : node.links) {
      for (const std::string& code : row) {
        model::LinkClass c = model::LinkClass::kCrossNuma;
        model::ParseLinkClass(code, &c);
        lc.push_back(c);
      }
    }
    if (static_cast<int>(lc.size()) == n * n) spec["nvlinkDomains"] = model::NvLinkIslands(n, lc);
  }
  if (!node.rack.empty()) spec["rack"] = node.rack;
  if (!node.block.empty()) spec["block"] = node.block;
  if (node.cpu_milli > 0) spec["cpuMilli"] = node.cpu_milli;
  if (node.memory_mib > 0) spec["memoryMiB"] = node.memory_mib;
  for (int attempt = 0; attempt < 6; ++attempt) {
    absl::StatusOr<ApiResponse> got = api_.Get(path);
    if (!got.ok()) return got.status();
    Json obj;
    bool create = got->code == 404;
    if (create) {
      obj = {
          {"apiVersion", "tessera.dev/v1"}, {"kind", "Node"}, {"metadata", {{"name", node.name}}}};
    } else if (got->code == 200) {
      obj = got->body;
      obj.erase("status");
    } else {
      return Unexpected("get node " + node.name, *got);
    }
    // What an admin decides (cordon, taints, pool) the server keeps as stored.
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
    return Unexpected("register node " + node.name, *put);
  }
  return absl::AbortedError("register node " + node.name + ": too many conflicts");
}

Json HttpControlPlaneClient::GpuStatus(const std::vector<GpuHealthReport>& gpus) const {
  Json list = Json::array();
  for (const GpuHealthReport& g : gpus) {
    Json j = {{"index", g.index}, {"health", g.healthy ? "Healthy" : "Unhealthy"}};
    if (!g.message.empty()) j["message"] = g.message.substr(0, 1024);
    if (g.utilization_percent) j["utilization"] = std::min<uint32_t>(*g.utilization_percent, 100);
    list.push_back(j);
  }
  return list;
}

absl::Status HttpControlPlaneClient::Heartbeat(const std::string& node,
                                               const std::vector<GpuHealthReport>& gpus,
                                               absl::Time) {
  absl::StatusOr<ApiResponse> r =
      api_.Post("/api/v1/nodes/" + node + "/heartbeat", {{"gpus", GpuStatus(gpus)}});
  if (!r.ok()) return r.status();
  if (r->code == 200) return absl::OkStatus();
  return Unexpected("heartbeat of node " + node, *r);
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
    if (absl::SimpleAtod(Str(ann, api::kGraceAnnotation), &grace) && grace >= 0) {
      // The server refuses more than the maximum; an older object is held to it here.
      base.grace = absl::Seconds(std::min(grace, static_cast<double>(api::kMaxGraceSeconds)));
    }
    if (std::string p = Str(Sub(spec, "checkpoint"), "path"); !p.empty()) {
      base.env["TESSERA_CHECKPOINT_PATH"] = p;
    }
    // The interval the controller chose (Young/Daly, for a job that declared its checkpoint
    // cost), else the one the job set itself.
    int64_t every = Int(st, "checkpointIntervalSeconds", 0);
    if (every <= 0) every = Int(Sub(spec, "checkpoint"), "intervalSeconds", 0);
    if (every > 0) base.env["TESSERA_CHECKPOINT_INTERVAL_SECONDS"] = absl::StrCat(every);
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

absl::Status HttpControlPlaneClient::ReportMembers(const std::string&,
                                                   const std::vector<MemberReport>& members) {
  // One status write per job: its members' entries and a serving replica's reading. The server
  // merges them into the stored status (no read first, no conflict with the gang's other
  // agents) and the controller derives the job's phase from them.
  std::map<std::string, std::vector<const MemberReport*>> by_job;
  for (const MemberReport& m : members) {
    by_job[ItemPath(m.kind, m.namespace_name, m.job)].push_back(&m);
  }
  absl::Status result = absl::OkStatus();
  for (const auto& [path, reports] : by_job) {
    Json entries = Json::array();
    Json metrics = Json::object();
    for (const MemberReport* m : reports) {
      api::MemberStatus e;
      e.member = model::MemberKey(m->group, m->index);
      e.generation = m->generation;
      e.state = m->state;
      if (api::Finished(m->state)) e.exit_code = m->exit_code;
      e.reason = m->reason.substr(0, api::kMemberReasonMaxBytes);
      e.message = m->message;
      e.last_checkpoint = m->last_checkpoint;
      e.time = m->time;
      entries.push_back(api::ToJson(e));
      // A serving replica's own latency / throughput reading, for the controller's
      // autoscaler (docs/api.md, status.replicaMetrics).
      if (m->state == api::MemberState::kRunning && m->metrics) {
        Json r = {{"time", Ts(m->metrics->time)}, {"generation", m->generation}};
        if (m->metrics->p99_latency_ms) r["p99LatencyMs"] = *m->metrics->p99_latency_ms;
        if (m->metrics->rps) r["rps"] = *m->metrics->rps;
        metrics[e.member] = std::move(r);
      }
    }
    Json status = {{"members", std::move(entries)}};
    if (!metrics.empty()) status["replicaMetrics"] = std::move(metrics);
    absl::StatusOr<ApiResponse> put = api_.Put(path + "/status", {{"status", std::move(status)}});
    if (!put.ok()) return put.status();
    // 404: the job is gone; 403: its members moved off this node meanwhile -- nothing to say.
    if (put->code == 200 || put->code == 404 || put->code == 403) continue;
    result = Unexpected("report to " + path, *put);
  }
  return result;
}

}  // namespace tessera::agent
