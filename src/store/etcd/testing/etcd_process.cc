#include "store/etcd/testing/etcd_process.h"

#include <stdlib.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/testing/child_process.h"
#include "httplib.h"

namespace tessera::testing {

std::string EtcdProcess::FindBin(const std::string& source_dir, std::string* why) {
  return FindBedBin(source_dir, "etcd", why);
}

EtcdProcess* EtcdProcess::Shared(const std::string& source_dir, std::string* why) {
  struct Holder {
    EtcdProcess etcd;
    std::string dir, error;
    ~Holder() {
      etcd.Stop();
      if (!dir.empty()) {
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
      }
    }
  };
  static Holder* holder = [&] {
    auto* h = new Holder;
    const std::string bin = FindBin(source_dir, &h->error);
    if (bin.empty()) return h;
    const char* tmp = getenv("TMPDIR");
    std::string tmpl = std::string(tmp ? tmp : "/tmp") + "/tessera-etcd-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
      h->error = "mkdtemp failed";
      return h;
    }
    h->dir = tmpl;
    h->error = h->etcd.Start(bin, h->dir + "/data", h->dir + "/etcd.log");
    static std::unique_ptr<Holder> owner(h);  // stops etcd at exit
    return h;
  }();
  if (holder->error.empty() && !holder->etcd.running()) holder->error = holder->etcd.Restart();
  if (!holder->error.empty()) {
    *why = holder->error;
    return nullptr;
  }
  return &holder->etcd;
}

std::string EtcdProcess::Start(const std::string& bin_dir, const std::string& data_dir,
                               const std::string& log) {
  if (pid_ > 0) return "etcd already runs";
  bin_ = bin_dir;
  data_dir_ = data_dir;
  log_ = log;
  if (client_port_ <= 0) client_port_ = FreeLoopbackPort();
  if (peer_port_ <= 0) peer_port_ = FreeLoopbackPort();
  const std::string client = "http://127.0.0.1:" + std::to_string(client_port_);
  const std::string peer = "http://127.0.0.1:" + std::to_string(peer_port_);
  const bool member = !initial_cluster_.empty();
  std::vector<std::string> argv = {
      bin_ + "/etcd",
      "--name",
      name_,
      "--data-dir",
      data_dir_,
      "--listen-client-urls",
      extra_client_host_.empty()
          ? client
          : absl::StrCat(client, ",http://", extra_client_host_, ":", client_port_),
      "--advertise-client-urls",
      client,
      "--listen-peer-urls",
      peer,
      "--initial-advertise-peer-urls",
      peer,
      "--initial-cluster",
      member ? initial_cluster_ : name_ + "=" + peer,
      "--log-level",
      "warn"};
  if (!fsync_) argv.push_back("--unsafe-no-fsync");
  if (member) {
    argv.push_back("--initial-cluster-token");
    argv.push_back("tessera-test");
  }
  pid_ = SpawnProcess(argv, log_);
  if (member) return "";  // healthy once a quorum runs: EtcdCluster waits
  return WaitHealthy(absl::Seconds(30));
}

std::string EtcdProcess::WaitHealthy(absl::Duration timeout) {
  httplib::Client c("127.0.0.1", client_port_);
  c.set_connection_timeout(1);
  // Polls /health: etcd has no readiness signal a parent can wait on.
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    auto r = c.Get("/health");
    if (r && r->status == 200 && r->body.find("true") != std::string::npos) return "";
    int status;
    if (pid_ > 0 && waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return "etcd exited: " + TailFile(log_);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return absl::StrCat("etcd not healthy within ", absl::FormatDuration(timeout), ": ",
                      TailFile(log_));
}

std::string EtcdCluster::Start(const std::string& bin_dir, const std::string& dir, int n,
                               const std::string& extra_client_host, bool fsync) {
  std::vector<std::pair<int, int>> ports;
  std::string initial;
  for (int i = 0; i < n; ++i) {
    ports.emplace_back(FreeLoopbackPort(), FreeLoopbackPort());
    absl::StrAppend(&initial, i ? "," : "", "m", i, "=http://127.0.0.1:", ports[i].second);
  }
  for (int i = 0; i < n; ++i) {
    auto m = std::make_unique<EtcdProcess>();
    m->SetMember(absl::StrCat("m", i), ports[i].first, ports[i].second, initial);
    m->set_extra_client_host(extra_client_host);
    m->set_fsync(fsync);
    const std::string base = absl::StrCat(dir, "/m", i);
    if (std::string e = m->Start(bin_dir, base, base + ".log"); !e.empty()) return e;
    members_.push_back(std::move(m));
  }
  for (auto& m : members_) {
    if (std::string e = m->WaitHealthy(absl::Seconds(30)); !e.empty()) return e;
  }
  return "";
}

std::vector<std::string> EtcdCluster::endpoints() const {
  std::vector<std::string> out;
  for (const auto& m : members_) out.push_back(m->endpoint());
  return out;
}

void EtcdProcess::Stop() { KillProcess(pid_); }

void EtcdProcess::Kill() { KillProcess(pid_, absl::ZeroDuration()); }

}  // namespace tessera::testing
