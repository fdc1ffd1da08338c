// tessera: one binary, subcommands in kubectl's habits.
#include <iostream>

#include "CLI/CLI.hpp"
#include "agent/agent_command.h"
#include "deviceplugin/deviceplugin_command.h"

int main(int argc, char** argv) {
  CLI::App app{"Tessera: a GPU cluster orchestrator", "tessera"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "tessera 0.1.0");
  // Subcommand registration, one line per module.
  tessera::agent::RegisterAgentCommands(app);
  tessera::deviceplugin::RegisterDevicePluginCommands(app);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
