// `tessera bench kube` (kube_bench.h). For each scheduler in --schedulers, on a fresh bed (etcd +
// kube-apiserver with the test fixture's flags, plus scheduling.k8s.io/v1beta1, which
// kube-scheduler reads PodGroups from, plus any --apiserver-arg; every request of this bench and
// of both schedulers is the admin's, group system:masters, which API Priority and Fairness exempts
// from the apiserver's in-flight limits):
//   1. the Nodes, created through the API from --threads threads (node_create_s);
//   2. the --phases, in order, each in its own namespace with a Pod watch that timestamps each
//      Pod's first sight with spec.nodeName, each with a scheduler started for it and stopped
//      after it (a new process or KubeScheduler: it rebuilds from the API), its work deleted
//      before the next phase:
//      - latency: the scheduler is started and binds a probe Pod (ready_s); then --paced-single
//        1-GPU Pods and --paced-gangs gangs are created at --paced-rate items per second, a
//        gang's members at once after its PodGroup. Creation sent -> binding seen, unqueued:
//        what a user waits on a cluster that keeps up;
//      - throughput: the work (--single 1-GPU Pods, --gangs gangs) is created first, with no
//        scheduler running; then the scheduler starts and binds the backlog. Pods bound per
//        second from its start to the last binding: the scheduler's rate, not the creators' (the
//        raw binding rate below is measured on Pods created first too);
//      - burst: the scheduler is started and probed, then the same work is created from
//        --threads threads as fast as the API takes it while it schedules (a gang's members
//        one after the other); bound per second from the first create, creation -> binding.
//      Each phase ends when every Pod is bound, after --timeout-s, or after --idle-s without a
//      binding once creation is over; then partially bound gangs and unbound Pods.
// On the last bed, after its scheduler stopped: --raw-bindings Pods of no scheduler, bound from
// --threads threads as fast as the API answers (raw_binding_per_s).
#include "bench/kube/kube_bench.h"

#include <unistd.h>

#include <atomic>
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
#include "bench/kube/kube_contender.h"
#include "bench/kube/kube_workload.h"
#include "common/bench_stats.h"
#include "kube/resource.h"
#include "kube/testing/kube_bed.h"
#include "kubesched/kube_scheduler.h"
#include "nlohmann/json.hpp"

namespace tessera::bench {
namespace {

using Json = nlohmann::json;
using testing::KubeBed;
using testing::KubeBedOptions;

constexpr const char* kTessera = kTesseraContender;
constexpr const char* kKubeScheduler = kKubeSchedulerContender;
constexpr char kProbeNamespace[] = "bench-probe";

enum class Phase { kLatency, kThroughput, kBurst };
constexpr std::pair<Phase, const char*> kPhases[] = {
    {Phase::kLatency, "latency"}, {Phase::kThroughput, "throughput"}, {Phase::kBurst, "burst"}};

const char* PhaseName(Phase p) {
  for (const auto& [phase, name] : kPhases) {
    if (phase == p) return name;
  }
  return "";
}

struct Flags {
  Flags() { contender.api_writers = kubesched::KubeSchedulerOptions{}.api_writers; }
  KubeBenchShape shape;
  std::string schedulers = "tessera,kube-scheduler";
  std::string phases = "latency,throughput";
  int paced_single = 200;
  int paced_gangs = 100;
  double paced_rate = 20;
  ContenderOptions contender;
  std::string bed_bin;
  int raw_bindings = 5000;
  double timeout_s = 600;
  double idle_s = 60;
  int threads = 32;
  uint64_t seed = 1;
  std::vector<std::string> apiserver_args;
};

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

// What the watch saw of the work `w`. Pods bound per second count from `from`.
Json Measure(const KubeBenchShape& s, const CreatedWork& w, const BindingWatch& watch,
             absl::Time from) {
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
      from == absl::InfiniteFuture() ? 0 : std::max(1e-9, absl::ToDoubleSeconds(end - from));
  const double create_s =
      w.first == absl::InfiniteFuture() ? 0 : absl::ToDoubleSeconds(w.last - w.first);
  const absl::Time first = watch.first_bound();
  std::string stale;
  const int stale_n = watch.BoundButUnschedulable(&stale);
  return {{"pods_bound_per_s", wall_s > 0 ? bound / wall_s : 0.0},
          {"first_bound_s",
           first == absl::InfiniteFuture() ? Json() : Json(absl::ToDoubleSeconds(first - from))},
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

KubeBenchShape PhaseShape(const Flags& f, Phase p) {
  KubeBenchShape s = f.shape;
  if (p == Phase::kLatency) {
    s.single = f.paced_single;
    s.gangs = f.paced_gangs;
  }
  return s;
}

// One phase of `which` on `bed` (the file's opening comment). Errors end the bench.
absl::StatusOr<Json> RunPhase(const Flags& f, Phase phase, const std::string& which, KubeBed& bed,
                              kube::RestClient& c) {
  const std::string ns = PhaseName(phase);
  const KubeBenchShape shape = PhaseShape(f, phase);
  if (absl::Status s = CreateNamespace(c, ns); !s.ok()) return s;
  BindingWatch watch(c, ns);
  if (!watch.synced()) return absl::UnavailableError("the Pod watch did not sync within 60 s");
  std::unique_ptr<Contender> sched = MakeContender(which, f.contender, bed);
  auto failed = [&](absl::string_view what, const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat(which, ", ", ns, ": ", what, ": ", s.message()));
  };
  Json out = Json::object();
  CpuSample cpu_before;
  std::map<std::string, double> requests_before;
  CreatedWork work;
  absl::Time from = absl::InfiniteFuture();
  std::atomic<bool> created{false};
  std::thread creator;
  if (phase == Phase::kThroughput) {
    work = CreateWork(c, ns, shape, sched->pod_scheduler_name(), f.threads, f.seed);
    created.store(true);
    cpu_before = CpuSample::Of(bed);
    requests_before = ApiRequests(c);
    from = absl::Now();
    if (absl::Status s = sched->Start(); !s.ok()) return failed("starting", s);
  } else {
    const absl::Time t0 = absl::Now();
    if (absl::Status s = sched->Start(); !s.ok()) return failed("starting", s);
    if (absl::Status s = Probe(c, *sched, kProbeNamespace, absl::Minutes(5)); !s.ok()) {
      return failed("probe", s);
    }
    out["ready_s"] = absl::ToDoubleSeconds(absl::Now() - t0);
    cpu_before = CpuSample::Of(bed);
    requests_before = ApiRequests(c);
    WorkPacing pacing;
    if (phase == Phase::kLatency) {
      pacing.items_per_s = f.paced_rate;
      pacing.members_at_once = true;
    }
    creator = std::thread([&, pacing] {
      work = CreateWork(c, ns, shape, sched->pod_scheduler_name(), f.threads, f.seed, pacing);
      created.store(true);
    });
  }
  const absl::Time wait_from = from == absl::InfiniteFuture() ? absl::Now() : from;
  watch.WaitBound(shape.pods(), wait_from + absl::Seconds(f.timeout_s), absl::Seconds(f.idle_s),
                  [&] { return created.load(); });
  if (creator.joinable()) creator.join();
  if (from == absl::InfiniteFuture()) from = work.first;
  const CpuSample cpu_after = CpuSample::Of(bed);
  const absl::Status alive = sched->Alive();
  out.update(Measure(shape, work, watch, from));
  out["cpu_s"] = cpu_after.Since(cpu_before);
  // What the phase cost the apiserver, by verb and resource (the bench's own creates and watch
  // included; in the throughput phase, from the scheduler's start).
  out["apiserver_requests"] = RequestDelta(requests_before, ApiRequests(c));
  out["scheduler_stats"] = sched->Stats();
  sched->Stop();
  if (!alive.ok()) return failed("while it ran", alive);
  if (absl::Status s = DeleteWork(c, ns, absl::Minutes(2)); !s.ok()) return failed("cleanup", s);
  return out;
}

// `which` on `bed`, every phase; with `raw`, the raw binding rate afterwards.
absl::StatusOr<Json> RunOne(const Flags& f, const std::vector<Phase>& phases,
                            const std::string& which, KubeBed& bed, double* raw) {
  const std::string load_before = LoadAvg();
  kube::RestOptions ro;
  ro.timeout = absl::Seconds(60);
  ro.max_idle_connections = f.threads + 8;
  ro.user_agent = "tessera-bench";
  absl::StatusOr<std::unique_ptr<kube::RestClient>> admin = AdminClient(bed, ro);
  if (!admin.ok()) return admin.status();
  kube::RestClient& c = **admin;
  const absl::Time t0 = absl::Now();
  if (absl::Status s = CreateNodes(c, f.shape, f.threads); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("creating the Nodes: ", s.message()));
  }
  Json out = {{"node_create_s", absl::ToDoubleSeconds(absl::Now() - t0)}};
  for (Phase p : phases) {
    std::cerr << "bench kube: " << which << ": " << PhaseName(p) << " phase\n";
    absl::StatusOr<Json> r = RunPhase(f, p, which, bed, c);
    if (!r.ok()) return r.status();
    out[PhaseName(p)] = *std::move(r);
  }
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

std::vector<std::string> Validate(const Flags& f, std::vector<std::string>* schedulers,
                                  std::vector<Phase>* phases) {
  std::vector<std::string> errs;
  const KubeBenchShape& s = f.shape;
  for (auto [name, v] : {std::pair<const char*, int>{"--nodes", s.nodes},
                         {"--rack-size", s.rack_size},
                         {"--gpus-per-node", s.gpus_per_node},
                         {"--gang-size", s.gang_size},
                         {"--gpus-per-gang-pod", s.gpus_per_gang_pod},
                         {"--threads", f.threads},
                         {"--api-writers", f.contender.api_writers},
                         {"--burst", f.contender.burst}}) {
    if (v < 1) errs.push_back(absl::StrCat(name, " must be at least 1, got ", v));
  }
  for (auto [name, v] : {std::pair<const char*, int>{"--single", s.single},
                         {"--gangs", s.gangs},
                         {"--raw-bindings", f.raw_bindings},
                         {"--paced-single", f.paced_single},
                         {"--paced-gangs", f.paced_gangs}}) {
    if (v < 0) errs.push_back(absl::StrCat(name, " must not be negative, got ", v));
  }
  if (f.contender.qps <= 0) errs.push_back("--qps must be positive");
  if (f.paced_rate <= 0) errs.push_back("--paced-rate must be positive");
  if (f.timeout_s <= 0 || f.idle_s <= 0)
    errs.push_back("--timeout-s and --idle-s must be positive");
  if (s.gpus_per_gang_pod > s.gpus_per_node) {
    errs.push_back(absl::StrCat("--gpus-per-gang-pod ", s.gpus_per_gang_pod,
                                " exceeds --gpus-per-node ", s.gpus_per_node));
  }
  const bool shape_ok = errs.empty();
  for (absl::string_view n : absl::StrSplit(f.phases, ',', absl::SkipWhitespace())) {
    bool known = false;
    for (const auto& [phase, name] : kPhases) {
      if (n != name) continue;
      known = true;
      phases->push_back(phase);
    }
    if (!known) {
      errs.push_back(
          absl::StrCat("--phases: unknown phase '", n, "' (latency, throughput or burst)"));
    }
  }
  if (phases->empty()) errs.push_back("--phases names none");
  for (Phase p : *phases) {
    const KubeBenchShape ps = PhaseShape(f, p);
    if (!shape_ok || ps.gpus_asked() <= ps.gpus()) continue;
    const char* how =
        p == Phase::kLatency ? "--paced-single + --paced-gangs" : "--single + --gangs";
    errs.push_back(absl::StrCat("the ", PhaseName(p), " work asks ", ps.gpus_asked(), " GPUs (",
                                how, " x --gang-size x --gpus-per-gang-pod) but the nodes have ",
                                ps.gpus(), " (--nodes x --gpus-per-node): it cannot all be bound"));
  }
  if (f.contender.kube_scoring != "MostAllocated" && f.contender.kube_scoring != "LeastAllocated") {
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

// The throughput phase's rate (else the burst's), the latency phase's gang p99 (else the
// burst's), partially bound gangs over every phase.
Json Targets(const Json& results, const Json& raw) {
  auto phase = [&](const char* who, std::initializer_list<const char*> order) -> const Json* {
    if (!results.contains(who)) return nullptr;
    for (const char* p : order) {
      if (results[who].contains(p)) return &results[who][p];
    }
    return nullptr;
  };
  const Json* t = phase(kTessera, {"throughput", "burst"});
  const Json* k = phase(kKubeScheduler, {"throughput", "burst"});
  const Json* t_lat = phase(kTessera, {"latency", "burst"});
  auto rate = [](const Json* r) { return r ? (*r)["pods_bound_per_s"].get<double>() : 0.0; };
  const Json vs_kube = t && k && rate(k) > 0 ? Json(rate(t) / rate(k)) : Json();
  const Json vs_raw =
      t && raw.is_number() && raw.get<double>() > 0 ? Json(rate(t) / raw.get<double>()) : Json();
  const Json gang_p99 = t_lat && (*t_lat)["gang_all_bound"]["n"].get<int64_t>() > 0
                            ? (*t_lat)["gang_all_bound"]["p99_ms"]
                            : Json();
  Json partial;
  if (results.contains(kTessera)) {
    int64_t n = 0;
    for (const auto& [name, r] : results[kTessera].items()) {
      if (r.is_object() && r.contains("partially_bound_gangs")) {
        n += r["partially_bound_gangs"].get<int64_t>();
      }
    }
    partial = n;
  }
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
  std::vector<Phase> phases;
  if (std::vector<std::string> errs = Validate(f, &schedulers, &phases); !errs.empty()) {
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
    absl::StatusOr<Json> one = RunOne(f, phases, which, bed, last ? &r : nullptr);
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
                {"phases", f.phases},
                {"paced_single", f.paced_single},
                {"paced_gangs", f.paced_gangs},
                {"paced_rate", f.paced_rate},
                {"qps", f.contender.qps},
                {"burst", f.contender.burst},
                {"threads", f.threads},
                {"tessera_api_writers", f.contender.api_writers},
                {"kube_scheduler_scoring", f.contender.kube_scoring},
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
  cmd->add_option("--phases", f->phases,
                  "Which phases, in order: latency (paced work, unqueued latencies), throughput "
                  "(the work created first, then the scheduler started: its rate), burst (the "
                  "work created while it schedules) (default latency,throughput)");
  cmd->add_option("--paced-single", f->paced_single,
                  "Single-GPU Pods of the latency phase (default 200)");
  cmd->add_option("--paced-gangs", f->paced_gangs, "Gangs of the latency phase (default 100)");
  cmd->add_option("--paced-rate", f->paced_rate,
                  "Latency phase: work items (a Pod, or a gang) created per second (default 20)");
  cmd->add_option("--qps", f->contender.qps, "Each scheduler's client QPS (default 5000)");
  cmd->add_option("--burst", f->contender.burst, "Each scheduler's client burst (default 5000)");
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
  cmd->add_option("--api-writers", f->contender.api_writers,
                  "Tessera's concurrent API writes, as `tessera scheduler --api-writers` "
                  "(default 16)");
  cmd->add_option("--kube-scheduler-scoring", f->contender.kube_scoring,
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
