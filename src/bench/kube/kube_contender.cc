#include "bench/kube/kube_contender.h"

#include <fstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "kube/kubeconfig.h"
#include "kube/resource.h"
#include "kubesched/kube_scheduler.h"
#include "metrics/registry.h"
#include "sched/pack/plugin_set.h"

namespace tessera::bench {
namespace {

using Json = nlohmann::json;
using testing::KubeBed;

class TesseraContender : public Contender {
 public:
  TesseraContender(const ContenderOptions& o, const KubeBed& bed) : o_(o), bed_(bed) {}
  ~TesseraContender() override { Stop(); }
  std::string pod_scheduler_name() const override { return kTesseraContender; }

  absl::Status Start() override {
    kube::RestOptions ro;
    ro.qps = o_.qps;
    ro.burst = o_.burst;
    ro.max_idle_connections = o_.api_writers + 8;
    ro.user_agent = "tessera-scheduler";
    absl::StatusOr<std::unique_ptr<kube::RestClient>> c = AdminClient(bed_, ro);
    if (!c.ok()) return c.status();
    client_ = *std::move(c);
    kubesched::KubeSchedulerOptions so;
    so.api_writers = o_.api_writers;
    so.sync_timeout = absl::Minutes(5);
    absl::StatusOr<obs::Logger> log = obs::Logger::File(bed_.dir() + "/tessera-scheduler.log",
                                                        obs::LogFormat::kText, "scheduler");
    if (log.ok()) so.log = *log;
    // As `tessera scheduler` runs it: every plugin it can run (the pack policies too).
    auto plugins = std::make_shared<sched::pack::PluginSet>();
    so.queues.extra_plugins = [plugins](sched::PluginRegistry* r) { return plugins->Register(r); };
    absl::StatusOr<std::unique_ptr<kubesched::KubeScheduler>> s =
        kubesched::KubeScheduler::Create(*client_, clock_, registry_, std::move(so));
    if (!s.ok()) return s.status();
    sched_ = *std::move(s);
    return sched_->Start();
  }
  absl::Status Alive() override { return absl::OkStatus(); }
  Json Stats() const override {
    if (!sched_) return Json::object();
    const kubesched::KubeSchedulerStats st = sched_->stats();
    Json out = {{"cycles", st.cycles},
                {"bound", st.bound},
                {"bind_errors", st.bind_errors},
                {"pending_jobs", st.pending_jobs},
                {"unaccounted_pods", st.unaccounted_pods}};
    // The cycles' own time (scheduler_scheduling_algorithm_duration_seconds), from /metrics.
    for (absl::string_view line : absl::StrSplit(registry_.Render(), '\n')) {
      for (const char* what : {"_sum", "_count"}) {
        const std::string prefix =
            absl::StrCat("scheduler_scheduling_algorithm_duration_seconds", what, " ");
        double v = 0;
        if (absl::StartsWith(line, prefix) && absl::SimpleAtod(line.substr(prefix.size()), &v)) {
          out[absl::StrCat("algorithm_seconds", what)] = v;
        }
      }
    }
    return out;
  }
  void Stop() override {
    if (sched_) sched_->Stop();
  }

 private:
  const ContenderOptions o_;
  const KubeBed& bed_;
  RealClock clock_;
  metrics::Registry registry_;
  std::unique_ptr<kube::RestClient> client_;
  std::unique_ptr<kubesched::KubeScheduler> sched_;
};

class KubeSchedulerContender : public Contender {
 public:
  KubeSchedulerContender(const ContenderOptions& o, KubeBed& bed) : o_(o), bed_(bed) {}
  ~KubeSchedulerContender() override { Stop(); }
  std::string pod_scheduler_name() const override { return "default-scheduler"; }

  absl::Status Start() override {
    const std::string config = bed_.dir() + "/kube-scheduler.yaml";
    std::ofstream(config)
        << "apiVersion: kubescheduler.config.k8s.io/v1\n"
        << "kind: KubeSchedulerConfiguration\n"
        << "clientConnection:\n"
        << "  kubeconfig: " << bed_.admin_kubeconfig() << "\n"
        << "  qps: " << o_.qps << "\n"
        << "  burst: " << o_.burst << "\n"
        << "leaderElection:\n  leaderElect: false\n"
        << "profiles:\n- schedulerName: default-scheduler\n"
        << "  pluginConfig:\n  - name: NodeResourcesFit\n    args:\n"
        << "      scoringStrategy:\n        type: " << o_.kube_scoring << "\n"
        << "        resources:\n        - name: nvidia.com/gpu\n          weight: 1\n";
    std::string e = bed_.StartKubeScheduler(
        {"--config=" + config, "--kubeconfig=" + bed_.admin_kubeconfig(), "--leader-elect=false",
         "--feature-gates=GenericWorkload=true", "--secure-port=0"});
    if (!e.empty()) return absl::InternalError(e);
    return absl::OkStatus();
  }
  absl::Status Alive() override {
    if (bed_.KubeSchedulerRunning()) return absl::OkStatus();
    return absl::InternalError("kube-scheduler exited: " +
                               KubeBed::Tail(bed_.kube_scheduler_log()));
  }
  Json Stats() const override { return Json::object(); }
  void Stop() override { bed_.StopKubeScheduler(); }

 private:
  const ContenderOptions o_;
  KubeBed& bed_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<kube::RestClient>> AdminClient(const KubeBed& bed,
                                                              kube::RestOptions ro) {
  absl::StatusOr<kube::KubeConfig> kc = kube::LoadKubeconfig({bed.admin_kubeconfig(), "", nullptr});
  if (!kc.ok()) return kc.status();
  return kube::RestClient::Create(*std::move(kc), std::move(ro));
}

std::unique_ptr<Contender> MakeContender(const std::string& which, const ContenderOptions& o,
                                         KubeBed& bed) {
  if (which == kTesseraContender) return std::make_unique<TesseraContender>(o, bed);
  return std::make_unique<KubeSchedulerContender>(o, bed);
}

absl::Status Probe(kube::RestClient& c, Contender& s, const std::string& ns,
                   absl::Duration timeout) {
  absl::StatusOr<Json> have = c.Get(kube::NamespacesResource(), "", ns);
  if (!have.ok()) {
    absl::StatusOr<Json> made =
        c.Create(kube::NamespacesResource(), "",
                 {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}});
    if (!made.ok()) return made.status();
  }
  Json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", "probe"}}},
              {"spec",
               {{"schedulerName", s.pod_scheduler_name()},
                {"containers", Json::array({{{"name", "main"},
                                             {"image", "probe:1"},
                                             {"resources", {{"requests", {{"cpu", "10m"}}}}}}})}}}};
  if (absl::Status st = c.Create(kube::PodsResource(), ns, pod).status(); !st.ok()) return st;
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (absl::Status st = s.Alive(); !st.ok()) return st;
    absl::StatusOr<Json> p = c.Get(kube::PodsResource(), ns, "probe");
    if (p.ok() && !(*p)["spec"].value("nodeName", "").empty()) {
      kube::DeleteOptions now;
      now.grace_period_seconds = 0;  // no kubelet would ever confirm a graceful deletion
      return c.Delete(kube::PodsResource(), ns, "probe", now);
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("the probe Pod was not bound within ", absl::FormatDuration(timeout)));
}

}  // namespace tessera::bench
