#include "agent/up_command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/api_client.h"
#include "agent/fake/node_uuids.h"
#include "common/clock.h"

namespace tessera::agent {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

std::atomic<bool> g_up_stop{false};  // SIGINT/SIGTERM
void OnUpSignal(int) { g_up_stop.store(true); }

struct UpFlags {
  int h100_nodes = 4;
  int pcie_nodes = 2;
  std::string listen = "127.0.0.1:7420";
  std::string data_dir;
  double duration = 0;
  bool demo = true;
  std::string examples;
  std::string fake_gpus;
  std::string profile;  // the server's --profile (empty: its default)
};

// The server's command line. Six nodes: the Node may be written every few seconds, so the
// dashboard's utilization colors follow the fake GPUs' scripted load closely (a large fleet
// keeps the 60 s default).
std::vector<std::string> ServerArgs(const std::string& exe, const std::string& data,
                                    const UpFlags& f) {
  std::vector<std::string> a = {exe,
                                "server",
                                "--data-dir",
                                data + "/store",
                                "--listen",
                                f.listen,
                                "--tokens-file",
                                data + "/tokens",
                                "--node-grace-seconds",
                                "6",
                                "--eviction-seconds",
                                "10",
                                "--node-status-seconds",
                                "4"};
  if (!f.profile.empty()) a.insert(a.end(), {"--profile", f.profile});
  return a;
}

std::string SelfExe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, n) : "tessera";
}

// Finds DIR/<rel> walking up from the current directory (a checkout), else "".
std::string FindUp(const std::string& rel) {
  fs::path p = fs::current_path();
  for (int i = 0; i < 6; ++i) {
    if (fs::exists(p / rel)) return (p / rel).string();
    if (!p.has_parent_path() || p.parent_path() == p) break;
    p = p.parent_path();
  }
  return "";
}

struct Child {
  std::string name;
  pid_t pid = -1;
};

// Starts `exe args...` with stdout+stderr appended to `log`; with `out_pipe`, stdout goes to a
// pipe whose read end is returned there instead.
pid_t Spawn(const std::vector<std::string>& args, const std::string& log, int* out_pipe) {
  int fds[2] = {-1, -1};
  if (out_pipe != nullptr && pipe2(fds, O_CLOEXEC) != 0) return -1;
  std::vector<std::string> argv_s = args;
  std::vector<char*> argv;
  argv.reserve(argv_s.size() + 1);
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);  // Ctrl-C reaches `up` only; it stops the children in order
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 2);
      dup2(fd, 1);
    }
    if (out_pipe != nullptr) dup2(fds[1], 1);
    execv(argv[0], argv.data());
    _exit(127);
  }
  if (out_pipe != nullptr) {
    close(fds[1]);
    *out_pipe = fds[0];
  }
  return pid;
}

bool Sleep(absl::Duration d) {
  absl::Time end = absl::Now() + d;
  while (absl::Now() < end) {
    if (g_up_stop.load()) return false;
    absl::SleepFor(std::min(end - absl::Now(), absl::Milliseconds(100)));
  }
  return !g_up_stop.load();
}

void StopChild(Child& c, absl::Duration grace) {
  if (c.pid <= 0) return;
  kill(c.pid, SIGTERM);
  absl::Time end = absl::Now() + grace;
  int st = 0;
  while (absl::Now() < end) {
    if (waitpid(c.pid, &st, WNOHANG) == c.pid) {
      c.pid = -1;
      return;
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  kill(c.pid, SIGKILL);
  waitpid(c.pid, &st, 0);
  c.pid = -1;
}

Json Job(const std::string& name, int count, int gpus, const std::string& gpu_type,
         const std::vector<std::string>& command, const std::string& ckpt) {
  Json spec = {{"groups", {{{"name", "worker"}, {"count", count}, {"gpusPerReplica", gpus}}}},
               {"command", command}};
  if (!gpu_type.empty()) spec["groups"][0]["gpuType"] = gpu_type;
  if (!ckpt.empty()) spec["checkpoint"] = {{"path", ckpt}};
  return {{"apiVersion", "tessera.dev/v1"},
          {"kind", "TrainingJob"},
          {"metadata", {{"name", name}, {"namespace", "demo"}}},
          {"spec", spec}};
}

int RunUp(const UpFlags& f) {
  const std::string exe = SelfExe();
  std::string fake_dir = f.fake_gpus.empty() ? FindUp("deploy/fake-gpus") : f.fake_gpus;
  std::string examples = f.examples.empty() ? FindUp("examples") : f.examples;
  if (fake_dir.empty() || !fs::exists(fake_dir + "/up-h100-nvswitch-8.yaml")) {
    std::cerr << "tessera up: cannot find deploy/fake-gpus/up-h100-nvswitch-8.yaml; run from the "
                 "checkout or pass --fake-gpus DIR\n";
    return 2;
  }
  if (f.demo && (examples.empty() || !fs::exists(examples + "/train.sh"))) {
    std::cerr << "tessera up: cannot find examples/train.sh; run from the checkout or pass "
                 "--examples DIR (or --no-demo)\n";
    return 2;
  }
  std::string data = f.data_dir;
  if (data.empty()) {
    std::string t =
        (getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp") + std::string("/tessera-up-XXXXXX");
    if (mkdtemp(t.data()) == nullptr) {
      std::cerr << "tessera up: cannot create a temporary directory\n";
      return 1;
    }
    data = t;
  }
  fs::create_directories(data + "/logs");
  struct sigaction sa = {};
  sa.sa_handler = OnUpSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  // 0. Tokens: an admin token for `up` and the user, one node token per agent (agents read only
  //    their own bindings; their endpoints check `tessera logs` tokens with the server).
  std::random_device rd;
  auto secret = [&rd] {
    return absl::StrCat(absl::Hex(static_cast<uint64_t>(rd()) << 32 | rd(), absl::kZeroPad16));
  };
  const std::string admin_token = secret();
  std::map<std::string, std::string> node_tokens;

  // 1. The server.
  Child server{"server"};
  int out = -1;
  struct NodeDef {
    std::string name, config, rack;
  };
  std::vector<NodeDef> nodes;
  nodes.reserve(static_cast<size_t>(f.h100_nodes) + f.pcie_nodes);
  for (int i = 0; i < f.h100_nodes; ++i) {
    nodes.push_back({absl::StrCat("h100-", i), fake_dir + "/up-h100-nvswitch-8.yaml",
                     absl::StrCat("rack-", i / 2)});
  }
  for (int i = 0; i < f.pcie_nodes; ++i) {
    nodes.push_back({absl::StrCat("pcie-", i), fake_dir + "/up-pcie-4.yaml", "rack-pcie"});
  }
  // Each node gets its own copy of its fake config with UUIDs of its own: nodes sharing one
  // file would otherwise report the same GPUs (metrics, device ids and XIDs keyed by UUID).
  fs::create_directories(data + "/fake-gpus");
  for (NodeDef& n : nodes) {
    std::ifstream in(n.config);
    std::stringstream text;
    text << in.rdbuf();
    const std::string own = absl::StrCat(data, "/fake-gpus/", n.name, ".yaml");
    std::ofstream(own) << WithNodeUuids(text.str(), n.name);
    n.config = own;
  }
  {
    std::ofstream tokens(data + "/tokens");
    // 0600 before a secret is written: the file is never readable by others with a token in it.
    chmod((data + "/tokens").c_str(), 0600);
    tokens << "# tessera up: TOKEN NAMESPACE ROLE\n" << admin_token << " * admin\n";
    for (const NodeDef& n : nodes) {
      node_tokens[n.name] = secret();
      tokens << node_tokens[n.name] << " - node:" << n.name << "\n";
    }
  }
  server.pid = Spawn(ServerArgs(exe, data, f), data + "/logs/server.log", &out);
  std::string line;
  char buf[512];
  while (line.find('\n') == std::string::npos) {
    pollfd p{out, POLLIN, 0};
    if (poll(&p, 1, 30000) <= 0) break;
    ssize_t n = read(out, buf, sizeof buf);
    if (n <= 0) break;
    line.append(buf, n);
  }
  close(out);
  size_t at = line.find("listening on ");
  if (at == std::string::npos) {
    std::cerr << "tessera up: the server did not start; see " << data << "/logs/server.log\n";
    StopChild(server, absl::Seconds(2));
    return 1;
  }
  std::string addr = line.substr(at + 13, line.find(' ', at + 13) - at - 13);
  const std::string url = "http://" + addr;

  // 2. The agents.
  std::vector<Child> agents;
  for (const NodeDef& n : nodes) {
    Child c{n.name};
    c.pid = Spawn({exe,
                   "agent",
                   "--server",
                   url,
                   "--token",
                   node_tokens[n.name],
                   "--node-name",
                   n.name,
                   "--backend",
                   "fake",
                   "--fake-config",
                   n.config,
                   "--state-dir",
                   data + "/agents/" + n.name,
                   "--rack",
                   n.rack,
                   "--block",
                   "block-0",
                   "--heartbeat",
                   "2s",
                   "--sync",
                   "1s",
                   "--cgroup-parent",
                   ""},
                  data + "/logs/agent-" + n.name + ".log", nullptr);
    agents.push_back(c);
  }
  ApiClient api(url, admin_token);
  absl::Time ready_by = absl::Now() + absl::Seconds(60);
  size_t ready = 0;
  while (absl::Now() < ready_by && !g_up_stop.load()) {
    absl::StatusOr<ApiResponse> r = api.Get("/api/v1/nodes");
    ready = 0;
    if (r.ok() && r->code == 200) {
      for (const Json& n : r->body["items"]) {
        if (n.contains("status") && n["status"].value("phase", "") == "Ready") ++ready;
      }
    }
    if (ready == nodes.size()) break;
    Sleep(absl::Milliseconds(300));
  }
  std::cout << "tessera up: server " << url << " (API " << url << "/api/v1), " << ready << "/"
            << nodes.size() << " nodes Ready, data in " << data << std::endl;
  std::cout << "tessera up: dashboard " << url << "/ui/ (open it in a browser)" << std::endl;

  // 3. The demo workload.
  std::vector<std::pair<std::string, std::string>> submitted;  // plural, name
  if (f.demo && !g_up_stop.load()) {
    std::vector<Json> jobs;
    Json train = Job("llm-pretrain", 2, 8, "NVIDIA H100 80GB HBM3",
                     {"/bin/sh", examples + "/train.sh"}, data + "/checkpoints/llm-pretrain");
    train["spec"]["gang"] = {{"minMember", 2}};
    jobs.push_back(train);
    for (int i = 0; i < 3; ++i) {
      jobs.push_back(Job(absl::StrCat("small-", i), 1, 1, "",
                         {"/bin/sh", examples + "/small.sh", absl::StrCat(20 + 10 * i)}, ""));
    }
    Json isvc = {
        {"apiVersion", "tessera.dev/v1"},
        {"kind", "InferenceService"},
        {"metadata",
         {{"name", "chat"},
          {"namespace", "demo"},
          {"annotations",
           {{"tessera.dev/command", Json::array({"/bin/sh", examples + "/serve.sh"}).dump()}}}}},
        {"spec",
         {{"modelVersion", "chat-v1"},
          // Autoscaled on the p99 its replicas write (examples/serve.sh).
          {"replicas", {{"min", 2}, {"max", 4}}},
          {"slo", {{"p99LatencyMs", 250}}},
          {"gpusPerReplica", 1}}}};
    for (const Json& j : jobs) {
      absl::StatusOr<ApiResponse> r = api.Post("/api/v1/namespaces/demo/trainingjobs", j);
      if (!r.ok() || r->code != 201) {
        std::cerr << "tessera up: submit " << j["metadata"]["name"] << ": "
                  << (r.ok() ? ApiError(*r) : std::string(r.status().message())) << "\n";
      } else {
        submitted.emplace_back("trainingjobs", j["metadata"]["name"]);
      }
    }
    absl::StatusOr<ApiResponse> r = api.Post("/api/v1/namespaces/demo/inferenceservices", isvc);
    if (!r.ok() || r->code != 201) {
      std::cerr << "tessera up: submit chat: "
                << (r.ok() ? ApiError(*r) : std::string(r.status().message())) << "\n";
    } else {
      submitted.emplace_back("inferenceservices", "chat");
    }
    // Wait (up to 20 s) for the placements, then print them.
    absl::Time by = absl::Now() + absl::Seconds(20);
    std::map<std::string, Json> placed;
    while (absl::Now() < by && !g_up_stop.load()) {
      placed.clear();
      for (const auto& [plural, name] : submitted) {
        absl::StatusOr<ApiResponse> g =
            api.Get(absl::StrCat("/api/v1/namespaces/demo/", plural, "/", name));
        if (g.ok() && g->code == 200 && g->body.contains("status") &&
            g->body["status"].contains("placement")) {
          placed[name] = g->body["status"];
        }
      }
      if (placed.size() == submitted.size()) break;
      Sleep(absl::Milliseconds(300));
    }
    std::cout << "\nplacements (namespace demo):\n";
    for (const auto& [plural, name] : submitted) {
      auto it = placed.find(name);
      if (it == placed.end()) {
        std::cout << "  " << name << ": not placed yet\n";
        continue;
      }
      std::cout << "  " << name << " (" << it->second.value("phase", "") << ", generation "
                << it->second.value("generation", 0) << "):\n";
      for (const Json& m : it->second["placement"]) {
        std::vector<int> gpus = m.value("gpus", std::vector<int>{});
        std::cout << "    " << m.value("group", "") << "-" << m.value("member", 0) << " -> "
                  << m.value("node", "") << " GPUs [" << absl::StrJoin(gpus, ",") << "]\n";
      }
    }
    std::cout
        << "\n  logs:        " << exe << " logs llm-pretrain -n demo -f --server " << addr
        << " --token " << admin_token << "\n  checkpoints: " << data << "/checkpoints/llm-pretrain"
        << "\n  nodes:       curl -H 'Authorization: Bearer " << admin_token << "' " << url
        << "/api/v1/nodes"
        << "\n  metrics:     the tessera.dev/agent-endpoint annotation of each node + /metrics "
           "(with the admin token)"
        << "\n  autoscaling: chat starts with 2 replicas and scales on the p99 they report: " << exe
        << " get isvc -n demo --server " << addr << " --token " << admin_token
        << "\n  inject XID:  curl -XPOST -H 'Authorization: Bearer " << admin_token
        << "' '<agent-endpoint>/fake/event?gpu=3&type=xid&xid=79'"
        << "\n  token:       " << admin_token << " (admin; all tokens in " << data << "/tokens)\n";
  }
  std::cout << (f.duration > 0 ? absl::StrCat("running for ", f.duration, " s") : "running")
            << "; Ctrl-C stops everything" << std::endl;
  if (f.duration > 0) {
    Sleep(absl::Seconds(f.duration));
  } else {
    while (Sleep(absl::Seconds(1))) {
    }
  }

  // 4. Stop: delete the jobs (members get their checkpoint signal), then agents, then server.
  if (f.demo) {
    // What the autoscaler made of the demo service's SLO (2 replicas at the start).
    absl::StatusOr<ApiResponse> chat = api.Get("/api/v1/namespaces/demo/inferenceservices/chat");
    if (chat.ok() && chat->code == 200 && chat->body.contains("status")) {
      const Json& st = chat->body["status"];
      std::cout << "tessera up: chat (" << st.value("phase", "") << ") serves with "
                << (st.contains("placement") ? st["placement"].size() : 0) << " replicas, "
                << st.value("desiredReplicas", 0) << " desired for its p99 target of 250 ms"
                << std::endl;
    }
  }
  std::cout << "tessera up: stopping" << std::endl;
  for (const auto& [plural, name] : submitted) {
    (void)api.Delete(absl::StrCat("/api/v1/namespaces/demo/", plural, "/", name));
  }
  absl::SleepFor(absl::Seconds(submitted.empty() ? 0 : 3));
  for (Child& a : agents) kill(a.pid, SIGTERM);
  for (Child& a : agents) StopChild(a, absl::Seconds(5));
  // Members outlive agents by design; `up` owns this whole cluster, so it ends them too.
  int killed = 0;
  std::error_code ec;
  for (const auto& node : fs::directory_iterator(data + "/agents", ec)) {
    for (const auto& m : fs::directory_iterator(node.path() / "members", ec)) {
      std::ifstream in(m.path() / "member.json");
      Json j = Json::parse(in, nullptr, false);
      if (j.is_object() && j.value("pid", 0) > 0 && kill(-j.value("pid", 0), SIGKILL) == 0)
        ++killed;
    }
  }
  StopChild(server, absl::Seconds(5));
  std::cout << "tessera up: stopped server and " << agents.size() << " agents"
            << (killed > 0 ? absl::StrCat(", killed ", killed, " leftover members") : "")
            << "; data kept in " << data << std::endl;
  return 0;
}

}  // namespace

void RegisterUpCommand(CLI::App& app) {
  auto f = std::make_shared<UpFlags>();
  CLI::App* up = app.add_subcommand(
      "up", "Run a local cluster: server + agents with fake GPUs + a demo workload");
  up->add_option("--h100-nodes", f->h100_nodes, "Nodes with 8 x H100 on NVSwitch (default 4)");
  up->add_option("--pcie-nodes", f->pcie_nodes, "Nodes with 4 x A100 PCIe (default 2)");
  up->add_option("--listen", f->listen, "API address (default 127.0.0.1:7420; port 0: any)");
  up->add_option("--data-dir", f->data_dir, "Store, agent state and logs (default: a temp dir)");
  up->add_option("--profile", f->profile,
                 "The server's scheduler profile YAML (deploy/profiles/; default: the server's)");
  up->add_option("--duration", f->duration, "Stop after this many seconds (default: Ctrl-C)");
  up->add_flag("!--no-demo", f->demo, "Do not submit the demo workload");
  up->add_option("--examples", f->examples, "Directory of the demo scripts (default ./examples)");
  up->add_option("--fake-gpus", f->fake_gpus,
                 "Directory of fake GPU configs (default ./deploy/fake-gpus)");
  up->footer(
      "Examples:\n"
      "  tessera up                                   # 4 H100 + 2 A100 nodes and a demo workload\n"
      "  tessera up --h100-nodes 16 --pcie-nodes 0 --no-demo --duration 600");
  up->callback([f]() {
    int code = RunUp(*f);
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace tessera::agent
