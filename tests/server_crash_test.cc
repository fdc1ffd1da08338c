// Crash test: SIGKILL the real `tessera server` at random instants while
// clients create, update (spec and suspend) and delete jobs and the server's
// scheduling controller binds them to the GPUs of registered nodes; then
// restart it on the same data dir.
//
// Checked after EVERY restart (clients stopped, the restarted server's state):
//   * every acknowledged create exists exactly once (unless a delete was
//     attempted after it), every acknowledged delete stays gone, every job's
//     spec is the last acknowledged update or a later unacknowledged one, and
//     no job exists that no client wrote;
//   * every job is in a legal phase;
//   * no GPU is bound to two jobs (milli-GPUs per GPU sum to <= 1000, on GPUs
//     that exist), every member of a placement carries the job's
//     status.generation, and fencing holds across restarts: a job's
//     generation never goes back, and one (job, generation) names one
//     placement forever.
// In the mix, with authentication on: the clients write as a tenant (a user token); node
// "agents" (node tokens) read their bindings and report their members Running through the status
// subresource, so the controller moves jobs on to Running; and a forger (the tenant's token)
// creates jobs that carry a status saying they are bound (generation kForgedGeneration, a
// placement on n0's GPUs) and writes such a status through the subresource. Checked as well:
// no stored job ever carries the forged generation, the forged status writes were all refused,
// and the node reports landed.
// Checked at the end: watchers on every resource kind -- reconnecting after
// each kill with the resourceVersion of the last event they saw -- together
// received every revision, none twice, and replaying the job events gives
// exactly the final list.
// TESSERA_CRASH_KILLS overrides the number of kills (default 200).
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "nlohmann/json.hpp"
#include "server_process.h"

namespace tessera::testing {
namespace {

using Json = nlohmann::json;

constexpr char kJobs[] = "/api/v1/namespaces/crash/trainingjobs";
constexpr int kNodes = 8;
constexpr int kGpusPerNode = 8;
constexpr char kAdminToken[] = "crash-admin";
constexpr char kUserToken[] = "crash-tenant";
// A generation the controller never reaches here: only a forged status could carry it.
constexpr int64_t kForgedGeneration = 1000000;

// The tokens file: an admin (watchers, checks, nodes' registration), the tenant that owns the
// "crash" namespace, and one token per node.
std::string TokensFile() {
  std::string t = std::string(kAdminToken) + " * admin\n" + kUserToken + " crash user\n";
  for (int n = 0; n < kNodes; ++n) {
    t += "node-token-n" + std::to_string(n) + " - node:n" + std::to_string(n) + "\n";
  }
  return t;
}

Json Job(const std::string& name, int count, bool suspend = false) {
  Json spec = {{"groups", {{{"name", "w"}, {"count", count}, {"gpusPerReplica", 1}}}}};
  if (suspend) spec["suspend"] = true;
  return {{"apiVersion", "tessera.dev/v1"},
          {"kind", "TrainingJob"},
          {"metadata", {{"name", name}}},
          {"spec", spec}};
}

Json Node(int i) {
  return {{"apiVersion", "tessera.dev/v1"},
          {"kind", "Node"},
          {"metadata", {{"name", std::string("n").append(std::to_string(i))}}},
          {"spec",
           {{"gpuType", "H100"},
            {"gpuCount", kGpusPerNode},
            {"layout", "nvswitch"},
            {"rack", std::string("r").append(std::to_string(i / 2))}}}};
}

std::string Path(const std::string& name) { return std::string(kJobs).append("/").append(name); }

int64_t Rv(const Json& obj) {
  return std::stoll(obj["metadata"]["resourceVersion"].get<std::string>());
}

// What the clients know about one object. Counts only grow, so an object's
// final count must lie in [last acknowledged, highest attempted].
struct Truth {
  bool create_acked = false;
  bool delete_acked = false;
  bool delete_attempted = false;
  int acked_count = 0;
  int max_count = 0;
};

class Model {
 public:
  void Set(const std::string& name, const std::function<void(Truth&)>& f) {
    std::lock_guard<std::mutex> l(mu_);
    f(truth_[name]);
  }
  std::map<std::string, Truth> Snapshot() {
    std::lock_guard<std::mutex> l(mu_);
    return truth_;
  }

 private:
  std::mutex mu_;
  std::map<std::string, Truth> truth_;
};

// Follows one collection across server restarts, resuming from the last
// resourceVersion it saw.
class Watcher {
 public:
  // Starts following `collection` from `since` (which must exist on the server).
  Watcher(std::atomic<int>& port, std::string collection, int64_t since)
      : port_(port), collection_(std::move(collection)), last_(since) {
    thread_ = std::thread([this] { Run(); });
  }
  ~Watcher() { Stop(); }
  void RequestStop() { stop_ = true; }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  const std::string& collection() const { return collection_; }
  int64_t last() const { return last_.load(); }
  const std::vector<Json>& events() const { return events_; }  // after Stop()
  std::string error() const {
    std::lock_guard<std::mutex> l(mu_);
    return error_;
  }

 private:
  void SetError(std::string e) {
    std::lock_guard<std::mutex> l(mu_);
    error_ = collection_ + ": " + e;
  }
  // One watch request from last_ on `port`, appending its events. Returns the
  // number of events read, or -1 after an error (recorded) or a refused
  // connection / 429 (retryable: `retry` set).
  int Once(int port, int timeout_s, bool* retry) {
    *retry = false;
    httplib::Client cli("127.0.0.1", port);
    cli.set_connection_timeout(0, 200000);
    cli.set_read_timeout(timeout_s, 0);
    cli.set_bearer_token_auth(kAdminToken);
    // The objects of one transaction share its revision, and a stream cut (a
    // kill, Stop) may fall between them: ask again from the revision before the
    // last one seen and skip the objects of the last revision already read.
    const int64_t last = last_.load();
    std::string path = collection_ + "?watch=true&timeoutSeconds=" + std::to_string(timeout_s) +
                       "&resourceVersion=" + std::to_string(last > 1 ? last - 1 : last);
    std::string buf;
    int status = 0, n = 0;
    bool failed = false;
    cli.Get(
        path,
        [&](const httplib::Response& r) {
          status = r.status;
          return r.status == 200;  // an error body is not a stream of events
        },
        [&](const char* data, size_t len) {
          buf.append(data, len);
          size_t nl;
          while ((nl = buf.find('\n')) != std::string::npos) {
            std::string line = buf.substr(0, nl);
            buf.erase(0, nl + 1);
            if (line.empty()) continue;
            Json ev = Json::parse(line, nullptr, false);
            if (ev.is_discarded() || ev["type"] == "ERROR" || !ev["object"].is_object()) {
              SetError(line);
              failed = true;
              return false;
            }
            const int64_t rev = Rv(ev["object"]);
            const Json& meta = ev["object"]["metadata"];
            std::string id = meta.value("namespace", "") + "/" + meta["name"].get<std::string>();
            if (rev > last_.load()) {
              at_last_.clear();
              last_ = rev;
            } else if (rev < last_.load() || at_last_.count(id)) {
              continue;  // read before the cut
            }
            at_last_.insert(std::move(id));
            events_.push_back(std::move(ev));
            ++n;
          }
          return true;  // Stop() waits for the request's end (timeout_s), not cutting it
        });
    if (failed) return -1;
    // 0: the server went away (killed) mid-stream; 429: all watch slots taken for a moment.
    if (status == 0 || status == 429) {
      *retry = true;
      return -1;
    }
    if (status != 200) {
      SetError(std::string("watch status ").append(std::to_string(status)));
      return -1;
    }
    return n;
  }
  void Run() {
    while (!stop_) {
      int port = port_.load();
      if (port <= 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      bool retry = false;
      if (Once(port, 2, &retry) < 0) {
        if (!retry) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  }

 public:
  // After Stop(), with the final server up: reads until a watch from the last
  // revision seen comes back empty. The server reads the history at least once
  // in every watch, so an empty answer means nothing in this collection after
  // last() up to a revision read after the call began: the watcher is current.
  void Drain() {
    for (int i = 0; i < 600; ++i) {
      bool retry = false;
      int n = Once(port_.load(), 1, &retry);
      if (n == 0) return;
      if (n < 0 && !retry) return;
      if (retry) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    SetError("still behind after 600 drains");
  }

 private:
  std::atomic<int>& port_;
  const std::string collection_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> last_;
  std::vector<Json> events_;
  std::set<std::string> at_last_;  // namespace/name of the objects read at last_
  mutable std::mutex mu_;
  std::string error_;
  std::thread thread_;
};

// One client: creates new jobs and updates/deletes jobs it created; a job
// whose request got no answer is left alone afterwards. Updates raise the
// gang size and toggle spec.suspend (which unbinds and later rebinds the job
// with a new generation); a 409 because the controller wrote the job's status
// meanwhile is retried with the current resourceVersion.
struct Known {
  std::string name;
  std::string rv;
  int count;
};

// `known`: the jobs this client created and whose state it knows, kept
// across rounds so that jobs bound in earlier rounds are suspended and
// deleted too (which frees GPUs for new bindings). `orphans`: jobs whose last
// request got no answer; at the next round the client reads them from the
// restarted server -- what it reads is durable -- and knows them again.
void ClientLoop(int id, int round, int port, std::atomic<bool>& stop, Model& model,
                std::atomic<int>& acks, std::vector<Known>& known,
                std::vector<std::string>& orphans) {
  std::mt19937_64 rng(round * 1000 + id);
  httplib::Client cli("127.0.0.1", port);
  cli.set_connection_timeout(0, 200000);
  cli.set_read_timeout(2, 0);
  cli.set_tcp_nodelay(true);
  cli.set_bearer_token_auth(kUserToken);
  while (!orphans.empty()) {
    auto r = cli.Get(Path(orphans.back()));
    if (!r) return;
    if (r->status == 200) {
      Json obj = Json::parse(r->body);
      const int count = obj["spec"]["groups"][0]["count"];
      model.Set(orphans.back(), [&](Truth& t) {
        t.create_acked = true;
        t.acked_count = count;
      });
      known.push_back({orphans.back(), obj["metadata"]["resourceVersion"], count});
    }
    orphans.pop_back();
  }
  int seq = 0;
  while (!stop) {
    int dice = static_cast<int>(rng() % 10);
    // At most 16 live jobs per client, so that the same jobs are suspended,
    // resumed and deleted often: bindings churn and generations move on.
    if (known.empty() || (dice < 4 && known.size() < 16)) {
      std::string name("j-");
      name.append(std::to_string(round)).append("-").append(std::to_string(id));
      name.append("-").append(std::to_string(seq++));
      model.Set(name, [](Truth& t) { t.max_count = 1; });
      auto r = cli.Post(kJobs, Job(name, 1).dump(), "application/json");
      if (!r) {  // the server is gone: outcome unknown
        orphans.push_back(name);
        return;
      }
      if (r->status == 201) {
        model.Set(name, [](Truth& t) {
          t.create_acked = true;
          t.acked_count = 1;
        });
        known.push_back({name, Json::parse(r->body)["metadata"]["resourceVersion"], 1});
        acks++;
      }
    } else if (dice < 7) {
      size_t i = rng() % known.size();
      Known& k = known[i];
      const int count = k.count < 4 ? k.count + 1 : k.count;
      model.Set(k.name, [&](Truth& t) { t.max_count = count; });
      const bool suspend = rng() % 3 == 0;
      int status = 0;
      for (int attempt = 0; attempt < 20; ++attempt) {
        Json obj = Job(k.name, count, suspend);
        obj["metadata"]["resourceVersion"] = k.rv;
        auto r = cli.Put(Path(k.name), obj.dump(), "application/json");
        if (!r) {  // outcome unknown
          orphans.push_back(k.name);
          known.erase(known.begin() + i);
          return;
        }
        status = r->status;
        if (status == 200) {
          k.rv = Json::parse(r->body)["metadata"]["resourceVersion"];
          break;
        }
        if (status != 409) break;
        auto cur = cli.Get(Path(k.name));  // the controller wrote the status meanwhile
        if (!cur) {
          orphans.push_back(k.name);
          known.erase(known.begin() + i);
          return;
        }
        if (cur->status != 200) break;
        k.rv = Json::parse(cur->body)["metadata"]["resourceVersion"];
      }
      if (status != 200) {  // unexpected for a job only this client changes
        model.Set(k.name, [](Truth& t) { t.max_count = -1000; });
        return;
      }
      k.count = count;
      model.Set(k.name, [&](Truth& t) { t.acked_count = count; });
      acks++;
    } else {
      size_t i = rng() % known.size();
      std::string name = known[i].name;
      known.erase(known.begin() + i);
      model.Set(name, [](Truth& t) { t.delete_attempted = true; });
      auto r = cli.Delete(Path(name));
      if (!r) {
        orphans.push_back(name);
        return;
      }
      if (r->status == 200) {
        model.Set(name, [](Truth& t) { t.delete_acked = true; });
        acks++;
      }
    }
  }
}

// What the node agents and the forger did, over all rounds.
struct Mix {
  std::atomic<int> reports{0};          // member reports a node wrote (200)
  std::atomic<int> reports_lost{0};     // ... that lost a race (403, 404, 422)
  std::string last_lost;                // the last such answer, for the log
  std::atomic<int> forged_refused{0};   // forged status writes refused (403)
  std::atomic<int> forged_accepted{0};  // ... accepted: must stay 0
  std::atomic<int> forged_creates{0};   // creates carrying a forged status, stored (201)
  std::mutex mu;
  std::string error;  // an answer no rule allows
  void Fail(std::string e) {
    std::lock_guard<std::mutex> l(mu);
    if (error.empty()) error = std::move(e);
  }
};

// The node agents' side of the protocol, one sweep after another until `stop`: each node (with
// its own token) reads its bindings and reports every member placed on it Running at the job's
// generation. A report may lose a race with a rebinding, a deletion or a kill (403, 404, 422, no
// answer); anything else is an error.
void AgentsLoop(int port, std::atomic<bool>& stop, Mix& mix) {
  std::vector<std::unique_ptr<httplib::Client>> nodes;
  for (int n = 0; n < kNodes; ++n) {
    nodes.push_back(std::make_unique<httplib::Client>("127.0.0.1", port));
    nodes.back()->set_connection_timeout(0, 200000);
    nodes.back()->set_read_timeout(2, 0);
    nodes.back()->set_bearer_token_auth(("node-token-n" + std::to_string(n)).c_str());
  }
  while (!stop) {
    for (int n = 0; n < kNodes && !stop; ++n) {
      const std::string node = "n" + std::to_string(n);
      auto b = nodes[n]->Get("/api/v1/nodes/" + node + "/bindings");
      if (!b) return;  // the server is gone
      if (b->status != 200) return mix.Fail("bindings of " + node + ": " + b->body);
      const Json bound = Json::parse(b->body);  // not a temporary: the loop reads into it
      for (const Json& job : bound["items"]) {
        const Json& st = job["status"];
        Json members = Json::array();
        for (const Json& m : st["placement"]) {
          if (m["node"] != node) continue;
          members.push_back({{"member", m["group"].get<std::string>() + "-" +
                                            std::to_string(m["member"].get<int>())},
                             {"generation", st["generation"]},
                             {"state", "Running"}});
        }
        if (members.empty()) continue;
        auto r =
            nodes[n]->Put(Path(job["metadata"]["name"]) + "/status",
                          Json({{"status", {{"members", members}}}}).dump(), "application/json");
        if (!r) return;
        if (r->status == 200) {
          mix.reports++;
        } else if (r->status == 403 || r->status == 404 || r->status == 422) {
          mix.reports_lost++;
          std::lock_guard<std::mutex> l(mix.mu);
          mix.last_lost = r->body.substr(0, 160);
        } else {
          return mix.Fail("report of " + node + ": " + std::to_string(r->status) + " " + r->body);
        }
      }
    }
  }
}

// A tenant forging bindings, until `stop`: creates jobs (label forged=true) whose body carries a
// bound status at kForgedGeneration on n0's GPUs, then writes that status through the
// subresource. Creates must succeed with the status ignored; the status writes must be refused.
// At the start of each round it deletes its jobs left from earlier rounds.
void ForgerLoop(int round, int port, std::atomic<bool>& stop, Model& model, Mix& mix) {
  httplib::Client cli("127.0.0.1", port);
  cli.set_connection_timeout(0, 200000);
  cli.set_read_timeout(2, 0);
  cli.set_bearer_token_auth(kUserToken);
  auto old = cli.Get(std::string(kJobs) + "?labelSelector=forged%3Dtrue");
  if (!old) return;
  const Json mine = Json::parse(old->body);
  for (const Json& item : mine["items"]) {
    const std::string name = item["metadata"]["name"];
    model.Set(name, [](Truth& t) { t.delete_attempted = true; });
    auto d = cli.Delete(Path(name));
    if (!d) return;
    if (d->status == 200) model.Set(name, [](Truth& t) { t.delete_acked = true; });
  }
  const Json forged_status = {{"phase", "Scheduled"},
                              {"generation", kForgedGeneration},
                              {"placement",
                               {{{"group", "w"},
                                 {"member", 0},
                                 {"node", "n0"},
                                 {"gpus", {0}},
                                 {"generation", kForgedGeneration}}}}};
  for (int seq = 0; !stop && seq < 8; ++seq) {
    const std::string name = "f-" + std::to_string(round) + "-" + std::to_string(seq);
    Json job = Job(name, 1);
    job["metadata"]["labels"] = {{"forged", "true"}};
    job["status"] = forged_status;
    model.Set(name, [](Truth& t) { t.max_count = 1; });
    auto r = cli.Post(kJobs, job.dump(), "application/json");
    if (!r) return;
    if (r->status != 201) return mix.Fail("forged create: " + r->body);
    model.Set(name, [](Truth& t) {
      t.create_acked = true;
      t.acked_count = 1;
    });
    mix.forged_creates++;
    auto w = cli.Put(Path(name) + "/status", Json({{"status", forged_status}}).dump(),
                     "application/json");
    if (!w) return;
    if (w->status == 403) {
      mix.forged_refused++;
    } else {
      mix.forged_accepted++;
      return mix.Fail("forged status write answered " + std::to_string(w->status) + ": " + w->body);
    }
  }
}

// Fencing facts remembered across restarts.
struct Fencing {
  std::map<std::string, int64_t> generation;               // uid -> highest generation seen
  std::map<std::pair<std::string, int64_t>, Json> placed;  // (uid, generation) -> placement
  int64_t bindings_seen = 0;
  int64_t max_generation = 0;
};

// Checks the jobs `list` (the restarted server's) against the clients' model
// and the binding invariants. Returns name -> spec count.
std::map<std::string, int> CheckState(const Json& list, Model& model, Fencing& fencing, int round) {
  static const std::set<std::string> kPhases = {"Pending",   "Admitted",  "Queued",    "Scheduled",
                                                "Running",   "Suspended", "Succeeded", "Failed",
                                                "Preempted", "NodeLost"};
  const std::string at = std::string("after restart ").append(std::to_string(round)).append(": ");
  std::map<std::string, int> state;
  std::map<std::pair<std::string, int>, int> milli;  // (node, gpu) -> milli-GPUs bound
  for (const Json& item : list["items"]) {
    const std::string name = item["metadata"]["name"];
    EXPECT_TRUE(state.emplace(name, item["spec"]["groups"][0]["count"].get<int>()).second)
        << at << name << " listed twice";
    const Json& st = item.value("status", Json::object());
    const std::string phase = st.value("phase", "");
    EXPECT_TRUE(kPhases.count(phase)) << at << name << ": illegal phase \"" << phase << "\"";
    EXPECT_LT(st.value("generation", int64_t{0}), kForgedGeneration)
        << at << name << ": a forged status was stored";
    if (!st.contains("placement") || st["placement"].empty()) continue;
    EXPECT_TRUE(phase == "Scheduled" || phase == "Running")
        << at << name << ": placement while " << phase;
    const int64_t gen = st.value("generation", int64_t{0});
    EXPECT_GT(gen, 0) << at << name << ": placement without a generation";
    for (const Json& m : st["placement"]) {
      EXPECT_EQ(m.value("generation", int64_t{-1}), gen)
          << at << name << ": a member's generation differs from the job's";
      const std::string node = m["node"];
      for (const Json& g : m["gpus"]) {
        const int gpu = g.get<int>();
        EXPECT_TRUE(node.size() > 1 && node[0] == 'n' && std::stoi(node.substr(1)) < kNodes &&
                    gpu >= 0 && gpu < kGpusPerNode)
            << at << name << ": bound to a GPU that does not exist: " << node << "/" << gpu;
        int& used = milli[{node, gpu}];
        used += m.value("gpuMilli", 1000);
        EXPECT_LE(used, 1000) << at << "GPU " << node << "/" << gpu << " bound twice (" << name
                              << ")";
      }
    }
    const std::string uid = item["metadata"]["uid"];
    int64_t& highest = fencing.generation[uid];
    EXPECT_GE(gen, highest) << at << name << ": generation went back";
    highest = std::max(highest, gen);
    fencing.max_generation = std::max(fencing.max_generation, gen);
    auto [it, fresh] = fencing.placed.emplace(std::make_pair(uid, gen), st["placement"]);
    if (fresh) {
      fencing.bindings_seen++;
    } else {
      EXPECT_EQ(it->second, st["placement"])
          << at << name << ": generation " << gen << " names two different placements";
    }
  }
  const std::map<std::string, Truth> truth = model.Snapshot();
  for (const auto& [name, t] : truth) {
    auto it = state.find(name);
    EXPECT_GE(t.max_count, 0) << name << ": an update of a known object was refused";
    if (t.delete_acked) {
      EXPECT_EQ(it, state.end()) << at << name << ": acknowledged delete came back";
      continue;
    }
    if (t.create_acked && !t.delete_attempted) {
      EXPECT_NE(it, state.end()) << at << name << ": acknowledged create is missing";
    }
    if (it != state.end()) {
      EXPECT_GE(it->second, t.acked_count) << at << name << ": acknowledged update lost";
      EXPECT_LE(it->second, t.max_count) << at << name << ": a count nobody wrote";
    }
  }
  for (const auto& [name, count] : state) {
    (void)count;
    EXPECT_TRUE(truth.count(name)) << at << name << " was never written";
  }
  return state;
}

TEST(ServerCrashTest, KilledServerKeepsEveryAcknowledgedWriteAndBinding) {
  if (TesseraBin().empty()) GTEST_SKIP() << "TESSERA_BIN is not set";
  int kills = 200;
  if (const char* k = getenv("TESSERA_CRASH_KILLS")) kills = atoi(k);
  const std::string dir = MakeTempDir("tessera_crash");
  // The scheduler runs; nodes never turn NotReady (the simulated agents report members but do
  // not heartbeat). Enough threads for a watch per kind besides the clients.
  std::ofstream(std::string(dir).append("/tokens")) << TokensFile();
  std::filesystem::permissions(std::string(dir).append("/tokens"),
                               std::filesystem::perms::owner_read |
                                   std::filesystem::perms::owner_write);  // the server insists
  const std::vector<std::string> args = {"--data-dir",
                                         std::string(dir).append("/data"),
                                         "--threads",
                                         "64",
                                         "--node-grace-seconds",
                                         "0",
                                         "--tokens-file",
                                         std::string(dir).append("/tokens")};
  Mix mix;
  Model model;
  Fencing fencing;
  std::atomic<int> port{0};
  std::atomic<int> acks{0};
  std::vector<std::unique_ptr<Watcher>> watchers;
  constexpr int kClients = 4;
  std::vector<std::vector<Known>> known(kClients);
  std::vector<std::vector<std::string>> orphans(kClients);
  std::mt19937_64 rng(42);

  std::unique_ptr<ServerProcess> server;
  for (int round = 0; round <= kills; ++round) {
    server = std::make_unique<ServerProcess>();
    int p = server->Start(args);
    ASSERT_GT(p, 0) << "round " << round << ": " << server->error();
    httplib::Client cli("127.0.0.1", p);
    cli.set_read_timeout(10, 0);
    cli.set_bearer_token_auth(kAdminToken);
    if (round == 0) {
      // A first object, so the watchers can start from an existing revision (1).
      auto r = cli.Post(kJobs, Job("sentinel", 1).dump(), "application/json");
      ASSERT_TRUE(r);
      ASSERT_EQ(r->status, 201) << r->body;
      ASSERT_EQ(Rv(Json::parse(r->body)), 1);
      model.Set("sentinel", [](Truth& t) {
        t.create_acked = true;
        t.acked_count = t.max_count = 1;
      });
      // One watcher per resource kind (across namespaces): together they see
      // every write of the store, the controller's too.
      auto res = cli.Get("/api/v1");
      ASSERT_TRUE(res);
      const Json discovery = Json::parse(res->body);
      for (const Json& k : discovery["resources"]) {
        watchers.push_back(std::make_unique<Watcher>(
            port, std::string("/api/v1/").append(k["name"].get<std::string>()), 1));
      }
      for (int n = 0; n < kNodes; ++n) {
        auto rn = cli.Post("/api/v1/nodes", Node(n).dump(), "application/json");
        ASSERT_TRUE(rn);
        ASSERT_EQ(rn->status, 201) << rn->body;
      }
    } else {
      auto r = cli.Get(kJobs);
      ASSERT_TRUE(r);
      ASSERT_EQ(r->status, 200) << r->body;
      CheckState(Json::parse(r->body), model, fencing, round);
      if (::testing::Test::HasFailure()) return;
    }
    port = p;
    if (round == kills) break;  // the last start is for checking
    std::atomic<bool> stop{false};
    const int acks_before = acks.load();
    std::vector<std::thread> clients;
    for (int c = 0; c < kClients; ++c) {
      clients.emplace_back(ClientLoop, c, round, p, std::ref(stop), std::ref(model), std::ref(acks),
                           std::ref(known[c]), std::ref(orphans[c]));
    }
    clients.emplace_back(AgentsLoop, p, std::ref(stop), std::ref(mix));
    clients.emplace_back(ForgerLoop, round, p, std::ref(stop), std::ref(model), std::ref(mix));
    // Kill only once writes are flowing (at least one acknowledged), at a
    // random instant after that: mostly within 30 ms, every fourth round
    // within 0.1-0.6 s, so that the controller also gets through its restart
    // (admitting the jobs created meanwhile) to binding, and dies mid-binding.
    for (int i = 0; i < 5000 && acks.load() == acks_before; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    const bool long_round = rng() % 4 == 0;
    std::this_thread::sleep_for(
        std::chrono::microseconds(long_round ? 100000 + rng() % 500000 : rng() % 30000));
    port = 0;
    server->Kill(SIGKILL);
    stop = true;
    for (auto& t : clients) t.join();
    for (auto& w : watchers) ASSERT_TRUE(w->error().empty()) << w->error();
    ASSERT_EQ(mix.error, "") << "round " << round;
  }

  // Final state, read from the restarted server.
  httplib::Client cli("127.0.0.1", port.load());
  cli.set_bearer_token_auth(kAdminToken);
  auto r = cli.Get(kJobs);
  ASSERT_TRUE(r);
  Json list = Json::parse(r->body);
  const int64_t final_rev = std::stoll(list["metadata"]["resourceVersion"].get<std::string>());
  std::map<std::string, int> state = CheckState(list, model, fencing, kills);
  std::map<std::string, int64_t> state_rv;
  for (const Json& item : list["items"]) state_rv[item["metadata"]["name"]] = Rv(item);

  // The watchers catch up with the final revision. Together they must have
  // seen every revision in (1, final], each (revision, object) once, and each
  // one in non-decreasing revision order (the objects of one transaction, say a
  // scheduling cycle's bindings, share its revision, as in etcd).
  std::set<int64_t> revisions;
  std::set<std::pair<int64_t, std::string>> seen;
  auto collect = [&] {
    revisions.clear();
    seen.clear();
    for (auto& w : watchers) {
      int64_t prev = 1;
      for (const Json& ev : w->events()) {
        const int64_t rev = Rv(ev["object"]);
        EXPECT_GE(rev, prev) << w->collection() << ": events out of order";
        prev = rev;
        revisions.insert(rev);
        const Json& meta = ev["object"]["metadata"];
        std::string id = w->collection() + "/" + meta.value("namespace", "") + "/" +
                         meta["name"].get<std::string>();
        EXPECT_TRUE(seen.emplace(rev, id).second) << id << " at " << rev << " seen twice";
      }
    }
  };
  // Each watcher reads on from its last revision until a watch comes back
  // empty: then it has every event of its collection up to a revision read
  // after final_rev (the server reads the history once in every watch).
  for (auto& w : watchers) w->RequestStop();
  for (auto& w : watchers) {
    w->Stop();
    w->Drain();
    ASSERT_TRUE(w->error().empty()) << w->error();
  }
  collect();
  ASSERT_GE(watchers.size(), 3u) << "the API lists too few resource kinds";
  for (int64_t rev = 2; rev <= final_rev; ++rev) {
    ASSERT_TRUE(revisions.count(rev)) << "no watcher saw revision " << rev;
  }

  // Replaying the job events up to the list's revision gives the list.
  std::map<std::string, int> replay = {{"sentinel", 1}};
  std::map<std::string, int64_t> replay_rv = {{"sentinel", 1}};
  for (auto& w : watchers) {
    if (w->collection() != "/api/v1/trainingjobs") continue;
    for (const Json& ev : w->events()) {
      const int64_t rev = Rv(ev["object"]);
      if (rev > final_rev) break;
      std::string name = ev["object"]["metadata"]["name"];
      if (ev["type"] == "DELETED") {
        ASSERT_EQ(replay.erase(name), 1u) << name << " deleted but never added";
        replay_rv.erase(name);
      } else {
        bool added = ev["type"] == "ADDED";
        ASSERT_EQ(replay.count(name) == 0, added) << name << " " << ev["type"];
        replay[name] = ev["object"]["spec"]["groups"][0]["count"].get<int>();
        replay_rv[name] = rev;
      }
    }
  }
  EXPECT_EQ(replay, state);
  EXPECT_EQ(replay_rv, state_rv);
  int acked_creates = 0;
  for (const auto& [name, t] : model.Snapshot()) acked_creates += t.create_acked;
  std::cout << "crash test: " << kills << " kills, " << acks.load() << " acknowledged writes ("
            << acked_creates << " creates), final revision " << final_rev << ", "
            << fencing.bindings_seen << " bindings checked, highest generation "
            << fencing.max_generation << "\n";
  std::cout << "crash test: node reports " << mix.reports.load() << " (" << mix.reports_lost.load()
            << " lost a race, the last: " << mix.last_lost << "), forged creates "
            << mix.forged_creates.load() << " (status ignored), forged status writes refused "
            << mix.forged_refused.load() << ", accepted " << mix.forged_accepted.load() << "\n";
  EXPECT_GT(acked_creates, kills) << "too few writes landed between kills to mean much";
  EXPECT_EQ(mix.forged_accepted.load(), 0);
  EXPECT_GT(mix.forged_refused.load(), 0);
  EXPECT_GT(mix.reports.load(), 0) << "no node report landed: the agents' path was not exercised";
  // Not vacuous: the scheduler bound jobs, and rebinding (suspend/resume)
  // moved generations on.
  EXPECT_GT(fencing.bindings_seen, kills / 4);
  if (kills >= 50) {
    EXPECT_GT(fencing.max_generation, 1);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessera::testing
