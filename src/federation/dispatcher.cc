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
#include "federation/copy_sync.h"
#include "federation/json_fields.h"
#include "federation/requeue.h"

namespace tessera::federation {
namespace {

using controller::ObjectKey;
using controller::ParseStored;
using controller::Timestamp;
using controller::ToStoredValue;

constexpr const char* kJobPlurals[] = {"trainingjobs", "inferenceservices"};

bool Terminal(const std::string& phase) { return phase == "Succeeded" || phase == "Failed"; }

std::string ReadToken(const std::string& path) {
  if (path.empty()) return "";
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return std::string(absl::StripAsciiWhitespace(ss.str()));
}

// The demand of a hub job, decoded as the members' schedulers will (any
// priority class: the member resolves it).
absl::StatusOr<JobDemand> DemandOfObject(const Json& obj) {
  absl::StatusOr<model::Job> job =
      controller::JobFromObject(obj, [](absl::string_view) { return std::optional<int32_t>(0); });
  if (!job.ok()) return job.status();
  return DemandOf(*job, Str(obj, "kind") == "InferenceService");
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
  absl::StatusOr<JobDemand> demand = absl::UnknownError("not decoded");  // set when queued
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
                               {"cluster"})),
        requeues(r.AddCounter("tessera_federation_requeues_total",
                              "Jobs moved off a member that accepted but did not place them.",
                              {"cluster"})) {}
  metrics::Family<metrics::Gauge>& ready;
  metrics::Family<metrics::Gauge>& gpus;
  metrics::Family<metrics::Gauge>& free_gpus;
  metrics::Family<metrics::Counter>& dispatches;
  metrics::Family<metrics::Counter>& failovers;
  metrics::Family<metrics::Counter>& requeues;
};

Dispatcher::Dispatcher(store::Store& hub, Clock& clock, DispatcherOptions options)
    : hub_(hub),
      clock_(clock),
      options_(std::move(options)),
      events_gc_(hub_, options_.event_ttl, options_.log) {
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

bool Dispatcher::WriteStatus(HubJob& j, const Json& fields, const std::vector<std::string>& erase,
                             const Note* note) {
  Json obj = j.obj;
  Json& st = obj["status"];
  if (!st.is_object()) st = Json::object();
  for (auto it = fields.begin(); it != fields.end(); ++it) st[it.key()] = it.value();
  for (const std::string& f : erase) st.erase(f);
  if (obj == j.obj && note == nullptr) return true;
  std::vector<store::Op> ops;
  ops.push_back(store::Op::Put(j.key, ToStoredValue(obj), j.revision));
  if (note != nullptr) {
    // Written as the scheduling controller writes its own (controller/events.h).
    ops.push_back(controller::EventPut(
        j.obj, absl::StrCat(absl::Hex(j.revision), "-f", absl::Hex(++event_seq_ & 0xfff)), *note,
        clock_.Now()));
  }
  absl::StatusOr<int64_t> rev = hub_.Txn(ops);
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

const Json* Dispatcher::Mirror(HubJob& j, Member& m) {
  if (!m.listed) return nullptr;  // the next probe will tell
  auto copy = m.copies.find(j.uid);
  if (copy == m.copies.end()) {
    SendBack(j, absl::StrCat("its copy in cluster ", m.name, " is gone"));
    return nullptr;
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
  return &copy->second.second;
}

void Dispatcher::SyncSpec(HubJob& j, Member& m, const Json& copy) {
  const Json want = CopyOf(j.obj, options_.hub_name, j.uid);
  const SyncPlan plan = PlanSync(want, copy, j.status());
  if (plan.clear_record) (void)WriteStatus(j, {}, {"specSync"});
  if (!plan.push) return;
  const std::vector<std::string> changed = ChangedFields(copy, want);
  Json body = want;
  const Json& meta = Field(copy, "metadata");
  if (meta.contains("resourceVersion"))
    body["metadata"]["resourceVersion"] = meta["resourceVersion"];
  absl::StatusOr<agent::ApiResponse> r =
      m.client->Put(agent::ObjectPath(j.plural, j.ns, j.name), body);
  // Unanswered, a conflict (the member wrote the copy since the probe), a
  // copy gone (Mirror sees it next step) or a server error: next step again.
  if (!r.ok() || r->code == 409 || r->code == 404 || r->code >= 500) return;
  const std::string hash = SpecHashOf(want);
  const std::string what = changed.empty() ? "" : absl::StrJoin(changed, ", ");
  Note note;
  std::string state;
  if (r->code == 200) {
    ++stats_.spec_pushed;
    if (changed.empty()) return;  // only the digest (a copy from before digests)
    const Json& placement = Field(Field(copy, "status"), "placement");
    const std::vector<std::string> deferred = placement.is_array() && !placement.empty()
                                                  ? DeferredWhileBound(changed)
                                                  : std::vector<std::string>();
    state = deferred.empty() ? "Synced" : "Deferred";
    note = {"SpecUpdated", absl::StrCat("passed on to the copy in cluster ", m.name, ": ", what)};
    if (!deferred.empty()) {
      absl::StrAppend(&note.message, "; the job is placed there, so ",
                      absl::StrJoin(deferred, ", "),
                      " take effect when it is next placed (a placed job's spec is not changed in "
                      "place, except spec.suspend)");
    }
  } else {
    ++stats_.spec_refused;
    state = "Refused";
    note = {"SpecRefused",
            absl::StrCat("cluster ", m.name, " refused the change of ",
                         what.empty() ? "the copy" : what, ": ", agent::ApiError(*r),
                         "; the copy keeps its previous spec (change the job again to retry)"),
            true};
  }
  if (!WriteStatus(j,
                   {{"specSync",
                     {{"hash", hash},
                      {"state", state},
                      {"message", note.message},
                      {"time", Timestamp(clock_.Now())}}}},
                   {}, &note)) {
    return;
  }
  const std::vector<obs::LogField> fields = {
      {"job", j.name}, {"namespace", j.ns}, {"cluster", m.name}};
  if (note.warning) {
    options_.log.Warn(note.message, fields);
  } else {
    options_.log.Info(note.message, fields);
  }
}

std::vector<Candidate> Dispatcher::Candidates() const {
  std::vector<Candidate> out;
  out.reserve(members_.size());
  for (const auto& [name, m] : members_) out.push_back({name, m->ready, &m->cap});
  return out;
}

bool Dispatcher::CreateCopy(HubJob& j, Member& m, bool say_why) {
  const std::string kind = Str(j.obj, "kind");
  const std::string plural_path = absl::StrCat("/api/v1/namespaces/", j.ns, "/", j.plural);
  absl::StatusOr<agent::ApiResponse> r =
      m.client->Post(plural_path, CopyOf(j.obj, options_.hub_name, j.uid));
  if (!r.ok()) return false;
  if (r->code == 409) {
    absl::StatusOr<agent::ApiResponse> cur =
        m.client->Get(agent::ObjectPath(j.plural, j.ns, j.name));
    if (!cur.ok() || cur->code != 200 || OriginOf(cur->body) != j.uid) {
      if (!say_why) return false;
      (void)WriteStatus(
          j, {{"phase", "Pending"},
              {"message", absl::StrCat("waiting: cluster ", m.name, " already has another ", kind,
                                       " ", j.ns, "/", j.name)}});
      return false;
    }
  } else if (r->code != 201) {
    if (!say_why) return false;
    (void)WriteStatus(j, {{"phase", "Pending"},
                          {"message", absl::StrCat("waiting: cluster ", m.name,
                                                   " refused it: ", agent::ApiError(*r))}});
    return false;
  }
  return true;
}

bool Dispatcher::Dispatch(HubJob& j) {
  // Decoded as the members' schedulers will (any priority class: the member resolves it).
  if (!j.demand.ok()) {
    (void)WriteStatus(j, {{"phase", "Pending"},
                          {"message", absl::StrCat("waiting: ", j.demand.status().message())}});
    return false;
  }
  const std::string target = PickMember(Candidates(), *j.demand);
  if (target.empty()) {
    std::vector<std::string> seen;
    for (auto& [name, m] : members_) {
      seen.push_back(m->ready ? absl::StrCat(name, " ", m->cap.free_gpus, " free")
                              : absl::StrCat(name, " unreachable"));
    }
    const std::string msg =
        members_.empty()
            ? "waiting: the federation has no member cluster (create a Cluster object)"
            : absl::StrCat("waiting: no member cluster has room for ", j.demand->gpus(),
                           " GPUs now (", absl::StrJoin(seen, ", "), ")");
    (void)WriteStatus(j, {{"phase", "Pending"}, {"message", msg}});
    return false;
  }
  Member* best = members_.at(target).get();
  if (!CreateCopy(j, *best, /*say_why=*/true)) return false;
  const int64_t free_before = best->cap.free_gpus;
  (void)Take(&best->cap, *j.demand);
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

void Dispatcher::Requeue(HubJob& j, Member& from, const Json& copy) {
  if (!j.demand.ok()) return;
  auto since = unplaced_since_.find(absl::StrCat(j.uid, "/", from.name));
  if (since == unplaced_since_.end()) return;
  const absl::Time now = clock_.Now();
  const Json& moves = Field(j.status(), "requeues");
  const int64_t requeues = moves.is_number_integer() ? moves.get<int64_t>() : 0;
  const std::string target = RequeueTarget(since->second, now, options_.requeue_after, requeues,
                                           Candidates(), *j.demand, from.name);
  if (target.empty()) return;
  Member& to = *members_.at(target);
  // 1. The new copy; until the hub records the move it is stale to the
  // collector, which deletes it should a later step fail. A refusal is not
  // written: the job still waits in `from`, whose status the hub mirrors.
  if (!CreateCopy(j, to, /*say_why=*/false)) return;
  // 2. The old copy, only as it was seen unplaced: if its member placed it
  // since, the delete fails (409) and the job stays there.
  const Json& meta = Field(copy, "metadata");
  absl::StatusOr<agent::ApiResponse> d =
      from.client->Delete(absl::StrCat(agent::ObjectPath(j.plural, j.ns, j.name),
                                       "?resourceVersion=", Str(meta, "resourceVersion")));
  if (!d.ok() || (d->code != 200 && d->code != 404)) return;
  // 3. The hub's record. Should it fail, the job's copy on `from` is gone:
  // the next step sends it back and dispatches it again (a failover).
  const absl::Duration waited = now - since->second;
  const int64_t free_before = to.cap.free_gpus;
  const Note note = {
      "Requeued",
      absl::StrCat("moved from cluster ", from.name, " to cluster ", to.name, ": not placed in ",
                   from.name, " for ", absl::FormatDuration(absl::Trunc(waited, absl::Seconds(1))),
                   " while ", to.name, " has room (", free_before, " of ", to.cap.gpus,
                   " GPUs free)")};
  (void)Take(&to.cap, *j.demand);
  if (!WriteStatus(j,
                   {{"phase", "Dispatched"},
                    {"cluster", to.name},
                    {"requeues", requeues + 1},
                    {"lastRequeueTime", Timestamp(now)},
                    {"message", note.message}},
                   {"placement", "generation", "replicas", "scheduledTime", "resumeFrom"}, &note)) {
    return;
  }
  unplaced_since_.erase(since);
  hub_uids_[j.uid] = to.name;
  ++stats_.requeued;
  if (metrics_) metrics_->requeues.With({from.name}).Inc();
  options_.log.Info(
      note.message,
      {{"job", j.name}, {"namespace", j.ns}, {"cluster", to.name}, {"from", from.name}});
}

void Dispatcher::Collect(Member& m) {
  if (!m.listed) return;
  for (const auto& [uid, copy] : m.copies) {
    auto it = hub_uids_.find(uid);
    if (it != hub_uids_.end() && it->second == m.name) continue;
    const Json& meta = Field(copy.second, "metadata");
    absl::StatusOr<agent::ApiResponse> d =
        m.client->Delete(agent::ObjectPath(copy.first, Str(meta, "namespace"), Str(meta, "name")));
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
  stats_.events_collected += events_gc_.Step(now);
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
  // The hub's queue: jobs waiting to be dispatched, and copies waiting unplaced
  // at their member that may move (requeue.h).
  struct Queued {
    HubJob* job;
    Member* from = nullptr;      // set: a requeue candidate on this member
    const Json* copy = nullptr;  // its copy as listed
  };
  std::vector<Queued> queue;
  std::map<std::string, absl::Time> unplaced;
  for (HubJob& j : jobs) {
    if (Terminal(Str(Field(j.obj, "status"), "phase"))) continue;
    const std::string cluster = Str(Field(j.obj, "status"), "cluster");
    if (cluster.empty()) {
      queue.push_back({&j});
      continue;
    }
    auto it = members_.find(cluster);
    if (it == members_.end()) {
      SendBack(j, absl::StrCat("cluster ", cluster, " left the federation"));
    } else if (!it->second->ready && now - it->second->last_ok >= options_.failover_after) {
      SendBack(j, absl::StrCat("cluster ", cluster, " has not answered for ",
                               absl::FormatDuration(now - it->second->last_ok)));
    } else if (it->second->ready) {
      Member& m = *it->second;
      if (const Json* copy = Mirror(j, m); copy != nullptr) {
        SyncSpec(j, m, *copy);
        if (Unplaced(Field(*copy, "status"))) {
          const std::string key = absl::StrCat(j.uid, "/", m.name);
          auto seen = unplaced_since_.find(key);
          unplaced[key] = seen != unplaced_since_.end() ? seen->second : UnplacedSince(*copy, now);
          if (options_.requeue_after > absl::ZeroDuration()) queue.push_back({&j, &m, copy});
        }
      }
    } else if (auto seen = unplaced_since_.find(absl::StrCat(j.uid, "/", cluster));
               seen != unplaced_since_.end()) {
      unplaced.insert(*seen);  // not heard from this step: keeps its wait
    }
    if (Str(Field(j.obj, "status"), "cluster").empty()) queue.push_back({&j});
  }
  unplaced_since_ = std::move(unplaced);
  // Higher priority first, then the oldest (the hub's own queue order).
  auto priority = [](const HubJob* j) {
    const Json& p = Field(Field(j->obj, "spec"), "priority");
    return p.is_number_integer() ? p.get<int64_t>() : 0;
  };
  std::stable_sort(queue.begin(), queue.end(), [&](const Queued& qa, const Queued& qb) {
    const HubJob* a = qa.job;
    const HubJob* b = qb.job;
    if (priority(a) != priority(b)) return priority(a) > priority(b);
    const std::string ca = Str(Field(a->obj, "metadata"), "creationTimestamp");
    const std::string cb = Str(Field(b->obj, "metadata"), "creationTimestamp");
    return ca != cb ? ca < cb : a->key < b->key;
  });
  for (Queued& q : queue) {
    q.job->demand = DemandOfObject(q.job->obj);
    if (q.from == nullptr) {
      Dispatch(*q.job);
    } else {
      Requeue(*q.job, *q.from, *q.copy);
    }
  }
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
