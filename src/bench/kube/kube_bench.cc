// `tessera bench kube` (kube_bench.h). For each scheduler in --schedulers, in turn:
//   1. a fresh bed (etcd + kube-apiserver with the test fixture's flags, plus
//      scheduling.k8s.io/v1beta1, which kube-scheduler reads PodGroups from, plus any
//      --apiserver-arg); every request of this bench and of both schedulers is the admin's
//      (group system:masters), which API Priority and Fairness exempts from the apiserver's
//      in-flight limits, so --max-requests-inflight needs no raising;
//   2. the Nodes created through the API from --threads threads (timed: node_create_s);
//   3. a watch on the bench namespace's Pods, which timestamps each Pod's first sight with
//      spec.nodeName;
//   4. the scheduler: Tessera in process (kubesched::KubeScheduler on a RestClient paced at
//      --qps/--burst, no leader election) or kube-scheduler as a child (--config: a
//      KubeSchedulerConfiguration with clientConnection.qps/burst = --qps/--burst, profile
//      default-scheduler, NodeResourcesFit scoring --kube-scheduler-scoring on nvidia.com/gpu;
//      --feature-gates=GenericWorkload=true for KEP-4671 gangs). A probe Pod asking 10m CPU is
//      bound by it before any work is created (ready_s: start to probe bound; kube-scheduler
//      binds only once its caches are synced);
//   5. the work, created from --threads threads in a seeded shuffled order: --single 1-GPU Pods
//      and --gangs gangs (a KEP-4671 PodGroup with gang minCount = --gang-size, then its Pods of
//      --gpus-per-gang-pod GPUs), each create timestamped as it is sent;
//   6. the wait: every Pod bound, --timeout-s since the first create, or no binding for --idle-s
//      once creation is over. Then latencies (creation sent -> binding seen), partially bound
//      gangs, unbound Pods.
// On the last bed, after its scheduler stopped: --raw-bindings Pods of no scheduler, bound from
// --threads threads as fast as the API answers (raw_binding_per_s).
#include "bench/kube/kube_bench.h"

#include <unistd.h>

#include <atomic>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/harness/server_child.h"
#include "bench/kube/kube_workload.h"
#include "common/bench_stats.h"
#include "common/clock.h"
#include "kube/kubeconfig.h"
#include "kube/resource.h"
#include "kube/testing/kube_bed.h"
#include "kubesched/kube_scheduler.h"
#include "metrics/registry.h"
#include "nlohmann/json.hpp"
#include "sched/pack/plugin_set.h"

namespace tessera::bench {
namespace {

using Json = nlohmann::json;
using testing::KubeBed;
using testing::KubeBedOptions;

constexpr char kTessera[] = "tessera";
constexpr char kKubeScheduler[] = "kube-scheduler";
constexpr char kNamespace[] = "bench";
constexpr char kProbeNamespace[] = "bench-probe";

struct Flags {
  KubeBenchShape shape;
  std::string schedulers = "tessera,kube-scheduler";
  double qps = 5000;
  int burst = 5000;
  std::string bed_bin;
  int raw_bindings = 5000;
  double timeout_s = 600;
  double idle_s = 60;
  int threads = 32;
  int api_writers = kubesched::KubeSchedulerOptions{}.api_writers;
  std::string kube_scoring = "MostAllocated";
  uint64_t seed = 1;
  std::vector<std::string> apiserver_args;
};

absl::StatusOr<std::unique_ptr<kube::RestClient>> AdminClient(const KubeBed& bed,
                                                              kube::RestOptions ro) {
  absl::StatusOr<kube::KubeConfig> kc = kube::LoadKubeconfig({bed.admin_kubeconfig(), "", nullptr});
  if (!kc.ok()) return kc.status();
  return kube::RestClient::Create(*std::move(kc), std::move(ro));
}

// apiserver_request_total from the apiserver's /metrics, summed by "VERB resource[/subresource]".
std::map<std::string, double> ApiRequests(kube::RestClient& c) {
  std::map<std::string, double> out;
  absl::StatusOr<kube::HttpResult> r = c.Raw("GET", "/metrics");
  if (!r.ok() || r->status != 200) return out;
  constexpr absl::string_view kName = "apiserver_request_total{";
  for (absl::string_view line : absl::StrSplit(r->body, '\n')) {
    if (!absl::StartsWith(line, kName)) continue;
    const size_t close = line.rfind('}');
    double v = 0;
    if (close == absl::string_view::npos || !absl::SimpleAtod(line.substr(close + 1), &v)) continue;
    std::map<std::string, std::string> labels;
    for (absl::string_view kv :
         absl::StrSplit(line.substr(kName.size(), close - kName.size()), ',')) {
      std::pair<std::string, std::string> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
      if (p.second.size() >= 2) labels[p.first] = p.second.substr(1, p.second.size() - 2);
    }
    std::string key = absl::StrCat(labels["verb"], " ", labels["resource"]);
    if (!labels["subresource"].empty()) absl::StrAppend(&key, "/", labels["subresource"]);
    out[key] += v;
  }
  return out;
}

// `after` - `before`, the keys that changed.
Json RequestDelta(const std::map<std::string, double>& before,
                  const std::map<std::string, double>& after) {
  Json out = Json::object();
  for (const auto& [k, v] : after) {
    auto it = before.find(k);
    const double d = v - (it == before.end() ? 0 : it->second);
    if (d > 0) out[k] = d;
  }
  return out;
}

// A scheduler under test on one bed.
class Contender {
 public:
  virtual ~Contender() = default;
  virtual std::string pod_scheduler_name() const = 0;
  virtual absl::Status Start() = 0;
  // OK while it runs.
  virtual absl::Status Alive() = 0;
  virtual Json Stats() const = 0;
  virtual void Stop() = 0;
};

class TesseraContender : public Contender {
 public:
  TesseraContender(const Flags& f, const KubeBed& bed) : f_(f), bed_(bed) {}
  ~TesseraContender() override { Stop(); }
  std::string pod_scheduler_name() const override { return kTessera; }

  absl::Status Start() override {
    kube::RestOptions ro;
    ro.qps = f_.qps;
    ro.burst = f_.burst;
    ro.max_idle_connections = f_.api_writers + 8;
    ro.user_agent = "tessera-scheduler";
    absl::StatusOr<std::unique_ptr<kube::RestClient>> c = AdminClient(bed_, ro);
    if (!c.ok()) return c.status();
    client_ = *std::move(c);
    kubesched::KubeSchedulerOptions o;
    o.api_writers = f_.api_writers;
    o.sync_timeout = absl::Minutes(5);
    absl::StatusOr<obs::Logger> log = obs::Logger::File(bed_.dir() + "/tessera-scheduler.log",
                                                        obs::LogFormat::kText, "scheduler");
    if (log.ok()) o.log = *log;
    // As `tessera scheduler` runs it: every plugin it can run (the pack policies too).
    auto plugins = std::make_shared<sched::pack::PluginSet>();
    o.queues.extra_plugins = [plugins](sched::PluginRegistry* r) { return plugins->Register(r); };
    absl::StatusOr<std::unique_ptr<kubesched::KubeScheduler>> s =
        kubesched::KubeScheduler::Create(*client_, clock_, registry_, std::move(o));
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
  const Flags& f_;
  const KubeBed& bed_;
  RealClock clock_;
  metrics::Registry registry_;
  std::unique_ptr<kube::RestClient> client_;
  std::unique_ptr<kubesched::KubeScheduler> sched_;
};

class KubeSchedulerContender : public Contender {
 public:
  KubeSchedulerContender(const Flags& f, KubeBed& bed) : f_(f), bed_(bed) {}
  ~KubeSchedulerContender() override { Stop(); }
  std::string pod_scheduler_name() const override { return "default-scheduler"; }

  absl::Status Start() override {
    const std::string config = bed_.dir() + "/kube-scheduler.yaml";
    std::ofstream(config)
        << "apiVersion: kubescheduler.config.k8s.io/v1\n"
        << "kind: KubeSchedulerConfiguration\n"
        << "clientConnection:\n"
        << "  kubeconfig: " << bed_.admin_kubeconfig() << "\n"
        << "  qps: " << f_.qps << "\n"
        << "  burst: " << f_.burst << "\n"
        << "leaderElection:\n  leaderElect: false\n"
        << "profiles:\n- schedulerName: default-scheduler\n"
        << "  pluginConfig:\n  - name: NodeResourcesFit\n    args:\n"
        << "      scoringStrategy:\n        type: " << f_.kube_scoring << "\n"
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
  const Flags& f_;
  KubeBed& bed_;
};

// A Pod asking a little CPU, bound by the contender: it is up with its caches filled. (Tessera
// refuses a Pod that asks nothing at all.)
absl::Status Probe(kube::RestClient& c, Contender& s, absl::Duration timeout) {
  if (absl::Status st = CreateNamespace(c, kProbeNamespace); !st.ok()) return st;
  Json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", "probe"}}},
              {"spec",
               {{"schedulerName", s.pod_scheduler_name()},
                {"containers", Json::array({{{"name", "main"},
                                             {"image", "probe:1"},
                                             {"resources", {{"requests", {{"cpu", "10m"}}}}}}})}}}};
  if (absl::Status st = c.Create(kube::PodsResource(), kProbeNamespace, pod).status(); !st.ok()) {
    return st;
  }
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (absl::Status st = s.Alive(); !st.ok()) return st;
    absl::StatusOr<Json> p = c.Get(kube::PodsResource(), kProbeNamespace, "probe");
    if (p.ok() && !(*p)["spec"].value("nodeName", "").empty()) {
      kube::DeleteOptions now;
      now.grace_period_seconds = 0;  // no kubelet would ever confirm a graceful deletion
      return c.Delete(kube::PodsResource(), kProbeNamespace, "probe", now);
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("the probe Pod was not bound within ", absl::FormatDuration(timeout)));
}

Json Quantiles(const std::vector<double>& ms) {
  return {{"p50_ms", Percentile(ms, 0.5)},
          {"p99_ms", Percentile(ms, 0.99)},
          {"n", static_cast<int64_t>(ms.size())}};
}

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

// CPU seconds of the bed's processes and of this one (which runs Tessera when it is the
// contender, and always the creators and the Pod watch).
struct CpuSample {
  double apiserver = 0, etcd = 0, kube_scheduler = 0, self = 0;
  static CpuSample Of(const KubeBed& bed) {
    CpuSample c;
    c.apiserver = ProcCpuSeconds(bed.apiserver_pid());
    c.etcd = ProcCpuSeconds(bed.etcd_pid());
    if (bed.kube_scheduler_pid() > 0) c.kube_scheduler = ProcCpuSeconds(bed.kube_scheduler_pid());
    c.self = ProcCpuSeconds(getpid());
    return c;
  }
  Json Since(const CpuSample& before) const {
    return {{"kube_apiserver", apiserver - before.apiserver},
            {"etcd", etcd - before.etcd},
            {"kube_scheduler", kube_scheduler - before.kube_scheduler},
            {"bench_process", self - before.self}};
  }
};

// What the watch saw of the work `w`.
Json Measure(const KubeBenchShape& s, const CreatedWork& w, const BindingWatch& watch) {
  std::vector<double> single, gang_all, gang_last;
  int bound = 0, partial = 0;
  for (int i = 0; i < s.single; ++i) {
    const absl::Time b = watch.BoundAt(SinglePodName(i));
    if (b == absl::InfinitePast()) continue;
    ++bound;
    if (w.single_sent[i] != absl::InfinitePast()) single.push_back(Ms(b - w.single_sent[i]));
  }
  for (int g = 0; g < s.gangs; ++g) {
    int members = 0;
    absl::Time last = absl::InfinitePast();
    for (int m = 0; m < s.gang_size; ++m) {
      const absl::Time b = watch.BoundAt(GangPodName(g, m));
      if (b == absl::InfinitePast()) continue;
      ++members;
      last = std::max(last, b);
    }
    bound += members;
    if (members == s.gang_size) {
      gang_all.push_back(Ms(last - w.gang_sent[g]));
      gang_last.push_back(Ms(last - w.gang_last_sent[g]));
    } else if (members > 0) {
      ++partial;
    }
  }
  const absl::Time end =
      watch.last_bound() == absl::InfinitePast() ? absl::Now() : watch.last_bound();
  const double wall_s =
      w.first == absl::InfiniteFuture() ? 0 : std::max(1e-9, absl::ToDoubleSeconds(end - w.first));
  const double create_s =
      w.first == absl::InfiniteFuture() ? 0 : absl::ToDoubleSeconds(w.last - w.first);
  std::string stale;
  const int stale_n = watch.BoundButUnschedulable(&stale);
  return {{"pods_bound_per_s", wall_s > 0 ? bound / wall_s : 0.0},
          {"single", Quantiles(single)},
          {"gang_all_bound", Quantiles(gang_all)},
          {"gang_last_member_to_all_bound", Quantiles(gang_last)},
          {"partially_bound_gangs", partial},
          {"unbound", s.pods() - bound},
          {"bound", bound},
          {"wall_s", wall_s},
          {"create_s", create_s},
          {"pods_created_per_s", create_s > 0 ? s.pods() / create_s : 0.0},
          {"create_errors", w.errors},
          {"first_create_error", w.first_error},
          {"bound_but_podscheduled_false", stale_n},
          {"bound_but_podscheduled_false_example", stale}};
}

// One contender on `bed`; with `raw`, the raw binding rate afterwards. Errors end the bench.
absl::StatusOr<Json> RunOne(const Flags& f, const std::string& which, KubeBed& bed, double* raw) {
  const std::string load_before = LoadAvg();
  kube::RestOptions ro;
  ro.timeout = absl::Seconds(60);
  ro.max_idle_connections = f.threads + 8;
  ro.user_agent = "tessera-bench";
  absl::StatusOr<std::unique_ptr<kube::RestClient>> admin = AdminClient(bed, ro);
  if (!admin.ok()) return admin.status();
  kube::RestClient& c = **admin;
  absl::Time t0 = absl::Now();
  if (absl::Status s = CreateNodes(c, f.shape, f.threads); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("creating the Nodes: ", s.message()));
  }
  const double node_create_s = absl::ToDoubleSeconds(absl::Now() - t0);
  if (absl::Status s = CreateNamespace(c, kNamespace); !s.ok()) return s;
  BindingWatch watch(c, kNamespace);
  if (!watch.synced()) return absl::UnavailableError("the Pod watch did not sync within 60 s");

  std::unique_ptr<Contender> sched;
  if (which == kTessera) {
    sched = std::make_unique<TesseraContender>(f, bed);
  } else {
    sched = std::make_unique<KubeSchedulerContender>(f, bed);
  }
  t0 = absl::Now();
  if (absl::Status s = sched->Start(); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("starting ", which, ": ", s.message()));
  }
  if (absl::Status s = Probe(c, *sched, absl::Minutes(5)); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(which, ": ", s.message()));
  }
  const double ready_s = absl::ToDoubleSeconds(absl::Now() - t0);

  const CpuSample cpu_before = CpuSample::Of(bed);
  const std::map<std::string, double> requests_before = ApiRequests(c);
  std::atomic<bool> created{false};
  CreatedWork work;
  std::thread creator([&] {
    work = CreateWork(c, kNamespace, f.shape, sched->pod_scheduler_name(), f.threads, f.seed);
    created.store(true);
  });
  watch.WaitBound(f.shape.pods(), absl::Now() + absl::Seconds(f.timeout_s), absl::Seconds(f.idle_s),
                  [&] { return created.load(); });
  creator.join();
  const CpuSample cpu_after = CpuSample::Of(bed);
  absl::Status alive = sched->Alive();
  Json out = Measure(f.shape, work, watch);
  out["cpu_s"] = cpu_after.Since(cpu_before);
  // What the work cost the apiserver, by verb and resource (the bench's own creates and watch
  // included).
  out["apiserver_requests"] = RequestDelta(requests_before, ApiRequests(c));
  out["ready_s"] = ready_s;
  out["node_create_s"] = node_create_s;
  out["scheduler_stats"] = sched->Stats();
  sched->Stop();
  if (!alive.ok()) return alive;
  if (raw != nullptr && f.raw_bindings > 0) {
    absl::StatusOr<double> r = RawBindingRate(c, "raw", f.raw_bindings, f.shape.nodes, f.threads);
    if (!r.ok()) {
      return absl::Status(r.status().code(), absl::StrCat("raw bindings: ", r.status().message()));
    }
    *raw = *r;
  }
  out["loadavg_before"] = load_before;
  out["loadavg_after"] = LoadAvg();
  return out;
}

std::vector<std::string> Validate(const Flags& f, std::vector<std::string>* schedulers) {
  std::vector<std::string> errs;
  const KubeBenchShape& s = f.shape;
  for (auto [name, v] : {std::pair<const char*, int>{"--nodes", s.nodes},
                         {"--rack-size", s.rack_size},
                         {"--gpus-per-node", s.gpus_per_node},
                         {"--gang-size", s.gang_size},
                         {"--gpus-per-gang-pod", s.gpus_per_gang_pod},
                         {"--threads", f.threads},
                         {"--api-writers", f.api_writers},
                         {"--burst", f.burst}}) {
    if (v < 1) errs.push_back(absl::StrCat(name, " must be at least 1, got ", v));
  }
  for (auto [name, v] : {std::pair<const char*, int>{"--single", s.single},
                         {"--gangs", s.gangs},
                         {"--raw-bindings", f.raw_bindings}}) {
    if (v < 0) errs.push_back(absl::StrCat(name, " must not be negative, got ", v));
  }
  if (f.qps <= 0) errs.push_back("--qps must be positive");
  if (f.timeout_s <= 0 || f.idle_s <= 0)
    errs.push_back("--timeout-s and --idle-s must be positive");
  if (s.gpus_per_gang_pod > s.gpus_per_node) {
    errs.push_back(absl::StrCat("--gpus-per-gang-pod ", s.gpus_per_gang_pod,
                                " exceeds --gpus-per-node ", s.gpus_per_node));
  }
  if (errs.empty() && s.gpus_asked() > s.gpus()) {
    errs.push_back(absl::StrCat("the work asks ", s.gpus_asked(), " GPUs (--single + --gangs x ",
                                "--gang-size x --gpus-per-gang-pod) but the nodes have ", s.gpus(),
                                " (--nodes x --gpus-per-node): it cannot all be bound"));
  }
  if (f.kube_scoring != "MostAllocated" && f.kube_scoring != "LeastAllocated") {
    errs.push_back("--kube-scheduler-scoring must be MostAllocated or LeastAllocated");
  }
  for (absl::string_view n : absl::StrSplit(f.schedulers, ',', absl::SkipWhitespace())) {
    if (n != kTessera && n != kKubeScheduler) {
      errs.push_back(absl::StrCat("--schedulers: unknown scheduler '", n, "' (", kTessera, " or ",
                                  kKubeScheduler, ")"));
    } else {
      schedulers->emplace_back(n);
    }
  }
  if (schedulers->empty()) errs.push_back("--schedulers names none");
  return errs;
}

// {"target", "value", "met"}; met is null when the value could not be measured.
Json Target(const std::string& target, const Json& value, const std::function<bool()>& met) {
  return {{"target", target}, {"value", value}, {"met", value.is_null() ? Json() : Json(met())}};
}

Json Targets(const Json& results, const Json& raw) {
  const Json none;
  const Json* t = results.contains(kTessera) ? &results[kTessera] : nullptr;
  const Json* k = results.contains(kKubeScheduler) ? &results[kKubeScheduler] : nullptr;
  auto rate = [](const Json* r) { return r ? (*r)["pods_bound_per_s"].get<double>() : 0.0; };
  const Json vs_kube = t && k && rate(k) > 0 ? Json(rate(t) / rate(k)) : Json();
  const Json vs_raw =
      t && raw.is_number() && raw.get<double>() > 0 ? Json(rate(t) / raw.get<double>()) : Json();
  const Json gang_p99 = t && (*t)["gang_all_bound"]["n"].get<int64_t>() > 0
                            ? (*t)["gang_all_bound"]["p99_ms"]
                            : Json();
  const Json partial = t ? (*t)["partially_bound_gangs"] : Json();
  return {{"ratios", {{"tessera_over_kube_scheduler", vs_kube}, {"tessera_over_raw", vs_raw}}},
          {"targets",
           {{"pods_bound_per_s_vs_kube_scheduler",
             Target(">= 5", vs_kube, [&] { return vs_kube.get<double>() >= 5; })},
            {"pods_bound_per_s_vs_raw_binding",
             Target(">= 0.5", vs_raw, [&] { return vs_raw.get<double>() >= 0.5; })},
            {"gang_all_bound_p99_ms",
             Target("<= 100", gang_p99, [&] { return gang_p99.get<double>() <= 100; })},
            {"partially_bound_gangs",
             Target("== 0", partial, [&] { return partial.get<int64_t>() == 0; })}}}};
}

int RunBench(const Flags& f) {
  std::vector<std::string> schedulers;
  if (std::vector<std::string> errs = Validate(f, &schedulers); !errs.empty()) {
    std::cerr << "bench kube: " << absl::StrJoin(errs, "; ") << "\n";
    return 2;
  }
  KubeBedOptions bo;
  bo.bin_dir = f.bed_bin;
  // kube-scheduler v1.37.2 with GenericWorkload reads PodGroups as scheduling.k8s.io/v1beta1 (it
  // waits for that informer's sync before it schedules anything); the fixture serves v1alpha3,
  // which the bench and Tessera use. Both versions are one stored object.
  bo.extra_apiserver_args = {"--runtime-config=scheduling.k8s.io/v1beta1=true"};
  bo.extra_apiserver_args.insert(bo.extra_apiserver_args.end(), f.apiserver_args.begin(),
                                 f.apiserver_args.end());
  std::string why;
  if (KubeBed::FindBin(&why, bo).empty()) {
    std::cerr << "bench kube: " << why << " (or pass --bed-bin DIR)\n";
    return 1;
  }
  RaiseFileLimit();
  const std::string load_before = LoadAvg();
  const absl::Time start = absl::Now();
  Json results = Json::object();
  Json raw;
  std::string version;
  for (size_t i = 0; i < schedulers.size(); ++i) {
    const std::string& which = schedulers[i];
    KubeBed bed;
    if (std::string e = bed.Start(bo); !e.empty()) {
      std::cerr << "bench kube: the bed did not start: " << e << "\n";
      return 1;
    }
    if (version.empty()) {
      if (auto c = AdminClient(bed, {}); c.ok()) {
        if (auto v = (*c)->Raw("GET", "/version"); v.ok() && v->status == 200) {
          version = Json::parse(v->body, nullptr, false).value("gitVersion", "");
        }
      }
    }
    std::cerr << "bench kube: " << which << " on a fresh bed (" << f.shape.nodes << " nodes, "
              << f.shape.pods() << " Pods)\n";
    double r = 0;
    const bool last = i + 1 == schedulers.size();
    absl::StatusOr<Json> one = RunOne(f, which, bed, last ? &r : nullptr);
    if (!one.ok()) {
      std::cerr << "bench kube: " << which << ": " << one.status().message() << "\n";
      return 1;
    }
    results[which] = *std::move(one);
    if (last && f.raw_bindings > 0) raw = r;
  }
  const KubeBenchShape& s = f.shape;
  Json out = {{"bench", "kube"},
              {"apiserver", {{"version", version}, {"extra_args", bo.extra_apiserver_args}}},
              {"size",
               {{"nodes", s.nodes},
                {"rack_size", s.rack_size},
                {"gpus_per_node", s.gpus_per_node},
                {"single", s.single},
                {"gangs", s.gangs},
                {"gang_size", s.gang_size},
                {"gpus_per_gang_pod", s.gpus_per_gang_pod},
                {"pods", s.pods()},
                {"gpus", s.gpus()},
                {"gpus_asked", s.gpus_asked()},
                {"qps", f.qps},
                {"burst", f.burst},
                {"threads", f.threads},
                {"tessera_api_writers", f.api_writers},
                {"kube_scheduler_scoring", f.kube_scoring},
                {"raw_bindings", f.raw_bindings}}},
              {"schedulers", results},
              {"raw_binding_per_s", raw},
              {"machine",
               {{"nproc", static_cast<int64_t>(sysconf(_SC_NPROCESSORS_ONLN))},
                {"loadavg_before", load_before},
                {"loadavg_after", LoadAvg()}}},
              {"total_s", absl::ToDoubleSeconds(absl::Now() - start)}};
  out.update(Targets(results, raw));
  std::cout << out.dump(2) << std::endl;
  return 0;
}

}  // namespace

void RegisterKubeBenchCommand(CLI::App& bench) {
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = bench.add_subcommand(
      "kube",
      "Tessera's Kubernetes scheduler beside kube-scheduler, each on a fresh etcd + "
      "kube-apiserver with the same Nodes and Pods; and the apiserver's raw binding rate");
  cmd->add_option("--nodes", f->shape.nodes, "Nodes (default 5000)");
  cmd->add_option("--rack-size", f->shape.rack_size, "Nodes per tessera.dev/rack (default 32)");
  cmd->add_option("--gpus-per-node", f->shape.gpus_per_node, "GPUs per node (default 8)");
  cmd->add_option("--single", f->shape.single,
                  "Single-GPU Pods (default 8000: with the default gangs, all 40,000 GPUs)");
  cmd->add_option("--gangs", f->shape.gangs, "Gangs, each a KEP-4671 PodGroup (default 500)");
  cmd->add_option("--gang-size", f->shape.gang_size, "Pods per gang = its minCount (default 8)");
  cmd->add_option("--gpus-per-gang-pod", f->shape.gpus_per_gang_pod,
                  "GPUs per gang Pod (default 8)");
  cmd->add_option("--schedulers", f->schedulers,
                  "Which, in order, each on a fresh bed (default tessera,kube-scheduler)");
  cmd->add_option("--qps", f->qps, "Each scheduler's client QPS (default 5000)");
  cmd->add_option("--burst", f->burst, "Each scheduler's client burst (default 5000)");
  cmd->add_option("--bed-bin", f->bed_bin,
                  "The bed's binaries (default: $TESSERA_KUBE_BED_BIN, else what "
                  "scripts/kube-bed.sh --check prints, run from the current directory)");
  cmd->add_option("--raw-bindings", f->raw_bindings,
                  "Pods bound directly for the raw binding rate, on the last bed (default 5000; "
                  "0: none)");
  cmd->add_option("--timeout-s", f->timeout_s,
                  "Longest wait per scheduler from the first create (default 600)");
  cmd->add_option("--idle-s", f->idle_s,
                  "Stop waiting when nothing was bound for this long after creation (default 60)");
  cmd->add_option("--threads", f->threads,
                  "Concurrent creates (Nodes, Pods) and raw bindings (default 32)");
  cmd->add_option("--api-writers", f->api_writers,
                  "Tessera's concurrent API writes, as `tessera scheduler --api-writers` "
                  "(default 16)");
  cmd->add_option("--kube-scheduler-scoring", f->kube_scoring,
                  "kube-scheduler's NodeResourcesFit scoring on nvidia.com/gpu: MostAllocated "
                  "(bin packing, as Tessera; default) or LeastAllocated (its default)");
  cmd->add_option("--seed", f->seed, "Seed of the creation order (default 1)");
  cmd->add_option("--apiserver-arg", f->apiserver_args,
                  "An extra kube-apiserver flag (repeatable), e.g. --apiserver-arg=--v=2");
  cmd->callback([f] {
    if (int rc = RunBench(*f); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace tessera::bench
