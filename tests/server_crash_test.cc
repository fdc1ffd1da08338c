// Crash test: SIGKILL the real `tessera server` at random instants while
// clients create, update and delete, then restart it on the same data dir.
//
// Checked after the last restart:
//   * every acknowledged create exists exactly once (unless an acknowledged
//     delete followed), every acknowledged delete is gone, and every object's
//     spec is the last acknowledged update or a later unacknowledged one;
//   * a watcher that follows the whole run -- reconnecting after each kill
//     with the resourceVersion of the last event it saw -- received every
//     revision exactly once, in order, and replaying its events gives exactly
//     the final list.
// TESSERA_CRASH_KILLS overrides the number of kills (default 200).
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <filesystem>
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

Json Job(const std::string& name, int count) {
  return {{"apiVersion", "tessera.dev/v1"},
          {"kind", "TrainingJob"},
          {"metadata", {{"name", name}}},
          {"spec", {{"groups", {{{"name", "w"}, {"count", count}, {"gpusPerReplica", 1}}}}}}};
}

std::string Path(const std::string& name) { return std::string(kJobs).append("/").append(name); }

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

// Follows the collection across server restarts, resuming from the last
// resourceVersion it saw.
class Watcher {
 public:
  // Starts following from `since` (which must exist on the server).
  Watcher(std::atomic<int>& port, int64_t since) : port_(port), last_(since) {
    thread_ = std::thread([this] { Run(); });
  }
  ~Watcher() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int64_t last() const { return last_.load(); }
  const std::vector<Json>& events() const { return events_; }  // after Stop()
  std::string error() const { return error_; }

 private:
  void Run() {
    while (!stop_) {
      int port = port_.load();
      if (port <= 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      httplib::Client cli("127.0.0.1", port);
      cli.set_connection_timeout(0, 200000);
      cli.set_read_timeout(2, 0);
      std::string path = std::string(kJobs).append("?watch=true&timeoutSeconds=2&resourceVersion=");
      path.append(std::to_string(last_.load()));
      std::string buf;
      int status = 0;
      cli.Get(
          path,
          [&](const httplib::Response& r) {
            status = r.status;
            return true;
          },
          [&](const char* data, size_t len) {
            buf.append(data, len);
            size_t nl;
            while ((nl = buf.find('\n')) != std::string::npos) {
              std::string line = buf.substr(0, nl);
              buf.erase(0, nl + 1);
              if (line.empty()) continue;
              Json ev = Json::parse(line, nullptr, false);
              if (ev.is_discarded() || ev["type"] == "ERROR") {
                error_ = line;
                return false;
              }
              last_ = std::stoll(ev["object"]["metadata"]["resourceVersion"].get<std::string>());
              events_.push_back(std::move(ev));
            }
            return !stop_.load();
          });
      if (status != 0 && status != 200) {
        error_ = std::string("watch status ").append(std::to_string(status));
      }
      if (!error_.empty()) return;
    }
  }

  std::atomic<int>& port_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> last_;
  std::vector<Json> events_;
  std::string error_;
  std::thread thread_;
};

// One client: creates new objects and updates/deletes objects whose state it
// knows; an object whose request got no answer is left alone afterwards.
void ClientLoop(int id, int round, int port, std::atomic<bool>& stop, Model& model,
                std::atomic<int>& acks) {
  std::mt19937_64 rng(round * 1000 + id);
  httplib::Client cli("127.0.0.1", port);
  cli.set_connection_timeout(0, 200000);
  cli.set_read_timeout(2, 0);
  struct Known {
    std::string name;
    std::string rv;
    int count;
  };
  std::vector<Known> known;
  int seq = 0;
  while (!stop) {
    int dice = static_cast<int>(rng() % 10);
    if (known.empty() || dice < 5) {
      std::string name("j-");
      name.append(std::to_string(round)).append("-").append(std::to_string(id));
      name.append("-").append(std::to_string(seq++));
      model.Set(name, [](Truth& t) { t.max_count = 1; });
      auto r = cli.Post(kJobs, Job(name, 1).dump(), "application/json");
      if (!r) return;  // the server is gone: outcome unknown
      if (r->status == 201) {
        model.Set(name, [](Truth& t) {
          t.create_acked = true;
          t.acked_count = 1;
        });
        known.push_back({name, Json::parse(r->body)["metadata"]["resourceVersion"], 1});
        acks++;
      }
    } else if (dice < 8) {
      size_t i = rng() % known.size();
      Known& k = known[i];
      Json obj = Job(k.name, k.count + 1);
      obj["metadata"]["resourceVersion"] = k.rv;
      model.Set(k.name, [&](Truth& t) { t.max_count = k.count + 1; });
      auto r = cli.Put(Path(k.name), obj.dump(), "application/json");
      if (!r) return;
      if (r->status != 200) {  // unexpected: 409 cannot happen for a known object
        model.Set(k.name, [](Truth& t) { t.max_count = -1000; });
        return;
      }
      k.count++;
      k.rv = Json::parse(r->body)["metadata"]["resourceVersion"];
      model.Set(k.name, [&](Truth& t) { t.acked_count = k.count; });
      acks++;
    } else {
      size_t i = rng() % known.size();
      std::string name = known[i].name;
      known.erase(known.begin() + i);
      model.Set(name, [](Truth& t) { t.delete_attempted = true; });
      auto r = cli.Delete(Path(name));
      if (!r) return;
      if (r->status == 200) {
        model.Set(name, [](Truth& t) { t.delete_acked = true; });
        acks++;
      }
    }
  }
}

TEST(ServerCrashTest, KilledServerKeepsEveryAcknowledgedWrite) {
  if (TesseraBin().empty()) GTEST_SKIP() << "TESSERA_BIN is not set";
  int kills = 200;
  if (const char* k = getenv("TESSERA_CRASH_KILLS")) kills = atoi(k);
  const std::string dir = MakeTempDir("tessera_crash");
  // The clients must be the only writers of these objects: their model of
  // each object's count assumes no concurrent status writes (the controller's
  // crash safety is covered by controller_test's restart invariants).
  const std::vector<std::string> args = {"--data-dir", std::string(dir).append("/data"),
                                         "--threads", "16", "--no-scheduler"};
  Model model;
  std::atomic<int> port{0};
  std::atomic<int> acks{0};
  std::unique_ptr<Watcher> watcher;
  std::mt19937_64 rng(42);
  constexpr int kClients = 4;

  std::unique_ptr<ServerProcess> server;
  for (int round = 0; round <= kills; ++round) {
    server = std::make_unique<ServerProcess>();
    int p = server->Start(args);
    ASSERT_GT(p, 0) << "round " << round << ": " << server->error();
    port = p;
    if (round == 0) {
      // A first object, so the watcher can start from an existing revision (1).
      httplib::Client cli("127.0.0.1", p);
      auto r = cli.Post(kJobs, Job("sentinel", 1).dump(), "application/json");
      ASSERT_TRUE(r);
      ASSERT_EQ(r->status, 201) << r->body;
      model.Set("sentinel", [](Truth& t) {
        t.create_acked = true;
        t.acked_count = t.max_count = 1;
      });
      watcher = std::make_unique<Watcher>(port, 1);
    }
    if (round == kills) break;  // the last start is for checking
    std::atomic<bool> stop{false};
    const int acks_before = acks.load();
    std::vector<std::thread> clients;
    for (int c = 0; c < kClients; ++c) {
      clients.emplace_back(ClientLoop, c, round, p, std::ref(stop), std::ref(model),
                           std::ref(acks));
    }
    // Kill only once writes are flowing (at least one acknowledged), at a
    // random instant after that.
    for (int i = 0; i < 5000 && acks.load() == acks_before; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 30000));
    port = 0;
    server->Kill(SIGKILL);
    stop = true;
    for (auto& t : clients) t.join();
    ASSERT_TRUE(watcher->error().empty()) << watcher->error();
  }

  // Final state, read from the restarted server.
  httplib::Client cli("127.0.0.1", port.load());
  auto r = cli.Get(kJobs);
  ASSERT_TRUE(r);
  Json list = Json::parse(r->body);
  const int64_t final_rev = std::stoll(list["metadata"]["resourceVersion"].get<std::string>());
  std::map<std::string, int> state;
  for (const Json& item : list["items"]) {
    std::string name = item["metadata"]["name"];
    ASSERT_TRUE(state.emplace(name, item["spec"]["groups"][0]["count"].get<int>()).second)
        << name << " listed twice";
  }
  int acked_creates = 0;
  for (const auto& [name, t] : model.Snapshot()) {
    auto it = state.find(name);
    ASSERT_GE(t.max_count, 0) << name << ": an update of a known object was refused";
    if (t.delete_acked) {
      EXPECT_EQ(it, state.end()) << name << ": acknowledged delete came back";
      continue;
    }
    if (t.create_acked) {
      ++acked_creates;
      if (!t.delete_attempted) {
        ASSERT_NE(it, state.end()) << name << ": acknowledged create is missing";
      }
    }
    if (it != state.end()) {
      EXPECT_GE(it->second, t.acked_count) << name << ": acknowledged update lost";
      EXPECT_LE(it->second, t.max_count) << name << ": a count nobody wrote";
    }
  }
  for (const auto& [name, count] : state) {
    (void)count;
    EXPECT_TRUE(model.Snapshot().count(name)) << name << " was never written";
  }

  // The watcher catches up with the final revision, then must have seen every
  // revision once, in order, and its replay must equal the list.
  for (int i = 0; i < 1000 && watcher->last() < final_rev; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  watcher->Stop();
  ASSERT_TRUE(watcher->error().empty()) << watcher->error();
  ASSERT_EQ(watcher->last(), final_rev);
  std::map<std::string, int> replay = {{"sentinel", 1}};
  int64_t expect_rev = 1;
  for (const Json& ev : watcher->events()) {
    int64_t rev = std::stoll(ev["object"]["metadata"]["resourceVersion"].get<std::string>());
    ASSERT_EQ(rev, ++expect_rev) << "gap or repeat in the watch";
    std::string name = ev["object"]["metadata"]["name"];
    if (ev["type"] == "DELETED") {
      ASSERT_EQ(replay.erase(name), 1u) << name << " deleted but never added";
    } else {
      bool added = ev["type"] == "ADDED";
      ASSERT_EQ(replay.count(name) == 0, added) << name << " " << ev["type"];
      replay[name] = ev["object"]["spec"]["groups"][0]["count"].get<int>();
    }
  }
  EXPECT_EQ(replay, state);
  std::cout << "crash test: " << kills << " kills, " << acks.load() << " acknowledged writes ("
            << acked_creates << " creates), final revision " << final_rev << "\n";
  EXPECT_GT(acked_creates, kills) << "too few writes landed between kills to mean much";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessera::testing
