// EtcdProcess: one etcd member on loopback (free client and peer ports, a data dir of the
// caller's, no fsync), for tests and test beds: KubeBed runs kube-apiserver on one, the etcd
// Store tests run the store against one. The binary comes from the test bed's build
// (scripts/kube-bed.sh; FindBin).
// Stop() keeps the data dir, so Start() again is a restart of the same member on the same ports
// (a lost connection, then a recovered etcd). Kill() is a crash (SIGKILL).
// The child dies with the thread that started it (child_process.h). Not thread-safe; one owner.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace tessera::testing {

class EtcdProcess {
 public:
  EtcdProcess() = default;
  EtcdProcess(const EtcdProcess&) = delete;
  EtcdProcess& operator=(const EtcdProcess&) = delete;
  ~EtcdProcess() { Stop(); }

  // The directory holding the bed's `etcd`, or "" with `why` saying what to run (FindBedBin).
  static std::string FindBin(const std::string& source_dir, std::string* why);

  // One etcd per test binary, started on the first call in a temp dir and stopped (its dir
  // removed) at exit; later calls return the same one, restarted when it is not running. null
  // with `why` when the bed's etcd is not built (the caller skips) or does not start. Call it
  // from the main thread (the child dies with the thread that started it).
  static EtcdProcess* Shared(const std::string& source_dir, std::string* why);

  // Starts `<bin_dir>/etcd` with its data in `data_dir` (created by etcd) and its log appended to
  // `log`, on the ports of the previous Start or on new free ones, and waits (up to 30 s) until
  // /health says true. "" on success, else why (with the log's tail).
  std::string Start(const std::string& bin_dir, const std::string& data_dir,
                    const std::string& log);
  // Starts it again after Stop/Kill: same binary, data and ports.
  std::string Restart() { return Start(bin_, data_dir_, log_); }

  // Makes this process member `name` of a cluster on the given ports, whose members are listed
  // in `initial_cluster` ("m0=http://127.0.0.1:P0,m1=..."); call before the first Start. A member
  // is healthy only once a quorum runs, so Start on a cluster member does not wait for /health:
  // EtcdCluster starts every member, then waits.
  void SetMember(const std::string& name, int client_port, int peer_port,
                 const std::string& initial_cluster) {
    name_ = name;
    client_port_ = client_port;
    peer_port_ = peer_port;
    initial_cluster_ = initial_cluster;
  }
  // Also serve clients on `host` (an address of this machine other than loopback, such as a
  // veth end a network namespace reaches), on the same port; set before the first Start.
  void set_extra_client_host(std::string host) { extra_client_host_ = std::move(host); }
  // fsync etcd's WAL, as production does (default off: tests run without fsync).
  void set_fsync(bool on) { fsync_ = on; }
  // Waits until /health says true; "" or why (the log's tail).
  std::string WaitHealthy(absl::Duration timeout);
  // SIGTERM, then SIGKILL after 2 s. Keeps the data.
  void Stop();
  // SIGKILL at once (a crash). Keeps the data.
  void Kill();

  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  int client_port() const { return client_port_; }
  // "127.0.0.1:PORT", the gRPC endpoint.
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(client_port_); }

 private:
  std::string bin_, data_dir_, log_;
  std::string name_ = "bed", initial_cluster_;  // initial_cluster_ "": a cluster of one
  std::string extra_client_host_;
  bool fsync_ = false;
  int client_port_ = -1, peer_port_ = -1;
  pid_t pid_ = -1;
};

// A cluster of `n` etcd members on loopback (m0..m{n-1}), each in `dir`/mI with its log
// `dir`/mI.log, for tests of losing a member. Not thread-safe; one owner.
class EtcdCluster {
 public:
  // "" once every member is healthy, else why. `extra_client_host` and `fsync`: as
  // EtcdProcess's set_extra_client_host and set_fsync, for every member.
  std::string Start(const std::string& bin_dir, const std::string& dir, int n = 3,
                    const std::string& extra_client_host = "", bool fsync = false);
  EtcdProcess& member(int i) { return *members_[i]; }
  int size() const { return static_cast<int>(members_.size()); }
  // Every member's client endpoint, in order.
  std::vector<std::string> endpoints() const;

 private:
  std::vector<std::unique_ptr<EtcdProcess>> members_;
};

}  // namespace tessera::testing
