#include "kube/testing/kube_bed.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "httplib.h"
#include "nlohmann/json.hpp"

namespace tessera::testing {

std::string KubeBed::FindBin(std::string* why, const KubeBedOptions& opts) {
  auto has_apiserver = [](const std::string& dir) {
    return access((dir + "/kube-apiserver").c_str(), X_OK) == 0;
  };
  if (!opts.bin_dir.empty()) {
    if (has_apiserver(opts.bin_dir)) return opts.bin_dir;
    *why = opts.bin_dir + " has no kube-apiserver";
    return "";
  }
  return FindBedBin(opts.source_dir, "kube-apiserver", why);
}

std::string KubeBed::Start(const KubeBedOptions& opts) {
  std::string why;
  bin_ = FindBin(&why, opts);
  if (bin_.empty()) return why;
  if (system("command -v openssl >/dev/null 2>&1") != 0) {
    return "the openssl CLI is missing (scripts/setup.sh installs it)";
  }
  opts_ = opts;
  const char* tmp = getenv("TMPDIR");
  std::string tmpl = std::string(tmp ? tmp : "/tmp") + "/tessera-kube-bed-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) return "mkdtemp failed";
  dir_ = tmpl;
  if (std::string e = MakeCerts(); !e.empty()) return e;
  {
    std::ofstream t(dir_ + "/tokens.csv");
    t << kAdminToken << ",bed-admin,uid-bed-admin,\"system:masters\"\n";
    t << kUserToken << "," << kUserName << ",uid-bed-user\n";
  }
  port_ = FreePort();
  if (std::string e = etcd_.Start(bin_, dir_ + "/etcd", dir_ + "/etcd.log"); !e.empty()) return e;
  if (std::string e = StartApiserver(); !e.empty()) return e;
  WriteKubeconfig(admin_kubeconfig(), "token: " + std::string(kAdminToken));
  WriteKubeconfig(user_kubeconfig(), "token: " + std::string(kUserToken));
  WriteKubeconfig(cert_kubeconfig(), "client-certificate: " + dir_ + "/client.crt\n" +
                                         "    client-key: " + dir_ + "/client.key");
  return "";
}

void KubeBed::Stop() {
  Kill(scheduler_pid_);
  Kill(kcm_pid_);
  Kill(second_pid_, absl::ZeroDuration());
  Kill(apiserver_pid_);
  etcd_.Stop();
  if (!dir_.empty() && getenv("TESSERA_KUBE_BED_KEEP") == nullptr) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  dir_.clear();
}

std::string KubeBed::StartSecondApiserver(std::string* server) {
  if (second_pid_ <= 0) {
    second_port_ = FreePort();
    if (std::string e =
            StartApiserverOn(second_port_, &second_pid_, dir_ + "/kube-apiserver-2.log");
        !e.empty()) {
      return e;
    }
  }
  *server = "https://127.0.0.1:" + std::to_string(second_port_);
  return "";
}

std::string KubeBed::StartHelper(const std::vector<std::string>& argv, const std::string& log,
                                 pid_t* pid) {
  *pid = Spawn(argv, log);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  int status;
  if (waitpid(*pid, &status, WNOHANG) == *pid) {
    *pid = -1;
    return argv[0] + " exited: " + Tail(log);
  }
  return "";
}

std::string KubeBed::StartControllerManager(const std::string& controllers) {
  if (kcm_pid_ > 0) return "";
  return StartHelper({bin_ + "/kube-controller-manager", "--kubeconfig=" + admin_kubeconfig(),
                      "--controllers=" + controllers, "--leader-elect=false", "--secure-port=0",
                      "--use-service-account-credentials=false"},
                     dir_ + "/kube-controller-manager.log", &kcm_pid_);
}

std::string KubeBed::StartKubeScheduler(const std::vector<std::string>& args) {
  if (scheduler_pid_ > 0) return "kube-scheduler already runs";
  std::vector<std::string> argv = {bin_ + "/kube-scheduler"};
  argv.insert(argv.end(), args.begin(), args.end());
  return StartHelper(argv, kube_scheduler_log(), &scheduler_pid_);
}

bool KubeBed::KubeSchedulerRunning() {
  if (scheduler_pid_ <= 0) return false;
  int status;
  if (waitpid(scheduler_pid_, &status, WNOHANG) == scheduler_pid_) {
    kill(-scheduler_pid_, SIGKILL);  // anything it left in its group
    scheduler_pid_ = -1;
    return false;
  }
  return true;
}

int64_t KubeBed::CompactEtcd() {
  httplib::Client etcd("127.0.0.1", etcd_.client_port());
  auto r = etcd.Post("/v3/kv/range", R"({"key":"AA=="})", "application/json");
  if (!r || r->status != 200) return -1;
  const nlohmann::json j = nlohmann::json::parse(r->body, nullptr, false);
  if (j.is_discarded()) return -1;
  const int64_t rev = std::stoll(j["header"]["revision"].get<std::string>());
  auto c = etcd.Post("/v3/kv/compaction",
                     nlohmann::json{{"revision", std::to_string(rev)}, {"physical", true}}.dump(),
                     "application/json");
  if (!c || c->status != 200) return -1;
  return rev;
}

void KubeBed::WriteKubeconfig(const std::string& path, const std::string& user_lines,
                              const std::string& cluster_lines,
                              const std::string& server_url) const {
  std::ofstream k(path);
  k << "apiVersion: v1\nkind: Config\nclusters:\n- name: bed\n  cluster:\n    server: "
    << (server_url.empty() ? server() : server_url) << "\n    "
    << (cluster_lines.empty() ? "certificate-authority: " + ca_file() : cluster_lines)
    << "\nusers:\n- name: u\n  user:\n    " << user_lines
    << "\ncontexts:\n- name: bed\n  context:\n    cluster: bed\n    user: u\n"
    << "    namespace: default\ncurrent-context: bed\n";
}

std::string KubeBed::OpenSsl(const std::string& args) const {
  const std::string cmd = "cd " + dir_ + " && openssl " + args + " >>" + dir_ + "/openssl.log 2>&1";
  if (system(cmd.c_str()) != 0) return "openssl " + args + " failed (see openssl.log)";
  return "";
}

std::string KubeBed::MakeCerts() {
  const char* ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  std::ofstream(dir_ + "/serving.ext")
      << "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n";
  std::ofstream(dir_ + "/client.ext") << "extendedKeyUsage=clientAuth\n";
  for (const std::string& args : {
           std::string("req -x509 ") + ec + " -days 2 -subj /CN=tessera-bed-ca" +
               " -keyout ca.key -out ca.crt",
           std::string("req ") + ec + " -subj /CN=kube-apiserver -keyout serving.key" +
               " -out serving.csr",
           std::string("x509 -req -in serving.csr -CA ca.crt -CAkey ca.key -CAcreateserial") +
               " -days 2 -extfile serving.ext -out serving.crt",
           std::string("req ") + ec + " -subj /O=system:masters/CN=tessera-cert-admin" +
               " -keyout client.key -out client.csr",
           std::string("x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial") +
               " -days 2 -extfile client.ext -out client.crt",
           std::string("ecparam -name prime256v1 -genkey -noout -out sa.key"),
           std::string("ec -in sa.key -pubout -out sa.pub"),
       }) {
    if (std::string e = OpenSsl(args); !e.empty()) return e;
  }
  return "";
}

std::string KubeBed::StartApiserverOn(int port, pid_t* pid, const std::string& log) {
  std::vector<std::string> argv = {
      bin_ + "/kube-apiserver",
      "--etcd-servers=http://" + etcd_.endpoint(),
      "--bind-address=127.0.0.1",
      "--advertise-address=127.0.0.1",
      // No kubelets and no Service to reconcile; a loopback advertise address needs this.
      "--endpoint-reconciler-type=none",
      "--secure-port=" + std::to_string(port),
      "--tls-cert-file=" + dir_ + "/serving.crt",
      "--tls-private-key-file=" + dir_ + "/serving.key",
      "--client-ca-file=" + dir_ + "/ca.crt",
      "--token-auth-file=" + dir_ + "/tokens.csv",
      "--authorization-mode=Node,RBAC",
      "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
      "--service-account-key-file=" + dir_ + "/sa.pub",
      "--service-account-signing-key-file=" + dir_ + "/sa.key",
      "--service-cluster-ip-range=10.96.0.0/16",
      "--runtime-config=scheduling.k8s.io/v1alpha3=true",
      "--feature-gates=GenericWorkload=true",
      "--disable-admission-plugins=ServiceAccount",
      "--cert-dir=" + dir_ + "/apiserver-certs",
      "--profiling=false",
  };
  argv.insert(argv.end(), opts_.extra_apiserver_args.begin(), opts_.extra_apiserver_args.end());
  *pid = Spawn(argv, log);
  httplib::SSLClient c("127.0.0.1", port);
  c.set_ca_cert_path(ca_file().c_str());
  c.enable_server_certificate_verification(true);
  c.set_connection_timeout(1);
  c.set_read_timeout(5);
  const httplib::Headers auth = {{"Authorization", std::string("Bearer ") + kAdminToken}};
  for (int i = 0; i < 600; ++i) {
    auto r = c.Get("/readyz", auth);
    if (r && r->status == 200) return "";
    int status;
    if (waitpid(*pid, &status, WNOHANG) == *pid) {
      *pid = -1;
      return "kube-apiserver exited: " + Tail(log);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return "kube-apiserver not ready within 60 s: " + Tail(log);
}

}  // namespace tessera::testing
