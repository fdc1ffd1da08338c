#include "federation/dispatcher.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/api_client.h"
#include "controller/job_codec.h"
#include "controller/store_layout.h"

namespace tessera::federation {
namespace {

using controller::ObjectKey;
using controller::ParseStored;
using controller::Timestamp;
using controller::ToStoredValue;

constexpr char kHubLabel[] = "tessera.dev/federation-hub";
constexpr char kOriginAnnotation[] = "tessera.dev/federation-origin";
constexpr const char* kJobPlurals[] = {"trainingjobs", "inferenceservices"};

std::string Str(const Json& o, const char* key) {
  auto it = o.find(key);
  return o.is_object() && it != o.end() && it->is_string() ? it->get<std::string>() : "";
}

const Json& Field(const Json& o, const char* key) {
  static const Json kNull;
  if (!o.is_object()) return kNull;
  auto it = o.find(key);
  return it == o.end() ? kNull : *it;
}

bool Terminal(const std::string& phase) { return phase == "Succeeded" || phase == "Failed"; }

std::string ReadToken(const std::string& path) {
  if (path.empty()) return "";
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return std::string(absl::StripAsciiWhitespace(ss.str()));
}

std::string ItemPath(const std::string& plural, const std::string& ns, const std::string& name) {
  return absl::StrCat("/api/v1/namespaces/", ns, "/", plural, "/", name);
}

// The member's copy of hub object `obj`: its metadata's name, namespace,
// labels and annotations, the hub label and origin uid, and its spec.
Json CopyOf(const Json& obj, const std::string& hub, const std::string& uid) {
  const Json& meta = Field(obj, "metadata");
  Json labels = Field(meta, "labels").is_object() ? Field(meta, "labels") : Json::object();
  Json annotations =
      Field(meta, "annotations").is_object() ? Field(meta, "annotations") : Json::object();
  labels[kHubLabel] = hub;
  annotations[kOriginAnnotation] = uid;
  return {{"apiVersion", Str(obj, "apiVersion")},
          {"kind", Str(obj, "kind")},
          {"metadata",
           {{"name", Str(meta, "name")},
            {"namespace", Str(meta, "namespace")},
            {"labels", labels},
            {"annotations", annotations}}},
          {"spec", Field(obj, "spec")}};
}

std::string OriginOf(const Json& copy) {
  return Str(Field(Field(copy, "metadata"), "annotations"), kOriginAnnotation);
}

}  // namespace

struct Dispatcher::Member {
  std::string name;
  std::string key;
  std::string server;
  std::string token_file;
  Json obj;  // the Cluster object as listed this step, and its revision
  int64_t revision = 0;
  std::unique_ptr<agent::ApiClient> client;
  bool ready = false;
  absl::Time last_ok;
  std::string error;
  MemberCapacity cap;
  // This hub's copies in the member, read with the probe, by origin uid
  // (plural, object); `listed` false when a list failed.
  bool listed = false;
  std::map<std::string, std::pair<std::string, Json>> copies;
};

// The implicit noexcept moves call nlohmann::json's move, which only asserts.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct Dispatcher::HubJob {
  std::string key;
  std::string plural;
  std::string ns;
  std::string name;
  std::string uid;
  int64_t revision = 0;
  Json obj;
  Json& status() { return obj["status"]; }
};

struct Dispatcher::Metrics {
  explicit Metrics(metrics::Registry& r)
      : ready(r.AddGauge("tessera_federation_cluster_ready",
                         "1 when the member cluster answered the hub's last probe.", {"cluster"})),
        gpus(r.AddGauge("tessera_federation_cluster_gpus",
                        "Healthy GPUs on the member's Ready, schedulable nodes.", {"cluster"})),
        free_gpus(r.AddGauge("tessera_federation_cluster_free_gpus",
                             "Of those, GPUs no placement uses.", {"cluster"})),
        dispatches(r.AddCounter("tessera_federation_dispatches_total",
                                "Jobs the hub handed to a member cluster.", {"cluster"})),
        failovers(r.AddCounter("tessera_federation_failovers_total",
                               "Jobs moved off a member (lost, removed, or its copy gone).",
                               {"cluster"})) {}
  metrics::Family<metrics::Gauge>& ready;
  metrics::Family<metrics::Gauge>& gpus;
  metrics::Family<metrics::Gauge>& free_gpus;
  metrics::Family<metrics::Counter>& dispatches;
  metrics::Family<metrics::Counter>& failovers;
};

Dispatcher::Dispatcher(store::Store& hub, Clock& clock, DispatcherOptions options)
    : hub_(hub), clock_(clock), options_(std::move(options)) {
  if (options_.metrics != nullptr) metrics_ = std::make_unique<Metrics>(*options_.metrics);
}

Dispatcher::~Dispatcher() { Stop(); }

void Dispatcher::SyncMembers(absl::Time now) {
  store::ListOptions lo;
  absl::StatusOr<store::ListResult> l = hub_.List("/registry/clusters/", lo);
  if (!l.ok()) return;
  std::map<std::string, std::unique_ptr<Member>> next;
  for (const store::KeyValue& kv : l->kvs) {
    absl::StatusOr<Json> obj = ParseStored(kv.value);
    if (!obj.ok()) continue;
    const std::string name = Str(Field(*obj, "metadata"), "name");
    const Json& spec = Field(*obj, "spec");
    auto it = members_.find(name);
    std::unique_ptr<Member> m =
        it != members_.end() ? std::move(it->second) : std::make_unique<Member>();
    if (!m->client || m->server != Str(spec, "server") || m->token_file != Str(spec, "tokenFile")) {
      m->name = name;
      m->server = Str(spec, "server");
      m->token_file = Str(spec, "tokenFile");
      m->client = std::make_unique<agent::ApiClient>(m->server, ReadToken(m->token_file),
                                                     options_.request_timeout);
      m->last_ok = now;  // a new member gets failover_after to answer
      m->ready = false;
    }
    m->key = kv.key;
    m->revision = kv.mod_revision;
    m->obj = *std::move(obj);
    next[name] = std::move(m);
  }
  members_ = std::move(next);
}

void Dispatcher::Fetch(Member& m, absl::Time now) {
  absl::StatusOr<agent::ApiResponse> r = m.client->Get("/api/v1/fleet");
  std::string error;
  if (!r.ok()) {
    error = std::string(r.status().message());
  } else if (r->code != 200) {
    error = absl::StrCat("GET /api/v1/fleet: ", agent::ApiError(*r));
  } else if (absl::StatusOr<MemberCapacity> c = CapacityFromFleet(r->body); !c.ok()) {
    error = std::string(c.status().message());
  } else {
    m.cap = *std::move(c);
  }
  m.ready = error.empty();
  m.error = error;
  m.listed = false;
  m.copies.clear();
  if (!m.ready) return;
  m.last_ok = now;
  // The copies (one list per kind), for Mirror and Collect.
  m.listed = true;
  for (const char* plural : kJobPlurals) {
    absl::StatusOr<agent::ApiResponse> l = m.client->Get(
        absl::StrCat("/api/v1/", plural, "?labelSelector=", kHubLabel, "%3D", options_.hub_name));
    if (!l.ok() || l->code != 200 || !l->body.contains("items") || !l->body["items"].is_array()) {
      m.listed = false;
      m.copies.clear();
      return;
    }
    for (Json& copy : l->body["items"]) {
      std::string uid = OriginOf(copy);
      m.copies[std::move(uid)] = {plural, std::move(copy)};
    }
  }
}

void Dispatcher::RecordProbe(Member& m, absl::Time now) {
  const std::string& error = m.error;
  if (metrics_) {
    metrics_->ready.With({m.name}).Set(m.ready ? 1 : 0);
    metrics_->gpus.With({m.name}).Set(static_cast<double>(m.cap.gpus));
    metrics_->free_gpus.With({m.name}).Set(m.ready ? static_cast<double>(m.cap.free_gpus) : 0);
  }
  // The Cluster's status, written when it changes (CAS on the listed
  // revision: a concurrent edit wins, and the next step writes again).
  Json obj = m.obj;
  Json& st = obj["status"];
  if (!st.is_object()) st = Json::object();
  const std::string phase = m.ready ? "Ready" : "Unreachable";
  const std::string message =
      m.ready ? absl::StrCat(m.cap.free_gpus, " of ", m.cap.gpus, " GPUs free")
              : absl::StrCat("not answering since ", Timestamp(m.last_ok), ": ", error);
  if (Str(st, "phase") == phase && Str(st, "message") == message) return;
  const bool transition = Str(st, "phase") != phase;
  if (transition) st["lastTransitionTime"] = Timestamp(now);
  st["phase"] = phase;
  st["message"] = message;
  st["gpus"] = m.cap.gpus;
  st["freeGpus"] = m.ready ? m.cap.free_gpus : 0;
  (void)hub_.Put(m.key, ToStoredValue(obj), m.revision);
  if (transition) {
    options_.log.Info(absl::StrCat("cluster ", m.name, " ", phase),
                      {{"cluster", m.name}, {"message", message}});
  }
}

bool Dispatcher::WriteStatus(HubJob& j, const Json& fields, const std::vector<std::string>& erase) {
  Json obj = j.obj;
  Json& st = obj["status"];
  if (!st.is_object()) st = Json::object();
  for (auto it = fields.begin(); it != fields.end(); ++it) st[it.key()] = it.value();
  for (const std::string& f : erase) st.erase(f);
  if (obj == j.obj) return true;
  absl::StatusOr<int64_t> rev = hub_.Put(j.key, ToStoredValue(obj), j.revision);
  if (!rev.ok()) return false;  // changed meanwhile (a user, or deleted): next step
  j.obj = std::move(obj);
  j.revision = *rev;
  return true;
}

void Dispatcher::SendBack(HubJob& j, const std::string& why) {
  const std::string from = Str(j.status(), "cluster");
  const int64_t failovers = Field(j.status(), "failovers").is_number_integer()
                                ? j.status()["failovers"].get<int64_t>() + 1
                                : 1;
  if (!WriteStatus(j,
                   {{"phase", "Pending"},
                    {"message", absl::StrCat(why, "; dispatching again")},
                    {"failovers", failovers}},
                   {"cluster", "placement"})) {
    return;
  }
  hub_uids_[j.uid] = "";
  ++stats_.failovers;
  if (metrics_) metrics_->failovers.With({from}).Inc();
  options_.log.Warn(absl::StrCat(why, "; dispatching again"),
                    {{"job", j.name}, {"namespace", j.ns}, {"cluster", from}});
}

void Dispatcher::Mirror(HubJob& j, Member& m) {
  if (!m.listed) return;  // the next probe will tell
  auto copy = m.copies.find(j.uid);
  if (copy == m.copies.end()) {
    SendBack(j, absl::StrCat("its copy in cluster ", m.name, " is gone"));
    return;
  }
  const Json& cs = Field(copy->second.second, "status");
  Json fields = Json::object();
  std::vector<std::string> erase;
  for (const char* f : {"phase", "message", "placement", "generation", "restarts", "replicas",
                        "scheduledTime", "resumeFrom"}) {
    if (cs.is_object() && cs.contains(f)) {
      fields[f] = cs[f];
    } else if (std::string(f) != "phase") {
      erase.emplace_back(f);
    }
  }
  if (!fields.contains("phase")) fields["phase"] = "Dispatched";
  (void)WriteStatus(j, fields, erase);
}

bool Dispatcher::Dispatch(HubJob& j) {
  const std::string kind = Str(j.obj, "kind");
  // Decoded as the members' schedulers will (any priority class: the member resolves it).
  absl::StatusOr<model::Job> job =
      controller::JobFromObject(j.obj, [](absl::string_view) { return std::optional<int32_t>(0); });
  if (!job.ok()) {
    (void)WriteStatus(
        j, {{"phase", "Pending"}, {"message", absl::StrCat("waiting: ", job.status().message())}});
    return false;
  }
  const JobDemand demand = DemandOf(*job, kind == "InferenceService");
  Member* best = nullptr;
  std::vector<std::string> seen;
  for (auto& [name, m] : members_) {
    seen.push_back(m->ready ? absl::StrCat(name, " ", m->cap.free_gpus, " free")
                            : absl::StrCat(name, " unreachable"));
    if (!m->ready || !Fits(m->cap, demand)) continue;
    if (best == nullptr || m->cap.free_gpus > best->cap.free_gpus) best = m.get();
  }
  if (best == nullptr) {
    const std::string msg =
        members_.empty() ? "waiting: the federation has no member cluster (create a Cluster object)"
                         : absl::StrCat("waiting: no member cluster has room for ", demand.gpus(),
                                        " GPUs now (", absl::StrJoin(seen, ", "), ")");
    (void)WriteStatus(j, {{"phase", "Pending"}, {"message", msg}});
    return false;
  }
  const std::string plural_path = absl::StrCat("/api/v1/namespaces/", j.ns, "/", j.plural);
  absl::StatusOr<agent::ApiResponse> r =
      best->client->Post(plural_path, CopyOf(j.obj, options_.hub_name, j.uid));
  if (!r.ok()) return false;
  if (r->code == 409) {
    absl::StatusOr<agent::ApiResponse> cur = best->client->Get(ItemPath(j.plural, j.ns, j.name));
    if (!cur.ok() || cur->code != 200 || OriginOf(cur->body) != j.uid) {
      (void)WriteStatus(
          j, {{"phase", "Pending"},
              {"message", absl::StrCat("waiting: cluster ", best->name, " already has another ",
                                       kind, " ", j.ns, "/", j.name)}});
      return false;
    }
  } else if (r->code != 201) {
    (void)WriteStatus(j, {{"phase", "Pending"},
                          {"message", absl::StrCat("waiting: cluster ", best->name,
                                                   " refused it: ", agent::ApiError(*r))}});
    return false;
  }
  const int64_t free_before = best->cap.free_gpus;
  (void)Take(&best->cap, demand);
  if (!WriteStatus(
          j, {{"phase", "Dispatched"},
              {"cluster", best->name},
              {"message", absl::StrCat("dispatched to cluster ", best->name, " (", free_before,
                                       " of ", best->cap.gpus, " GPUs were free)")}})) {
    return false;  // the copy is collected below and the job dispatched again
  }
  hub_uids_[j.uid] = best->name;
  ++stats_.dispatched;
  if (metrics_) metrics_->dispatches.With({best->name}).Inc();
  options_.log.Info(absl::StrCat("dispatched to cluster ", best->name),
                    {{"job", j.name}, {"namespace", j.ns}, {"cluster", best->name}});
  return true;
}

void Dispatcher::Collect(Member& m) {
  if (!m.listed) return;
  for (const auto& [uid, copy] : m.copies) {
    auto it = hub_uids_.find(uid);
    if (it != hub_uids_.end() && it->second == m.name) continue;
    const Json& meta = Field(copy.second, "metadata");
    absl::StatusOr<agent::ApiResponse> d =
        m.client->Delete(ItemPath(copy.first, Str(meta, "namespace"), Str(meta, "name")));
    if (d.ok() && (d->code == 200 || d->code == 404)) {
      ++stats_.collected;
      options_.log.Info(
          absl::StrCat("deleted a stale copy in cluster ", m.name),
          {{"job", Str(meta, "name")},
           {"namespace", Str(meta, "namespace")},
           {"cluster", m.name},
           {"reason", it == hub_uids_.end() ? "deleted in the hub" : "moved to another cluster"}});
    }
  }
}

absl::Status Dispatcher::Step() {
  const absl::Time now = clock_.Now();
  ++stats_.steps;
  SyncMembers(now);
  // Members are asked at once, each on its own thread and connection, so that
  // one that hangs until the request timeout does not hold up the others.
  std::vector<std::thread> probes;
  probes.reserve(members_.size());
  for (auto& [name, m] : members_) probes.emplace_back([this, &m = *m, now] { Fetch(m, now); });
  for (std::thread& t : probes) t.join();
  for (auto& [name, m] : members_) RecordProbe(*m, now);
  std::vector<HubJob> jobs;
  for (const char* plural : kJobPlurals) {
    absl::StatusOr<store::ListResult> l = hub_.List(absl::StrCat("/registry/", plural, "/"), {});
    if (!l.ok()) return l.status();
    for (const store::KeyValue& kv : l->kvs) {
      absl::StatusOr<Json> obj = ParseStored(kv.value);
      if (!obj.ok()) continue;
      HubJob j;
      j.key = kv.key;
      j.plural = plural;
      j.revision = kv.mod_revision;
      j.ns = Str(Field(*obj, "metadata"), "namespace");
      j.name = Str(Field(*obj, "metadata"), "name");
      j.uid = Str(Field(*obj, "metadata"), "uid");
      j.obj = *std::move(obj);
      jobs.push_back(std::move(j));
    }
  }
  hub_uids_.clear();
  for (HubJob& j : jobs) hub_uids_[j.uid] = Str(Field(j.obj, "status"), "cluster");
  std::vector<HubJob*> pending;
  for (HubJob& j : jobs) {
    if (Terminal(Str(Field(j.obj, "status"), "phase"))) continue;
    const std::string cluster = Str(Field(j.obj, "status"), "cluster");
    if (cluster.empty()) {
      pending.push_back(&j);
      continue;
    }
    auto it = members_.find(cluster);
    if (it == members_.end()) {
      SendBack(j, absl::StrCat("cluster ", cluster, " left the federation"));
    } else if (!it->second->ready && now - it->second->last_ok >= options_.failover_after) {
      SendBack(j, absl::StrCat("cluster ", cluster, " has not answered for ",
                               absl::FormatDuration(now - it->second->last_ok)));
    } else if (it->second->ready) {
      Mirror(j, *it->second);
    }
    if (Str(Field(j.obj, "status"), "cluster").empty()) pending.push_back(&j);
  }
  // Higher priority first, then the oldest (the hub's own queue order).
  auto priority = [](const HubJob* j) {
    const Json& p = Field(Field(j->obj, "spec"), "priority");
    return p.is_number_integer() ? p.get<int64_t>() : 0;
  };
  std::stable_sort(pending.begin(), pending.end(), [&](const HubJob* a, const HubJob* b) {
    if (priority(a) != priority(b)) return priority(a) > priority(b);
    const std::string ca = Str(Field(a->obj, "metadata"), "creationTimestamp");
    const std::string cb = Str(Field(b->obj, "metadata"), "creationTimestamp");
    return ca != cb ? ca < cb : a->key < b->key;
  });
  for (HubJob* j : pending) Dispatch(*j);
  for (auto& [name, m] : members_) {
    if (m->ready) Collect(*m);
  }
  return absl::OkStatus();
}

void Dispatcher::RunInBackground() {
  stop_ = false;
  thread_ = std::thread([this] {
    while (!stop_) {
      if (absl::Status s = Step(); !s.ok()) {
        options_.log.Error("federation step failed", {{"error", std::string(s.message())}});
      }
      for (absl::Duration left = options_.period; left > absl::ZeroDuration() && !stop_;
           left -= absl::Milliseconds(50)) {
        absl::SleepFor(std::min(left, absl::Milliseconds(50)));
      }
    }
  });
}

void Dispatcher::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

}  // namespace tessera::federation
