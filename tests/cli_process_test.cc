// The `tessera` CLI against a real `tessera server` process on loopback: the
// server schedules what the CLI applies (examples/), and the CLI shows it.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <regex>
#include <set>
#include <string>
#include <thread>

#include "agent_process.h"
#include "cli_process_fixture.h"
#include "nlohmann/json.hpp"

namespace tessera::testing {
namespace {

// Authentication is on without --tokens-file; a CLI without a token says where to find one.
TEST_F(CliProcessTest, WithoutATokenTheCliSaysWhereTheAdminTokenIs) {
  Result with = Run("get nodes");
  EXPECT_EQ(with.rc, 0) << with.out;
  unsetenv("TESSERA_TOKEN");
  Result without = Run("get nodes");
  EXPECT_NE(without.rc, 0) << without.out;
  EXPECT_NE(without.out.find("Unauthorized"), std::string::npos) << without.out;
  EXPECT_NE(without.out.find("DATA_DIR/admin-token"), std::string::npos) << without.out;
  EXPECT_NE(without.out.find("TESSERA_TOKEN"), std::string::npos) << without.out;
}

TEST_F(CliProcessTest, ApplyScheduleDescribeDrainRestart) {
  Result r = Run("apply -f " + Example("nodes.yaml") + " --server " + url_);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("node.tessera.dev/h100-0 created"), std::string::npos) << r.out;
  r = Run("apply -f " + Example("training-job.yaml"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("trainingjob.tessera.dev/llm-7b created"), std::string::npos) << r.out;

  Json job = WaitFor("jobs", "llm-7b", Scheduled);
  ASSERT_EQ(job["status"]["placement"].size(), 2u);
  EXPECT_EQ(job["status"]["priority"], 5000);  // from the PriorityClass
  EXPECT_EQ(job["status"]["generation"], 1);
  std::set<std::string> nodes;
  for (const Json& m : job["status"]["placement"]) {
    nodes.insert(m["node"].get<std::string>());
    EXPECT_EQ(m["gpus"].size(), 8u);
  }
  EXPECT_EQ(nodes.size(), 2u);

  // -o json: a List whose items are full objects as the API returns them.
  r = Run("get jobs -o json");
  ASSERT_EQ(r.rc, 0) << r.out;
  Json list = Json::parse(r.out);
  EXPECT_EQ(list["kind"], "List");
  ASSERT_EQ(list["items"].size(), 1u);
  EXPECT_EQ(list["items"][0]["apiVersion"], "tessera.dev/v1");
  EXPECT_FALSE(list["items"][0]["metadata"]["resourceVersion"].get<std::string>().empty());
  r = Run("get jobs -l team=nlp -o name");
  EXPECT_EQ(r.out, "trainingjob/llm-7b\n");
  r = Run("get jobs -l team=cv -o name");
  EXPECT_EQ(r.out, "");
  r = Run("get jobs -o yaml");
  EXPECT_NE(r.out.find("kind: List"), std::string::npos) << r.out;

  r = Run("describe job llm-7b");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("Placement:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Admitted"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Scheduled"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(*nodes.begin()), std::string::npos) << r.out;

  r = Run("get nodes -o wide");
  EXPECT_NE(r.out.find("l40s-0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("dedicated:NoSchedule"), std::string::npos) << r.out;
  // The table the server prints (api/table.h) is the one the CLI prints from objects (it does
  // with --sort-by, which needs them): same rows, namespaces with -A. Ages are masked (the two
  // runs may straddle a second), and a pair is read again if the controller changed something
  // between its two reads (a node's heartbeat or phase).
  auto without_age = [](const std::string& table) {
    return std::regex_replace(table, std::regex(" [0-9]+[smhd](?= |\n|$)"), " AGE");
  };
  for (const char* what : {"get jobs -o wide", "get nodes -o wide", "get jobs -A", "get queues"}) {
    std::string printed, local;
    for (int attempt = 0; attempt < 5 && (printed.empty() || printed != local); ++attempt) {
      Result a = Run(what);
      ASSERT_EQ(a.rc, 0) << a.out;
      printed = without_age(a.out);
      local = without_age(Run(std::string(what) + " --sort-by .metadata.name").out);
    }
    EXPECT_EQ(printed, local) << what;
  }
  EXPECT_NE(Run("get jobs -A").out.find("NAMESPACE"), std::string::npos);
  r = Run("top nodes");
  EXPECT_NE(r.out.find("100%"), std::string::npos) << r.out;  // ALLOC%
  // Allocation and measured use apart: no agent reports utilization here.
  EXPECT_NE(r.out.find("ALLOCATED  ALLOC%  UTIL%"), std::string::npos) << r.out;
  EXPECT_THAT(r.out, ::testing::ContainsRegex("100% +- +0 +Ready")) << r.out;
  r = Run("top queues");
  EXPECT_NE(r.out.find("research"), std::string::npos) << r.out;

  // The inference service tolerates the serving taint and lands on the L40S node.
  r = Run("apply -f " + Example("inference-service.yaml"));
  ASSERT_EQ(r.rc, 0) << r.out;
  Json svc = WaitFor("isvc", "chat", Scheduled);
  for (const Json& m : svc["status"]["placement"]) EXPECT_EQ(m["node"], "l40s-0");

  // A job that waits says why.
  auto submit_huge = [&] {
    Result h =
        Run("apply -f - <<'EOF'\n"
            "{\"apiVersion\": \"tessera.dev/v1\", \"kind\": \"TrainingJob\", \"metadata\": "
            "{\"name\": \"huge\"}, \"spec\": {\"groups\": [{\"name\": \"w\", \"count\": 9, "
            "\"gpusPerReplica\": 8}]}}\nEOF\n");
    ASSERT_EQ(h.rc, 0) << h.out;
    WaitFor("jobs", "huge", [](const Json& j) {
      return j["status"].value("message", "").find("waiting") != std::string::npos;
    });
  };
  ASSERT_NO_FATAL_FAILURE(submit_huge());
  r = Run("describe job huge");
  EXPECT_NE(r.out.find("Waiting:"), std::string::npos) << r.out;
  // Deleted and created again: describe shows the new job's events only.
  ASSERT_EQ(Run("delete job huge").rc, 0);
  ASSERT_NO_FATAL_FAILURE(submit_huge());
  r = Run("describe job huge");
  size_t admitted = 0;
  for (size_t at = r.out.find("admitted to queue"); at != std::string::npos;
       at = r.out.find("admitted to queue", at + 1)) {
    ++admitted;
  }
  EXPECT_EQ(admitted, 1u) << r.out;

  // Bad input: the server's message names the field; nothing is created.
  r =
      Run("apply -f - <<'EOF'\n"
          "{\"apiVersion\": \"tessera.dev/v1\", \"kind\": \"TrainingJob\", \"metadata\": "
          "{\"name\": \"bad\"}, \"spec\": {\"groups\": [{\"name\": \"w\", \"count\": 0, "
          "\"gpusPerReplica\": 8}]}}\nEOF\n");
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("spec.groups[0].count"), std::string::npos) << r.out;
  EXPECT_NE(Run("get jobs bad").rc, 0);

  // Cordon shows in the node list; drain moves the gang (new fencing generation).
  r = Run("cordon l40s-0");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(Run("get nodes l40s-0").out.find("SchedulingDisabled"), std::string::npos);
  EXPECT_EQ(Run("uncordon l40s-0").rc, 0);
  // Several at once, as kubectl takes them; a missing one fails the command, not the others.
  r = Run("cordon l40s-0 no-such-node h100-3");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("node/l40s-0 cordoned"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no-such-node"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("node/h100-3 cordoned"), std::string::npos) << r.out;
  r = Run("uncordon l40s-0 h100-3");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(Run("get nodes h100-3").out.find("SchedulingDisabled"), std::string::npos);
  const std::string victim = *nodes.begin();
  r = Run("drain " + victim);
  ASSERT_EQ(r.rc, 0) << r.out;
  job = WaitFor("jobs", "llm-7b", [&](const Json& j) {
    if (!Scheduled(j) || j["status"].value("generation", 0) < 2) return false;
    for (const Json& m : j["status"]["placement"]) {
      if (m["node"] == victim) return false;
    }
    return true;
  });
  r = Run("describe node " + victim);
  EXPECT_NE(r.out.find("NoExecute"), std::string::npos) << r.out;

  // Restart: placements come back from the store, nothing is rebound.
  const Json before = Run("get jobs llm-7b -o json").out.empty()
                          ? Json()
                          : Json::parse(Run("get jobs llm-7b -o json").out);
  server_.Kill(SIGTERM);
  StartServer();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  Json after = Json::parse(Run("get jobs llm-7b -o json").out);
  EXPECT_EQ(after["status"]["placement"], before["status"]["placement"]);
  EXPECT_EQ(after["status"]["generation"], before["status"]["generation"]);

  r = Run("delete jobs llm-7b huge");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("\"llm-7b\" deleted"), std::string::npos) << r.out;
  EXPECT_EQ(Run("get jobs -o name").out, "");
}

TEST_F(CliProcessTest, SilentNodeGoesNotReadyAndItsGangIsRequeued) {
  // A server with a 1 s heartbeat grace and a 1 s eviction delay.
  server_.Kill(SIGKILL);
  extra_args_ = {"--node-grace-seconds", "1", "--eviction-seconds", "1"};
  dir_ = MakeTempDir("tessera_cli_grace");
  StartServer();
  Result r =
      Run("apply -f - <<'EOF'\n"
          "kind: Node\napiVersion: tessera.dev/v1\nmetadata: {name: lonely}\n"
          "spec: {gpuType: H100, gpuCount: 8}\n---\n"
          "kind: TrainingJob\napiVersion: tessera.dev/v1\nmetadata: {name: j}\n"
          "spec: {groups: [{name: w, count: 1, gpusPerReplica: 8}]}\nEOF\n");
  ASSERT_EQ(r.rc, 0) << r.out;
  Json job = WaitFor("jobs", "j",
                     [](const Json& j) { return j["status"].value("phase", "") == "NodeLost"; });
  EXPECT_FALSE(job["status"].contains("placement"));
  EXPECT_NE(Run("get nodes lonely").out.find("NotReady"), std::string::npos);
  r = Run("describe job j");
  EXPECT_NE(r.out.find("NodeLost"), std::string::npos) << r.out;
  r = Run("describe node lonely");
  EXPECT_NE(r.out.find("NodeNotReady"), std::string::npos) << r.out;
}

TEST_F(CliProcessTest, ElasticJobShrinksWhenANodeGoesSilentAndGetShowsWhatItHolds) {
  // 1 s heartbeat grace and eviction delay; node `a` beats all along, node
  // `b` only until the elastic job is placed on both.
  server_.Kill(SIGKILL);
  extra_args_ = {"--node-grace-seconds", "1", "--eviction-seconds", "1"};
  dir_ = MakeTempDir("tessera_cli_elastic");
  StartServer();
  std::atomic<bool> stop_a{false}, stop_b{false};
  std::thread beats([&] {
    httplib::Client cli(url_);
    cli.set_bearer_token_auth(token_);
    const std::string body =
        R"({"gpus": [)"
        R"({"index": 0, "health": "Healthy"}, {"index": 1, "health": "Healthy"},)"
        R"({"index": 2, "health": "Healthy"}, {"index": 3, "health": "Healthy"}]})";
    while (!stop_a) {
      cli.Post("/api/v1/nodes/a/heartbeat", body, "application/json");
      if (!stop_b) cli.Post("/api/v1/nodes/b/heartbeat", body, "application/json");
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  Result r =
      Run("apply -f - <<'EOF'\n"
          "kind: Node\napiVersion: tessera.dev/v1\nmetadata: {name: a}\n"
          "spec: {gpuType: H100, gpuCount: 4}\n---\n"
          "kind: Node\napiVersion: tessera.dev/v1\nmetadata: {name: b}\n"
          "spec: {gpuType: H100, gpuCount: 4}\n---\n"
          "kind: TrainingJob\napiVersion: tessera.dev/v1\nmetadata: {name: el}\n"
          "spec: {elastic: {minReplicas: 1, maxReplicas: 2},\n"
          "       groups: [{name: w, count: 2, gpusPerReplica: 4}]}\nEOF\n");
  ASSERT_EQ(r.rc, 0) << r.out;
  Json job = WaitFor("jobs", "el", [](const Json& j) {
    return j["status"].contains("placement") && j["status"]["placement"].size() == 2;
  });
  std::string got = Run("get jobs el").out;
  EXPECT_NE(got.find("8/8"), std::string::npos) << got;  // GPUS held/requested
  EXPECT_NE(got.find("2/2"), std::string::npos) << got;  // MEMBERS
  stop_b = true;  // b goes NotReady after 1 s, its member is dropped 1 s later
  job = WaitFor("jobs", "el", [](const Json& j) { return j["status"].value("replicas", 0) == 1; });
  // a keeps heartbeating while we look: with a 1 s grace, a slow machine (sanitizers, a loaded
  // CI) took longer than that over the commands below and saw a lost too.
  struct StopBeats {
    std::atomic<bool>& stop;
    std::thread& beats;
    ~StopBeats() {
      stop = true;
      beats.join();
    }
  } stop_beats{stop_a, beats};
  ASSERT_EQ(job["status"]["placement"].size(), 1u) << job.dump();
  EXPECT_EQ(job["status"]["placement"][0]["node"], "a");
  EXPECT_EQ(job["status"]["generation"], 2);
  got = Run("get jobs el").out;
  EXPECT_NE(got.find("4/8"), std::string::npos) << got;
  EXPECT_NE(got.find("1/2"), std::string::npos) << got;
  r = Run("describe job el");
  EXPECT_NE(r.out.find("GPUs held:"), std::string::npos) << r.out;
  // Exactly one ElasticShrink event row: the shrink is one store transaction.
  const size_t events = r.out.find("Events:");
  ASSERT_NE(events, std::string::npos) << r.out;
  size_t rows = 0;
  for (size_t at = r.out.find("ElasticShrink", events); at != std::string::npos;
       at = r.out.find("ElasticShrink", at + 1)) {
    ++rows;
  }
  EXPECT_EQ(rows, 1u) << r.out;
}

TEST_F(CliProcessTest, DescribeShowsAPreemptionInFlight) {
  // A 10-minute grace period keeps the victim signalled while we look.
  server_.Kill(SIGKILL);
  dir_ = MakeTempDir("tessera_cli_preempt");
  {
    std::ofstream q(dir_ + "/queues.yaml");
    q << "preemption: {gracePeriod: 10m, minRuntime: 0s}\nqueues: [{name: default}]\n";
  }
  extra_args_ = {"--queue-config", dir_ + "/queues.yaml"};
  StartServer();
  Result r = Run(
      "apply -f - <<'EOF'\n"
      "kind: Node\napiVersion: tessera.dev/v1\nmetadata: {name: a}\n"
      "spec: {gpuType: H100, gpuCount: 8}\n---\n"
      "kind: TrainingJob\napiVersion: tessera.dev/v1\nmetadata: {name: low}\n"
      "spec: {priorityClassName: development, groups: [{name: w, count: 1, gpusPerReplica: 8}]}\n"
      "EOF\n");
  ASSERT_EQ(r.rc, 0) << r.out;
  WaitFor("jobs", "low", Scheduled);
  r = Run(
      "apply -f - <<'EOF'\n"
      "kind: TrainingJob\napiVersion: tessera.dev/v1\nmetadata: {name: high}\n"
      "spec: {priorityClassName: production, groups: [{name: w, count: 1, gpusPerReplica: 8}]}\n"
      "EOF\n");
  ASSERT_EQ(r.rc, 0) << r.out;
  Json low =
      WaitFor("jobs", "low", [](const Json& j) { return j["status"].contains("preemption"); });
  EXPECT_EQ(low["status"]["preemption"].value("preemptor", ""), "default/high") << low.dump();
  r = Run("describe job low");
  EXPECT_NE(r.out.find("Preemption:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the whole job for default/high; checkpoint now, stopped at "),
            std::string::npos)
      << r.out;
}

TEST_F(CliProcessTest, DescribeShowsAnAutoscaledServicesReplicasAndSlo) {
  Result r =
      Run("apply -f - <<'EOF'\n"
          "kind: Node\napiVersion: tessera.dev/v1\nmetadata: {name: a}\n"
          "spec: {gpuType: H100, gpuCount: 4}\n---\n"
          "kind: InferenceService\napiVersion: tessera.dev/v1\nmetadata: {name: chat}\n"
          "spec: {modelVersion: llama-v1, replicas: {min: 1, max: 8}, gpusPerReplica: 1,\n"
          "       slo: {p99LatencyMs: 150, minThroughputRps: 40}}\nEOF\n");
  ASSERT_EQ(r.rc, 0) << r.out;
  httplib::Client cli(url_);
  cli.set_bearer_token_auth(token_);
  cli.Post("/api/v1/nodes/a/heartbeat",
           R"({"gpus": [{"index": 0, "health": "Healthy"}, {"index": 1, "health": "Healthy"},)"
           R"({"index": 2, "health": "Healthy"}, {"index": 3, "health": "Healthy"}]})",
           "application/json");
  // Started at replicas.min (not as many as fit); no readings yet: desired holds at 1.
  WaitFor("isvc", "chat",
          [](const Json& j) { return j["status"].value("desiredReplicas", 0) == 1; });
  r = Run("describe isvc chat");
  EXPECT_NE(r.out.find("1 (desired 1, min 1, max 8)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("p99 150 ms, at least 40 rps"), std::string::npos) << r.out;
  // get: replicas bound of desired, GPUs held of replicas.max's.
  r = Run("get isvc chat");
  EXPECT_NE(r.out.find("1/1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1/8"), std::string::npos) << r.out;
}

TEST_F(CliProcessTest, LeaseHeartbeatsKeepANodeReadyAndDescribeShowsThem) {
  // A 1 s grace: only the heartbeat route's in-memory lease keeps the node
  // Ready (the server writes the Node once, then only every 60 s).
  server_.Kill(SIGKILL);
  extra_args_ = {"--node-grace-seconds", "1"};
  dir_ = MakeTempDir("tessera_cli_lease");
  StartServer();
  Result r =
      Run("apply -f - <<'EOF'\n"
          "kind: Node\napiVersion: tessera.dev/v1\nmetadata: {name: beating}\n"
          "spec: {gpuType: H100, gpuCount: 2}\nEOF\n");
  ASSERT_EQ(r.rc, 0) << r.out;
  httplib::Client cli(url_);
  cli.set_bearer_token_auth(token_);
  const std::string body =
      R"({"gpus": [{"index": 0, "health": "Healthy"}, {"index": 1, "health": "Healthy"}]})";
  int written = 0;
  for (int i = 0; i < 12; ++i) {  // 3 s of heartbeats every 250 ms
    auto res = cli.Post("/api/v1/nodes/beating/heartbeat", body, "application/json");
    ASSERT_TRUE(res && res->status == 200) << (res ? res->body : "no answer");
    written += Json::parse(res->body).value("written", false) ? 1 : 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  EXPECT_EQ(written, 1);
  // Heartbeats go on while the CLI looks (a CLI run can take longer than the grace on a loaded
  // machine, under a sanitizer), then stop.
  std::atomic<bool> beating{true};
  std::thread beat([&] {
    httplib::Client c(url_);
    c.set_bearer_token_auth(token_);
    while (beating.load()) {
      c.Post("/api/v1/nodes/beating/heartbeat", body, "application/json");
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  });
  const std::string listed = Run("get nodes beating").out;
  EXPECT_NE(listed.find("Ready"), std::string::npos) << listed;
  EXPECT_EQ(listed.find("NotReady"), std::string::npos) << listed;
  r = Run("describe node beating");
  beating = false;
  beat.join();
  EXPECT_NE(r.out.find("s ago)"), std::string::npos) << r.out;  // the lease, not the stored time
  // Silent: NotReady after the grace.
  Json node = WaitFor("nodes", "beating",
                      [](const Json& n) { return n["status"].value("phase", "") == "NotReady"; });
  EXPECT_EQ(node["status"]["phase"], "NotReady");
}

// Sends each of `requests` as is, one after the other on one connection to http://127.0.0.1:PORT,
// each once the answer to the previous one is in (a Content-Length framed response), and returns
// the answers (10 s at most for each).
std::string RawHttp(const std::string& endpoint, const std::vector<std::string>& requests) {
  const int port = atoi(endpoint.substr(endpoint.rfind(':') + 1).c_str());
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return "";
  }
  timeval tv = {10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  for (const std::string& request : requests) {
    if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) break;
    const size_t start = out.size();
    char buf[4096];
    while (true) {
      const size_t head = out.find("\r\n\r\n", start);
      const size_t cl = out.find("Content-Length: ", start);
      if (head != std::string::npos && cl != std::string::npos && cl < head &&
          out.size() >= head + 4 + static_cast<size_t>(atoi(out.c_str() + cl + 16))) {
        break;
      }
      const ssize_t n = read(fd, buf, sizeof buf);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  return out;
}

TEST_F(CliProcessTest, TheReadmesXidCommandWorksWithoutAContentLength) {
  // `curl -XPOST URL` sends a POST with neither Content-Length nor a body: README's and `tessera
  // up`'s command to inject an XID. The agent answers it at once, and says why on every 4xx.
  std::ofstream(dir_ + "/agent-tokens") << "xid-token\n";
  AgentProcess agent;
  ASSERT_TRUE(
      agent.Start({"--server", url_, "--token", token_, "--node-name", "xid-n1", "--backend",
                   "fake", "--fake-config",
                   std::string(TESSERA_SOURCE_DIR) + "/deploy/fake-gpus/up-h100-nvswitch-8.yaml",
                   "--state-dir", dir_ + "/agent", "--endpoint-token-file", dir_ + "/agent-tokens",
                   "--cgroup-parent", "", "--metrics-listen", "127.0.0.1:0"},
                  dir_ + "/agent.log"))
      << "agent did not start; see " << dir_;
  const std::string auth = "Authorization: Bearer xid-token\r\n";
  std::string got =
      RawHttp(agent.endpoint(),
              {"POST /fake/event?gpu=3&type=xid&xid=79 HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n"});
  EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;
  EXPECT_NE(got.find("\r\n\r\nok\n"), std::string::npos) << got;
  // GPU 3 is Unhealthy on the server.
  Json node = WaitFor("nodes", "xid-n1", [](const Json& n) {
    for (const Json& g : n["status"].value("gpus", Json::array())) {
      if (g.value("index", -1) == 3 && g.value("health", "") == "Unhealthy") return true;
    }
    return false;
  });
  // A body that is sent is still read: the next request on the connection is answered.
  got =
      RawHttp(agent.endpoint(), {"POST /fake/event?gpu=3&type=reset HTTP/1.1\r\nHost: x\r\n" +
                                     auth + "Content-Length: 3\r\n\r\nabc",
                                 "POST /fake/event?gpu=x HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n"});
  EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;
  EXPECT_NE(got.find("HTTP/1.1 400"), std::string::npos) << got;
  EXPECT_NE(got.find("gpu: expected a GPU index"), std::string::npos) << got;
  // cpp-httplib's own 4xx answers carry a message too.
  got = RawHttp(agent.endpoint(), {"GET /fake/event HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n"});
  EXPECT_NE(got.find("HTTP/1.1 4"), std::string::npos) << got;
  EXPECT_NE(got.find("\r\n\r\nHTTP 404: no such path /fake/event"), std::string::npos) << got;
}

}  // namespace
}  // namespace tessera::testing

// Issue 20's standalone behaviours through a real server: a GPUPool's status follows its nodes,
// a ModelVersion's status shows who serves it, deleting it while served is refused with the
// shared message, and `describe modelversion` shows the chain.
namespace tessera::testing {
namespace {

TEST_F(CliProcessTest, GpuPoolStatusAndServedModelVersionThroughTheServer) {
  Result r = Run("apply -f " + Example("nodes.yaml"));
  ASSERT_EQ(r.rc, 0) << r.out;
  const std::string manifests = dir_ + "/ai.yaml";
  {
    std::ofstream f(manifests);
    f << "apiVersion: tessera.dev/v1\nkind: GPUPool\nmetadata: {name: training}\n"
         "spec: {gpuType: H100, nodeSelector: {pool: training}, queues: [research]}\n"
         "---\n"
         "apiVersion: tessera.dev/v1\nkind: ModelVersion\nmetadata: {name: llama-v3}\n"
         "spec: {model: llama, version: '3', checkpoint: llm-step-400}\n"
         "---\n"
         "apiVersion: tessera.dev/v1\nkind: InferenceService\nmetadata: {name: chat}\n"
         "spec: {modelVersion: llama-v3, replicas: {min: 1, max: 1}, gpusPerReplica: 1}\n";
  }
  r = Run("apply -f " + manifests);
  ASSERT_EQ(r.rc, 0) << r.out;
  Json pool = WaitFor("gpupools", "training",
                      [](const Json& p) { return p["status"].value("nodes", 0) > 0; });
  EXPECT_EQ(pool["status"]["phase"], "Ready");
  EXPECT_EQ(pool["status"]["gpus"], 8 * pool["status"]["nodes"].get<int>());
  Json mv = WaitFor("modelversions", "llama-v3", [](const Json& m) {
    return m["status"].value("servedBy", Json::array()) == Json::array({"chat"});
  });
  EXPECT_EQ(mv["status"]["phase"], "Pending");  // its checkpoint does not exist
  EXPECT_EQ(mv["status"]["reason"], "CheckpointMissing");

  r = Run("delete modelversion llama-v3");
  EXPECT_NE(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("modelversion \"llama-v3\" is served by inferenceservice chat: delete or "
                       "repoint it first"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(Run("get modelversion llama-v3").rc, 0) << "still there";
  r = Run("describe modelversion llama-v3");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("modelversion/llama-v3 <- checkpoint/llm-step-400 (not found)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("inferenceservice/chat"), std::string::npos) << r.out;

  ASSERT_EQ(Run("delete inferenceservice chat").rc, 0);
  r = Run("delete modelversion llama-v3");
  EXPECT_EQ(r.rc, 0) << r.out;
}

}  // namespace
}  // namespace tessera::testing
