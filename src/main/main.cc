// tessera: one binary, subcommands in kubectl's habits.
//
// Each module registers its subcommands through a Register*Commands function
// declared in its own header; `bench` and `sim` are parents that several
// modules add to.
#include <iostream>

#include "CLI/CLI.hpp"
#include "agent/agent_command.h"
#include "agent/node_command.h"
#include "bench/agents/bench_agents.h"
#include "bench/control_plane/control_plane_bench.h"
#include "bench/kube/kube_bench.h"
#include "bench/sched_bench.h"
#include "bench_preempt/bench_preempt.h"
#include "bench_preempt/bench_queue_cycle.h"
#include "cli/cli_commands.h"
#include "cli/crds_command.h"
#include "controller/restart_bench.h"
#include "deviceplugin/deviceplugin_command.h"
#include "dra/dra_command.h"
#include "kubesched/dra_view.h"
#include "kubesched/scheduler_command.h"
#include "operator/operator_command.h"
#include "server/bench_api.h"
#include "server/server_command.h"
#include "sim/pack/commands.h"
#include "sim/replay/replay_command.h"

namespace {

int Run(int argc, char** argv) {
  CLI::App app{"Tessera: a GPU cluster orchestrator", "tessera"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "tessera 0.1.0");
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks; each prints one JSON object");
  bench->require_subcommand(1);
  CLI::App* sim = app.add_subcommand("sim", "Simulators that run the real scheduler code");
  sim->require_subcommand(1);
  // Subcommand registration, one line per module.
  tessera::bench::RegisterBenchSchedCommands(*bench);
  tessera::controller::RegisterRestartBenchCommands(*bench);
  tessera::server::RegisterApiBenchCommand(*bench);
  tessera::bench::RegisterAgentsBenchCommand(*bench);
  tessera::bench::RegisterControlPlaneBenchCommand(*bench);
  tessera::bench::RegisterKubeBenchCommand(*bench);
  tessera::server::RegisterServerCommands(app);
  tessera::agent::RegisterAgentCommands(app);
  tessera::deviceplugin::RegisterDevicePluginCommands(app);
  tessera::dra::RegisterDraCommands(app);
  tessera::sim::replay::RegisterSimReplayCommands(*sim);
  tessera::bench::RegisterBenchPreemptCommands(*bench);
  tessera::bench::RegisterBenchQueueCycleCommands(*bench);
  tessera::cli::RegisterCliCommands(app);
  tessera::cli::RegisterCrdsCommand(app);
  tessera::kubesched::RegisterSchedulerCommand(app);
  tessera::kubesched::RegisterDraView(app);  // after the agent's `gpus`
  tessera::op::RegisterOperatorCommand(app);
  tessera::sim::pack::RegisterSimPackCommands(*sim);
  tessera::agent::RegisterNodeCommands(app);
  // Exit codes (docs/control-plane.md, "Exit codes"): 0 done; 1 the command ran and failed (a
  // request refused, an object not found, input that does not validate); 2 the command line
  // itself is wrong (CLI11's usage errors); 70 an internal error (main below).
  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {  // a command's own failure (1), said already
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);  // prints help, the version, or the usage error
    return rc == 0 ? 0 : 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Subcommands report errors as statuses; an exception reaching here is a
  // bug or resource exhaustion (std::bad_alloc). Say so and exit with
  // EX_SOFTWARE instead of aborting without a message.
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "tessera: internal error: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "tessera: internal error: unknown exception\n";
  }
  return 70;
}
