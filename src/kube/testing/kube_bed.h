// KubeBed: a real etcd and kube-apiserver on loopback, for integration tests and for
// `tessera bench kube` (docs/kubernetes.md).
//
// The binaries come from scripts/kube-bed.sh (built from the pinned Go modules of tests/kube):
// KubeBedOptions::bin_dir names their directory, else env TESSERA_KUBE_BED_BIN, else
// `<source_dir>/scripts/kube-bed.sh --check` finds the cached build. Start() makes, in a fresh
// temp dir: a CA and, signed by it, a serving certificate for 127.0.0.1/localhost and a client
// certificate (CN tessera-cert-admin, O system:masters), all ECDSA P-256 with the openssl CLI; a
// static token file with an admin token (group system:masters) and a user token with no rights of
// its own; the service-account signing key pair; then starts etcd (free ports, no fsync) and
// kube-apiserver (free port, RBAC + Node authorization, the scheduling.k8s.io/v1alpha3
// Workload/PodGroup API and the GenericWorkload gate) and waits for /readyz. Kubeconfigs for the
// admin token, the user token and the client certificate are written.
// Stop() (and the destructor) kill every process group the bed started and remove the temp dir
// (kept when env TESSERA_KUBE_BED_KEEP is set, for debugging).
// Admission: ServiceAccount is disabled (no controller-manager creates default service accounts).
// The children die with the thread that started them (PR_SET_PDEATHSIG follows the forking
// thread, not the process): start the bed from a thread that outlives it.
// Not thread-safe; one owner.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/testing/child_process.h"
#include "store/etcd/testing/etcd_process.h"

namespace tessera::testing {

struct KubeBedOptions {
  std::vector<std::string> extra_apiserver_args;
  // The directory of the bed's binaries; "" looks for them (FindBin).
  std::string bin_dir;
  // The source tree whose scripts/kube-bed.sh --check finds the cached build; "" is the current
  // directory. The tests pass TESSERA_SOURCE_DIR (kube_test_util.h).
  std::string source_dir;
};

class KubeBed {
 public:
  static constexpr char kAdminToken[] = "tessera-bed-admin-token";
  static constexpr char kUserToken[] = "tessera-bed-user-token";
  static constexpr char kUserName[] = "bed-user";

  KubeBed() = default;
  KubeBed(const KubeBed&) = delete;
  KubeBed& operator=(const KubeBed&) = delete;
  ~KubeBed() { Stop(); }

  // The bin dir of the built bed, or "" with `why` saying what to run: opts.bin_dir, else env
  // TESSERA_KUBE_BED_BIN, else what `<opts.source_dir>/scripts/kube-bed.sh --check` prints.
  static std::string FindBin(std::string* why, const KubeBedOptions& opts = {});

  // "" on success, else what failed (with the tail of the failing process's log).
  std::string Start(const KubeBedOptions& opts = {});
  void Stop();

  // Kills kube-apiserver (SIGKILL: a crash; its graceful shutdown drains for many seconds) and
  // starts it again on the same port with the same etcd: its watch cache starts at the current
  // revision, so a watch from an older resourceVersion gets 410.
  std::string RestartApiserver() {
    StopApiserver();
    return StartApiserver();
  }
  void StopApiserver() { Kill(apiserver_pid_, absl::ZeroDuration()); }
  std::string StartApiserverAgain() { return StartApiserver(); }

  // A second kube-apiserver on the same etcd (an HA pair), for writes while the first is down.
  // Returns "" and its server URL in `server`; stopped with the bed.
  std::string StartSecondApiserver(std::string* server);

  // Starts kube-controller-manager with only `controllers` (e.g. "disruption", which keeps
  // PodDisruptionBudget status) against this apiserver as the admin; no leader election, no
  // serving port. Idempotent; stopped with the bed.
  std::string StartControllerManager(const std::string& controllers);

  // Starts the bed's kube-scheduler with `args` (e.g. --config FILE; nothing is added), its
  // output in kube_scheduler_log(). "" once it has not exited within 200 ms, else why. Stopped
  // with the bed or by StopKubeScheduler.
  std::string StartKubeScheduler(const std::vector<std::string>& args);
  void StopKubeScheduler() { Kill(scheduler_pid_); }
  // False once the kube-scheduler started above has exited (reaped here).
  bool KubeSchedulerRunning();

  // Compacts etcd's history up to its current revision (etcd's JSON gateway), so every older
  // resourceVersion is gone from storage. Returns the revision, or -1.
  int64_t CompactEtcd();

  std::string server() const { return "https://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  const std::string& dir() const { return dir_; }
  const std::string& bin() const { return bin_; }
  std::string ca_file() const { return dir_ + "/ca.crt"; }
  std::string admin_kubeconfig() const { return dir_ + "/admin.kubeconfig"; }
  std::string user_kubeconfig() const { return dir_ + "/user.kubeconfig"; }
  std::string cert_kubeconfig() const { return dir_ + "/cert.kubeconfig"; }
  std::string apiserver_log() const { return dir_ + "/kube-apiserver.log"; }
  std::string kube_scheduler_log() const { return dir_ + "/kube-scheduler.log"; }
  // The children's process ids (-1 when not running), e.g. to read their CPU time in /proc.
  pid_t etcd_pid() const { return etcd_.pid(); }
  pid_t apiserver_pid() const { return apiserver_pid_; }
  pid_t kube_scheduler_pid() const { return scheduler_pid_; }

  // Writes a kubeconfig for this server with `user_lines` under users[0].user (indent 4) and
  // `cluster_lines` replacing the default certificate-authority line.
  void WriteKubeconfig(const std::string& path, const std::string& user_lines,
                       const std::string& cluster_lines = "",
                       const std::string& server_url = "") const;

  // Runs `openssl ARGS` in the bed's dir; "" or the error.
  std::string OpenSsl(const std::string& args) const;

  // The last 3000 bytes of a file (a child's log), for error messages.
  static std::string Tail(const std::string& path) { return TailFile(path); }

 private:
  static int FreePort() { return FreeLoopbackPort(); }
  std::string MakeCerts();
  static pid_t Spawn(const std::vector<std::string>& argv, const std::string& log) {
    return SpawnProcess(argv, log);
  }
  static void Kill(pid_t& pid, absl::Duration grace = absl::Seconds(2)) { KillProcess(pid, grace); }
  std::string StartApiserver() { return StartApiserverOn(port_, &apiserver_pid_, apiserver_log()); }
  std::string StartApiserverOn(int port, pid_t* pid, const std::string& log);
  // Spawns a helper (controller-manager, scheduler) and checks it is alive 200 ms later.
  std::string StartHelper(const std::vector<std::string>& argv, const std::string& log, pid_t* pid);

  KubeBedOptions opts_;
  std::string bin_, dir_;
  EtcdProcess etcd_;
  int port_ = -1;
  pid_t apiserver_pid_ = -1, kcm_pid_ = -1, second_pid_ = -1, scheduler_pid_ = -1;
  int second_port_ = -1;
};

}  // namespace tessera::testing
