#include "kubesched/scheduler_command.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "config/profile_yaml.h"
#include "config/queue_config.h"
#include "kube/component.h"
#include "kubesched/kube_scheduler.h"
#include "sched/pack/plugin_set.h"

namespace tessera::kubesched {
namespace {

struct Flags {
  kube::ComponentFlags component;
  std::string scheduler_name = "tessera";
  std::string profile, queue_config;
  std::string rack_label = "tessera.dev/rack", block_label = "tessera.dev/block";
  int api_writers = KubeSchedulerOptions{}.api_writers;
  Flags() {
    component.lease_name = "tessera-scheduler";
    component.metrics_addr = "127.0.0.1:10259";
  }
};

int Run(const Flags& f) {
  KubeSchedulerOptions opts;
  opts.scheduler_name = f.scheduler_name;
  opts.labels.rack = f.rack_label;
  opts.labels.block = f.block_label;
  opts.api_writers = f.api_writers;
  std::unique_ptr<KubeScheduler> sched;
  kube::ComponentHooks hooks;
  hooks.configure = [&]() -> absl::Status {
    if (!f.queue_config.empty()) {
      absl::StatusOr<sched::QueueManagerConfig> c = config::LoadQueueConfigFile(f.queue_config);
      if (!c.ok())
        return absl::InvalidArgumentError(absl::StrCat("--queue-config ", c.status().message()));
      opts.queues = *std::move(c);
    }
    // The profile, validated against every plugin the scheduler can run (the pack policies
    // too); a bad one refuses to start, naming the field.
    auto plugins = std::make_shared<sched::pack::PluginSet>();
    if (!f.profile.empty()) {
      absl::StatusOr<sched::Profile> p = config::LoadProfileFile(f.profile, plugins->Registry());
      if (!p.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("--profile ", p.status().message()));
      }
      opts.queues.profile = *std::move(p);
    }
    opts.queues.extra_plugins = [plugins](sched::PluginRegistry* r) {
      return plugins->Register(r);
    };
    return absl::OkStatus();
  };
  hooks.start = [&](const kube::ComponentContext& ctx) -> absl::Status {
    opts.identity = ctx.identity;
    opts.log = ctx.log;
    absl::StatusOr<std::unique_ptr<KubeScheduler>> s =
        KubeScheduler::Create(ctx.client, ctx.clock, ctx.registry, opts);
    if (!s.ok()) return s.status();
    sched = *std::move(s);
    RETURN_IF_ERROR(sched->Start());
    ctx.log.Info("scheduling", {{"schedulerName", f.scheduler_name}, {"identity", ctx.identity}});
    return absl::OkStatus();
  };
  hooks.stop = [&] { sched->Stop(); };
  kube::RestOptions ro;
  ro.max_idle_connections = f.api_writers + 8;
  ro.user_agent = "tessera-scheduler";
  return kube::RunComponent("scheduler", f.component, ro, hooks);
}

}  // namespace

void RegisterSchedulerCommand(CLI::App& app) {
  auto f = std::make_shared<Flags>();
  CLI::App* c = app.add_subcommand(
      "scheduler", "Schedule Kubernetes Pods (spec.schedulerName: tessera) with Tessera's core");
  c->footer(
      "Examples:\n"
      "  tessera scheduler --kubeconfig ~/.kube/config\n"
      "  tessera scheduler --kubeconfig admin.kubeconfig --leader-elect=false \\\n"
      "      --profile deploy/profiles/tessera.yaml --metrics-addr 127.0.0.1:10259\n"
      "  # in a Pod (deploy/kubernetes/scheduler/): the in-cluster config, two replicas\n"
      "  tessera scheduler --lease-namespace tessera-system\n");
  kube::AddComponentFlags(c, &f->component);
  c->add_option("--scheduler-name", f->scheduler_name, "Pods' spec.schedulerName to schedule")
      ->capture_default_str();
  c->add_option("--profile", f->profile, "scheduling profile YAML (deploy/profiles/)");
  c->add_option("--queue-config", f->queue_config,
                "queue tree and priority classes YAML (tessera.dev Queue objects add to it)");
  c->add_option("--rack-label", f->rack_label, "node label naming a node's rack")
      ->capture_default_str();
  c->add_option("--block-label", f->block_label, "node label naming a node's block")
      ->capture_default_str();
  c->add_option("--api-writers", f->api_writers, "concurrent API writes (bindings, status)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  c->callback([f] {
    if (int rc = Run(*f); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace tessera::kubesched
