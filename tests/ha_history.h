// The history of tests/server_jepsen_test.cc, in the spirit of Jepsen's: what clients were told
// (acknowledged creates, the resourceVersions reads and watches returned) and what the agents
// ran, and the checks on it:
//   - lost: a job whose create was acknowledged (201) and that a later list does not hold, or
//     that holds an older value of label `touch` than an acknowledged update (200) set;
//   - doubled: a job recreated (a name listed twice, or with another uid than acknowledged), a
//     GPU bound to two live jobs, a member started twice at one generation or while another
//     process of the same member still ran (runs.log, see ha_cluster.h's Agents);
//   - resourceVersion going back: per object, for a watcher (one client following the jobs
//     through successive streams on different replicas, each from the last resourceVersion),
//     and for reads: a read that began after another read of the object ended must not return
//     an older resourceVersion (etcd reads are linearizable, so a replica must not serve stale
//     objects).
// Recording is thread-safe; the checks run on the test's main thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "server_process.h"

namespace tessera::testing {

// j[key] when j is an object with an object there, else an empty object (API objects may carry
// "status": null).
inline const nlohmann::json& Obj(const nlohmann::json& j, const char* key) {
  static const nlohmann::json empty = nlohmann::json::object();
  if (!j.is_object()) return empty;
  auto it = j.find(key);
  return it != j.end() && it->is_object() ? *it : empty;
}
// j[key] when it is a string there, else "".
inline std::string Str(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return "";
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}
// metadata.resourceVersion as a number (0 when absent).
inline int64_t Rv(const nlohmann::json& o) {
  const std::string rv = Str(Obj(o, "metadata"), "resourceVersion");
  return rv.empty() ? 0 : std::stoll(rv);
}

class History {
 public:
  using Json = nlohmann::json;

  // A create answered 201: the object's uid and resourceVersion.
  void Acked(const std::string& name, const std::string& uid, int64_t rv) {
    std::lock_guard<std::mutex> l(mu_);
    acked_[name] = uid;
    Raise(name, rv);
  }
  // A create whose answer was lost and whose retry found the name taken (409): it landed,
  // unacknowledged; or, `landed` false, no try got an answer at all.
  void Unacknowledged(const std::string& name, bool landed) {
    std::lock_guard<std::mutex> l(mu_);
    (landed ? landed_ : unknown_).insert(name);
  }
  // A random acknowledged name (for reads); "" when none.
  std::string AnyAcked(uint64_t r) {
    std::lock_guard<std::mutex> l(mu_);
    if (acked_.empty()) return "";
    auto it = acked_.begin();
    std::advance(it, r % acked_.size());
    return it->first;
  }
  // Before a read of `name`: the newest resourceVersion any finished observation returned.
  int64_t ReadFloor(const std::string& name) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = max_rv_.find(name);
    return it == max_rv_.end() ? 0 : it->second;
  }
  // After it: it returned `rv`.
  void ReadDone(const std::string& name, int64_t floor, int64_t rv, const std::string& where) {
    std::lock_guard<std::mutex> l(mu_);
    ++reads_;
    if (rv < floor) Violation(absl::StrCat(where, ": read ", name, " at ", rv, " after ", floor));
    Raise(name, rv);
  }
  // An event for `name` at `rv` seen by watcher `stream`.
  void Watched(int stream, const std::string& name, int64_t rv) {
    std::lock_guard<std::mutex> l(mu_);
    ++watch_events_;
    int64_t& last = watched_[{stream, name}];
    if (rv < last) {
      Violation(absl::StrCat("watch ", stream, ": ", name, " at ", rv, " after ", last));
    } else if (rv == last) {
      ++watch_repeats_;  // the same revision delivered again: not a step back
    }
    last = std::max(last, rv);
  }
  // An update of job `name` to label touch=`value` was sent (it may land), or answered 200.
  void TouchTried(const std::string& name, int value) {
    std::lock_guard<std::mutex> l(mu_);
    tried_[name] = std::max(tried_[name], value);
  }
  void TouchAcked(const std::string& name, int value) {
    std::lock_guard<std::mutex> l(mu_);
    touched_[name] = std::max(touched_[name], value);
    ++touch_acks_;
  }
  void Relisted() {
    std::lock_guard<std::mutex> l(mu_);
    ++relists_;
  }

  // What a list begun now must hold: every job acknowledged so far, each at least at the
  // newest resourceVersion an observation that ended returned.
  struct Before {
    std::set<std::string> acked;
    std::map<std::string, int64_t> floors;
    std::map<std::string, int> touched;  // the newest acknowledged touch of each job
  };
  Before Snapshot() {
    std::lock_guard<std::mutex> l(mu_);
    Before b{{}, max_rv_, touched_};
    for (const auto& [n, u] : acked_) b.acked.insert(n);
    return b;
  }
  // Checks a job list (GET of the collection, begun after `before` was taken): appends what is
  // wrong to `problems`.
  void CheckList(const Json& list, const Before& before, const std::string& at,
                 std::vector<std::string>* problems) {
    const auto& floors = before.floors;
    std::lock_guard<std::mutex> l(mu_);
    std::map<std::string, std::string> uid;
    std::map<std::pair<std::string, int>, std::string> owner;
    ++lists_;
    for (const Json& item : list["items"]) {
      const std::string name = Str(Obj(item, "metadata"), "name");
      const std::string id = Str(Obj(item, "metadata"), "uid");
      const int64_t rv = Rv(item);
      if (!uid.emplace(name, id).second) Doubled(problems, at, "job listed twice: " + name);
      if (auto a = acked_.find(name); a != acked_.end() && !a->second.empty() && a->second != id) {
        Doubled(problems, at,
                absl::StrCat("job ", name, " recreated: uid ", id, ", acked ", a->second));
      }
      if (auto f = floors.find(name); f != floors.end() && rv < f->second) {
        problems->push_back(
            absl::StrCat(at, ": list has ", name, " at ", rv, " after ", f->second));
        Violation(problems->back());
      }
      Raise(name, rv);
      // Touches only grow: the list holds at least the last acknowledged one (else an update
      // was lost) and nothing never sent.
      const std::string label = Str(Obj(Obj(item, "metadata"), "labels"), "touch");
      const int touch = label.empty() ? 0 : std::stoi(label);
      if (auto t = before.touched.find(name); t != before.touched.end() && touch < t->second) {
        if (lost_updates_.insert({name, t->second}).second) {
          problems->push_back(absl::StrCat(at, ": lost update: ", name, " has touch=", touch,
                                           ", acknowledged ", t->second));
        }
      }
      if (auto t = tried_.find(name); touch > (t == tried_.end() ? 0 : t->second)) {
        Doubled(problems, at, absl::StrCat(name, " has touch=", touch, ", never sent"));
      }
      const Json& st = Obj(item, "status");
      const std::string phase = Str(st, "phase");
      if (phase == "Succeeded" || phase == "Failed" || !st.contains("placement")) continue;
      for (const Json& m : st["placement"]) {
        for (const Json& g : m["gpus"]) {
          auto [it, fresh] =
              owner.emplace(std::make_pair(m["node"].get<std::string>(), g.get<int>()), name);
          if (!fresh) {
            Doubled(problems, at,
                    absl::StrCat("GPU ", it->first.first, "/", it->first.second, " bound to ",
                                 it->second, " and ", name));
          }
        }
      }
    }
    for (const std::string& name : before.acked) {
      if (!uid.count(name) && lost_.insert(name).second) {
        problems->push_back(absl::StrCat(at, ": lost ", name, " (acknowledged)"));
      }
    }
  }

  // Reads runs.log: every member start. Appends what is wrong to `problems`.
  void CheckRuns(const std::string& runs_log, const std::string& at,
                 std::vector<std::string>* problems) {
    std::lock_guard<std::mutex> l(mu_);
    std::istringstream in(Slurp(runs_log));
    std::set<std::string> jobs;
    std::string kind, job, member, gen, pwd;
    int64_t lines = 0;
    while (in >> kind >> job >> member >> gen >> pwd) {
      ++lines;
      jobs.insert(job);
      if (lines <= runs_checked_) continue;  // reported already
      if (kind == "double") {
        Doubled(problems, at,
                absl::StrCat("member ", job, "/", member, " started (generation ", gen, ", ", pwd,
                             ") while another process of it ran"));
      }
      if (++run_starts_[{job, member, gen}] == 2) {
        Doubled(problems, at,
                absl::StrCat("member ", job, "/", member, " started twice at generation ", gen));
      }
    }
    runs_checked_ = lines;
    jobs_run_ = jobs;
  }

  // Counts, for the report.
  size_t acked() {
    std::lock_guard<std::mutex> l(mu_);
    return acked_.size();
  }
  std::set<std::string> acked_names() {
    std::lock_guard<std::mutex> l(mu_);
    std::set<std::string> out;
    for (const auto& [n, u] : acked_) out.insert(n);
    return out;
  }
  // Acknowledged creates and updates not found.
  size_t lost() {
    std::lock_guard<std::mutex> l(mu_);
    return lost_.size() + lost_updates_.size();
  }
  int64_t doubled() {
    std::lock_guard<std::mutex> l(mu_);
    return doubled_;
  }
  std::string Summary() {
    std::lock_guard<std::mutex> l(mu_);
    size_t landed_listed = 0, unknown_listed = 0, acked_ran = 0;
    for (const std::string& n : landed_) landed_listed += max_rv_.count(n);
    for (const std::string& n : unknown_) unknown_listed += max_rv_.count(n);
    for (const auto& [n, u] : acked_) acked_ran += jobs_run_.count(n);
    return absl::StrCat(
        "acknowledged creates ", acked_.size(), " (", acked_ran, " ran on an agent) and updates ",
        touch_acks_, "; lost ", lost_.size() + lost_updates_.size(), " (", lost_updates_.size(),
        " updates), doubled ", doubled_, "; unacknowledged creates: ", landed_.size(),
        " landed (a retry found them; ", landed_listed, " listed), ", unknown_.size(),
        " never answered (", unknown_listed, " listed); member starts ", runs_checked_,
        "; resourceVersion checks: ", reads_, " reads, ", lists_, " lists, ", watch_events_,
        " watch events (", watch_repeats_, " repeated, ", relists_, " relists), ", violations_,
        " going back");
  }
  int64_t violations() {
    std::lock_guard<std::mutex> l(mu_);
    return violations_;
  }
  std::string first_violation() {
    std::lock_guard<std::mutex> l(mu_);
    return first_violation_;
  }

 private:
  void Raise(const std::string& name, int64_t rv) {
    int64_t& m = max_rv_[name];
    m = std::max(m, rv);
  }
  void Violation(const std::string& what) {
    if (violations_++ == 0) first_violation_ = what;
  }
  void Doubled(std::vector<std::string>* problems, const std::string& at, const std::string& what) {
    ++doubled_;
    problems->push_back(at + ": " + what);
  }

  std::mutex mu_;
  std::map<std::string, std::string> acked_;  // name -> uid
  std::set<std::string> landed_, unknown_, lost_, jobs_run_;
  std::map<std::string, int64_t> max_rv_;
  std::map<std::string, int> tried_, touched_;
  std::set<std::pair<std::string, int>> lost_updates_;
  std::map<std::pair<int, std::string>, int64_t> watched_;
  std::map<std::tuple<std::string, std::string, std::string>, int> run_starts_;
  int64_t touch_acks_ = 0, reads_ = 0, lists_ = 0, watch_events_ = 0, watch_repeats_ = 0,
          relists_ = 0;
  int64_t violations_ = 0, doubled_ = 0, runs_checked_ = 0;
  std::string first_violation_;
};

}  // namespace tessera::testing
