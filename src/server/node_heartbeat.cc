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
// lease table every heartbeat is written. GET on the same path reads the lease: {"kind":
// "NodeLease", "renewTime": "..." or null (none since the server started)}.
#include <algorithm>
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
#include "server/request_body.h"

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

void ApiServer::ServeNodeHeartbeat(const httplib::Request& req,
                                   const std::shared_ptr<http::Responder>& responder) {
  const absl::Time start = absl::Now();  // real time: network latency, not the API clock
  auto finish = [this, start, path = req.path, responder](httplib::Response& res) {
    if (res.status <= 0) res.status = 200;
    if (int cls = res.status / 100; cls >= 1 && cls <= 5) responses_[cls]++;
    request_metrics_.Observe(ClassifyRequest("POST", path, false), res.status,
                             absl::ToDoubleSeconds(absl::Now() - start));
    responder->Send(std::move(res));
  };
  httplib::Response res;
  std::optional<Principal> who = auth_.Authenticate(req.get_header_value("Authorization"));
  if (!who) {
    res.set_header("WWW-Authenticate", "Bearer");
    Fail(res, 401, "Unauthorized", "a valid bearer token is required");
    return finish(res);
  }
  const std::string node = req.matches[1];
  if (!api::IsDnsLabel(node)) {
    Fail(res, 400, "BadRequest", "name in the URL is not a valid DNS label");
    return finish(res);
  }
  if (req.body.size() > options_.max_body_bytes) {
    Fail(res, 413, "RequestEntityTooLarge",
         absl::StrCat("request body over the limit of ", options_.max_body_bytes,
                      " bytes (any encoding)"));
    return finish(res);
  }
  bool write_later = false;
  HandleNodeHeartbeat(*who, node, req, res, &write_later);
  if (!write_later) return finish(res);
  writers_->enqueue([this, p = *who, node, req, finish] {
    httplib::Response r;
    HandleNodeHeartbeat(p, node, req, r, nullptr, /*report_samples=*/false);  // reported above
    finish(r);
  });
}

void ApiServer::HandleNodeHeartbeat(const Principal& p, const std::string& node,
                                    const httplib::Request& req, httplib::Response& res,
                                    bool* write_later, bool report_samples) {
  if (!AllowNodeRoute(p, node, "node heartbeats", "heartbeat for itself", res)) return;
  absl::StatusOr<Json> body = api::ParseBody(req.body);
  if (!body.ok()) return Fail(res, 400, "BadRequest", body.status().message());
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
  for (int attempt = 0;; ++attempt) {
    absl::StatusOr<store::KeyValue> cur = store_.Get(key);
    if (!cur.ok()) {
      if (absl::IsNotFound(cur.status())) {
        return Fail(res, 404, "NotFound", absl::StrCat(what, " not found: register it first"));
      }
      return FailStore(res, cur.status(), what);
    }
    absl::StatusOr<Json> old = api::FromStored(cur->value, cur->mod_revision);
    if (!old.ok()) return FailStore(res, old.status(), what);
    if (errors.empty()) {
      const int64_t count = api::NodeGpuCount(old->value("spec", Json::object()));
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
      return Fail(res, 422, "Invalid",
                  absl::StrCat("heartbeat is invalid: ", errors.front().ToString()), errors);
    }
    const absl::Time now = clock_.Now();
    if (options_.node_leases != nullptr) options_.node_leases->Renew(node, now);
    if (options_.gpu_samples != nullptr && attempt == 0 && report_samples) {
      options_.gpu_samples->Report(
          node, Samples((*body)["gpus"], api::NodeGpuCount(old->value("spec", Json::object()))),
          now);
    }
    const Json& st = (*old).contains("status") ? (*old)["status"] : Json::object();
    absl::Time last = absl::InfinitePast();
    const bool stale =
        !st.is_object() || !st.contains("lastHeartbeatTime") ||
        !st["lastHeartbeatTime"].is_string() ||
        !controller::ParseTimestamp(st["lastHeartbeatTime"].get<std::string>(), &last) ||
        now - last >=
            (options_.is_leader && !options_.is_leader()
                 ? std::min(options_.standby_node_status_interval, options_.node_status_interval)
                 : options_.node_status_interval);
    const bool changed = !st.is_object() || !st.contains("gpus") ||
                         WithoutSamples(st["gpus"]) != WithoutSamples((*body)["gpus"]);
    if (options_.node_leases != nullptr && !stale && !changed) {
      ++heartbeats_renewed_;
      return Reply(res, 200,
                   {{"kind", "NodeHeartbeat"},
                    {"written", false},
                    {"resourceVersion", absl::StrCat(cur->mod_revision)}});
    }
    if (write_later != nullptr) {
      *write_later = true;  // the caller runs this again where the write may wait
      return;
    }
    Json obj = std::move(*old);
    Json& out = obj["status"];
    if (!out.is_object()) out = Json::object();
    out["gpus"] = (*body)["gpus"];
    out["lastHeartbeatTime"] = controller::Timestamp(now);
    absl::StatusOr<int64_t> rev = store_.Put(key, api::ToStored(obj), cur->mod_revision);
    if (!rev.ok() && absl::IsFailedPrecondition(rev.status()) && attempt < 10) {
      continue;  // the controller wrote the node meanwhile (its phase): read it again
    }
    if (!rev.ok()) return FailStore(res, rev.status(), what);
    ++heartbeats_written_;
    return Reply(
        res, 200,
        {{"kind", "NodeHeartbeat"}, {"written", true}, {"resourceVersion", absl::StrCat(*rev)}});
  }
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
