#include "bench/kube/kube_workload.h"

#include <algorithm>
#include <atomic>
#include <random>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "kube/resource.h"

namespace tessera::bench {

using kube::Json;

absl::Status ParallelFor(int n, int threads, const std::function<absl::Status(int)>& fn) {
  std::atomic<int> next{0};
  std::atomic<int> failed{0};
  absl::Mutex mu;
  absl::Status first;
  std::vector<std::thread> pool;
  const int t = std::max(1, std::min(threads, n));
  pool.reserve(t);
  for (int k = 0; k < t; ++k) {
    pool.emplace_back([&] {
      for (int i = next.fetch_add(1); i < n && failed.load() == 0; i = next.fetch_add(1)) {
        absl::Status s = fn(i);
        if (s.ok()) continue;
        failed.fetch_add(1);
        absl::MutexLock l(&mu);
        if (first.ok()) first = s;
      }
    });
  }
  for (std::thread& th : pool) th.join();
  if (first.ok()) return first;
  return absl::Status(first.code(),
                      absl::StrCat(failed.load(), " failed; the first: ", first.message()));
}

std::string BenchNodeName(int i) { return absl::StrFormat("node-%05d", i); }
std::string SinglePodName(int i) { return absl::StrFormat("single-%05d", i); }
std::string GangName(int g) { return absl::StrFormat("gang-%04d", g); }
std::string GangPodName(int g, int m) { return absl::StrFormat("gang-%04d-%d", g, m); }

Json BenchNode(const KubeBenchShape& s, int i) {
  const Json resources = {{"nvidia.com/gpu", std::to_string(s.gpus_per_node)},
                          {"cpu", std::to_string(s.gpus_per_node * 16)},
                          {"memory", absl::StrCat(s.gpus_per_node * 128, "Gi")},
                          {"pods", "110"}};
  return {
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata",
       {{"name", BenchNodeName(i)},
        {"labels",
         {{"tessera.dev/rack", absl::StrFormat("rack-%03d", i / std::max(1, s.rack_size))},
          {"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
          {"kubernetes.io/hostname", BenchNodeName(i)}}}}},
      {"status",
       {{"capacity", resources},
        {"allocatable", resources},
        {"conditions", {{{"type", "Ready"}, {"status", "True"}, {"reason", "KubeletReady"}}}}}}};
}

Json BenchPod(const std::string& name, const std::string& scheduler, int gpus,
              const std::string& pod_group) {
  const Json amounts = {{"nvidia.com/gpu", std::to_string(gpus)},
                        {"cpu", std::to_string(gpus * 4)},
                        {"memory", absl::StrCat(gpus * 32, "Gi")}};
  Json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", name}}},
              {"spec",
               {{"schedulerName", scheduler},
                {"containers",
                 Json::array({{{"name", "main"},
                               {"image", "trainer:1"},
                               {"resources", {{"requests", amounts}, {"limits", amounts}}}}})}}}};
  if (!pod_group.empty()) pod["spec"]["schedulingGroup"] = {{"podGroupName", pod_group}};
  return pod;
}

Json BenchPodGroup(const std::string& name, int min_count) {
  return {{"apiVersion", "scheduling.k8s.io/v1alpha3"},
          {"kind", "PodGroup"},
          {"metadata", {{"name", name}}},
          {"spec", {{"schedulingPolicy", {{"gang", {{"minCount", min_count}}}}}}}};
}

absl::Status CreateNodes(kube::RestClient& c, const KubeBenchShape& s, int threads) {
  return ParallelFor(s.nodes, threads, [&](int i) -> absl::Status {
    absl::StatusOr<Json> r = c.Create(kube::NodesResource(), "", BenchNode(s, i));
    if (!r.ok()) return r.status();
    r = c.MergePatch(kube::NodesResource(), "", BenchNodeName(i),
                     {{"spec", {{"taints", nullptr}}}});
    return r.status();
  });
}

absl::Status CreateNamespace(kube::RestClient& c, const std::string& name) {
  return c
      .Create(kube::NamespacesResource(), "",
              {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}})
      .status();
}

CreatedWork CreateWork(kube::RestClient& c, const std::string& ns, const KubeBenchShape& s,
                       const std::string& scheduler, int threads, uint64_t seed,
                       WorkPacing pacing) {
  // Work item i < single: a single Pod; else gang i - single.
  std::vector<int> order(s.single + s.gangs);
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  CreatedWork w;
  w.single_sent.assign(s.single, absl::InfinitePast());
  w.gang_sent.assign(s.gangs, absl::InfinitePast());
  w.gang_last_sent.assign(s.gangs, absl::InfinitePast());
  absl::Mutex mu;
  auto create = [&](const kube::ResourceType& t, const Json& obj, absl::Time* sent) {
    const absl::Time at = absl::Now();
    absl::Status st = c.Create(t, ns, obj).status();
    absl::MutexLock l(&mu);
    *sent = at;
    w.first = std::min(w.first, at);
    w.last = std::max(w.last, absl::Now());
    if (!st.ok() && w.errors++ == 0) w.first_error = st.ToString();
    return st.ok();
  };
  auto member = [&](int g, int m) {
    absl::Time sent;
    create(kube::PodsResource(),
           BenchPod(GangPodName(g, m), scheduler, s.gpus_per_gang_pod, GangName(g)), &sent);
    absl::MutexLock l(&mu);
    w.gang_last_sent[g] = std::max(w.gang_last_sent[g], sent);
  };
  const absl::Time start = absl::Now();
  // Errors are counted, not fatal: the run reports what was not created as unbound.
  (void)ParallelFor(static_cast<int>(order.size()), threads, [&](int k) {
    if (pacing.items_per_s > 0) {
      absl::SleepFor(start + absl::Seconds(k / pacing.items_per_s) - absl::Now());
    }
    const int item = order[k];
    if (item < s.single) {
      create(kube::PodsResource(), BenchPod(SinglePodName(item), scheduler, 1, ""),
             &w.single_sent[item]);
      return absl::OkStatus();
    }
    const int g = item - s.single;
    if (!create(kube::PodGroupsResource(), BenchPodGroup(GangName(g), s.gang_size),
                &w.gang_sent[g])) {
      return absl::OkStatus();
    }
    if (pacing.members_at_once) {
      return ParallelFor(s.gang_size, s.gang_size, [&](int m) {
        member(g, m);
        return absl::OkStatus();
      });
    }
    for (int m = 0; m < s.gang_size; ++m) member(g, m);
    return absl::OkStatus();
  });
  return w;
}

absl::Status DeleteWork(kube::RestClient& c, const std::string& ns, absl::Duration timeout) {
  for (const kube::ResourceType* t : {&kube::PodsResource(), &kube::PodGroupsResource()}) {
    absl::StatusOr<kube::HttpResult> r =
        c.Raw("DELETE", kube::ResourcePath(*t, ns, "") + "?gracePeriodSeconds=0");
    if (!r.ok()) return r.status();
    if (r->status >= 300 && r->status != 404) {
      return absl::InternalError(absl::StrCat("deleting the ", t->plural, " of ", ns, ": HTTP ",
                                              r->status, " ", r->body.substr(0, 200)));
    }
  }
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    absl::StatusOr<Json> l = c.List(kube::PodsResource(), ns);
    if (!l.ok()) return l.status();
    if ((*l)["items"].empty()) return absl::OkStatus();
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat((*l)["items"].size(), " Pods of ", ns, " still listed after the deletion"));
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
}

BindingWatch::BindingWatch(kube::RestClient& c, const std::string& ns) {
  kube::ReflectorOptions o;
  o.type = kube::PodsResource();
  o.ns = ns;
  inf_ = std::make_unique<kube::Informer>(c, o);
  inf_->AddEventHandlers({[this](const kube::ObjectPtr& obj, bool) { Saw(obj); },
                          [this](const kube::ObjectPtr&, const kube::ObjectPtr& obj) { Saw(obj); },
                          nullptr});
  inf_->Start();
  synced_ = inf_->WaitForSync(absl::Seconds(60));
}

BindingWatch::~BindingWatch() { inf_->Stop(); }

void BindingWatch::Saw(const kube::ObjectPtr& o) {
  const Json& spec = o->contains("spec") ? (*o)["spec"] : Json::object();
  if (!spec.contains("nodeName") || !spec["nodeName"].is_string() ||
      spec["nodeName"].get_ref<const std::string&>().empty()) {
    return;
  }
  const absl::Time now = absl::Now();
  const std::string name = (*o)["metadata"].value("name", "");
  absl::MutexLock l(&mu_);
  if (bound_at_.emplace(name, now).second) {
    last_ = now;
    first_ = std::min(first_, now);
  }
}

int BindingWatch::bound() const {
  absl::MutexLock l(&mu_);
  return static_cast<int>(bound_at_.size());
}

int BindingWatch::WaitBound(int n, absl::Time deadline, absl::Duration idle,
                            const std::function<bool()>& done_creating) {
  const absl::Time start = absl::Now();
  absl::MutexLock l(&mu_);
  for (;;) {
    const int have = static_cast<int>(bound_at_.size());
    if (have >= n) return have;
    const absl::Time now = absl::Now();
    if (now >= deadline) return have;
    // Idle: nothing bound for `idle` since the later of the last binding and the wait's start.
    if (now - std::max(last_, start) >= idle && done_creating()) return have;
    auto more = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return static_cast<int>(bound_at_.size()) != have;
    };
    mu_.AwaitWithTimeout(absl::Condition(&more), absl::Milliseconds(200));
  }
}

absl::Time BindingWatch::BoundAt(const std::string& pod) const {
  absl::MutexLock l(&mu_);
  auto it = bound_at_.find(pod);
  return it == bound_at_.end() ? absl::InfinitePast() : it->second;
}

absl::Time BindingWatch::last_bound() const {
  absl::MutexLock l(&mu_);
  return last_;
}

absl::Time BindingWatch::first_bound() const {
  absl::MutexLock l(&mu_);
  return first_;
}

int BindingWatch::BoundButUnschedulable(std::string* example) const {
  int n = 0;
  for (const kube::ObjectPtr& o : inf_->store().List()) {
    if (!o->contains("spec") || (*o)["spec"].value("nodeName", "").empty()) continue;
    if (!o->contains("status") || !(*o)["status"].contains("conditions")) continue;
    for (const Json& cond : (*o)["status"]["conditions"]) {
      if (cond.value("type", "") != "PodScheduled" || cond.value("status", "") != "False") continue;
      if (n++ == 0) {
        *example =
            absl::StrCat((*o)["metadata"].value("name", ""), ": ", cond.value("message", ""));
      }
    }
  }
  return n;
}

absl::StatusOr<double> RawBindingRate(kube::RestClient& c, const std::string& ns, int pods,
                                      int nodes, int threads) {
  if (absl::Status s = CreateNamespace(c, ns); !s.ok()) return s;
  auto name = [](int i) { return absl::StrFormat("raw-%05d", i); };
  if (absl::Status s = ParallelFor(
          pods, threads,
          [&](int i) {
            return c.Create(kube::PodsResource(), ns, BenchPod(name(i), "none-such", 1, ""))
                .status();
          });
      !s.ok()) {
    return s;
  }
  const absl::Time t0 = absl::Now();
  if (absl::Status s = ParallelFor(pods, threads,
                                   [&](int i) {
                                     kube::Binding b;
                                     b.ns = ns;
                                     b.pod_name = name(i);
                                     b.node = BenchNodeName(i % std::max(1, nodes));
                                     return c.Bind(b);
                                   });
      !s.ok()) {
    return s;
  }
  return pods / std::max(1e-9, absl::ToDoubleSeconds(absl::Now() - t0));
}

}  // namespace tessera::bench
