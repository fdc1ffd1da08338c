// tessera: the command users run.
//
// The client verbs (tessera_cli: apply, get, describe, delete, logs, top, explain, cordon,
// uncordon, drain, cancel, hold, release, crds, ...) run in this executable, which links none
// of what only servers need: no gRPC, protobuf, SQLite, Boost.Asio or scheduler. A process
// start is most of what a short command costs (the dynamic loader and the page faults of every
// library loaded), so `tessera get` should not pay for the server's libraries.
//
// Every other command line (server, agent, up, scheduler, bench, sim, completion, --help,
// --version, a mistyped verb) is handed to tessera-all, the executable with every subcommand,
// found beside this one: the same process (exec), the same arguments.
#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>

#include "CLI/CLI.hpp"
#include "cli/cli_commands.h"
#include "cli/crds_command.h"
#include "main/run_app.h"

namespace {

void AddClientVerbs(CLI::App& app) {
  tessera::cli::RegisterCliCommands(app);
  tessera::cli::RegisterCrdsCommand(app);
}

// Whether `verb` is one of the client verbs this executable runs. `completion` lists every
// subcommand, so tessera-all runs it.
bool IsClientVerb(const std::string& verb) {
  if (verb.empty() || verb[0] == '-' || verb == "completion") return false;
  CLI::App app;
  AddClientVerbs(app);
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->check_name(verb)) return true;
  }
  return false;
}

// tessera-all in this executable's directory.
std::string AllBinary() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  std::string self = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  const size_t slash = self.rfind('/');
  return (slash == std::string::npos ? std::string(".") : self.substr(0, slash)) + "/tessera-all";
}

}  // namespace

int main(int argc, char** argv) {
  std::string all;
  try {
    if (argc >= 2 && IsClientVerb(argv[1])) {
      return tessera::RunApp(argc, argv, AddClientVerbs);
    }
    all = AllBinary();
  } catch (const std::exception& e) {  // as RunApp answers one: a bug or resource exhaustion
    std::cerr << "tessera: internal error: " << e.what() << "\n";
    return 70;
  }
  execv(all.c_str(), argv);
  // 127: as a shell says of a command it cannot run.
  std::cerr << "tessera: " << (argc >= 2 ? argv[1] : "this command") << " is run by " << all
            << ", which could not be started: " << std::strerror(errno)
            << " (install tessera-all beside tessera)\n";
  return 127;
}
