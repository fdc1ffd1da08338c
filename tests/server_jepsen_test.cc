// Issue 22's checks, in the spirit of Jepsen: three `tessera server` replicas on a three-member
// etcd cluster (loopback; fsync on), four real `tessera agent` processes with fake 8 x H100
// nodes (three for the workload, one for the failover probes), submitter threads recording every
// acknowledged create, a watcher following the jobs across replicas, and faults:
//   - SIGKILL of the leader at random moments, TESSERA_HA_KILLS times (default 20; 100 for the
//     report in docs/control-plane.md), the RNG seeded by TESSERA_HA_SEED (default: random; the
//     seed is printed);
//   - SIGSTOP of the leader (replaced while it sleeps; woken, it steps down, its writes fenced);
//   - the leader cut off etcd: replica r2 runs in a network namespace (ip netns, a veth pair) and,
//     made leader, has its link taken down, then back up (skipped, as the whole test is reported,
//     when not root, without network namespaces or with TESSERA_HA_NETNS=0: every other fault
//     still runs);
//   - SIGKILL of one etcd member, restarted while the work goes on.
// After every fault and at the end, ha_history.h's checks: every acknowledged job listed, no GPU
// bound to two live jobs, no member started twice (what the agents ran), no job recreated, no
// resourceVersion going back; exactly one replica leads. At the end every acknowledged job has
// succeeded. Failover (the leader lost -> the new leader's first binding: a probe job submitted
// right after the fault, bound on the probe node) p50/p99 is printed, not asserted (target
// p99 <= 5 s), and so are submissions/s through the etcd replicas next to one SQLite server,
// single creates and 50-job batches. Labelled kube: skipped without the bed's etcd.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ha_cluster.h"
#include "ha_history.h"
#include "store/etcd/testing/etcd_process.h"

namespace tessera::testing {
namespace {

using Json = nlohmann::json;

constexpr char kJobs[] = "/api/v1/namespaces/default/trainingjobs";

int EnvInt(const char* name, int fallback) {
  const char* v = getenv(name);
  return v != nullptr && *v != '\0' ? atoi(v) : fallback;
}

// A job of `count` members of `gpus` GPUs on nodes labelled role=`role`, each running `command`.
Json Job(const std::string& name, int count, int gpus, const std::string& role,
         const std::vector<std::string>& command) {
  return {{"apiVersion", "tessera.dev/v1"},
          {"kind", "TrainingJob"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"groups", {{{"name", "w"}, {"count", count}, {"gpusPerReplica", gpus}}}},
            {"nodeSelector", {{"role", role}}},
            {"command", command}}}};
}

// Bound: a placement, or a phase past it.
bool IsBound(const Json& job) {
  const Json& st = Obj(job, "status");
  const std::string phase = Str(st, "phase");
  return (st.contains("placement") && !st["placement"].empty()) || phase == "Running" ||
         phase == "Succeeded";
}

// Waits on a watch of replica `i` (from `rv`) until job `name` is bound; when it was seen, or
// nullopt after `bound_s`.
std::optional<Clock::time_point> WaitBound(const Replicas& rs, int i, const std::string& name,
                                           const std::string& rv, int bound_s) {
  httplib::Client cli = rs.Client(i, bound_s + 2);
  std::optional<Clock::time_point> seen;
  std::string buf;
  cli.Get(absl::StrCat(kJobs, "?watch=true&timeoutSeconds=", bound_s, "&resourceVersion=", rv,
                       "&fieldSelector=metadata.name%3D", name),
          [&](const char* data, size_t n) {
            buf.append(data, n);
            for (size_t nl; (nl = buf.find('\n')) != std::string::npos; buf.erase(0, nl + 1)) {
              Json ev = Json::parse(buf.substr(0, nl), nullptr, false);
              if (Str(Obj(Obj(ev, "object"), "metadata"), "name") == name &&
                  IsBound(Obj(ev, "object"))) {
                seen = Clock::now();
              }
            }
            return !seen.has_value();
          });
  return seen;
}

// Submissions/s through `targets` (clients spread over them) for `seconds`: single creates
// (batch 1) or POST /api/v1/batch of `batch` jobs. The jobs are suspended: nothing schedules.
double Throughput(const std::vector<std::pair<std::string, int>>& targets, int clients,
                  double seconds, int batch, const std::string& tag) {
  std::atomic<int64_t> jobs{0};
  const auto start = Clock::now();
  const auto end =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      const auto& [host, port] = targets[c % targets.size()];
      httplib::Client cli(host, port);
      cli.set_keep_alive(true);
      cli.set_tcp_nodelay(true);
      cli.set_bearer_token_auth(Replicas::kAdminToken);
      cli.set_read_timeout(20, 0);
      for (int seq = 0; Clock::now() < end; ++seq) {
        Json items = Json::array();
        for (int k = 0; k < batch; ++k) {
          Json j = Job(absl::StrCat(tag, "-", c, "-", seq, "-", k), 1, 1, "none", {"true"});
          j["metadata"]["namespace"] = "bench";
          j["spec"]["suspend"] = true;
          items.push_back(std::move(j));
        }
        auto r = batch == 1
                     ? cli.Post("/api/v1/namespaces/bench/trainingjobs", items[0].dump(),
                                "application/json")
                     : cli.Post("/api/v1/batch", Json{{"items", items}}.dump(), "application/json");
        if (r && r->status == 201) jobs += batch;
      }
    });
  }
  for (auto& t : threads) t.join();
  return static_cast<double>(jobs) / Seconds(Clock::now() - start);
}

// The workload: submitter threads and a watcher, until Stop (or destruction).
class Load {
 public:
  Load(const Replicas& rs, const Agents& agents, History& h, uint64_t seed)
      : rs_(rs), agents_(agents), h_(h), seed_(seed) {}
  ~Load() { Stop(); }
  void Start(int submitters) {
    for (int t = 0; t < submitters; ++t) threads_.emplace_back([this, t] { Submit(t); });
    threads_.emplace_back([this] { Watch(); });
  }
  void Stop() {
    stop_ = true;
    for (auto& t : threads_) t.join();
    threads_.clear();
  }
  int64_t errors() const { return errors_; }
  int64_t paused() const { return paused_; }
  // At most this many unfinished workload jobs (as the watch sees them): the submitters wait
  // while the cluster catches up (a closed loop; the failovers take away much of its capacity).
  static constexpr int kMaxBacklog = 40;

 private:
  int Backlog() {
    std::lock_guard<std::mutex> l(mu_);
    return static_cast<int>(unfinished_.size());
  }
  // Creates jobs j<t>-<seq> (a quarter of them gangs of 2 x 4 GPUs), each member sleeping
  // 0.5-2.5 s, on a random replica; a create that gets no answer is retried on the next replica
  // (409 then means the lost try landed). Every third job, reads a random acknowledged one; every
  // other job, updates one of its own recent jobs (Touch).
  void Submit(int t) {
    std::mt19937_64 rng(seed_ * 31 + t);
    std::vector<std::string> own;
    std::map<std::string, int> touches;
    for (int seq = 0; !stop_; ++seq) {
      if (Backlog() >= kMaxBacklog) {
        ++paused_;
        do {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));  // bounded by Stop
        } while (!stop_ && Backlog() >= kMaxBacklog);
      }
      const std::string name = absl::StrCat("j", t, "-", seq);
      const bool gang = rng() % 4 == 0;
      const std::string body = Job(name, gang ? 2 : 1, gang ? 4 : 1, "work",
                                   agents_.Command(0.5 + static_cast<double>(rng() % 21) / 10))
                                   .dump();
      const int first = static_cast<int>(rng() % Replicas::kN);
      bool answered = false;
      for (int attempt = 0; attempt < 100 && !answered; ++attempt) {
        auto r =
            rs_.Client((first + attempt) % Replicas::kN, 3).Post(kJobs, body, "application/json");
        if (r && r->status == 201) {
          Json o = Json::parse(r->body, nullptr, false);
          h_.Acked(name, Str(Obj(o, "metadata"), "uid"), Rv(o));
          own.push_back(name);
          answered = true;
        } else if (r && r->status == 409) {
          h_.Unacknowledged(name, true);
          answered = true;
        } else {
          ++errors_;  // no answer, or the replica could not reach etcd (503)
          std::this_thread::sleep_for(std::chrono::milliseconds(20 * std::min(attempt, 10)));
        }
      }
      if (!answered) h_.Unacknowledged(name, false);
      if (seq % 3 == 2) {
        const std::string read = h_.AnyAcked(rng());
        const int i = static_cast<int>(rng() % Replicas::kN);
        const int64_t floor = h_.ReadFloor(read);
        auto r = rs_.Client(i, 3).Get(absl::StrCat(kJobs, "/", read));
        if (r && r->status == 200) {
          Json o = Json::parse(r->body, nullptr, false);
          h_.ReadDone(read, floor, Rv(o), absl::StrCat("r", i));
        }
      }
      if (seq % 2 == 1 && !own.empty()) {
        const std::string& job = own[own.size() - 1 - rng() % std::min<size_t>(own.size(), 20)];
        Touch(job, ++touches[job], static_cast<int>(rng() % Replicas::kN));
      }
      // The pace of a submitter (~2.5 jobs/s), not a wait for a condition.
      std::this_thread::sleep_for(std::chrono::milliseconds(250 + rng() % 300));
    }
  }
  // Sets label `touch` of `job` to `value` (its previous touches all ended): GET, then PUT with
  // the resourceVersion read (409: another writer came between; read again). A PUT without an
  // answer may have landed: the next GET tells (the label already says `value`).
  void Touch(const std::string& job, int value, int first) {
    h_.TouchTried(job, value);
    for (int attempt = 0; attempt < 50; ++attempt) {
      httplib::Client cli = rs_.Client((first + attempt) % Replicas::kN, 3);
      auto g = cli.Get(absl::StrCat(kJobs, "/", job));
      if (!g || g->status != 200) {
        ++errors_;
        continue;
      }
      Json o = Json::parse(g->body, nullptr, false);
      if (Str(Obj(Obj(o, "metadata"), "labels"), "touch") == std::to_string(value)) return;
      o["metadata"]["labels"]["touch"] = std::to_string(value);
      auto p = cli.Put(absl::StrCat(kJobs, "/", job), o.dump(), "application/json");
      if (p && p->status == 200) {
        h_.TouchAcked(job, value);
        return;
      }
      if (!p || p->status != 409) ++errors_;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a retry's pause
    }
  }
  // Follows the jobs, moving to the next replica (from the last resourceVersion) whenever a
  // stream ends; re-lists on 410.
  void Watch() {
    std::string rv = "0";
    for (int i = 0; !stop_; i = (i + 1) % Replicas::kN) {
      httplib::Client cli = rs_.Client(i, 5);
      std::string buf;
      bool expired = false;
      auto r = cli.Get(
          absl::StrCat(kJobs, "?watch=true&allowWatchBookmarks=true&timeoutSeconds=20",
                       "&resourceVersion=", rv),
          [&](const char* data, size_t n) {
            buf.append(data, n);
            for (size_t nl; (nl = buf.find('\n')) != std::string::npos; buf.erase(0, nl + 1)) {
              Json ev = Json::parse(buf.substr(0, nl), nullptr, false);
              if (!ev.is_object()) continue;
              const std::string type = ev.value("type", "");
              const Json& meta = Obj(Obj(ev, "object"), "metadata");
              if (type == "ERROR") {
                expired = Obj(ev, "object").value("code", 0) == 410;
                continue;
              }
              const std::string orv = meta.value("resourceVersion", "");
              if (orv.empty()) continue;
              if (type != "BOOKMARK") {
                const std::string name = meta.value("name", "");
                h_.Watched(0, name, std::stoll(orv));
                const std::string phase = Str(Obj(Obj(ev, "object"), "status"), "phase");
                std::lock_guard<std::mutex> l(mu_);
                if (name.empty() || name[0] != 'j' || phase == "Succeeded" || phase == "Failed" ||
                    type == "DELETED") {
                  unfinished_.erase(name);
                } else {
                  unfinished_.insert(name);
                }
              }
              if (std::stoll(orv) > std::stoll(rv)) rv = orv;
            }
            return !stop_.load();
          });
      if (expired || (r && r->status == 410)) {
        h_.Relisted();
        auto l = rs_.Client(i, 10).Get(kJobs);
        if (l && l->status == 200) {
          const int64_t lrv = Rv(Json::parse(l->body, nullptr, false));
          if (lrv > 0) rv = std::to_string(lrv);
        }
      }
    }
  }

  const Replicas& rs_;
  const Agents& agents_;
  History& h_;
  const uint64_t seed_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> errors_{0}, paused_{0};
  std::mutex mu_;
  std::set<std::string> unfinished_;  // workload jobs the watch saw, not yet ended
  std::vector<std::thread> threads_;
};

class ServerJepsenTest : public ::testing::Test {
 protected:
  // The fault loop's parts, in the test's order of use.
  void SetUp() override {
    if (TesseraBin().empty()) GTEST_SKIP() << "TESSERA_BIN is not set";
    std::string why;
    bin_ = EtcdProcess::FindBin(TESSERA_SOURCE_DIR, &why);
    if (bin_.empty()) GTEST_SKIP() << why;
    dir_ = MakeTempDir("tessera_jepsen");
    ASSERT_FALSE(dir_.empty());
  }
  // The logs stay after a failure, or with TESSERA_HA_KEEP=1.
  void TearDown() override {
    if (!HasFailure() && !dir_.empty() && EnvInt("TESSERA_HA_KEEP", 0) == 0) {
      std::filesystem::remove_all(dir_);
    }
  }

  // Submits a probe job (bound only on the probe node, which it never fills) to a replica in
  // `via`, then waits on a watch until it is bound: seconds from `t0`, or -1.
  double Probe(const std::vector<int>& via, Clock::time_point t0, const std::string& at) {
    const std::string name = absl::StrCat("probe-", probes_++);
    const std::string body = Job(name, 1, 1, "probe", agents_->Command(0.2)).dump();
    for (int attempt = 0; attempt < 200; ++attempt) {
      const int i = via[attempt % via.size()];
      auto r = rs_->Client(i, 3).Post(kJobs, body, "application/json");
      if (r && r->status == 201) {
        Json o = Json::parse(r->body);
        h_.Acked(name, Str(Obj(o, "metadata"), "uid"), Rv(o));
        auto bound = WaitBound(*rs_, i, name, std::to_string(Rv(o)), 30);
        if (!bound) ADD_FAILURE() << at << ": probe " << name << " not bound within 30 s";
        return bound ? Seconds(*bound - t0) : -1;
      }
      if (r && r->status == 409) break;  // a lost answer landed: give up on this probe
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // replicas settling
    }
    ADD_FAILURE() << at << ": no replica took probe " << name;
    return -1;
  }

  // The history checks, through a random answering replica (each of them when `all`).
  void Check(const std::string& at, bool all = false) {
    std::vector<std::string> problems;
    int checked = 0;
    for (int k = 0; k < Replicas::kN; ++k) {
      const int i = (static_cast<int>(rng_() % Replicas::kN) + k) % Replicas::kN;
      if (!rs_->alive(i)) continue;
      History::Before before = h_.Snapshot();
      auto r = rs_->Client(i, 30).Get(kJobs);
      if (!r || r->status != 200) continue;
      h_.CheckList(Json::parse(r->body), before, absl::StrCat(at, " (via r", i, ")"), &problems);
      ++checked;
      if (!all) break;
    }
    EXPECT_GT(checked, 0) << at << ": no replica listed the jobs";
    h_.CheckRuns(agents_->runs_log(), at, &problems);
    EXPECT_EQ(rs_->Leaders(), 1) << at << ": not exactly one leader";
    EXPECT_EQ(h_.violations(), 0) << at << ": " << h_.first_violation();
    for (const std::string& p : problems) ADD_FAILURE() << p;
  }

  // Makes replica `want` the leader: pauses the other standby, SIGTERMs the leader (its lease is
  // revoked), waits until `want` leads, resumes the standby and restarts the old leader.
  void MakeLeader(int want) {
    if (leader_ == want) return;
    const int other = 3 - want - leader_;
    ASSERT_EQ(kill(rs_->proc(other).pid(), SIGSTOP), 0);
    rs_->proc(leader_).Kill(SIGTERM);
    const int got = rs_->WaitOneLeader(absl::Seconds(15), other);
    kill(rs_->proc(other).pid(), SIGCONT);
    ASSERT_EQ(got, want) << "r" << want << " did not take over";
    ASSERT_EQ(rs_->Start(leader_), "");
    leader_ = want;
  }

  std::string bin_, dir_;
  std::mt19937_64 rng_;
  History h_;
  Replicas* rs_ = nullptr;
  Agents* agents_ = nullptr;
  int leader_ = -1, probes_ = 0;
};

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

TEST_F(ServerJepsenTest, KillsPausesPartitionsAndAnEtcdMemberLoseAndDoubleNothing) {
  const auto test_start = Clock::now();
  const uint64_t seed = getenv("TESSERA_HA_SEED") != nullptr
                            ? std::strtoull(getenv("TESSERA_HA_SEED"), nullptr, 10)
                            : std::random_device()();
  const int kills = std::max(4, EnvInt("TESSERA_HA_KILLS", 20));
  rng_.seed(seed);
  std::printf("jepsen: seed %llu (TESSERA_HA_SEED), %d leader kills (TESSERA_HA_KILLS)\n",
              static_cast<unsigned long long>(seed), kills);

  Netns netns;
  const std::string no_netns = EnvInt("TESSERA_HA_NETNS", 1) == 0
                                   ? "TESSERA_HA_NETNS=0 leaves the network alone"
                                   : netns.Create();
  const bool partition = no_netns.empty();
  // Its ports were free a moment before: another process may take one first; then again.
  std::unique_ptr<EtcdCluster> cluster;
  std::string etcd_error;
  for (int attempt = 0; attempt < 3 && (attempt == 0 || !etcd_error.empty()); ++attempt) {
    cluster = std::make_unique<EtcdCluster>();
    const std::string d = absl::StrCat(dir_, "/etcd", attempt);
    std::filesystem::create_directories(d);
    etcd_error = cluster->Start(bin_, d, 3, partition ? netns.host_ip() : "", true);
  }
  ASSERT_EQ(etcd_error, "");
  EtcdCluster& etcd = *cluster;
  std::vector<std::string> urls;
  for (int i = 0; i < Replicas::kN; ++i) {
    std::vector<std::string> eps;
    for (int m = 0; m < 3; ++m) {
      eps.push_back(absl::StrCat(i == 2 && partition ? netns.host_ip() : "127.0.0.1", ":",
                                 etcd.member(m).client_port()));
    }
    urls.push_back("etcd://" + absl::StrJoin(eps, ",") + "/jepsen");
  }
  const std::vector<std::string> nodes = {"work-0", "work-1", "work-2", "probe-0"};
  {
    std::ofstream tokens(dir_ + "/tokens");
    tokens << Replicas::kAdminToken << " * admin\n";
    for (const std::string& n : nodes) tokens << "tok-" << n << " - node:" << n << "\n";
  }
  Replicas rs(urls, dir_, partition ? &netns : nullptr, dir_ + "/tokens");
  rs_ = &rs;
  for (int i = 0; i < Replicas::kN; ++i) ASSERT_EQ(rs.Start(i), "") << i;
  leader_ = rs.WaitOneLeader(absl::Seconds(20));
  ASSERT_GE(leader_, 0) << "not exactly one leader";
  Agents agents(dir_);
  agents_ = &agents;
  for (const std::string& n : nodes) {
    ASSERT_EQ(agents.Start(n, n.substr(0, n.find('-')), rs.urls(), "tok-" + n, TESSERA_SOURCE_DIR),
              "");
  }
  ASSERT_GE(Probe({0, 1, 2}, Clock::now(), "start"), 0) << "the first leader binds nothing";

  Load load(rs, agents, h_, seed);
  load.Start(3);
  std::map<std::string, int> faults;
  std::vector<double> kill_failover;
  double stop_failover = -1, cut_failover = -1, member_down_probe = -1;
  const auto all = std::vector<int>{0, 1, 2};
  auto others = [](int x) {
    std::vector<int> v;
    for (int i = 0; i < Replicas::kN; ++i) {
      if (i != x) v.push_back(i);
    }
    return v;
  };
  for (int round = 0; round < kills; ++round) {
    if (round == kills / 4) {  // SIGSTOP the leader; SIGCONT after a probe was bound
      const int paused = leader_;
      const std::string at = "after SIGSTOP of r" + std::to_string(paused);
      const auto t0 = Clock::now();
      ASSERT_EQ(kill(rs.proc(paused).pid(), SIGSTOP), 0);
      stop_failover = Probe(others(paused), t0, at);
      ASSERT_EQ(kill(rs.proc(paused).pid(), SIGCONT), 0);
      const auto woke = Clock::now();
      while (rs.Leader(paused) != 0 && Clock::now() - woke < std::chrono::seconds(10)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // bounded, as WaitOneLeader
      }
      EXPECT_EQ(rs.Leader(paused), 0) << at << ": the woken leader still leads";
      leader_ = rs.WaitOneLeader(absl::Seconds(10));
      ASSERT_GE(leader_, 0) << at << ": not exactly one leader";
      ++faults["SIGSTOP of the leader"];
      Check(at);
    }
    if (round == kills / 2 && partition) {  // cut the leader (r2, in the namespace) off etcd
      MakeLeader(2);
      const std::string at = "after cutting r2 off";
      const auto t0 = Clock::now();
      ASSERT_EQ(netns.Cut(), "");
      cut_failover = Probe({0, 1}, t0, at);
      leader_ = rs.WaitOneLeader(absl::Seconds(10), 2);
      EXPECT_GE(leader_, 0) << at << ": no leader among r0, r1";
      // r2, asked from inside its namespace, has stepped down on its own.
      int r2_leads = -1;
      const auto cut = Clock::now();
      do {
        netns.Run([&] { r2_leads = rs.Leader(2); });
        if (r2_leads != 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));  // bounded
      } while (r2_leads != 0 && Clock::now() - cut < std::chrono::seconds(10));
      EXPECT_EQ(r2_leads, 0) << at << ": the cut-off leader still leads (or does not answer)";
      // The work goes on a moment while r2 is away (a fault's length, not a wait).
      std::this_thread::sleep_for(std::chrono::milliseconds(1000 + rng_() % 2000));
      ASSERT_EQ(netns.Heal(), "");
      const auto healed = Clock::now();
      while (rs.Leader(2) != 0 && Clock::now() - healed < std::chrono::seconds(15)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // bounded
      }
      EXPECT_EQ(rs.Leader(2), 0) << at << ": r2, back, leads or does not answer";
      leader_ = rs.WaitOneLeader(absl::Seconds(10));
      ASSERT_GE(leader_, 0) << at << ": not exactly one leader after healing";
      ++faults["leader cut off etcd (netns)"];
      Check(at + " and healing");
    }
    if (round == 3 * kills / 4) {  // SIGKILL an etcd member; restart it after a while
      const int m = static_cast<int>(rng_() % 3);
      const std::string at = "after SIGKILL of etcd member m" + std::to_string(m);
      etcd.member(m).Kill();
      member_down_probe = Probe(all, Clock::now(), at);
      Check(at + " (down)");
      std::this_thread::sleep_for(std::chrono::milliseconds(1000 + rng_() % 2000));  // as above
      ASSERT_EQ(etcd.member(m).Restart(), "");
      ASSERT_EQ(etcd.member(m).WaitHealthy(absl::Seconds(30)), "") << at;
      ++faults["SIGKILL of an etcd member (restarted)"];
      Check(at + " and its restart");
    }
    // The kill itself, at a random moment of the ongoing work.
    std::this_thread::sleep_for(std::chrono::milliseconds(rng_() % 1500));
    const int victim = leader_;
    const std::string at = absl::StrCat("after kill ", round, " (r", victim, ")");
    const auto t0 = Clock::now();
    rs.proc(victim).Kill(SIGKILL);
    const double f = Probe(others(victim), t0, at);
    ASSERT_GE(f, 0) << at;
    kill_failover.push_back(f);
    leader_ = rs.WaitOneLeader(absl::Seconds(10), victim);
    ASSERT_GE(leader_, 0) << at << ": not exactly one leader";
    ASSERT_EQ(rs.Start(victim), "") << at;
    ++faults["SIGKILL of the leader"];
    Check(at);
  }

  load.Stop();
  // Every acknowledged job runs to its end (the workload's members exit 0).
  std::set<std::string> acked = h_.acked_names(), pending;
  const auto drain = Clock::now();
  do {
    pending = acked;
    auto r = rs.Client(leader_, 30).Get(kJobs);
    if (r && r->status == 200) {
      const Json list = Json::parse(r->body);
      for (const Json& j : list["items"]) {
        if (Str(Obj(j, "status"), "phase") == "Succeeded") {
          pending.erase(Str(Obj(j, "metadata"), "name"));
        }
      }
    }
    if (!pending.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(500));  // bounded
  } while (!pending.empty() && Clock::now() - drain < std::chrono::seconds(180));
  EXPECT_TRUE(pending.empty()) << pending.size() << " acknowledged jobs did not succeed, e.g. "
                               << *pending.begin();
  Check("at the end", true);

  // Submissions/s, after the faults (the controller announces every suspended job, which would
  // slow the failovers): the etcd replicas (clients spread over them), then one SQLite server.
  std::vector<std::pair<std::string, int>> targets;
  for (int i = 0; i < Replicas::kN; ++i) {
    targets.emplace_back(rs.url(i).substr(7, rs.url(i).rfind(':') - 7),
                         std::stoi(rs.url(i).substr(rs.url(i).rfind(':') + 1)));
  }
  const double etcd_single = Throughput(targets, 8, 3, 1, "es");
  const double etcd_batch = Throughput(targets, 8, 3, 50, "eb");
  double sqlite_single = -1, sqlite_batch = -1;
  {
    ServerProcess sqlite;
    sqlite.set_stderr_path(dir_ + "/sqlite.log");
    const int port =
        sqlite.Start({"--data-dir", dir_ + "/sqlite", "--tokens-file", dir_ + "/tokens"});
    ASSERT_GT(port, 0) << sqlite.error();
    sqlite_single = Throughput({{"127.0.0.1", port}}, 8, 3, 1, "ss");
    sqlite_batch = Throughput({{"127.0.0.1", port}}, 8, 3, 50, "sb");
    sqlite.Kill(SIGTERM);
  }

  std::string fault_list;
  int total = 0;
  for (const auto& [kind, n] : faults) {
    absl::StrAppend(&fault_list, fault_list.empty() ? "" : ", ", n, " x ", kind);
    total += n;
  }
  char cut[64] = "not run";
  if (partition)
    std::snprintf(cut, sizeof cut, "%.2f s (it stepped down while cut off)", cut_failover);
  std::printf(
      "jepsen report (seed %llu): 3 replicas (lease TTL 2 s), 3 etcd members (fsync), 4 agents\n"
      "  faults: %d (%s)%s\n"
      "  %s\n"
      "  client errors retried: %lld; submitters paused %lld times at %d unfinished jobs\n"
      "  failover, leader SIGKILL -> new leader's first binding: p50 %.2f s, p99 %.2f s, max "
      "%.2f s over %zu (target p99 <= 5 s)\n"
      "  SIGSTOPped leader -> binding %.2f s; leader cut off etcd -> binding %s; an etcd member "
      "down -> binding %.2f s; writes of deposed leaders refused by the fence: %d\n"
      "  submissions/s, 8 clients: etcd (3 replicas) %.0f single, %.0f in batches of 50; "
      "SQLite (one server) %.0f single, %.0f in batches of 50\n"
      "  test time %.0f s; logs in %s\n",
      static_cast<unsigned long long>(seed), total, fault_list.c_str(),
      partition ? "" : (", no partition: " + no_netns).c_str(), h_.Summary().c_str(),
      static_cast<long long>(load.errors()), static_cast<long long>(load.paused()),
      Load::kMaxBacklog, Quantile(kill_failover, 0.5), Quantile(kill_failover, 0.99),
      Quantile(kill_failover, 1.0), kill_failover.size(), stop_failover, cut, member_down_probe,
      rs.FencedWrites(), etcd_single, etcd_batch, sqlite_single, sqlite_batch,
      Seconds(Clock::now() - test_start), dir_.c_str());
  EXPECT_EQ(h_.lost(), 0u);
  EXPECT_EQ(h_.doubled(), 0);
  if (!partition) GTEST_SKIP() << "every fault ran but the partition: " << no_netns;
}

}  // namespace
}  // namespace tessera::testing
