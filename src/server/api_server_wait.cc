// ApiServer's long-lived requests: watch streams (GET ...?watch=true), each on a thread of its
// own while it streams, and node-bindings long-polls (GET /api/v1/nodes/NAME/bindings), parked
// without a thread while they wait.
#include <httplib.h>

#include <deque>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "api/kinds.h"
#include "api/object_codec.h"
#include "api/selector.h"
#include "server/api_server.h"
#include "server/api_server_internal.h"

namespace tessera::server {

using api::Json;
using api::KindInfo;
using namespace internal;  // NOLINT: this module's reply helpers

namespace {

std::string EventType(const store::Event& e) {
  if (e.type == store::Event::Type::kDelete) return "DELETED";
  return e.kv.create_revision == e.kv.mod_revision ? "ADDED" : "MODIFIED";
}

}  // namespace

void ApiServer::HandleWatch(const Principal& who, const Route& r, const httplib::Request& req,
                            httplib::Response& res) {
  std::optional<Selectors> sel = ParseSelectors(req, res);
  if (!sel) return;
  int64_t since = 0, timeout_s = 0;
  if (!QueryInt(req, "resourceVersion", since, res)) return;
  if (!QueryInt(req, "timeoutSeconds", timeout_s, res)) return;
  const bool bookmarks = req.get_param_value("allowWatchBookmarks") == "true";
  const std::string prefix = api::StorePrefix(*r.kind, r.ns);

  struct State {
    int64_t since = 0;
    std::deque<std::string> initial;  // synthetic ADDED events (watch without resourceVersion)
    absl::Time deadline;
    absl::Time last_write;
    bool done = false;
    // The history is read at least once per watch, even when the server got to
    // the request after its deadline: an empty answer then means "nothing after
    // resourceVersion", which clients catching up rely on.
    bool read_once = false;
  };
  // Freed when the last copy of the stream's provider goes.
  std::string why;
  std::shared_ptr<SlotShares::Slot> slot = watches_.Acquire(who.id, &why);
  if (slot == nullptr) {
    res.set_header("Retry-After", "1");
    return Fail(res, 429, "TooManyRequests", why);
  }
  auto st = std::make_shared<State>();
  if (since == 0) {
    // No resourceVersion: the current objects as ADDED events, then changes.
    absl::StatusOr<store::ListResult> list = store_.List(prefix, {});
    if (!list.ok()) return FailStore(res, list.status(), r.kind->plural);
    st->since = list->revision;
    for (const store::KeyValue& kv : list->kvs) {
      absl::StatusOr<Json> obj = api::FromStored(kv.value, kv.mod_revision);
      if (!obj.ok() || !sel->Matches(*obj)) continue;
      st->initial.push_back(Json{{"type", "ADDED"}, {"object", std::move(*obj)}}.dump() + "\n");
    }
  } else {
    // Fail before the stream starts when the history is gone or in the future.
    absl::StatusOr<store::EventsResult> probe = store_.Events(prefix, since, 1);
    if (!probe.ok()) {
      if (absl::IsOutOfRange(probe.status())) {
        return Fail(
            res, 410, "Expired",
            absl::StrCat("too old resource version: ", since, " (", probe.status().message(), ")"));
      }
      return FailStore(res, probe.status(), r.kind->plural);
    }
    st->since = since;
  }
  absl::Duration limit = options_.max_watch;
  if (timeout_s > 0) limit = std::min(limit, absl::Seconds(timeout_s));
  st->deadline = absl::Now() + limit;
  st->last_write = absl::Now();
  const KindInfo* kind = r.kind;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "application/json",
      [this, st, slot, prefix, kind, sel = *std::move(sel), bookmarks](
          size_t, httplib::DataSink& sink) -> bool {
        auto write = [&](const std::string& line) {
          st->last_write = absl::Now();
          return sink.write(line.data(), line.size());
        };
        if (st->done) {
          sink.done();
          return true;
        }
        while (!st->initial.empty()) {
          if (!write(st->initial.front())) return false;
          st->initial.pop_front();
        }
        if (stopping_ || (st->read_once && absl::Now() >= st->deadline)) {
          st->done = true;
          sink.done();
          return true;
        }
        // Nothing new: skip the store read (an idle watch polls every 200 ms).
        absl::StatusOr<store::EventsResult> evs =
            store_.CurrentRevision() <= st->since
                ? absl::StatusOr<store::EventsResult>(store::EventsResult{{}, st->since})
                : store_.Events(prefix, st->since, 1000);
        if (!evs.ok()) {
          int code = absl::IsOutOfRange(evs.status()) ? 410 : 500;
          Json err = {{"type", "ERROR"},
                      {"object", api::StatusBody(code, code == 410 ? "Expired" : "InternalError",
                                                 evs.status().message())}};
          write(err.dump() + "\n");
          st->done = true;
          sink.done();
          return true;
        }
        for (const store::Event& e : evs->events) {
          std::string line;
          if (sel.empty()) {
            // No selector: splice the stored text (the controller and every agent-facing
            // watcher read the same events; parsing each for each watcher was most of a
            // watch's cost). Text not from ToStored falls back to the parse below.
            absl::StatusOr<std::string> text = api::StoredToApiText(e.kv.value, e.revision);
            if (text.ok()) {
              line = absl::StrCat("{\"object\":", *text, ",\"type\":\"", EventType(e), "\"}\n");
            }
          }
          if (line.empty()) {
            absl::StatusOr<Json> obj = api::FromStored(e.kv.value, e.revision);
            if (!obj.ok() || !sel.Matches(*obj)) continue;
            line = Json{{"type", EventType(e)}, {"object", std::move(*obj)}}.dump() + "\n";
          }
          if (!write(line)) return false;
        }
        st->since = evs->revision;
        st->read_once = true;
        if (evs->events.empty()) {
          absl::Time now = absl::Now();
          if (now - st->last_write >= options_.watch_heartbeat) {
            std::string beat = "\n";  // a blank line is a keep-alive
            if (bookmarks) {
              beat = Json{{"type", "BOOKMARK"},
                          {"object",
                           {{"apiVersion", api::kApiVersion},
                            {"kind", kind->kind},
                            {"metadata", {{"resourceVersion", std::to_string(st->since)}}}}}}
                         .dump() +
                     "\n";
            }
            if (!write(beat)) return false;
          }
          absl::Time until = std::min({now + absl::Milliseconds(200), st->deadline,
                                       st->last_write + options_.watch_heartbeat});
          store_.WaitForRevision(st->since + 1, until).IgnoreError();
        }
        return true;
      });
}

// GET /api/v1/nodes/NAME/bindings[?resourceVersion=R&timeoutSeconds=S]: the jobs bound to node
// NAME (docs/api.md, "Node bindings"). With R and S, waits up to S seconds for a change after R,
// parked: no thread waits. A change to the node's bindings (the index's wake-up) or the deadline
// (the front end's timer), whichever comes first, answers on a worker; the other then does
// nothing.
void ApiServer::ServeNodeBindings(const Principal& p, const std::string& node,
                                  const httplib::Request& req,
                                  const std::shared_ptr<http::Responder>& responder,
                                  const Finish& finish) {
  httplib::Response res;
  std::optional<BindingsWait> wait = StartNodeBindings(p, node, req, res);
  if (!wait) return finish(res);
  NodeBindingIndex::Snapshot now = bindings_->Wait(node, wait->since, absl::InfinitePast());
  if (now.changed || wait->deadline <= absl::Now() || stopping_) {
    AnswerNodeBindings(node, now, res);
    return finish(res);
  }
  struct Parked {
    std::atomic<bool> done{false};
    std::atomic<uint64_t> id{0};
    std::shared_ptr<SlotShares::Slot> slot;
  };
  auto parked = std::make_shared<Parked>();
  parked->slot = std::move(wait->slot);
  auto answer = [this, parked, node, since = wait->since, finish](bool timed_out) {
    if (parked->done.exchange(true)) return;
    if (timed_out) bindings_->CancelNotify(node, parked->id.load());
    httplib::Response r;
    AnswerNodeBindings(node, bindings_->Wait(node, since, absl::InfinitePast()), r);
    parked->slot.reset();
    finish(r);
  };
  responder->RunAt(wait->deadline, [answer] { answer(true); });
  parked->id = bindings_->NotifyOnChange(
      node, wait->since, [responder, answer] { responder->Post([answer] { answer(false); }); });
}

std::optional<ApiServer::BindingsWait> ApiServer::StartNodeBindings(const Principal& p,
                                                                    const std::string& node,
                                                                    const httplib::Request& req,
                                                                    httplib::Response& res) {
  // A node sees only its own bindings; users none (they span tenants).
  if (!AllowNodeRoute(p, node, "node bindings", "read its own bindings", res)) return std::nullopt;
  BindingsWait w;
  int64_t timeout_s = 0;
  if (!QueryInt(req, "resourceVersion", w.since, res)) return std::nullopt;
  if (!QueryInt(req, "timeoutSeconds", timeout_s, res)) return std::nullopt;
  // From another store (restored, or a new cluster at the same address): answer in full.
  if (w.since > store_.CurrentRevision()) w.since = 0;
  // Fresh for a plain read (a registering agent fences on it); a long-poll is woken by the
  // index's follower instead.
  if (absl::Status s = bindings_->CatchUp(); !s.ok()) {
    FailStore(res, s, "bindings");
    return std::nullopt;
  }
  if (w.since > 0 && timeout_s > 0) {
    std::string why;
    w.slot = binding_waits_.Acquire(p.id, &why);
    if (w.slot == nullptr) {
      res.set_header("Retry-After", "1");
      Fail(res, 429, "TooManyRequests", why);
      return std::nullopt;
    }
    w.deadline = absl::Now() + std::min(absl::Seconds(timeout_s), options_.max_binding_wait);
  }
  return w;
}

void ApiServer::AnswerNodeBindings(const std::string& node, const NodeBindingIndex::Snapshot& snap,
                                   httplib::Response& res) {
  // Written as text: the items are spliced from the stored text of each job, and a job whose
  // stored revision is the one the index saw bound here needs no parse (every write to a bound
  // job wakes its nodes' agents, so this runs for each member report and phase change).
  std::string body = absl::StrCat("{\"apiVersion\":\"", api::kApiVersion, "\",");
  if (snap.changed) {
    body.append("\"items\":[");
    bool first = true;
    for (size_t i = 0; i < snap.jobs.size(); ++i) {
      const std::string& key = snap.jobs[i];
      absl::StatusOr<store::KeyValue> kv = store_.Get(key);
      if (!kv.ok()) {
        if (absl::IsNotFound(kv.status())) continue;  // deleted since the snapshot
        return FailStore(res, kv.status(), key);
      }
      absl::StatusOr<std::string> text = absl::DataLossError("");
      if (i < snap.revisions.size() && kv->mod_revision == snap.revisions[i]) {
        text = api::StoredToApiText(kv->value, kv->mod_revision);
      }
      if (!text.ok()) {
        // Written since the snapshot: the job may have moved; never show a node someone else's
        // job.
        absl::StatusOr<Json> obj = api::FromStored(kv->value, kv->mod_revision);
        if (!obj.ok()) return FailStore(res, obj.status(), key);
        if (!BoundToNode(*obj, node)) continue;
        text = obj->dump();
      }
      if (!first) body.push_back(',');
      first = false;
      body.append(*text);
    }
    body.append("],");
  }
  // Nothing new: the agent keeps what it has (no per-job reads above).
  absl::StrAppend(&body, "\"kind\":\"NodeBindingList\",\"metadata\":{\"resourceVersion\":\"",
                  snap.revision, "\"", snap.changed ? "" : ",\"unchanged\":true", "}}\n");
  res.status = 200;
  res.set_content(body, "application/json");
}

}  // namespace tessera::server
