// gpu_check_kubelet: drives a real `tessera device-plugin` process from kubelet's side, for
// scripts/gpu-check.sh on a machine with a GPU (and, with the stub NVML library, in ctest).
//
//   gpu_check_kubelet --tessera BIN [--expect-resources N] [--watch-seconds S]
//                     [-- extra device-plugin flags...]
//
// It serves the test kubelet's v1beta1.Registration in a fresh temporary directory, starts
// `BIN device-plugin --plugin-dir DIR <extra flags>`, waits for N registrations (default 1), and
// for every registered resource: GetDevicePluginOptions, the first ListAndWatch list, Allocate of
// the first device and, with two or more devices, GetPreferredAllocation of two. Then it keeps
// every ListAndWatch stream open for S seconds (default 0): any further list is a health change
// (on a healthy machine there must be none). Last it sends SIGTERM and expects exit 0 with the
// sockets removed. It prints one JSON object with everything seen; exit 0 when every step worked
// (what the devices should be is for the caller to compare), 1 otherwise, 2 on bad usage.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "deviceplugin/testing/test_kubelet.h"
#include "nlohmann/json.hpp"

extern char** environ;

namespace tessera::deviceplugin::testing {
namespace {

using nlohmann::json;

struct Args {
  std::string tessera;
  int expect_resources = 1;
  int watch_seconds = 0;
  std::vector<std::string> extra;
};

bool ParseArgs(int argc, char** argv, Args* a, std::string* error) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char* name) -> const char* {
      if (i + 1 >= argc) {
        *error = std::string(name) + ": needs a value";
        return nullptr;
      }
      return argv[++i];
    };
    if (arg == "--") {
      for (++i; i < argc; ++i) a->extra.emplace_back(argv[i]);
      break;
    } else if (arg == "--tessera") {
      const char* v = value("--tessera");
      if (v == nullptr) return false;
      a->tessera = v;
    } else if (arg == "--expect-resources" || arg == "--watch-seconds") {
      const char* v = value(arg.c_str());
      if (v == nullptr) return false;
      char* end = nullptr;
      long n = std::strtol(v, &end, 10);
      if (*v == '\0' || *end != '\0' || n < 0 || n > 3600) {
        *error = arg + ": expected a whole number 0..3600, got '" + v + "'";
        return false;
      }
      (arg == "--watch-seconds" ? a->watch_seconds : a->expect_resources) = static_cast<int>(n);
    } else {
      *error = "unknown argument '" + arg + "'";
      return false;
    }
  }
  if (a->tessera.empty()) {
    *error = "--tessera: required";
    return false;
  }
  return true;
}

json DeviceJson(const v1beta1::Device& d) {
  json numa = json::array();
  if (d.has_topology()) {
    for (const auto& n : d.topology().nodes()) numa.push_back(n.id());
  }
  return {{"id", d.id()}, {"health", d.health()}, {"numa_nodes", numa}};
}

json ListJson(const v1beta1::ListAndWatchResponse& list) {
  json devices = json::array();
  for (const auto& d : list.devices()) devices.push_back(DeviceJson(d));
  return devices;
}

json AllocateJson(const v1beta1::ContainerAllocateResponse& c) {
  json envs = json::object();
  for (const auto& [k, v] : c.envs()) envs[k] = v;
  json devices = json::array();
  for (const auto& d : c.devices()) {
    devices.push_back({{"host_path", d.host_path()},
                       {"container_path", d.container_path()},
                       {"permissions", d.permissions()}});
  }
  json mounts = json::array();
  for (const auto& m : c.mounts()) {
    mounts.push_back({{"host_path", m.host_path()}, {"container_path", m.container_path()}});
  }
  json cdi = json::array();
  for (const auto& d : c.cdi_devices()) cdi.push_back(d.name());
  json annotations = json::object();
  for (const auto& [k, v] : c.annotations()) annotations[k] = v;
  return {{"envs", envs},
          {"devices", devices},
          {"mounts", mounts},
          {"cdi_devices", cdi},
          {"annotations", annotations}};
}

int Run(const Args& args) {
  json out = {{"errors", json::array()}};
  auto fail = [&out](const std::string& e) { out["errors"].push_back(e); };

  char tmpl[] = "/tmp/tessera-gpucheck-kubelet-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    std::cerr << "mkdtemp failed\n";
    return 1;
  }
  const std::string dir = tmpl;
  out["plugin_dir"] = dir;
  TestKubelet kubelet(dir);
  if (absl::Status st = kubelet.Start(); !st.ok()) {
    std::cerr << "test kubelet: " << st << "\n";
    return 1;
  }

  std::vector<std::string> argv_s = {args.tessera, "device-plugin", "--plugin-dir", dir};
  argv_s.insert(argv_s.end(), args.extra.begin(), args.extra.end());
  out["command"] = argv_s;
  std::vector<char*> argv;
  argv.reserve(argv_s.size() + 1);
  for (std::string& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  const std::string log = dir + "/plugin.log";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = -1;
  int spawned = posix_spawn(&pid, args.tessera.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    std::cerr << "cannot start " << args.tessera << "\n";
    return 1;
  }

  std::map<std::string, std::unique_ptr<PluginClient>> clients;  // by resource name
  json resources = json::object();
  if (!kubelet.WaitForRegistrations(static_cast<size_t>(args.expect_resources),
                                    absl::Seconds(60))) {
    fail("expected " + std::to_string(args.expect_resources) + " registrations within 60s, got " +
         std::to_string(kubelet.registrations().size()));
  }
  json rejections = json::array();
  for (const std::string& r : kubelet.rejections()) rejections.push_back(r);
  out["rejections"] = rejections;
  for (const v1beta1::RegisterRequest& reg : kubelet.registrations()) {
    const std::string name = reg.resource_name();
    json r = {
        {"endpoint", reg.endpoint()},
        {"version", reg.version()},
        {"get_preferred_allocation_available", reg.options().get_preferred_allocation_available()},
        {"pre_start_required", reg.options().pre_start_required()}};
    std::unique_ptr<PluginClient> client = kubelet.Connect(reg.endpoint());
    v1beta1::DevicePluginOptions options;
    grpc::Status s = client->GetDevicePluginOptions(&options);
    if (!s.ok()) fail(name + ": GetDevicePluginOptions: " + s.error_message());
    client->StartWatch();
    std::optional<v1beta1::ListAndWatchResponse> list =
        client->WaitForList([](const auto&) { return true; }, 0, absl::Seconds(30));
    if (!list) {
      fail(name + ": no ListAndWatch list within 30s");
    } else {
      r["devices"] = ListJson(*list);
      if (list->devices_size() > 0) {
        v1beta1::AllocateRequest req;
        req.add_container_requests()->add_devices_ids(list->devices(0).id());
        v1beta1::AllocateResponse resp;
        s = client->Allocate(req, &resp);
        if (!s.ok() || resp.container_responses_size() != 1) {
          fail(name + ": Allocate(" + list->devices(0).id() + "): " + s.error_message());
        } else {
          r["allocate"] = {{"device_ids", {list->devices(0).id()}},
                           {"response", AllocateJson(resp.container_responses(0))}};
        }
      }
      if (list->devices_size() >= 2) {
        v1beta1::PreferredAllocationRequest preq;
        auto* c = preq.add_container_requests();
        for (const auto& d : list->devices()) c->add_available_deviceids(d.id());
        c->set_allocation_size(2);
        v1beta1::PreferredAllocationResponse presp;
        s = client->GetPreferredAllocation(preq, &presp);
        if (!s.ok() || presp.container_responses_size() != 1) {
          fail(name + ": GetPreferredAllocation: " + s.error_message());
        } else {
          json ids = json::array();
          for (const auto& id : presp.container_responses(0).deviceids()) ids.push_back(id);
          r["preferred_allocation_of_2"] = ids;
        }
      }
    }
    resources[name] = r;
    clients[name] = std::move(client);
  }

  // Health over the watch window: every list after the first is a change.
  absl::SleepFor(absl::Seconds(args.watch_seconds));
  out["watch_seconds"] = args.watch_seconds;
  for (auto& [name, client] : clients) {
    std::vector<v1beta1::ListAndWatchResponse> lists = client->lists();
    resources[name]["lists_received"] = lists.size();
    if (!lists.empty()) resources[name]["last_list"] = ListJson(lists.back());
  }
  out["resources"] = resources;

  kill(pid, SIGTERM);
  int status = 0;
  bool exited = false;
  for (absl::Time deadline = absl::Now() + absl::Seconds(20); absl::Now() < deadline;) {
    if (waitpid(pid, &status, WNOHANG) == pid) {
      exited = true;
      break;
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  if (!exited) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    fail("device-plugin did not exit within 20s of SIGTERM");
  }
  out["plugin_exit_code"] = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fail("device-plugin exited non-zero");
  for (const auto& [name, r] : resources.items()) {
    if (std::filesystem::exists(dir + "/" + r["endpoint"].get<std::string>())) {
      fail(name + ": socket left behind after SIGTERM");
    }
  }
  clients.clear();
  std::ifstream in(log);
  out["plugin_log_tail"] = [&] {
    std::string text((std::istreambuf_iterator<char>(in)), {});
    return text.size() > 4000 ? text.substr(text.size() - 4000) : text;
  }();
  kubelet.StopAndDeleteSockets();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  out["ok"] = out["errors"].empty();
  std::cout << out.dump(2) << "\n";
  return out["errors"].empty() ? 0 : 1;
}

}  // namespace
}  // namespace tessera::deviceplugin::testing

int main(int argc, char** argv) {
  tessera::deviceplugin::testing::Args args;
  std::string error;
  if (!tessera::deviceplugin::testing::ParseArgs(argc, argv, &args, &error)) {
    std::cerr << "gpu_check_kubelet: " << error << "\n";
    return 2;
  }
  try {
    return tessera::deviceplugin::testing::Run(args);
  } catch (const std::exception& e) {  // nlohmann::json or std::filesystem
    std::cerr << "gpu_check_kubelet: " << e.what() << "\n";
    return 1;
  }
}
