// Helpers shared by the CLI's command files. Internal to src/cli.
#pragma once

#include <iostream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cli/api_client.h"
#include "cli/resources.h"

namespace tessera::cli {

// Every item of a collection (following `continue`), with optional label
// selector. On an HTTP error, returns Internal with the server's message.
absl::StatusOr<std::vector<Json>> ListAll(ApiClient& client, const ResourceInfo& r,
                                          const std::string& ns, bool all_namespaces,
                                          const std::string& selector);

// Prints rows as aligned columns (two spaces apart).
void PrintTable(std::ostream& out, const std::vector<std::vector<std::string>>& rows);

// "5s", "3m", "2h", "4d" since an RFC 3339 timestamp; "<unknown>" otherwise.
std::string Age(const std::string& timestamp, absl::Time now);

// Members' total GPUs requested by a job object (whole GPUs, shares as 1).
int64_t RequestedGpus(const Json& job);
// GPUs bound to `job` (status.placement), whole or shared.
int64_t HeldGpus(const Json& job);
// Sum of milli-GPU per node name in a job's status.placement.
void AddPlacedMilli(const Json& job, std::vector<std::pair<std::string, int64_t>>* out);
std::string Phase(const Json& obj);
bool IsTerminal(const std::string& phase);

void RegisterApplyCommand(CLI::App& app);
void RegisterDescribeCommands(CLI::App& app);
void RegisterTopCommands(CLI::App& app);
void RegisterLogsCommand(CLI::App& app);
void AddConnectionFlags(CLI::App* cmd, ConfigFlags* flags);
// Builds a client from flags; prints the error and throws CLI::RuntimeError.
ApiClient MakeClient(const ConfigFlags& flags);
// Prints `msg` to stderr and throws CLI::RuntimeError(1).
[[noreturn]] void Die(const std::string& msg);

}  // namespace tessera::cli
