// tessera-all: every subcommand of tessera, in kubectl's habits (client_main.cc is the `tessera`
// users run: it runs the client verbs itself and hands every other command line to this one).
//
// Each module registers its subcommands through a Register*Commands function
// declared in its own header; `bench` and `sim` are parents that several
// modules add to.
#include "CLI/CLI.hpp"
#include "agent/agent_command.h"
#include "agent/node_command.h"
#include "bench/agents/bench_agents.h"
#include "bench/control_plane/control_plane_bench.h"
#include "bench/kube/kube_bench.h"
#include "bench/sched/sched_bench.h"
#include "bench/preempt/bench_preempt.h"
#include "bench/preempt/bench_queue_cycle.h"
#include "cli/cli_commands.h"
#include "cli/crds_command.h"
#include "bench/restart/restart_bench.h"
#include "deviceplugin/deviceplugin_command.h"
#include "dra/dra_command.h"
#include "kubesched/dra_view.h"
#include "kubesched/scheduler_command.h"
#include "main/run_app.h"
#include "operator/operator_command.h"
#include "bench/api/bench_api.h"
#include "server/server_command.h"
#include "sim/pack/commands.h"
#include "sim/replay/replay_command.h"

namespace {

void AddEverything(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks; each prints one JSON object");
  bench->require_subcommand(1);
  CLI::App* sim = app.add_subcommand("sim", "Simulators that run the real scheduler code");
  sim->require_subcommand(1);
  // Subcommand registration, one line per module.
  tessera::bench::RegisterBenchSchedCommands(*bench);
  tessera::bench::RegisterRestartBenchCommands(*bench);
  tessera::bench::RegisterApiBenchCommand(*bench);
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
}

}  // namespace

int main(int argc, char** argv) { return tessera::RunApp(argc, argv, AddEverything); }
