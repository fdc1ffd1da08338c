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
#include <cstdio>
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

// Whether argv[1] names one of the client verbs `app` has. `completion` lists every subcommand,
// so tessera-all runs it; options (--help, --version) go there too.
bool RunsHere(const CLI::App& app, int argc, char** argv) {
  if (argc < 2) return false;
  const std::string verb = argv[1];
  if (verb.empty() || verb[0] == '-' || verb == "completion") return false;
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->check_name(verb)) return true;
  }
  return false;
}

// tessera-all in this executable's directory, into `path` (no allocation: nothing to throw
// between here and the exec).
void AllBinary(char (&path)[PATH_MAX]) {
  const ssize_t n = readlink("/proc/self/exe", path, PATH_MAX - 1);
  path[n > 0 ? n : 0] = '\0';
  char* slash = strrchr(path, '/');
  const size_t dir = slash == nullptr ? 0 : static_cast<size_t>(slash - path);
  if (slash == nullptr) path[dir] = '.';
  snprintf(path + (slash == nullptr ? 1 : dir), PATH_MAX - dir - 1, "/tessera-all");
}

}  // namespace

int main(int argc, char** argv) {
  const int rc = tessera::RunApp(argc, argv, AddClientVerbs,
                                 [&](const CLI::App& app) { return RunsHere(app, argc, argv); });
  if (rc != tessera::kNotRunHere) return rc;
  char all[PATH_MAX];
  AllBinary(all);
  execv(all, argv);
  // 127: as a shell says of a command it cannot run.
  std::cerr << "tessera: " << (argc >= 2 ? argv[1] : "this command") << " is run by " << all
            << ", which could not be started: " << std::strerror(errno)
            << " (install tessera-all beside tessera)\n";
  return 127;
}
