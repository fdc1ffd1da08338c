#include "server/fleet.h"

#include <algorithm>
#include <map>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "api/kinds.h"
#include "api/member_status.h"
#include "api/object_codec.h"
#include "controller/node_codec.h"
#include "controller/store_layout.h"
#include "nlohmann/json.hpp"

namespace tessera::server {
namespace {

using Json = nlohmann::json;

// A change set larger than this per kind is sent in parts (the answer's
// resourceVersion stops where the part ends; the next poll gets the rest).
constexpr int64_t kDeltaEventLimit = 20000;
constexpr double kMaxWaitSeconds = 5;
constexpr size_t kMaxMessageChars = 240;

// The kinds the summary covers, with the key prefix of each.
struct Section {
  const char* plural;
  const char* field;          // "nodes", "jobs", "queues" or "clusters"
  const char* deleted_field;  // where deletions go
};
constexpr Section kSections[] = {
    {"nodes", "nodes", "deletedNodes"},           {"trainingjobs", "jobs", "deletedJobs"},
    {"inferenceservices", "jobs", "deletedJobs"}, {"queues", "queues", "deletedQueues"},
    {"clusters", "clusters", "deletedClusters"},
};

std::string Str(const Json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

const Json& Field(const Json& o, const char* key) {
  static const Json kNull;
  auto it = o.find(key);
  return it != o.end() ? *it : kNull;
}

double Num(const Json& o, const char* key, double def = 0) {
  auto it = o.find(key);
  return it != o.end() && it->is_number() ? it->get<double>() : def;
}

// Utilization % per GPU, `gpus` long: the newest heartbeat samples when the
// server has them, else what the stored Node says; -1 where none.
Json Utilization(const std::string& name, const Json& status, size_t gpus,
                 const GpuSamples* samples) {
  Json util = Json::array();
  for (size_t i = 0; i < gpus; ++i) util.push_back(-1);
  if (samples != nullptr) {
    if (GpuSamples::Samples live = samples->Get(name); !live.empty()) {
      for (size_t i = 0; i < gpus && i < live.size(); ++i) util[i] = live[i];
      return util;
    }
  }
  if (const Json& list = Field(status, "gpus"); list.is_array()) {
    for (const Json& g : list) {
      if (!g.is_object()) continue;
      const double idx = Num(g, "index", -1), u = Num(g, "utilization", -1);
      if (idx >= 0 && idx < static_cast<double>(gpus) && u >= 0) {
        util[static_cast<size_t>(idx)] = static_cast<int>(std::min(u, 100.0));
      }
    }
  }
  return util;
}

Json NodeRow(const Json& obj, const GpuSamples* samples) {
  const Json& meta = Field(obj, "metadata");
  const Json& spec = Field(obj, "spec");
  Json domains = Json::array();
  std::string health;
  std::string model = spec.is_object() ? Str(spec, "gpuType") : "";
  std::string rack = spec.is_object() ? Str(spec, "rack") : "";
  std::string block = spec.is_object() ? Str(spec, "block") : "";
  bool unschedulable = false;
  // An object the scheduler cannot read is still shown (without GPUs).
  if (absl::StatusOr<model::Node> n = controller::NodeFromObject(obj); n.ok()) {
    // The islands the scheduler sees (node_codec derives them from the links).
    for (size_t i = 0; i < n->gpus.size(); ++i) {
      domains.push_back(n->topology.domain(static_cast<int>(i)));
      health.push_back(n->gpus[i].health == model::GpuHealth::kUnhealthy ? 'U' : 'H');
    }
    if (!n->gpus.empty()) model = n->gpus[0].model;
    rack = n->rack;
    block = n->block;
    unschedulable = n->unschedulable;
  }
  std::string endpoint;
  if (const Json& ann = Field(meta, "annotations"); ann.is_object()) {
    endpoint = Str(ann, "tessera.dev/agent-endpoint");
  }
  const Json& status = Field(obj, "status");
  const std::string name = Str(meta, "name");
  Json util = Utilization(name, status, health.size(), samples);
  return Json::array({name, rack.empty() ? "default" : rack, block.empty() ? "default" : block,
                      status.is_object() ? Str(status, "phase") : "", model, unschedulable ? 1 : 0,
                      domains, health, endpoint, util});
}

// GPUs one member of `g` asks for: whole GPUs, or a share in thousandths.
double MemberGpus(const Json& g) {
  double whole = Num(g, "gpusPerReplica");
  if (whole > 0) return whole;
  double milli = Num(g, "gpuMilli");
  return milli > 0 ? milli / 1000 : 0;
}

// An autoscaled service's (spec.slo) replicas and latency against its target:
// [bound, desired, min, max, slo p99 ms, mean p99 ms, fresh readings], null
// where unknown. The mean is over the readings at most `freshness` old at
// `now`, as the autoscaler counts them; none fresh gives a null mean.
Json ScaleInfo(const Json& spec, const Json& status, double bound, absl::Time now,
               absl::Duration freshness) {
  const Json& slo = Field(spec, "slo");
  const Json& replicas = Field(spec, "replicas");
  auto num_or_null = [](const Json& o, const char* key) -> Json {
    if (!o.is_object()) return nullptr;
    auto it = o.find(key);
    return it != o.end() && it->is_number() ? *it : Json(nullptr);
  };
  double sum = 0;
  int fresh = 0;
  if (const Json& readings = Field(status, "replicaMetrics"); readings.is_object()) {
    for (const auto& [replica, r] : readings.items()) {
      absl::Time at;
      if (!r.is_object() || !controller::ParseTimestamp(Str(r, "time"), &at)) continue;
      const double p99 = Num(r, "p99LatencyMs", -1);
      if (p99 < 0 || now - at > freshness) continue;
      sum += p99;
      ++fresh;
    }
  }
  return Json::array({bound, num_or_null(status, "desiredReplicas"),
                      replicas.is_object() ? Num(replicas, "min") : 0,
                      replicas.is_object() ? Num(replicas, "max") : 0,
                      num_or_null(slo, "p99LatencyMs"),
                      fresh > 0 ? Json(sum / fresh) : Json(nullptr), fresh});
}

// The row's optional trailing element (index 9): what only some jobs have,
// by key, so that rows of plain jobs stay as short as before. Null when empty.
Json JobExtras(const Json& spec, const Json& status, bool training, double bound,
               const FleetRequest& req) {
  Json extra = Json::object();
  if (!training && spec.is_object() && Field(spec, "slo").is_object()) {
    extra["scale"] = ScaleInfo(spec, status.is_object() ? status : Json::object(), bound, req.now,
                               req.metrics_freshness);
  }
  if (status.is_object()) {
    if (std::string c = Str(status, "cluster"); !c.empty()) extra["cluster"] = c;
    for (const char* key : {"requeues", "failovers"}) {
      if (const double n = Num(status, key); n > 0) extra[key] = n;
    }
    // The bounded reason word (OverQuota, NoRoom, Reserved, Cancelled, Error...), not the prose.
    if (std::string r = Str(status, "reason"); !r.empty() && r != Str(status, "phase")) {
      extra["reason"] = r;
    }
    // A failed job: the first failed member's exit code.
    if (Str(status, "phase") == "Failed") {
      if (std::optional<int64_t> code = api::JobExitCode(api::MembersOf(status)); code) {
        extra["exitCode"] = *code;
      }
    }
  }
  return extra.empty() ? Json(nullptr) : extra;
}

Json JobRow(const Json& obj, const FleetRequest& req) {
  const Json& meta = Field(obj, "metadata");
  const Json& spec = Field(obj, "spec");
  const Json& status = Field(obj, "status");
  const bool training = Str(obj, "kind") == "TrainingJob";
  double gpus = 0;
  if (spec.is_object()) {
    if (training) {
      if (const Json& groups = Field(spec, "groups"); groups.is_array()) {
        for (const Json& g : groups) {
          if (g.is_object()) gpus += Num(g, "count") * MemberGpus(g);
        }
      }
    } else {
      const Json& replicas = Field(spec, "replicas");
      gpus = (replicas.is_object() ? Num(replicas, "max") : 0) * MemberGpus(spec);
    }
  }
  Json placement = Json::array();
  std::string phase, message;
  double priority = spec.is_object() ? Num(spec, "priority") : 0;
  if (status.is_object()) {
    phase = Str(status, "phase");
    message = Str(status, "message");
    if (message.size() > kMaxMessageChars) message.resize(kMaxMessageChars);
    priority = Num(status, "priority", priority);
    if (const Json& p = Field(status, "placement"); p.is_array()) {
      for (const Json& m : p) {
        if (!m.is_object()) continue;
        const Json& g = Field(m, "gpus");
        placement.push_back(Json::array(
            {Str(m, "node"), g.is_array() ? g : Json::array(), Num(m, "gpuMilli", 1000)}));
      }
    }
  }
  std::string queue = spec.is_object() ? Str(spec, "queue") : "";
  Json row = Json::array({training ? "T" : "I", Str(meta, "namespace"), Str(meta, "name"), phase,
                          queue.empty() ? "default" : queue, gpus, priority, placement, message});
  // Replicas bound: status.replicas, else the placement's members (one per replica).
  double bound = status.is_object() ? Num(status, "replicas", -1) : -1;
  if (bound < 0) bound = static_cast<double>(placement.size());
  Json extra = JobExtras(spec, status, training, bound, req);
  // Every job's creation time, for the AGE column.
  if (std::string created = Str(meta, "creationTimestamp"); !created.empty()) {
    if (extra.is_null()) extra = Json::object();
    extra["created"] = created;
  }
  if (!extra.is_null()) row.push_back(std::move(extra));
  return row;
}

// A member cluster of a federation hub: [name, phase, GPUs, free GPUs, message].
Json ClusterRow(const Json& obj) {
  const Json& status = Field(obj, "status");
  std::string message = status.is_object() ? Str(status, "message") : "";
  if (message.size() > kMaxMessageChars) message.resize(kMaxMessageChars);
  return Json::array({Str(Field(obj, "metadata"), "name"),
                      status.is_object() ? Str(status, "phase") : "",
                      status.is_object() ? Num(status, "gpus") : 0,
                      status.is_object() ? Num(status, "freeGpus") : 0, message});
}

// The row of a stored object for its section; null when the caller may not
// see it or it does not parse.
Json Row(const Section& s, const store::KeyValue& kv, const Principal& who,
         const GpuSamples* samples, const FleetRequest& req) {
  absl::StatusOr<Json> obj = api::FromStored(kv.value, kv.mod_revision);
  if (!obj.ok() || !obj->is_object()) return nullptr;
  const std::string_view field = s.field;
  if (field == "jobs") {
    const std::string ns = Str(Field(*obj, "metadata"), "namespace");
    if (!Authorize(who, Verb::kList, Resource{s.plural, true, ns, ""}).empty()) return nullptr;
    return JobRow(*obj, req);
  }
  if (field == "nodes") return NodeRow(*obj, samples);
  if (field == "clusters") return ClusterRow(*obj);
  return *obj;  // queues: few, shown whole
}

// What a deletion event names: node/queue name, or [kind, namespace, name].
Json DeletedRow(const Section& s, const store::KeyValue& kv, const Principal& who) {
  std::string_view key = kv.key;
  const std::string prefix = api::StorePrefix(*api::KindByPlural(s.plural), "");
  key.remove_prefix(std::min(key.size(), prefix.size()));
  if (std::string_view(s.field) != "jobs") return std::string(key);
  size_t slash = key.find('/');
  std::string ns(key.substr(0, slash));
  if (slash == std::string_view::npos) return nullptr;
  if (!Authorize(who, Verb::kList, Resource{s.plural, true, ns, ""}).empty()) return nullptr;
  return Json::array({std::string(s.plural) == "trainingjobs" ? "T" : "I", ns,
                      std::string(key.substr(slash + 1))});
}

Json EmptyBody() {
  Json out = Json::object();
  for (const Section& s : kSections) {
    out[s.field] = Json::array();
    out[s.deleted_field] = Json::array();
  }
  return out;
}

absl::StatusOr<std::string> Full(store::Store& store, const GpuSamples* samples,
                                 const Principal& who, const FleetRequest& req) {
  // Lists read at this revision or later: a change in between comes again
  // in the next change set (rows are upserts), none is lost. So do samples.
  const int64_t revision = store.CurrentRevision();
  const int64_t samples_version = samples != nullptr ? samples->version() : 0;
  Json out = EmptyBody();
  for (const Section& s : kSections) {
    const std::string prefix = api::StorePrefix(*api::KindByPlural(s.plural), "");
    store::ListOptions opts;
    opts.limit = 5000;
    while (true) {
      absl::StatusOr<store::ListResult> page = store.List(prefix, opts);
      if (!page.ok()) return page.status();
      for (const store::KeyValue& kv : page->kvs) {
        if (Json row = Row(s, kv, who, samples, req); !row.is_null()) {
          out[s.field].push_back(std::move(row));
        }
      }
      if (!page->more) break;
      opts.continue_after = page->next_key;
    }
  }
  out["full"] = true;
  out["resourceVersion"] = std::to_string(revision);
  out["samples"] = Json::array();
  out["samplesVersion"] = std::to_string(samples_version);
  return out.dump();
}

// Waits up to `wait_seconds` (at most kMaxWaitSeconds) for a store write after
// `since` or, when the caller follows samples, a sample change after
// `samples_since`. Samples are checked between short waits on the store.
void WaitForChange(store::Store& store, const GpuSamples* samples, const FleetRequest& req) {
  const bool follow = samples != nullptr && req.samples_since >= 0;
  if (req.wait_seconds <= 0 || store.CurrentRevision() != req.since ||
      (follow && samples->version() != req.samples_since)) {
    return;
  }
  const absl::Time deadline =
      absl::Now() + absl::Seconds(std::min(req.wait_seconds, kMaxWaitSeconds));
  // Wakes on any write; a write outside the summary gives an empty change set.
  if (!follow) {
    (void)store.WaitForRevision(req.since + 1, deadline);
    return;
  }
  constexpr absl::Duration kSlice = absl::Milliseconds(200);
  while (absl::Now() < deadline) {
    if (store.WaitForRevision(req.since + 1, std::min(deadline, absl::Now() + kSlice)).ok()) return;
    if (samples->version() != req.samples_since) return;
  }
}

}  // namespace

absl::StatusOr<std::string> FleetSummary(store::Store& store, const GpuSamples* samples,
                                         const Principal& who, const FleetRequest& req) {
  if (std::string why = Authorize(who, Verb::kList, Resource{"nodes", false, "", ""});
      !why.empty()) {
    return absl::PermissionDeniedError(why);
  }
  if (req.since <= 0) return Full(store, samples, who, req);
  if (req.since > store.CurrentRevision()) {
    return absl::InvalidArgumentError("resourceVersion: newer than the server's");
  }
  if (req.since < store.CompactedRevision()) return Full(store, samples, who, req);
  WaitForChange(store, samples, req);
  Json out = EmptyBody();
  // Samples first: a change after this read comes again in the next answer.
  GpuSamples::Changes changed;
  if (samples != nullptr && req.samples_since >= 0) {
    changed = samples->Since(req.samples_since);
  } else if (samples != nullptr) {
    changed.version = samples->version();
  }
  int64_t complete = INT64_MAX;
  for (const Section& s : kSections) {
    const std::string prefix = api::StorePrefix(*api::KindByPlural(s.plural), "");
    absl::StatusOr<store::EventsResult> ev = store.Events(prefix, req.since, kDeltaEventLimit);
    if (!ev.ok()) {
      if (ev.status().code() == absl::StatusCode::kOutOfRange)
        return Full(store, samples, who, req);
      return ev.status();
    }
    complete = std::min(complete, ev->revision);
    // The last event of each key decides (events come in revision order).
    std::map<std::string_view, const store::Event*> last;
    for (const store::Event& e : ev->events) last[e.kv.key] = &e;
    for (const auto& [key, e] : last) {
      Json row = e->type == store::Event::Type::kDelete ? DeletedRow(s, e->kv, who)
                                                        : Row(s, e->kv, who, samples, req);
      if (row.is_null()) continue;
      out[e->type == store::Event::Type::kDelete ? s.deleted_field : s.field].push_back(
          std::move(row));
    }
  }
  out["full"] = false;
  out["resourceVersion"] = std::to_string(complete);
  out["samples"] = Json::array();
  for (auto& [name, u] : changed.nodes) out["samples"].push_back(Json::array({name, u}));
  out["samplesVersion"] = std::to_string(changed.version);
  return out.dump();
}

}  // namespace tessera::server
