// How both executables run (client_main.cc: `tessera`; main.cc: `tessera-all`): one CLI::App
// named tessera, its subcommands added by `build`, and the exit codes of docs/control-plane.md
// ("Exit codes"): 0 done; 1 the command ran and failed (a request refused, an object not found,
// input that does not validate); 2 the command line itself is wrong (CLI11's usage errors); 70
// an internal error (an exception that escaped a command: a bug or resource exhaustion).
#pragma once

#include <exception>
#include <functional>
#include <iostream>

#include "CLI/CLI.hpp"

namespace tessera {

// What RunApp returns when `runs_here` declined the command line (nothing was parsed or run).
inline constexpr int kNotRunHere = -1;

// Builds the app, then parses and runs the command line unless `runs_here` (given the built
// app) says it is not this executable's to run.
inline int RunApp(int argc, char** argv, const std::function<void(CLI::App&)>& build,
                  const std::function<bool(const CLI::App&)>& runs_here = nullptr) {
  try {
    CLI::App app{"Tessera: a GPU cluster orchestrator", "tessera"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "tessera 0.1.0");
    build(app);
    if (runs_here && !runs_here(app)) return kNotRunHere;
    try {
      app.parse(argc, argv);
    } catch (const CLI::RuntimeError& e) {  // a command's own failure (1), said already
      return e.get_exit_code();
    } catch (const CLI::ParseError& e) {
      const int rc = app.exit(e);  // prints help, the version, or the usage error
      return rc == 0 ? 0 : 2;
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "tessera: internal error: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "tessera: internal error: unknown exception\n";
  }
  return 70;
}

}  // namespace tessera
