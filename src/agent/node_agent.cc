#include "agent/node_agent.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/discovery.h"
#include "agent/replica_metrics.h"
#include "agent/topology.h"
#include "api/member_status.h"

namespace tessera::agent {
namespace {

// The last lines of a member's stderr log, for its Failed report (api::TailLines' limits).
std::string StderrTail(const std::string& path) {
  constexpr std::streamoff kRead = 8192;
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(size > kRead ? size - kRead : 0);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return api::TailLines(text, 10, api::kMemberMessageMaxBytes);
}

// True when the NVLink between a and b goes through a switch (neither end's link lands on the
// other GPU's PCI address).
bool ThroughSwitch(const GpuInfo& a, const GpuInfo& b) {
  for (const NvLinkInfo& l : a.nvlinks) {
    if (l.active && l.remote_pci_bus_id == b.pci_bus_id) return false;
  }
  for (const NvLinkInfo& l : b.nvlinks) {
    if (l.active && l.remote_pci_bus_id == a.pci_bus_id) return false;
  }
  return true;
}

std::string LinkCode(const TopologyMatrix& m, const std::vector<GpuInfo>& gpus, int a, int b) {
  switch (m.Link(a, b)) {
    case LinkClass::kSelf:
      return "X";
    case LinkClass::kNvLink:
      return ThroughSwitch(gpus[a], gpus[b]) ? "NVSWITCH" : "NVLINK";
    case LinkClass::kPcieSwitch:
      return "PIX";
    case LinkClass::kHostBridge:
      return "PHB";
    case LinkClass::kCrossNuma:
    case LinkClass::kUnknown:
      return "SYS";
  }
  return "SYS";
}

// A report about `spec`'s member, its state still to fill in.
MemberReport ReportAbout(const MemberSpec& spec) {
  MemberReport r;
  r.kind = spec.kind;
  r.namespace_name = spec.namespace_name;
  r.job = spec.job;
  r.group = spec.group;
  r.index = spec.index;
  r.generation = spec.generation;
  return r;
}

MemberSpec SpecFromBinding(const Binding& b, const NodeRegistration& reg) {
  MemberSpec s;
  s.namespace_name = b.namespace_name;
  s.job = b.job;
  s.kind = b.kind;
  s.group = b.group;
  s.index = b.index;
  s.generation = b.generation;
  s.command = b.command;
  s.env = b.env;
  s.working_dir = b.working_dir;
  s.gpu_indices = b.gpus;
  for (int g : b.gpus) {
    s.gpu_uuids.push_back(g >= 0 && g < static_cast<int>(reg.gpus.size()) ? reg.gpus[g].uuid : "");
  }
  s.checkpoint_signal = b.checkpoint_signal;
  s.grace = b.grace;
  s.cpu_milli = b.cpu_milli;
  s.memory_mib = b.memory_mib;
  return s;
}

std::string BindingId(const Binding& b) {
  MemberSpec s;
  s.namespace_name = b.namespace_name;
  s.job = b.job;
  s.group = b.group;
  s.index = b.index;
  return s.Id();
}

}  // namespace

NodeAgent::NodeAgent(GpuBackend& backend, HealthTracker& tracker, Launcher& launcher,
                     ControlPlaneClient& client, Clock& clock, NodeAgentOptions options)
    : backend_(backend),
      tracker_(tracker),
      launcher_(launcher),
      client_(client),
      clock_(clock),
      options_(std::move(options)),
      rng_(options_.seed),
      backoff_(options_.initial_backoff) {}

absl::Status NodeAgent::Init() {
  absl::StatusOr<NodeSnapshot> snap = Discover(backend_);
  if (!snap.ok()) return snap.status();
  registration_.name = options_.node_name;
  registration_.rack = options_.rack;
  registration_.block = options_.block;
  registration_.labels = options_.labels;
  registration_.agent_endpoint = options_.agent_endpoint;
  registration_.cpu_milli = options_.cpu_milli;
  registration_.memory_mib = options_.memory_mib;
  std::vector<GpuInfo> infos;
  for (const GpuSnapshot& g : snap->gpus) {
    NodeGpu n;
    n.index = g.info.index;
    n.uuid = g.info.uuid;
    n.model = g.info.name.empty() ? "unknown" : g.info.name;
    if (g.info.memory) n.memory_mib = static_cast<int64_t>(g.info.memory->total_bytes >> 20);
    registration_.gpus.push_back(n);
    infos.push_back(g.info);
    tracker_.AddGpu(g.info.uuid);
  }
  const TopologyMatrix& m = snap->topology;
  if (m.size == static_cast<int>(infos.size()) && m.size > 0) {
    registration_.links.assign(m.size, std::vector<std::string>(m.size));
    for (int a = 0; a < m.size; ++a) {
      for (int b = 0; b < m.size; ++b) registration_.links[a][b] = LinkCode(m, infos, a, b);
    }
  }
  std::vector<MemberStatus> adopted = launcher_.Adopt();
  for (const MemberStatus& s : adopted) {
    options_.log.Info("adopted member", {{"node", options_.node_name},
                                         {"job", s.spec.job},
                                         {"namespace", s.spec.namespace_name},
                                         {"member", s.spec.Id()},
                                         {"pid", static_cast<int64_t>(s.pid)},
                                         {"generation", s.spec.generation},
                                         {"state", MemberStateName(s.state)}});
  }
  return absl::OkStatus();
}

std::vector<GpuHealthReport> NodeAgent::HealthReports() const {
  std::vector<GpuHealthReport> out;
  for (const NodeGpu& g : registration_.gpus) {
    GpuHealthReport r;
    r.index = g.index;
    absl::StatusOr<GpuHealth> h = tracker_.Get(g.uuid);
    if (h.ok()) {
      r.healthy = h->health == Health::kHealthy;
      r.message = h->reason;
    }
    // A failed sample leaves the field empty: the heartbeat still goes out.
    if (absl::StatusOr<GpuMetrics> m = backend_.GetMetrics(g.index); m.ok()) {
      r.utilization_percent = m->gpu_util_percent;
    }
    out.push_back(r);
  }
  return out;
}

void NodeAgent::Fail(const absl::Status& s, const char* what) {
  ++stats_.failures;
  registered_ = false;
  // Exponential backoff with jitter, so 12,500 agents do not return in step after an outage.
  std::uniform_real_distribution<double> jitter(0.8, 1.2);
  absl::Duration wait = backoff_ * jitter(rng_);
  backoff_ = std::min(backoff_ * 2, options_.max_backoff);
  next_attempt_ = clock_.Now() + wait;
  options_.log.Warn(absl::StrCat(what, " failed"), {{"node", options_.node_name},
                                                    {"error", std::string(s.message())},
                                                    {"retry_in", absl::FormatDuration(wait)}});
}

bool NodeAgent::WakeOrStop(NodeAgent* a) { return a->wake_ || a->stop_ || a->offered_; }

void NodeAgent::OfferBindings(BindingSet set) {
  absl::MutexLock l(&mu_);
  if (offered_ && offered_->revision > set.revision) return;
  offered_ = std::move(set);
}

void NodeAgent::Wake() {
  absl::MutexLock l(&mu_);
  wake_ = true;
}

void NodeAgent::Stop() {
  absl::MutexLock l(&mu_);
  stop_ = true;
}

absl::Duration NodeAgent::Step() {
  absl::Time now = clock_.Now();
  bool woken = false;
  std::optional<BindingSet> offered;
  {
    absl::MutexLock l(&mu_);
    woken = wake_;
    wake_ = false;
    offered.swap(offered_);
  }
  const absl::Duration partition_after = options_.partition_after > absl::ZeroDuration()
                                             ? options_.partition_after
                                             : options_.heartbeat_interval * 3;
  if (registered_ && now - last_heartbeat_ok_ > partition_after) {
    options_.log.Warn(
        "no heartbeat accepted; re-registering and fencing",
        {{"node", options_.node_name}, {"since", absl::FormatDuration(now - last_heartbeat_ok_)}});
    registered_ = false;
    next_attempt_ = now;
  }
  if (!registered_) {
    if (now < next_attempt_) return next_attempt_ - now;
    absl::Status s = client_.RegisterNode(registration_);
    if (!s.ok()) {
      Fail(s, "register");
      return next_attempt_ - now;
    }
    ++stats_.registrations;
    registered_ = true;
    backoff_ = options_.initial_backoff;
    fence_next_sync_ = true;
    next_heartbeat_ = now;
    last_heartbeat_ok_ = now;
    next_sync_ = now;
    reported_.clear();  // report everything again to the (maybe new) server
  }
  if (woken || now >= next_heartbeat_) {
    absl::Status s = client_.Heartbeat(options_.node_name, HealthReports(), now);
    if (!s.ok()) {
      Fail(s, "heartbeat");
      return next_attempt_ - now;
    }
    ++stats_.heartbeats;
    last_heartbeat_ok_ = now;
    next_heartbeat_ = now + options_.heartbeat_interval;
  }
  launcher_.Poll();
  if (now >= next_sync_ || woken || fence_next_sync_) {
    absl::StatusOr<BindingSet> b = client_.ListBindings(options_.node_name);
    ++stats_.lists;
    if (!b.ok()) {
      Fail(b.status(), "list bindings");
      return next_attempt_ - now;
    }
    SyncBindings(b->bindings, fence_next_sync_);
    applied_revision_ = b->revision;
    fence_next_sync_ = false;
    next_sync_ = now + options_.sync_interval;
    launcher_.Poll();
    last_bindings_ = std::move(b->bindings);
  } else if (offered && offered->changed && offered->revision >= applied_revision_) {
    ++stats_.offers;
    SyncBindings(offered->bindings, /*fence=*/false);
    applied_revision_ = offered->revision;
    next_sync_ = now + options_.sync_interval;
    launcher_.Poll();
    last_bindings_ = std::move(offered->bindings);
  } else if (!fence_next_sync_) {
    // Nothing new from the server, but a member may have finished stopping: its successor
    // (the next generation on the same member id) starts now, from the last set the server sent.
    SyncBindings(last_bindings_, /*fence=*/false);
  }
  Report();
  absl::Time next = std::min(next_heartbeat_, next_sync_);
  // Stopping members need their grace deadline checked.
  for (const MemberStatus& m : launcher_.List()) {
    if (m.state == MemberState::kStopping) next = std::min(next, now + absl::Milliseconds(200));
  }
  for (const auto& [id, r] : replica_restarts_) next = std::min(next, r.not_before);
  return std::max(next - clock_.Now(), absl::ZeroDuration());
}

void NodeAgent::SyncBindings(const std::vector<Binding>& bindings, bool fence) {
  std::map<std::string, const Binding*> bound;
  for (const Binding& b : bindings) bound[BindingId(b)] = &b;
  std::set<std::string> tracked;
  // The checkpoint signal now, SIGKILL after the member's grace period.
  auto checkpoint_stop = [&](const MemberStatus& m, const char* why) {
    options_.log.Info(why, {{"node", options_.node_name},
                            {"job", m.spec.job},
                            {"namespace", m.spec.namespace_name},
                            {"member", m.spec.Id()},
                            {"checkpoint_signal", m.spec.checkpoint_signal},
                            {"grace", absl::FormatDuration(m.spec.grace)}});
    (void)launcher_.Stop(m.spec.Id(), /*graceful=*/true);
  };
  for (const MemberStatus& m : launcher_.List()) {
    const std::string id = m.spec.Id();
    tracked.insert(id);
    auto it = bound.find(id);
    const bool current = it != bound.end() && it->second->generation == m.spec.generation;
    if (current && it->second->checkpoint_requested && m.state == MemberState::kRunning) {
      // A preemption victim: checkpoint now, SIGKILL after its grace period.
      // Its exit lets the controller hand the GPUs over before the deadline.
      ++stats_.checkpoint_requests;
      checkpoint_stop(m, "checkpoint signal: preemption pending");
      continue;
    }
    if (it != bound.end() && !current && AdoptGeneration(m, *it->second)) continue;
    if (current) {
      if (m.state == MemberState::kExited && m.spec.kind == "InferenceService") {
        RestartReplica(m, *it->second);
      }
      continue;
    }
    if (m.state == MemberState::kExited) {
      (void)launcher_.Forget(id);
      tracked.erase(id);
      reported_.erase(id);
      replica_restarts_.erase(id);
      metrics_sent_.erase(id);
      continue;
    }
    if (fence) {
      options_.log.Warn("fencing member: not bound here with that generation",
                        {{"node", options_.node_name},
                         {"job", m.spec.job},
                         {"namespace", m.spec.namespace_name},
                         {"member", id},
                         {"generation", m.spec.generation}});
      ++stats_.fenced;
      (void)launcher_.Stop(id, /*graceful=*/false);
    } else if (m.state != MemberState::kStopping) {
      ++stats_.stopped;
      checkpoint_stop(m, "stopping member: unbound");
    }
  }
  for (auto it = start_failures_.begin(); it != start_failures_.end();) {
    auto b = bound.find(it->first);
    const bool same = b != bound.end() && b->second->generation == it->second.spec.generation;
    it = same ? std::next(it) : start_failures_.erase(it);  // a new binding may start
  }
  for (const auto& [id, b] : bound) {
    if (!tracked.contains(id) && !start_failures_.contains(id)) {
      (void)StartMember(*b, "started member");
    }
  }
  for (auto it = replica_restarts_.begin(); it != replica_restarts_.end();) {
    it = bound.contains(it->first) ? std::next(it) : replica_restarts_.erase(it);
  }
  absl::flat_hash_map<std::string, WorkloadLabels> w;
  for (const MemberStatus& m : launcher_.List()) {
    if (m.state == MemberState::kExited) continue;
    for (const std::string& u : m.spec.gpu_uuids) w[u] = {m.spec.namespace_name, m.spec.job};
  }
  absl::MutexLock l(&mu_);
  workloads_ = std::move(w);
}

bool NodeAgent::StartMember(const Binding& b, const char* why) {
  MemberSpec spec = SpecFromBinding(b, registration_);
  const std::string id = spec.Id();
  for (size_t i = 0; i < spec.gpu_indices.size(); ++i) {
    // The server will move it once our heartbeat lands.
    if (spec.gpu_uuids[i].empty() || !tracker_.IsHealthy(spec.gpu_uuids[i])) return false;
  }
  absl::StatusOr<MemberStatus> s = launcher_.Start(spec);
  if (!s.ok()) {
    options_.log.Error("cannot start member", {{"node", options_.node_name},
                                               {"job", spec.job},
                                               {"namespace", spec.namespace_name},
                                               {"member", id},
                                               {"error", std::string(s.status().message())}});
    // A spec the launcher refuses will not start on a retry: the member failed, and its job
    // hears so (instead of holding its GPUs in Scheduled, silently).
    if (absl::IsInvalidArgument(s.status())) {
      start_failures_[id] = StartFailure{spec, std::string(s.status().message()), false};
    }
    return false;
  }
  ++stats_.started;
  options_.log.Info(why, {{"node", options_.node_name},
                          {"job", spec.job},
                          {"namespace", spec.namespace_name},
                          {"member", id},
                          {"generation", spec.generation},
                          {"gpus", absl::StrJoin(spec.gpu_indices, ",")},
                          {"pid", static_cast<int64_t>(s->pid)}});
  return true;
}

void NodeAgent::RestartReplica(const MemberStatus& m, const Binding& b) {
  if (b.checkpoint_requested) return;  // a preemption victim's exit: the server takes it away
  const std::string id = m.spec.Id();
  const absl::Time now = clock_.Now();
  ReplicaRestart& r = replica_restarts_[id];
  if (!r.waiting) {
    if (r.started != absl::InfinitePast() && now - r.started >= absl::Minutes(10)) r.restarts = 0;
    absl::Duration wait = options_.replica_restart_backoff;
    for (int i = 0; i < r.restarts && wait < options_.max_replica_restart_backoff; ++i) wait *= 2;
    r.waiting = true;
    r.not_before = now + std::min(wait, options_.max_replica_restart_backoff);
    return;
  }
  // Not before the backoff, nor before the server has heard of the exit.
  auto rep = reported_.find(id);
  if (now < r.not_before || rep == reported_.end() ||
      !(absl::StartsWith(rep->second, api::MemberStateName(api::MemberState::kExited)) ||
        absl::StartsWith(rep->second, api::MemberStateName(api::MemberState::kFailed)))) {
    return;
  }
  (void)launcher_.Forget(id);
  reported_.erase(id);
  r.waiting = false;
  r.not_before = absl::InfiniteFuture();
  if (!StartMember(b, "restarted serving replica")) return;  // tried again next sync
  ++r.restarts;
  r.started = now;
  ++stats_.replica_restarts;
}

bool NodeAgent::AdoptGeneration(const MemberStatus& m, const Binding& b) {
  if (m.spec.kind != "InferenceService" || b.kind != "InferenceService" ||
      m.state != MemberState::kRunning || b.generation <= m.spec.generation ||
      b.checkpoint_requested) {
    return false;
  }
  // The replica runs on unchanged if only the generation and the gang-wide
  // variables (which describe the placement, not this replica) differ.
  auto own = [](MemberSpec s, int64_t generation) {
    s.generation = generation;
    s.env.erase("TESSERA_WORLD_SIZE");
    s.env.erase("TESSERA_RANK");
    s.env.erase("TESSERA_RESUME_FROM");
    return s;
  };
  if (own(SpecFromBinding(b, registration_), 0) != own(m.spec, 0)) return false;
  const std::string id = m.spec.Id();
  if (absl::Status s = launcher_.AdoptGeneration(id, b.generation); !s.ok()) {
    options_.log.Warn(
        "cannot adopt new generation; restarting the replica",
        {{"node", options_.node_name}, {"member", id}, {"error", std::string(s.message())}});
    return false;
  }
  ++stats_.generations_adopted;
  options_.log.Info("serving replica kept running at a new generation",
                    {{"node", options_.node_name},
                     {"job", m.spec.job},
                     {"namespace", m.spec.namespace_name},
                     {"member", id},
                     {"pid", static_cast<int64_t>(m.pid)},
                     {"from_generation", m.spec.generation},
                     {"generation", b.generation}});
  return true;
}

std::optional<ReplicaMetrics> NodeAgent::NewMetrics(const MemberStatus& m, absl::Time now) {
  if (m.spec.kind != "InferenceService" || m.state != MemberState::kRunning) return std::nullopt;
  const std::string id = m.spec.Id();
  MetricsSent& ms = metrics_sent_[id];
  if (now - ms.read_at < options_.metrics_interval) return std::nullopt;
  ms.read_at = now;
  absl::StatusOr<std::optional<ReplicaMetrics>> got = ReadReplicaMetrics(launcher_.MetricsPath(id));
  if (!got.ok()) {
    if (ms.error != got.status().message()) {
      ms.error = std::string(got.status().message());
      options_.log.Warn("replica metrics file ignored", {{"node", options_.node_name},
                                                         {"job", m.spec.job},
                                                         {"namespace", m.spec.namespace_name},
                                                         {"member", id},
                                                         {"path", launcher_.MetricsPath(id)},
                                                         {"error", ms.error}});
    }
    return std::nullopt;
  }
  ms.error.clear();
  if (!got->has_value() || (*got)->time == ms.time) return std::nullopt;
  return *got;
}

void NodeAgent::Report() {
  std::vector<MemberReport> reports;
  std::vector<std::pair<std::string, std::string>> sent;
  const absl::Time now = clock_.Now();
  for (const MemberStatus& m : launcher_.List()) {
    if (m.state == MemberState::kStopping) continue;  // being taken away: nothing to say
    MemberReport r = ReportAbout(m.spec);
    r.exit_code = m.exit_code;
    if (m.state == MemberState::kRunning) {
      r.state = api::MemberState::kRunning;
    } else {
      r.state = m.exit_code == 0 ? api::MemberState::kExited : api::MemberState::kFailed;
      r.reason = api::ExitReason(m.exit_code);
    }
    r.metrics = NewMetrics(m, now);
    std::string key = absl::StrCat(api::MemberStateName(r.state), r.exit_code, "/", r.generation);
    auto it = reported_.find(m.spec.Id());
    if (it != reported_.end() && it->second == key && !r.metrics) continue;
    // Said once per state: when it was seen, and why a member failed in its own words.
    r.time = now;
    if (r.state == api::MemberState::kFailed) r.message = StderrTail(m.stderr_path);
    reports.push_back(r);
    sent.emplace_back(m.spec.Id(), key);
  }
  std::vector<std::string> failed_starts;
  for (const auto& [id, f] : start_failures_) {
    if (f.reported) continue;
    MemberReport r = ReportAbout(f.spec);
    r.state = api::MemberState::kFailed;
    r.exit_code = -1;
    r.reason = "could not start";
    r.message = f.error;
    r.time = now;
    reports.push_back(r);
    sent.emplace_back(id, "");  // not in reported_: keyed by start_failures_
    failed_starts.push_back(id);
  }
  if (reports.empty()) return;
  absl::Status s = client_.ReportMembers(options_.node_name, reports);
  if (!s.ok()) {
    options_.log.Warn("member report failed",
                      {{"node", options_.node_name}, {"error", std::string(s.message())}});
    return;  // retried next step
  }
  for (auto& [id, key] : sent) {
    if (!key.empty()) reported_[id] = key;
  }
  for (const std::string& id : failed_starts) start_failures_[id].reported = true;
  for (size_t i = 0; i < reports.size(); ++i) {
    if (!reports[i].metrics) continue;
    metrics_sent_[sent[i].first].time = reports[i].metrics->time;
    ++stats_.metrics_reports;
  }
  for (const MemberReport& r : reports) {
    if (r.state == api::MemberState::kRunning) continue;
    options_.log.Log(r.exit_code == 0 ? obs::LogLevel::kInfo : obs::LogLevel::kWarn,
                     "member exited",
                     {{"node", options_.node_name},
                      {"job", r.job},
                      {"namespace", r.namespace_name},
                      {"group", r.group},
                      {"index", r.index},
                      {"generation", r.generation},
                      {"exit_code", r.exit_code},
                      {"reason", r.reason}});
  }
}

void NodeAgent::Run() {
  for (;;) {
    absl::Duration wait = Step();
    absl::MutexLock l(&mu_);
    if (stop_) return;
    mu_.AwaitWithTimeout(absl::Condition(&NodeAgent::WakeOrStop, this),
                         std::min(wait, absl::Seconds(1)));
    if (stop_) return;
  }
}

absl::flat_hash_map<std::string, WorkloadLabels> NodeAgent::Workloads() const {
  absl::MutexLock l(&mu_);
  return workloads_;
}

}  // namespace tessera::agent
