#include "agent/agent_command.h"

#include <unistd.h>

#include <iostream>
#include <memory>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "agent/backend_flags.h"
#include "agent/dcgm_metrics.h"
#include "agent/discovery.h"
#include "agent/gpus_report.h"
#include "agent/health.h"
#include "agent/health_monitor.h"
#include "common/clock.h"

namespace tessera::agent {
namespace {

std::string Hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "";
  return buf;
}

std::string Stamp(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", t, absl::UTCTimeZone());
}

// Watches events and health for `options.watch` on `clock`, printing each event and every
// health transition.
int Watch(GpuBackend& backend, const GpusOptions& options, Clock& clock, std::ostream& out) {
  HealthPolicy policy;
  policy.ignored_xids.insert(options.ignore_xids.begin(), options.ignore_xids.end());
  HealthTracker health(policy);
  health.AddListener([&out](const HealthTransition& t) {
    out << Stamp(t.time) << "  " << t.uuid << "  " << HealthName(t.from) << " -> "
        << HealthName(t.to) << ": " << t.reason << "\n";
  });
  HealthMonitor monitor(backend, health, clock);
  monitor.SetEventCallback([&out, &policy](const GpuEvent& e) {
    out << Stamp(e.time) << "  " << (e.gpu_uuid.empty() ? "(all GPUs)" : e.gpu_uuid) << "  event "
        << GpuEventKindName(e.kind);
    if (e.kind == GpuEventKind::kXid) {
      out << " " << e.xid << " (" << XidDescription(e.xid) << ", "
          << (ClassifyXid(e.xid, policy) == XidClass::kHardware ? "hardware" : "not hardware")
          << ")";
    }
    if (!e.detail.empty()) out << ": " << e.detail;
    out << "\n";
  });
  if (absl::Status st = monitor.Start(); !st.ok()) {
    out << "cannot watch: " << st.message() << "\n";
    return 1;
  }
  out << "Watching GPU events for " << absl::FormatDuration(options.watch) << "...\n";
  monitor.RunUntil(clock.Now() + options.watch);
  if (!monitor.events_supported()) {
    out << "note: this backend delivers no events; only metrics were watched\n";
  }
  out << "Health:\n";
  for (const std::string& uuid : health.Uuids()) {
    absl::StatusOr<GpuHealth> h = health.Get(uuid);
    if (!h.ok()) continue;
    out << "  " << uuid << "  " << HealthName(h->health)
        << (h->reason.empty() ? "" : absl::StrCat("  (", h->reason, ")")) << "\n";
  }
  return 0;
}

}  // namespace

int RunGpusCommand(const GpusOptions& options, Clock& clock, std::ostream& out, std::ostream& err) {
  if (options.output != "table" && options.output != "json" && options.output != "prometheus") {
    err << "-o/--output: expected table, json or prometheus, got '" << options.output << "'\n";
    return 2;
  }
  if (options.watch < absl::ZeroDuration()) {
    err << "--watch: must not be negative\n";
    return 2;
  }
  absl::StatusOr<std::unique_ptr<GpuBackend>> chosen =
      BackendFromFlags(options.backend, options.fake_config, options.nvml_lib, clock);
  if (!chosen.ok()) {
    err << chosen.status().message() << "\n";
    return 2;
  }
  std::unique_ptr<GpuBackend> backend = *std::move(chosen);
  if (absl::Status st = backend->Init(); !st.ok()) {
    err << "GPU backend " << options.backend << ": " << st.message() << "\n";
    return 1;
  }
  absl::StatusOr<NodeSnapshot> snap = Discover(*backend);
  if (!snap.ok()) {
    err << "GPU discovery failed: " << snap.status().message() << "\n";
    backend->Shutdown().IgnoreError();
    return 1;
  }
  if (options.output == "json") {
    out << SnapshotToJson(*snap).dump(2) << "\n";
  } else if (options.output == "prometheus") {
    DcgmRenderOptions r;
    r.hostname = options.hostname.empty() ? Hostname() : options.hostname;
    out << RenderDcgmMetrics(snap->gpus, r);
  } else {
    out << RenderSnapshotTable(*snap);
  }
  int code = 0;
  if (options.watch > absl::ZeroDuration()) code = Watch(*backend, options, clock, out);
  backend->Shutdown().IgnoreError();
  return code;
}

void RegisterAgentCommands(CLI::App& app) {
  auto options = std::make_shared<GpusOptions>();
  auto watch = std::make_shared<std::string>();
  CLI::App* gpus =
      app.add_subcommand("gpus", "Show the GPUs this node's agent discovers (NVML or a fake)");
  gpus->add_option("--backend", options->backend, "GPU backend: nvml or fake")
      ->check(CLI::IsMember({"nvml", "fake"}));
  gpus->add_option("--fake-config", options->fake_config,
                   "YAML node description for --backend fake (see deploy/fake-gpus/)");
  gpus->add_option("--nvml-lib", options->nvml_lib,
                   "NVML library to load (default: $TESSERA_NVML_LIB or libnvidia-ml.so.1)");
  gpus->add_option("-o,--output", options->output, "Output format: table, json or prometheus")
      ->check(CLI::IsMember({"table", "json", "prometheus"}));
  gpus->add_option("--watch", *watch,
                   "Then watch GPU events and health for this long (e.g. 60s, 10m)");
  gpus->add_option("--ignore-xid", options->ignore_xids,
                   "XIDs that never affect health (repeat or comma-separate: 48,79)")
      ->delimiter(',');
  gpus->add_option("--hostname", options->hostname, "Hostname label for -o prometheus");
  gpus->footer(
      "Examples:\n"
      "  tessera gpus                       # this node's GPUs through NVML\n"
      "  tessera gpus -o prometheus         # as the agent's /metrics exports them\n"
      "  tessera gpus --backend fake --fake-config deploy/fake-gpus/a100-mig.yaml --watch 60s");
  gpus->callback([options, watch]() {
    if (!watch->empty() && !absl::ParseDuration(*watch, &options->watch)) {
      throw CLI::ValidationError("--watch",
                                 "expected a duration such as 60s, got '" + *watch + "'");
    }
    RealClock clock;
    int code = RunGpusCommand(*options, clock, std::cout, std::cerr);
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace tessera::agent
