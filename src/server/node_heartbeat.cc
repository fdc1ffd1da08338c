// POST /api/v1/nodes/NAME/heartbeat: a node agent's heartbeat (docs/api.md, "Node heartbeats").
//
// Body: {"gpus": [{"index": 0, "health": "Healthy"|"Unhealthy", "message": "...",
// "utilization": 0..100}, ...]}, the agent-owned part of the Node's status. Every heartbeat
// renews the node's in-memory lease (controller::NodeLeases), which the controller reads for
// liveness (a NotReady node whose lease renews is Ready again at the controller's next step). The
// Node is written (one fsynced store write, one event for every watcher) only
//   - when the GPUs' health or messages differ from the stored status,
//   - or when the stored lastHeartbeatTime is missing or older than options_.node_status_interval,
// so in steady state a fleet's heartbeats cost map updates, not durable writes, and readers of
// the Node (`tessera describe node`) see it refreshed at least every interval. Every
// heartbeat's utilization samples also go to the server's GpuSamples (gpu_samples.h), from
// which the dashboard shows them live. On a replica that is not the leader (options_.is_leader)
// the stale interval is standby_node_status_interval, so that the leader hears the node. Without a
// lease table every heartbeat is written. A renewal is answered on the front end's worker; a
// heartbeat that writes waits for its fsync on ApiServer's writer threads (the route is deferred,
// http/event_server.h), so slow commits never hold the workers that renewals need. GET on the
// same path reads the lease: {"kind": "NodeLease", "renewTime": "..." or null (none since the
// server started)}.
#include <algorithm>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "api/kinds.h"
#include "controller/node_leases.h"
#include "controller/store_layout.h"
#include "server/api_server.h"
#include "server/api_server_internal.h"
#include "server/elastic_pool.h"
#include "server/gpu_samples.h"

namespace tessera::server {

using namespace internal;  // NOLINT: the module's own helpers

namespace {

// The GPUs list without what changes with every sample (utilization), to tell a heartbeat that
// only renews liveness from one that reports a change.
Json WithoutSamples(const Json& gpus) {
  Json out = Json::array();
  if (!gpus.is_array()) return out;
  for (Json g : gpus) {
    if (g.is_object()) g.erase("utilization");
    out.push_back(std::move(g));
  }
  std::sort(out.begin(), out.end(),
            [](const Json& a, const Json& b) { return a.value("index", 0) < b.value("index", 0); });
  return out;
}

// Utilization % per GPU index (`count` GPUs), -1 where the heartbeat has none.
GpuSamples::Samples Samples(const Json& gpus, int64_t count) {
  GpuSamples::Samples out(static_cast<size_t>(std::max<int64_t>(count, 0)), -1);
  for (const Json& g : gpus) {
    const int64_t idx = g.value("index", int64_t{-1});
    auto u = g.find("utilization");
    if (idx < 0 || idx >= count || u == g.end() || !u->is_number()) continue;
    out[static_cast<size_t>(idx)] = static_cast<int>(std::clamp(u->get<double>(), 0.0, 100.0));
  }
  return out;
}

}  // namespace

void ApiServer::ServeNodeHeartbeat(const Principal& p, const std::string& node,
                                   const httplib::Request& req, const Finish& finish) {
  httplib::Response res;
  if (req.body.size() > options_.max_body_bytes) {
    Fail(res, 413, "RequestEntityTooLarge", BodyTooLargeMessage(options_.max_body_bytes));
    return finish(res);
  }
  std::optional<HeartbeatWrite> write =
      PrepareNodeHeartbeat(p, node, req, res, /*report_samples=*/true);
  if (!write) return finish(res);
  writers_->enqueue([this, p, node, req, w = *std::move(write), finish]() mutable {
    httplib::Response r;
    WriteNodeHeartbeat(p, node, req, std::move(w), r);
    finish(r);
  });
}

void ApiServer::WriteNodeHeartbeat(const Principal& p, const std::string& node,
                                   const httplib::Request& req, HeartbeatWrite w,
                                   httplib::Response& res) {
  for (int attempt = 0;; ++attempt) {
    absl::StatusOr<int64_t> rev = store_.Put(w.key, w.value, w.base);
    if (rev.ok()) {
      ++heartbeats_written_;
      return Reply(
          res, 200,
          {{"kind", "NodeHeartbeat"}, {"written", true}, {"resourceVersion", absl::StrCat(*rev)}});
    }
    if (!absl::IsFailedPrecondition(rev.status()) || attempt >= 10) {
      return FailStore(res, rev.status(), absl::StrCat("node \"", node, "\""));
    }
    // The controller wrote the node meanwhile (its phase): read it again. The samples went to
    // GpuSamples the first time.
    std::optional<HeartbeatWrite> again =
        PrepareNodeHeartbeat(p, node, req, res, /*report_samples=*/false);
    if (!again) return;  // answered: a renewal now, or refused
    w = *std::move(again);
  }
}

// std::hash of a string is the same in every process of one build, so a node keeps its share
// across restarts.
absl::Duration internal::NodeStatusInterval(const std::string& node, absl::Duration interval) {
  const double share = static_cast<double>(std::hash<std::string>{}(node) % 1024) / 1024.0;
  return interval + interval * (share / 2);
}

std::optional<ApiServer::HeartbeatWrite> ApiServer::PrepareNodeHeartbeat(
    const Principal& p, const std::string& node, const httplib::Request& req,
    httplib::Response& res, bool report_samples) {
  auto fail = [&](int code, absl::string_view reason, absl::string_view message,
                  const std::vector<api::FieldError>& causes = {}) {
    Fail(res, code, reason, message, causes);
    return std::nullopt;
  };
  if (!AllowNodeRoute(p, node, "node heartbeats", "heartbeat for itself", res)) return std::nullopt;
  absl::StatusOr<Json> body = api::ParseBody(req.body);
  if (!body.ok()) return fail(400, "BadRequest", body.status().message());
  std::vector<api::FieldError> errors;
  if (!body->is_object()) {
    errors.push_back({"", "the body must be a JSON object"});
  } else {
    for (auto it = body->begin(); it != body->end(); ++it) {
      if (it.key() != "gpus") errors.push_back({it.key(), "unknown field"});
    }
    static const api::Schema* const kGpus =
        api::KindByPlural("nodes")->object_schema.FieldSchema("status")->FieldSchema("gpus");
    if (!body->contains("gpus")) {
      errors.push_back({"gpus", "required"});
    } else {
      kGpus->Validate((*body)["gpus"], "gpus", errors);
    }
  }
  const std::string key = api::StoreKey(*api::KindByPlural("nodes"), "", node);
  const std::string what = absl::StrCat("node \"", node, "\"");
  absl::StatusOr<store::KeyValue> cur = store_.Get(key);
  if (!cur.ok()) {
    if (absl::IsNotFound(cur.status())) {
      return fail(404, "NotFound", absl::StrCat(what, " not found: register it first"));
    }
    FailStore(res, cur.status(), what);
    return std::nullopt;
  }
  // The stored Node is parsed only when its revision is new to this server (the summary) or
  // when it must be written.
  std::optional<Json> old;
  auto parse_stored = [&] {
    absl::StatusOr<Json> parsed = api::FromStored(cur->value, cur->mod_revision);
    if (!parsed.ok()) {
      FailStore(res, parsed.status(), what);
      return false;
    }
    old = *std::move(parsed);
    return true;
  };
  StoredNodeStatus stored;
  bool known = false;
  {
    absl::MutexLock l(&node_status_mu_);
    if (auto it = node_status_.find(node);
        it != node_status_.end() && it->second.revision == cur->mod_revision) {
      stored = it->second;
      known = true;
    }
  }
  if (!known) {
    if (!parse_stored()) return std::nullopt;
    stored.revision = cur->mod_revision;
    stored.gpu_count = api::NodeGpuCount(old->value("spec", Json::object()));
    const Json& st = old->contains("status") ? (*old)["status"] : Json::object();
    if (st.is_object() && st.contains("lastHeartbeatTime") && st["lastHeartbeatTime"].is_string()) {
      absl::Time t;
      if (controller::ParseTimestamp(st["lastHeartbeatTime"].get<std::string>(), &t)) {
        stored.last_heartbeat = t;
      }
    }
    stored.has_gpus = st.is_object() && st.contains("gpus");
    if (stored.has_gpus) stored.gpus = WithoutSamples(st["gpus"]).dump();
    absl::MutexLock l(&node_status_mu_);
    StoredNodeStatus& slot = node_status_[node];
    if (slot.revision <= stored.revision) slot = stored;
  }
  const int64_t count = stored.gpu_count;
  if (errors.empty()) {
    std::set<int64_t> seen;
    const Json& gpus = (*body)["gpus"];
    for (size_t i = 0; i < gpus.size(); ++i) {
      const int64_t idx = gpus[i].value("index", int64_t{-1});
      const std::string field = absl::StrCat("gpus[", i, "].index");
      if (idx >= count) {
        errors.push_back({field, absl::StrCat("the node has ", count, " GPUs")});
      } else if (!seen.insert(idx).second) {
        errors.push_back({field, absl::StrCat("GPU ", idx, " is listed twice")});
      }
    }
  }
  if (!errors.empty()) {
    return fail(422, "Invalid", absl::StrCat("heartbeat is invalid: ", errors.front().ToString()),
                errors);
  }
  const absl::Time now = clock_.Now();
  if (options_.node_leases != nullptr) options_.node_leases->Renew(node, now);
  if (options_.gpu_samples != nullptr && report_samples) {
    options_.gpu_samples->Report(node, Samples((*body)["gpus"], count), now);
  }
  const bool stale =
      now - stored.last_heartbeat >=
      (options_.is_leader && !options_.is_leader()
           ? std::min(options_.standby_node_status_interval, options_.node_status_interval)
           : NodeStatusInterval(node, options_.node_status_interval));
  const bool changed = !stored.has_gpus || stored.gpus != WithoutSamples((*body)["gpus"]).dump();
  if (options_.node_leases != nullptr && !stale && !changed) {
    ++heartbeats_renewed_;
    Reply(res, 200,
          {{"kind", "NodeHeartbeat"},
           {"written", false},
           {"resourceVersion", absl::StrCat(cur->mod_revision)}});
    return std::nullopt;
  }
  if (!old && !parse_stored()) return std::nullopt;
  Json obj = *std::move(old);
  Json& out = obj["status"];
  if (!out.is_object()) out = Json::object();
  out["gpus"] = (*body)["gpus"];
  out["lastHeartbeatTime"] = controller::Timestamp(now);
  return HeartbeatWrite{key, api::ToStored(obj), cur->mod_revision};
}

void ApiServer::HandleNodeLease(const Principal& p, const std::string& node,
                                httplib::Response& res) {
  // Whoever may read the Node may read its lease.
  if (std::string why = Authorize(p, Verb::kGet, Resource{"nodes", false, "", node});
      !why.empty()) {
    return Fail(res, 403, "Forbidden", why);
  }
  const std::optional<absl::Time> renewed =
      options_.node_leases != nullptr ? options_.node_leases->LastRenew(node) : std::nullopt;
  Json lease = {{"kind", "NodeLease"}, {"metadata", {{"name", node}}}, {"renewTime", nullptr}};
  if (renewed) lease["renewTime"] = controller::Timestamp(*renewed);
  Reply(res, 200, lease);
}

void ApiServer::HandleNodeUtilization(const Principal& p, const std::string& node,
                                      httplib::Response& res) {
  // Whoever may read the Node may read its GPUs' utilization.
  if (std::string why = Authorize(p, Verb::kGet, Resource{"nodes", false, "", node});
      !why.empty()) {
    return Fail(res, 403, "Forbidden", why);
  }
  const absl::Time now = clock_.Now();
  Json gpus = Json::array();
  if (options_.gpu_samples != nullptr) {
    for (std::vector<int>& g : options_.gpu_samples->History(node, now)) gpus.push_back(g);
  }
  Reply(res, 200,
        {{"kind", "NodeUtilization"},
         {"metadata", {{"name", node}}},
         {"minutes", GpuSamples::kHistoryMinutes},
         {"end", controller::Timestamp(now)},
         {"gpus", std::move(gpus)}});
}

}  // namespace tessera::server
