// End to end: a real `tessera server` (with its scheduling controller) and three real
// `tessera agent` processes with fake 8 x H100 GPUs, on loopback. Checks that a gang runs on the
// GPUs the scheduler picked, that an XID 79 moves it to healthy GPUs where it resumes from its
// checkpoint, that a SIGKILLed agent's members keep running and are re-adopted, and that a
// partitioned (paused) agent's members are fenced when it returns. Prints the agent's CPU and RSS
// and the XID-to-server and XID-to-rebinding latencies.
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent_process.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server_process.h"

namespace tessera::testing {
namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;

// Gone or a zombie.
bool ProcessGone(pid_t pid) {
  if (kill(pid, 0) != 0) return true;
  std::string s = Slurp(absl::StrCat("/proc/", pid, "/stat"));
  size_t rp = s.rfind(')');
  return rp == std::string::npos || (rp + 2 < s.size() && s[rp + 2] == 'Z');
}

class AgentE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (TesseraBin().empty()) GTEST_SKIP() << "TESSERA_BIN is not set";
    dir_ = MakeTempDir("agent_e2e");
    ASSERT_FALSE(dir_.empty());
    fs::create_directories(dir_ + "/logs");
    for (int i = 0; i < 3; ++i) names_.push_back(std::string("node-") + static_cast<char>('a' + i));
    // Agents use node tokens: they may read jobs and write only their status.
    {
      std::ofstream tokens(dir_ + "/tokens");
      tokens << "admintoken * admin\ntok-e2e-user e2e user\ntok-other-user other user\n";
      for (const std::string& n : names_) tokens << "tok-" << n << " - node:" << n << "\n";
    }
    int port = server_.Start({"--data-dir", dir_ + "/store", "--node-grace-seconds", "3",
                              "--eviction-seconds", "2", "--tokens-file", dir_ + "/tokens"});
    ASSERT_GT(port, 0) << server_.error();
    url_ = absl::StrCat("http://127.0.0.1:", port);
    api_ = std::make_unique<httplib::Client>(url_);
    api_->set_read_timeout(10, 0);
    api_->set_bearer_token_auth("admintoken");
    for (int i = 0; i < 3; ++i) {
      agents_.push_back(std::make_unique<AgentProcess>());
      ASSERT_TRUE(StartAgent(i)) << "agent " << names_[i] << " did not start; see " << dir_;
    }
    ASSERT_TRUE(WaitFor([&] { return ReadyNodes() == 3; }, absl::Seconds(30))) << "nodes not Ready";
  }
  void TearDown() override {
    for (auto& a : agents_) {
      if (a) a->Kill(SIGKILL);
    }
    // Members outlive agents by design: end them here.
    std::error_code ec;
    for (const auto& n : fs::directory_iterator(dir_ + "/agents", ec)) {
      for (const auto& m : fs::directory_iterator(n.path() / "members", ec)) {
        Json j = Json::parse(Slurp((m.path() / "member.json").string()), nullptr, false);
        if (j.is_object() && j.value("pid", 0) > 0) kill(-j.value("pid", 0), SIGKILL);
      }
    }
    server_.Kill(SIGKILL);
    if (!HasFailure() && !dir_.empty()) fs::remove_all(dir_);
  }
  bool StartAgent(int i) {
    return agents_[i]->Start(
        {"--server",
         url_,
         "--token",
         "tok-" + names_[i],
         "--node-name",
         names_[i],
         "--backend",
         "fake",
         "--fake-config",
         std::string(TESSERA_SOURCE_DIR) + "/deploy/fake-gpus/up-h100-nvswitch-8.yaml",
         "--state-dir",
         dir_ + "/agents/" + names_[i],
         "--rack",
         "rack-0",
         "--heartbeat",
         "1s",
         "--sync",
         "30s",  // binding changes must come through the bindings long-poll, not a re-list
         "--cgroup-parent",
         "",
         "--metrics-listen",
         "127.0.0.1:0"},
        dir_ + "/logs/agent-" + names_[i] + ".log");
  }
  template <typename F>
  bool WaitFor(F f, absl::Duration limit, absl::Duration every = absl::Milliseconds(100)) {
    absl::Time end = absl::Now() + limit;
    while (absl::Now() < end) {
      if (f()) return true;
      absl::SleepFor(every);
    }
    return f();
  }
  Json Get(const std::string& path) {
    auto r = api_->Get(path);
    if (!r || r->status != 200) return Json();
    return Json::parse(r->body, nullptr, false);
  }
  int ReadyNodes() {
    Json l = Get("/api/v1/nodes");
    int n = 0;
    if (!l.is_object()) return 0;
    for (const Json& i : l["items"]) {
      if (i.contains("status") && i["status"].value("phase", "") == "Ready") ++n;
    }
    return n;
  }
  bool Submit(const std::string& name, int count, int gpus, const std::string& script) {
    Json job = {{"apiVersion", "tessera.dev/v1"},
                {"kind", "TrainingJob"},
                {"metadata",
                 {{"name", name},
                  {"namespace", "e2e"},
                  {"annotations", {{"tessera.dev/grace-seconds", "10"}}}}},
                {"spec",
                 {{"groups", {{{"name", "worker"}, {"count", count}, {"gpusPerReplica", gpus}}}},
                  {"command", {"/bin/sh", script}},
                  {"checkpoint", {{"path", dir_ + "/ckpt/" + name}}}}}};
    auto r = api_->Post("/api/v1/namespaces/e2e/trainingjobs", job.dump(), "application/json");
    return r && r->status == 201;
  }
  Json Job(const std::string& name) { return Get("/api/v1/namespaces/e2e/trainingjobs/" + name); }
  int AgentIndex(const std::string& node) {
    for (size_t i = 0; i < names_.size(); ++i) {
      if (names_[i] == node) return static_cast<int>(i);
    }
    return -1;
  }
  Json Members(int i) {
    httplib::Client c(agents_[i]->endpoint());
    c.set_bearer_token_auth("admintoken");  // the agent checks it with the server
    auto r = c.Get("/members");
    if (!r || r->status != 200) return Json::array();
    return Json::parse(r->body, nullptr, false);
  }

  std::string dir_;
  std::string url_;
  ServerProcess server_;
  std::unique_ptr<httplib::Client> api_;
  std::vector<std::string> names_;
  std::vector<std::unique_ptr<AgentProcess>> agents_;
};

std::string TrainScript() { return std::string(TESSERA_SOURCE_DIR) + "/examples/train.sh"; }

TEST_F(AgentE2eTest, GangRunsWhereScheduledAndMovesOffAnXidResumingFromItsCheckpoint) {
  ASSERT_TRUE(Submit("gang", 2, 8, TrainScript()));
  Json job;
  ASSERT_TRUE(WaitFor(
      [&] {
        job = Job("gang");
        return job.is_object() && job["status"].value("phase", "") == "Running";
      },
      absl::Seconds(30)))
      << job.dump();
  const int64_t gen1 = job["status"].value("generation", int64_t{0});
  const Json placement = job["status"]["placement"];
  ASSERT_EQ(placement.size(), 2u);
  const std::string ckpt = dir_ + "/ckpt/gang";
  // Each member saw exactly the GPUs the scheduler picked.
  for (size_t rank = 0; rank < placement.size(); ++rank) {
    const std::string env_file = absl::StrCat(ckpt, "/env-rank", rank, "-gen", gen1, ".txt");
    ASSERT_TRUE(WaitFor([&] { return !Slurp(env_file).empty(); }, absl::Seconds(20))) << env_file;
    std::vector<int> gpus = placement[rank]["gpus"].get<std::vector<int>>();
    Json node = Get("/api/v1/nodes/" + placement[rank]["node"].get<std::string>());
    std::vector<std::string> uuids;
    for (int g : gpus) uuids.push_back(node["spec"]["gpus"][g]["uuid"]);
    std::string env = Slurp(env_file);
    EXPECT_NE(env.find("CUDA_VISIBLE_DEVICES=" + absl::StrJoin(gpus, ",") + "\n"),
              std::string::npos)
        << env;
    EXPECT_NE(env.find("NVIDIA_VISIBLE_DEVICES=" + absl::StrJoin(uuids, ",") + "\n"),
              std::string::npos)
        << env;
    EXPECT_NE(env.find(absl::StrCat("TESSERA_GENERATION=", gen1, "\n")), std::string::npos);
  }
  // Let both ranks write a checkpoint.
  ASSERT_TRUE(WaitFor(
      [&] {
        return atoi(Slurp(ckpt + "/rank0.step").c_str()) >= 10 &&
               atoi(Slurp(ckpt + "/rank1.step").c_str()) >= 10;
      },
      absl::Seconds(30)));

  // XID 79 on GPU 3 of rank 0's node.
  const std::string bad_node = placement[0]["node"];
  const int bad_gpu = placement[0]["gpus"][3];
  httplib::Client agent(agents_[AgentIndex(bad_node)]->endpoint());
  agent.set_bearer_token_auth("admintoken");
  const absl::Time t0 = absl::Now();
  auto r =
      agent.Post(absl::StrCat("/fake/event?gpu=", bad_gpu, "&type=xid&xid=79"), "", "text/plain");
  ASSERT_TRUE(r && r->status == 200);
  absl::Duration to_server, to_rebind;
  ASSERT_TRUE(WaitFor(
      [&] {
        Json n = Get("/api/v1/nodes/" + bad_node);
        for (const Json& g : n["status"].value("gpus", Json::array())) {
          if (g.value("index", -1) == bad_gpu && g.value("health", "") == "Unhealthy") return true;
        }
        return false;
      },
      absl::Seconds(10), absl::Milliseconds(5)));
  to_server = absl::Now() - t0;
  Json moved;
  ASSERT_TRUE(WaitFor(
      [&] {
        moved = Job("gang");
        return moved["status"].value("generation", int64_t{0}) > gen1 &&
               moved["status"].contains("placement");
      },
      absl::Seconds(30), absl::Milliseconds(5)));
  to_rebind = absl::Now() - t0;
  std::cout << "{\"xid_to_node_unhealthy_on_server_ms\": " << absl::ToDoubleMilliseconds(to_server)
            << ", \"xid_to_gang_rebound_ms\": " << absl::ToDoubleMilliseconds(to_rebind) << "}"
            << std::endl;
  const int64_t gen2 = moved["status"]["generation"];
  for (const Json& m : moved["status"]["placement"]) {
    if (m["node"] == bad_node) {
      for (const Json& g : m["gpus"]) EXPECT_NE(g.get<int>(), bad_gpu) << moved.dump();
    }
  }
  // The new generation resumes from the checkpoint the old one wrote.
  for (int rank = 0; rank < 2; ++rank) {
    const std::string env_file = absl::StrCat(ckpt, "/env-rank", rank, "-gen", gen2, ".txt");
    ASSERT_TRUE(WaitFor([&] { return !Slurp(env_file).empty(); }, absl::Seconds(40))) << env_file;
  }
  const std::string new_node = moved["status"]["placement"][0]["node"];
  httplib::Client logs(agents_[AgentIndex(new_node)]->endpoint());
  // Logs need a token the server lets read this job (docs/agent.md, "HTTP endpoint").
  auto anonymous = logs.Get("/logs?namespace=e2e&job=gang");
  ASSERT_TRUE(anonymous);
  EXPECT_EQ(anonymous->status, 401);
  logs.set_bearer_token_auth("tok-other-user");  // a tenant of another namespace
  auto foreign = logs.Get("/logs?namespace=e2e&job=gang");
  ASSERT_TRUE(foreign);
  EXPECT_EQ(foreign->status, 403);
  logs.set_bearer_token_auth("tok-e2e-user");  // the job's own tenant
  ASSERT_TRUE(WaitFor(
      [&] {
        auto l = logs.Get("/logs?namespace=e2e&job=gang");
        return l && l->status == 200 &&
               l->body.find(absl::StrCat(
                   "generation ", gen2, ": resuming from checkpoint at step")) != std::string::npos;
      },
      absl::Seconds(20)));
  // describe node: each GPU's health, the bad one Unhealthy with the agent's message.
  CliResult desc =
      RunTessera("describe node " + bad_node + " --server " + url_ + " --token admintoken");
  EXPECT_THAT(desc.out, ::testing::ContainsRegex(
                            absl::StrCat("\n  ", bad_gpu, " +GPU-[^ ]+ +[^\n]*Unhealthy")))
      << desc.out;
  // The run before the move, from the nodes it ran on (status.logNodes), through the CLI.
  const std::string env = "TESSERA_SERVER=" + url_ + " TESSERA_TOKEN=tok-e2e-user ";
  CliResult before = RunShell(env + TesseraBin() + " logs gang -n e2e --previous");
  EXPECT_EQ(before.rc, 0) << before.out;
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_NE(before.out.find(absl::StrCat("rank ", rank, " generation ", gen1, ": starting")),
              std::string::npos)
        << before.out;
  }
  EXPECT_EQ(before.out.find(absl::StrCat("generation ", gen2)), std::string::npos) << before.out;
}

TEST_F(AgentE2eTest, SigkilledAgentLeavesMembersRunningAndTheRestartedAgentReadoptsThem) {
  ASSERT_TRUE(Submit("solo", 1, 1, TrainScript()));
  Json job;
  ASSERT_TRUE(WaitFor(
      [&] {
        job = Job("solo");
        return job.is_object() && job["status"].value("phase", "") == "Running";
      },
      absl::Seconds(30)));
  const int i = AgentIndex(job["status"]["placement"][0]["node"]);
  Json before = Members(i);
  ASSERT_EQ(before.size(), 1u);
  const pid_t pid = before[0]["pid"];
  agents_[i]->Kill(SIGKILL);
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_EQ(kill(pid, 0), 0) << "the member died with its agent";
  ASSERT_TRUE(StartAgent(i));
  Json after;
  ASSERT_TRUE(WaitFor(
      [&] {
        after = Members(i);
        return after.size() == 1u;
      },
      absl::Seconds(10)));
  EXPECT_EQ(after[0]["pid"], pid);
  EXPECT_TRUE(after[0]["adopted"].get<bool>());
  EXPECT_EQ(after[0]["state"], "Running");
  absl::SleepFor(absl::Seconds(2));  // a few syncs: still the same process, not restarted
  after = Members(i);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0]["pid"], pid);
  EXPECT_EQ(Job("solo")["status"]["generation"], job["status"]["generation"]);
}

TEST_F(AgentE2eTest, AMemberThatCrashesRestartsTheGangInPlaceWithinMaxRestarts) {
  // Rank 1 crashes at the first generation; rank 0 would run on, blocked on its peer. With
  // spec.maxRestarts the controller restarts both at the next generation on the same GPUs
  // (the agents do not call the job Failed while restarts are left); then both succeed.
  const std::string script = dir_ + "/crash-once.sh";
  {
    std::ofstream f(script);
    f << "echo \"rank $TESSERA_RANK generation $TESSERA_GENERATION\"\n"
         "if [ \"$TESSERA_GENERATION\" = 1 ]; then\n"
         "  if [ \"$TESSERA_RANK\" = 1 ]; then sleep 1; exit 3; fi\n"
         "  sleep 60; exit 0\n"
         "fi\n"
         "sleep 1; echo \"rank $TESSERA_RANK done\"; exit 0\n";
  }
  Json job = {{"apiVersion", "tessera.dev/v1"},
              {"kind", "TrainingJob"},
              {"metadata", {{"name", "crashy"}, {"namespace", "e2e"}}},
              {"spec",
               {{"groups", {{{"name", "worker"}, {"count", 2}, {"gpusPerReplica", 8}}}},
                {"command", {"/bin/sh", script}},
                {"maxRestarts", 2}}}};
  auto r = api_->Post("/api/v1/namespaces/e2e/trainingjobs", job.dump(), "application/json");
  ASSERT_TRUE(r && r->status == 201) << (r ? r->body : "no answer");
  Json got;
  ASSERT_TRUE(WaitFor(
      [&] {
        got = Job("crashy");
        return got.is_object() && (got["status"].value("phase", "") == "Succeeded" ||
                                   got["status"].value("phase", "") == "Failed");
      },
      absl::Seconds(60)))
      << got.dump();
  EXPECT_EQ(got["status"]["phase"], "Succeeded") << got["status"].dump();
  EXPECT_EQ(got["status"]["restarts"], 1);
  EXPECT_EQ(got["status"]["generation"], 2);
  // Both members' last reports: exited with 0 at generation 2, each stamped with its node.
  ASSERT_EQ(got["status"]["members"].size(), 2u) << got["status"].dump();
  for (const Json& m : got["status"]["members"]) {
    EXPECT_EQ(m.value("state", ""), "Exited") << m.dump();
    EXPECT_EQ(m.value("exitCode", -1), 0) << m.dump();
    EXPECT_EQ(m.value("generation", 0), 2) << m.dump();
    EXPECT_FALSE(m.value("node", "").empty()) << m.dump();
  }
  // kubectl's habit: RESTARTS in `get`, and the event in `describe`.
  // top nodes: the agents' measured utilization (the fake GPUs report 0 %) beside allocation.
  CliResult top = RunTessera("top nodes --server " + url_ + " --token admintoken");
  EXPECT_THAT(top.out, ::testing::ContainsRegex("[0-9]+% +0% +0 +Ready")) << top.out;
  CliResult get = RunTessera("get job crashy -n e2e --server " + url_ + " --token admintoken");
  EXPECT_NE(get.out.find("RESTARTS"), std::string::npos) << get.out;
  CliResult desc =
      RunTessera("describe job crashy -n e2e --server " + url_ + " --token admintoken");
  EXPECT_NE(desc.out.find("1 of 2\n"), std::string::npos) << desc.out;  // Restarts:
  EXPECT_NE(desc.out.find("exited with code 3"), std::string::npos) << desc.out;
  // `tessera logs` of the finished job (no placement left: its members' reports name the
  // nodes), with the server and token from the environment as every command reads them.
  const std::string env = "TESSERA_SERVER=" + url_ + " TESSERA_TOKEN=admintoken ";
  CliResult logs = RunShell(env + TesseraBin() + " logs crashy -n e2e --tail 1");
  EXPECT_EQ(logs.rc, 0) << logs.out;
  EXPECT_NE(logs.out.find("[worker-0] rank 0 done\n"), std::string::npos) << logs.out;
  EXPECT_NE(logs.out.find("[worker-1] rank 1 done\n"), std::string::npos) << logs.out;
  EXPECT_EQ(std::count(logs.out.begin(), logs.out.end(), '\n'), 2) << logs.out;
  logs = RunShell(env + TesseraBin() + " logs crashy -n e2e --member worker-1");
  EXPECT_NE(logs.out.find("[worker-1] rank 1 generation 2\n"), std::string::npos) << logs.out;
  EXPECT_EQ(logs.out.find("generation 1"), std::string::npos) << "one run at a time: " << logs.out;
  // The run before the restart, kept apart (kubectl logs --previous).
  logs = RunShell(env + TesseraBin() + " logs crashy -n e2e --previous");
  EXPECT_EQ(logs.rc, 0) << logs.out;
  EXPECT_NE(logs.out.find("[worker-0] rank 0 generation 1\n"), std::string::npos) << logs.out;
  EXPECT_NE(logs.out.find("[worker-1] rank 1 generation 1\n"), std::string::npos) << logs.out;
  EXPECT_EQ(logs.out.find("generation 2"), std::string::npos) << logs.out;
  logs = RunShell(env + TesseraBin() + " logs crashy -n e2e --generation 2 --since 1h");
  EXPECT_NE(logs.out.find("[worker-0] rank 0 done\n"), std::string::npos) << logs.out;
  EXPECT_NE(RunShell(env + TesseraBin() + " logs crashy -n e2e --generation 9").rc, 0);
}

TEST_F(AgentE2eTest, APartitionedAgentsMembersAreFencedWhenItReturns) {
  ASSERT_TRUE(Submit("part", 1, 1, TrainScript()));
  Json job;
  ASSERT_TRUE(WaitFor(
      [&] {
        job = Job("part");
        return job.is_object() && job["status"].value("phase", "") == "Running";
      },
      absl::Seconds(30)));
  const std::string node = job["status"]["placement"][0]["node"];
  const int i = AgentIndex(node);
  const pid_t pid = Members(i)[0]["pid"];
  // Cut the agent off (paused: no heartbeats); its member keeps running meanwhile.
  agents_[i]->Kill(SIGSTOP);
  Json moved;
  ASSERT_TRUE(WaitFor(
      [&] {
        moved = Job("part");
        return moved["status"].value("generation", int64_t{0}) >
                   job["status"].value("generation", int64_t{0}) &&
               moved["status"].contains("placement") &&
               moved["status"]["placement"][0]["node"] != node;
      },
      absl::Seconds(40)))
      << moved.dump();
  EXPECT_EQ(kill(pid, 0), 0);
  agents_[i]->Kill(SIGCONT);
  // Back: it re-registers and kills the stale member at once (no grace).
  ASSERT_TRUE(WaitFor([&] { return ProcessGone(pid); }, absl::Seconds(15)));
  EXPECT_NE(Slurp(dir_ + "/logs/agent-" + node + ".log").find("fencing member"), std::string::npos);
}

TEST_F(AgentE2eTest, ANodeTokenReportsOnlyOnItsOwnMembers) {
  ASSERT_TRUE(Submit("guarded", 1, 1, TrainScript()));
  Json job;
  ASSERT_TRUE(WaitFor(
      [&] {
        job = Job("guarded");
        return job.is_object() && job["status"].value("phase", "") == "Running";
      },
      absl::Seconds(30)));
  const std::string path = "/api/v1/namespaces/e2e/trainingjobs/guarded";
  const std::string host = job["status"]["placement"][0]["node"];
  const std::string other = host == "node-a" ? "node-b" : "node-a";
  httplib::Client mine(url_), theirs(url_);
  mine.set_bearer_token_auth(("tok-" + host).c_str());
  theirs.set_bearer_token_auth(("tok-" + other).c_str());
  // Neither may rewrite the job itself (its spec, its command, its labels).
  Json edit = job;
  edit["spec"]["command"] = {"/bin/sh", "-c", "echo pwned"};
  edit["metadata"]["labels"] = {{"owner", host}};
  edit["metadata"].erase("resourceVersion");
  auto r = mine.Put(path, edit.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403) << r->body;
  // The node that does not run the member may not even read the job, nor report on it.
  auto g = theirs.Get(path);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, 403);
  const Json forged = {{"status",
                        {{"members",
                          {{{"member", "worker-0"},
                            {"generation", job["status"]["generation"]},
                            {"state", "Exited"},
                            {"exitCode", 0}}}}}}};
  auto f = theirs.Put(path + "/status", forged.dump(), "application/json");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status, 403) << f->body;
  Json after = Job("guarded");
  EXPECT_EQ(after["spec"]["command"], job["spec"]["command"]);
  EXPECT_FALSE(after["metadata"].contains("labels"));
  EXPECT_EQ(after["status"]["phase"], "Running");
  auto d = mine.Delete(path);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->status, 403);
  auto q = mine.Get(("/api/v1/nodes/" + other).c_str());
  ASSERT_TRUE(q);
  EXPECT_EQ(q->status, 403);
}

TEST_F(AgentE2eTest, MeasuresAgentCpuAndRssWithEightGpus) {
  // A full node (8 GPUs busy) sampled every second for 10 s.
  ASSERT_TRUE(Submit("full", 1, 8, TrainScript()));
  Json job;
  ASSERT_TRUE(WaitFor(
      [&] {
        job = Job("full");
        return job.is_object() && job["status"].value("phase", "") == "Running";
      },
      absl::Seconds(30)));
  const int i = AgentIndex(job["status"]["placement"][0]["node"]);
  const pid_t pid = agents_[i]->pid();
  auto ticks = [pid] {
    std::string s = Slurp(absl::StrCat("/proc/", pid, "/stat"));
    std::istringstream in(s.substr(s.rfind(')') + 2));
    std::string f;
    long long ut = 0, st = 0;
    for (int k = 3; k <= 15 && in >> f; ++k) {
      if (k == 14) ut = atoll(f.c_str());
      if (k == 15) st = atoll(f.c_str());
    }
    return ut + st;
  };
  auto rss_kib = [pid] {
    std::string s = Slurp(absl::StrCat("/proc/", pid, "/status"));
    size_t at = s.find("VmRSS:");
    return at == std::string::npos ? 0LL : atoll(s.c_str() + at + 6);
  };
  const long hz = sysconf(_SC_CLK_TCK);
  long long t_prev = ticks();
  double max_cpu = 0, sum_cpu = 0;
  long long max_rss = 0;
  const int samples = 10;
  for (int k = 0; k < samples; ++k) {
    absl::SleepFor(absl::Seconds(1));
    long long t = ticks();
    double cpu = 100.0 * static_cast<double>(t - t_prev) / static_cast<double>(hz);
    t_prev = t;
    sum_cpu += cpu;
    max_cpu = std::max(max_cpu, cpu);
    max_rss = std::max(max_rss, rss_kib());
  }
  std::cout << "{\"agent_gpus\": 8, \"samples\": " << samples
            << ", \"agent_cpu_percent_mean\": " << sum_cpu / samples
            << ", \"agent_cpu_percent_max\": " << max_cpu
            << ", \"agent_rss_mib_max\": " << static_cast<double>(max_rss) / 1024.0 << "}"
            << std::endl;
  EXPECT_GT(max_rss, 0);
}

// `tessera up --duration`: the whole local cluster with the demo workload, then a clean stop.
TEST(TesseraUpTest, RunsTheDemoAndStopsEverything) {
  if (TesseraBin().empty()) GTEST_SKIP() << "TESSERA_BIN is not set";
  const std::string dir = MakeTempDir("tessera_up");
  const std::string src = TESSERA_SOURCE_DIR;
  const std::string cmd = absl::StrCat(TesseraBin(), " up --listen 127.0.0.1:0 --duration 8",
                                       " --data-dir ", dir, " --examples ", src, "/examples",
                                       " --fake-gpus ", src, "/deploy/fake-gpus 2>&1");
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out, logs_out;
  char line[4096];
  while (fgets(line, sizeof line, p) != nullptr) {
    out += line;
    // Run the `tessera logs ... -f --token T` command `up` printed, while the cluster runs: the
    // agents check its token with the server.
    std::string l = line;
    if (size_t at = l.find("logs:"); at != std::string::npos && logs_out.empty()) {
      std::string logs_cmd = l.substr(l.find_first_not_of(' ', at + 5));
      logs_cmd.erase(logs_cmd.find_last_not_of("\r\n ") + 1);
      FILE* lp = popen(("timeout 3 " + logs_cmd + " 2>&1").c_str(), "r");
      ASSERT_NE(lp, nullptr);
      char buf[4096];
      size_t n;
      while ((n = fread(buf, 1, sizeof buf, lp)) > 0) logs_out.append(buf, n);
      pclose(lp);
    }
  }
  const int status = pclose(p);
  EXPECT_NE(logs_out.find("] rank 0 generation"), std::string::npos) << logs_out;
  EXPECT_EQ(logs_out.find("HTTP 401"), std::string::npos) << logs_out;
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("6/6 nodes Ready"), std::string::npos) << out;
  EXPECT_NE(out.find("dashboard http://"), std::string::npos) << out;
  // The 16-GPU gang got two whole H100 nodes; the replicas and small jobs were placed.
  EXPECT_NE(out.find("GPUs [0,1,2,3,4,5,6,7]"), std::string::npos) << out;
  EXPECT_EQ(out.find("not placed yet"), std::string::npos) << out;
  EXPECT_NE(out.find("stopped server and 6 agents"), std::string::npos) << out;
  // The autoscaled demo service reports what its SLO made of it (2 to 4 replicas; how many
  // within 8 s depends on the machine's load, autoscale_http_test checks the scaling itself).
  EXPECT_NE(out.find("desired for its p99 target of 250 ms"), std::string::npos) << out;
  // Every fake node had GPUs of its own: 4 H100 nodes x 8 + 2 PCIe nodes x 4, 40 distinct UUIDs.
  std::set<std::string> uuids;
  int configs = 0;
  const std::regex uuid("uuid: (GPU-[0-9a-f-]{36})");
  for (const auto& c : fs::directory_iterator(dir + "/fake-gpus")) {
    ++configs;
    const std::string text = Slurp(c.path().string());
    for (auto it = std::sregex_iterator(text.begin(), text.end(), uuid);
         it != std::sregex_iterator(); ++it) {
      EXPECT_TRUE(uuids.insert((*it)[1]).second) << (*it)[1] << " twice";
    }
  }
  EXPECT_EQ(configs, 6);
  EXPECT_EQ(uuids.size(), 40u);
  // The gang wrote checkpoints, and no member outlived `up`.
  EXPECT_TRUE(fs::exists(dir + "/checkpoints/llm-pretrain/rank0.step"));
  std::error_code ec;
  for (const auto& node : fs::directory_iterator(dir + "/agents", ec)) {
    for (const auto& m : fs::directory_iterator(node.path() / "members", ec)) {
      Json j = Json::parse(Slurp((m.path() / "member.json").string()), nullptr, false);
      if (j.is_object()) {
        EXPECT_TRUE(ProcessGone(j.value("pid", 0))) << m.path();
      }
    }
  }
  if (!::testing::Test::HasFailure()) fs::remove_all(dir);
}

}  // namespace
}  // namespace tessera::testing
