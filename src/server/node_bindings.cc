#include "server/node_bindings.h"

#include <algorithm>

#include "api/kinds.h"
#include "api/object_codec.h"
#include "nlohmann/json.hpp"

namespace tessera::server {
namespace {

using Json = nlohmann::json;

// The phases in which a job's placement is live (the agent runs its members).
bool BoundPhase(const std::string& p) {
  return p == "Scheduled" || p == "Running" || p == "Deploying" || p == "Ready" || p == "Degraded";
}

// Reads a stored job's status.phase and status.placement[].node as the parser streams by,
// building no document: the index reads every job write (a member report, a phase), and a full
// parse of each was a twentieth of the server's CPU under load.
class BoundNodesSax : public nlohmann::json_sax<Json> {
 public:
  // The nodes the job is bound to (empty unless its phase is a bound one).
  std::set<std::string> Take() {
    if (failed_ || !BoundPhase(phase_)) return {};
    return std::move(nodes_);
  }

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool string(string_t& v) override {
    if (Top() == kStatus && key_ == "phase") phase_ = v;
    if (Top() == kMember && key_ == "node") nodes_.insert(v);
    return true;
  }
  bool key(string_t& k) override {
    key_ = k;
    return true;
  }
  bool start_object(std::size_t) override {
    Where w = kOther;
    if (stack_.empty()) {
      w = kRoot;
    } else if (Top() == kRoot && key_ == "status") {
      w = kStatus;
    } else if (Top() == kPlacement) {
      w = kMember;
    }
    stack_.push_back(w);
    return true;
  }
  bool start_array(std::size_t) override {
    stack_.push_back(Top() == kStatus && key_ == "placement" ? kPlacement : kOther);
    return true;
  }
  bool end_object() override { return Pop(); }
  bool end_array() override { return Pop(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    failed_ = true;
    return false;
  }

 private:
  // The containers that matter: the object, its status, status.placement, a placement member.
  enum Where { kOther, kRoot, kStatus, kPlacement, kMember };
  Where Top() const { return stack_.empty() ? kOther : stack_.back(); }
  bool Pop() {
    if (!stack_.empty()) stack_.pop_back();
    return true;
  }

  std::vector<Where> stack_;
  std::string key_;  // the last key read: a value in an object always follows its own key
  std::string phase_;
  std::set<std::string> nodes_;
  bool failed_ = false;
};

// The nodes a stored job is bound to (empty when not in a bound phase).
std::set<std::string> BoundNodes(const std::string& value) {
  // A job with no placement member (new, admitted, queued: most writes in a burst of
  // submissions) is bound nowhere; a substring search says so without reading the document.
  if (value.find("\"placement\":[{") == std::string::npos) return {};
  BoundNodesSax sax;
  Json::sax_parse(value, &sax);
  return sax.Take();
}

std::vector<std::string> JobPrefixes() {
  std::vector<std::string> out;
  for (const char* plural : {"trainingjobs", "inferenceservices"}) {
    out.push_back(api::StorePrefix(*api::KindByPlural(plural), ""));
  }
  return out;
}

}  // namespace

NodeBindingIndex::NodeBindingIndex(store::Store& store) : store_(store) {}

NodeBindingIndex::~NodeBindingIndex() { Stop(); }

absl::Status NodeBindingIndex::Start() {
  {
    absl::MutexLock a(&apply_mu_);
    if (started_) return absl::OkStatus();
    started_ = true;
  }
  // The build (a list of every job) runs on the follower, so a restarting server listens at
  // once; the first bindings request builds it itself if it comes first (CatchUp).
  follower_ = std::thread([this] { Follow(); });
  return absl::OkStatus();
}

void NodeBindingIndex::Stop() {
  std::vector<std::function<void()>> due;
  {
    absl::MutexLock l(&mu_);
    if (stopping_) return;
    stopping_ = true;
    for (auto& [name, e] : nodes_) {
      e->cv.SignalAll();
      TakeDue(*e, due);
    }
  }
  for (auto& wake : due) wake();
  if (follower_.joinable()) follower_.join();
}

void NodeBindingIndex::TakeDue(NodeEntry& e, std::vector<std::function<void()>>& due) {
  const int64_t changed = std::max(e.changed, base_);
  for (auto it = e.notify.begin(); it != e.notify.end();) {
    if (stopping_ || changed > it->second.first) {
      due.push_back(std::move(it->second.second));
      it = e.notify.erase(it);
      --notifying_;
    } else {
      ++it;
    }
  }
}

uint64_t NodeBindingIndex::NotifyOnChange(const std::string& node, int64_t since,
                                          std::function<void()> wake) {
  {
    absl::MutexLock l(&mu_);
    NodeEntry& e = Entry(node);
    if (!stopping_ && std::max(e.changed, base_) <= since) {
      const uint64_t id = next_notify_++;
      e.notify.emplace(id, std::make_pair(since, std::move(wake)));
      ++notifying_;
      return id;
    }
  }
  wake();
  return 0;
}

void NodeBindingIndex::CancelNotify(const std::string& node, uint64_t id) {
  if (id == 0) return;
  absl::MutexLock l(&mu_);
  auto it = nodes_.find(node);
  if (it != nodes_.end() && it->second->notify.erase(id) > 0) --notifying_;
}

NodeBindingIndex::NodeEntry& NodeBindingIndex::Entry(const std::string& node) {
  std::unique_ptr<NodeEntry>& e = nodes_[node];
  if (!e) e = std::make_unique<NodeEntry>();
  return *e;
}

absl::Status NodeBindingIndex::Rebuild() {
  const int64_t target = store_.CurrentRevision();
  std::map<std::string, std::set<std::string>> job_nodes;
  std::map<std::string, int64_t> job_rev;
  int64_t revision = target;
  for (const std::string& prefix : JobPrefixes()) {
    store::ListOptions opts;
    opts.limit = 5000;
    for (;;) {
      absl::StatusOr<store::ListResult> page = store_.List(prefix, opts);
      if (!page.ok()) return page.status();
      // Later pages may be newer than the first; the events after the oldest page are
      // replayed below (per-job revisions make that idempotent).
      revision = std::min(revision, page->revision);
      for (const store::KeyValue& kv : page->kvs) {
        job_rev[kv.key] = kv.mod_revision;
        std::set<std::string> nodes = BoundNodes(kv.value);
        if (!nodes.empty()) job_nodes[kv.key] = std::move(nodes);
      }
      if (!page->more) break;
      opts.continue_after = page->next_key;
    }
  }
  job_rev_ = std::move(job_rev);
  std::vector<std::function<void()>> due;
  {
    absl::MutexLock l(&mu_);
    job_nodes_ = std::move(job_nodes);
    for (auto& [name, e] : nodes_) e->jobs.clear();
    for (const auto& [job, nodes] : job_nodes_) {
      for (const std::string& n : nodes) Entry(n).jobs[job] = job_rev_[job];
    }
    applied_ = revision;
    base_ = revision;
    // Everyone re-reads: bindings may have changed while the index was not looking.
    for (auto& [name, e] : nodes_) {
      e->cv.SignalAll();
      TakeDue(*e, due);
    }
  }
  for (auto& wake : due) wake();
  return absl::OkStatus();
}

void NodeBindingIndex::Apply(const std::string& key, const std::string* value, int64_t revision,
                             std::set<std::string>& touched) {
  auto seen = job_rev_.find(key);
  if (seen != job_rev_.end() && seen->second >= revision) return;  // replayed after a rebuild
  if (value == nullptr) {
    job_rev_.erase(key);
  } else {
    job_rev_[key] = revision;
  }
  std::set<std::string> now = value == nullptr ? std::set<std::string>() : BoundNodes(*value);
  absl::MutexLock l(&mu_);
  auto it = job_nodes_.find(key);
  if (it != job_nodes_.end()) {
    for (const std::string& n : it->second) {
      NodeEntry& e = Entry(n);
      if (!now.contains(n)) e.jobs.erase(key);
      e.changed = std::max(e.changed, revision);
      touched.insert(n);
    }
  }
  for (const std::string& n : now) {
    NodeEntry& e = Entry(n);
    e.jobs[key] = revision;
    e.changed = std::max(e.changed, revision);
    touched.insert(n);
  }
  if (now.empty()) {
    if (it != job_nodes_.end()) job_nodes_.erase(it);
  } else {
    job_nodes_[key] = std::move(now);
  }
}

absl::Status NodeBindingIndex::CatchUp() {
  absl::MutexLock a(&apply_mu_);
  if (!built_) {
    if (absl::Status s = Rebuild(); !s.ok()) return s;
    built_ = true;
  }
  const int64_t target = store_.CurrentRevision();
  int64_t from;
  {
    absl::MutexLock l(&mu_);
    from = applied_;
  }
  if (target <= from) return absl::OkStatus();
  std::vector<store::Event> events;
  // Up to where every prefix's events are complete (a store may answer Events up to less than
  // the revision it reported: etcd's watch cache still catching up). The rest comes next time.
  int64_t reached = target;
  for (const std::string& prefix : JobPrefixes()) {
    absl::StatusOr<store::EventsResult> r = store_.Events(prefix, from, 0);
    if (!r.ok()) {
      if (absl::IsOutOfRange(r.status())) return Rebuild();  // compaction overtook us
      return r.status();
    }
    reached = std::min(reached, r->revision);
    for (store::Event& e : r->events) events.push_back(std::move(e));
  }
  std::erase_if(events, [&](const store::Event& e) { return e.revision > reached; });
  std::stable_sort(events.begin(), events.end(), [](const store::Event& a, const store::Event& b) {
    return a.revision < b.revision;
  });
  std::set<std::string> touched;
  for (const store::Event& e : events) {
    Apply(e.kv.key, e.type == store::Event::Type::kDelete ? nullptr : &e.kv.value, e.revision,
          touched);
  }
  std::vector<std::function<void()>> due;
  {
    absl::MutexLock l(&mu_);
    applied_ = std::max(applied_, reached);
    for (const std::string& n : touched) {
      auto it = nodes_.find(n);
      if (it == nodes_.end()) continue;
      it->second->cv.SignalAll();
      TakeDue(*it->second, due);
    }
  }
  for (auto& wake : due) wake();
  return absl::OkStatus();
}

void NodeBindingIndex::Follow() {
  absl::Time last = absl::InfinitePast();
  (void)CatchUp();  // builds
  for (;;) {
    int64_t next;
    {
      absl::MutexLock l(&mu_);
      if (stopping_) return;
      next = applied_ + 1;
    }
    // Short slices, so Stop() is prompt.
    if (store_.WaitForRevision(next, absl::Now() + absl::Milliseconds(200)).ok()) {
      // Most writes are not to jobs (12,500 heartbeats every 10 s): catching up at most every
      // 2 ms bounds the cost of reading past them, for at most 2 ms of extra latency.
      absl::SleepFor(last + absl::Milliseconds(2) - absl::Now());
      last = absl::Now();
      if (absl::Status s = CatchUp(); !s.ok()) absl::SleepFor(absl::Milliseconds(100));
    }
  }
}

NodeBindingIndex::Snapshot NodeBindingIndex::Wait(const std::string& node, int64_t since,
                                                  absl::Time deadline) {
  absl::MutexLock l(&mu_);
  NodeEntry& e = Entry(node);
  auto changed = [&] { return std::max(e.changed, base_) > since; };
  Snapshot out;
  if (since > 0 && !changed()) {
    ++e.waiters;
    ++waiting_;
    while (!changed() && !stopping_) {
      if (e.cv.WaitWithDeadline(&mu_, deadline)) break;  // timed out
    }
    --e.waiters;
    --waiting_;
    out.changed = changed();
  }
  out.revision = applied_;
  out.jobs.reserve(e.jobs.size());
  out.revisions.reserve(e.jobs.size());
  for (const auto& [job, rev] : e.jobs) {
    out.jobs.push_back(job);
    out.revisions.push_back(rev);
  }
  return out;
}

int64_t NodeBindingIndex::revision() const {
  absl::MutexLock l(&mu_);
  return applied_;
}

int NodeBindingIndex::waiters() const {
  absl::MutexLock l(&mu_);
  return waiting_ + notifying_;
}

size_t NodeBindingIndex::bound_nodes() const {
  absl::MutexLock l(&mu_);
  size_t n = 0;
  for (const auto& [name, e] : nodes_) n += e->jobs.empty() ? 0 : 1;
  return n;
}

}  // namespace tessera::server
