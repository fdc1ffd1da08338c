#include "operator/operator_command.h"

#include <memory>

#include "kube/component.h"
#include "operator/operator.h"

namespace tessera::op {
namespace {

struct Flags {
  kube::ComponentFlags component;
  std::string scheduler_name = "tessera";
  int workers = OperatorOptions{}.workers;
  WebhookOptions webhook;
  double gpu_mtbf_hours = GangOptions{}.gpu_mtbf_s / 3600;
  Flags() {
    component.lease_name = "tessera-operator";
    component.metrics_addr = "127.0.0.1:10270";
  }
};

int Run(const Flags& f) {
  OperatorOptions opts;
  opts.gang.scheduler_name = f.scheduler_name;
  opts.workers = f.workers;
  opts.webhook = f.webhook;
  opts.gang.gpu_mtbf_s = f.gpu_mtbf_hours * 3600;
  std::unique_ptr<Operator> op;
  kube::ComponentHooks hooks;
  hooks.start = [&](const kube::ComponentContext& ctx) -> absl::Status {
    opts.identity = ctx.identity;
    opts.log = ctx.log;
    absl::StatusOr<std::unique_ptr<Operator>> o =
        Operator::Create(ctx.client, ctx.clock, ctx.registry, opts);
    if (!o.ok()) return o.status();
    op = *std::move(o);
    return op->Start();
  };
  hooks.stop = [&] { op->Stop(); };
  kube::RestOptions ro;
  ro.max_idle_connections = f.workers * 2 + 4;
  return kube::RunComponent("operator", f.component, ro, hooks);
}

}  // namespace

void RegisterOperatorCommand(CLI::App& app) {
  auto f = std::make_shared<Flags>();
  CLI::App* c = app.add_subcommand(
      "operator",
      "Run the tessera.dev workload CRDs on Kubernetes (TrainingJob -> gang of Pods, Checkpoints)");
  c->footer(
      "Examples:\n"
      "  tessera operator --kubeconfig ~/.kube/config\n"
      "  tessera operator --kubeconfig admin.kubeconfig --leader-elect=false --workers 8\n"
      "  # in a Pod (deploy/kubernetes/operator/): the in-cluster config, two replicas\n"
      "  tessera operator --lease-namespace tessera-system\n");
  kube::AddComponentFlags(c, &f->component);
  c->add_option("--scheduler-name", f->scheduler_name,
                "spec.schedulerName of the Pods it creates (tessera scheduler's)")
      ->capture_default_str();
  c->add_option("--workers", f->workers, "objects reconciled at once")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  c->add_option("--checkpoint-gpu-mtbf-hours", f->gpu_mtbf_hours,
                "per-GPU mean time between failures for Young/Daly checkpoint intervals "
                "(jobs with spec.checkpoint.costSeconds)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  c->add_option("--webhook-addr", f->webhook.addr,
                "HOST:PORT of the validating admission webhook (HTTPS; \"\" for none)");
  c->add_option("--webhook-cert", f->webhook.cert_file, "the webhook's serving certificate (PEM)");
  c->add_option("--webhook-key", f->webhook.key_file, "its private key (PEM)");
  c->callback([f] {
    if (int rc = Run(*f); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace tessera::op
