// Helpers shared by the CLI's command files. Internal to src/cli.
#pragma once

#include <iostream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "api/table.h"
#include "cli/api_client.h"
#include "cli/resources.h"

namespace tessera::cli {

// "&labelSelector=...&fieldSelector=..." for the non-empty ones, escaped.
std::string SelectorQuery(const std::string& labels, const std::string& fields);
// A collection page by page (500 a page, following `continue`), with optional label and field
// selectors, `extra_query` ("&k=v") and an Accept header (`accept`, when not empty): each answer's
// body goes to `page`, which returns false to stop. `revision`, when given and empty, receives
// the first page's resourceVersion (to watch from). On an HTTP error, returns Internal with the
// server's message.
absl::Status ForEachPage(ApiClient& client, const ResourceInfo& r, const std::string& ns,
                         bool all_namespaces, const std::string& selector,
                         const std::string& field_selector, const std::string& extra_query,
                         const std::string& accept, std::string* revision,
                         absl::FunctionRef<bool(Json& body)> page);
// Every item of a collection (ForEachPage).
absl::StatusOr<std::vector<Json>> ListAll(ApiClient& client, const ResourceInfo& r,
                                          const std::string& ns, bool all_namespaces,
                                          const std::string& selector,
                                          const std::string& field_selector = "",
                                          std::string* revision = nullptr);

// Prints rows as aligned columns (two spaces apart).
void PrintTable(std::ostream& out, const std::vector<std::vector<std::string>>& rows);

// The values behind `tessera get`'s columns (api/table.h: the server prints the same).
using api::Age;
using api::HeldGpus;
using api::Phase;
using api::RequestedGpus;
using api::SubmittedBy;

// Sum of milli-GPU per node name in a job's status.placement.
void AddPlacedMilli(const Json& job, std::vector<std::pair<std::string, int64_t>>* out);
// GET the job `name` of namespace `ns`: a TrainingJob, else an InferenceService (only `kind`
// when given). The first answer that is not a 404 (or the last 404); dies when the server
// cannot be reached.
Response GetJob(ApiClient& client, const std::string& ns, const std::string& name,
                const std::string& kind = "");
bool IsTerminal(const std::string& phase);

// An object named in a manifest: its resource, namespace (namespaced kinds) and name, and
// "FILE:LINE" of its document.
struct NamedObject {
  const ResourceInfo* r = nullptr;
  std::string ns, name, where;
};
// The objects of manifest files as apply reads them (files, directories, - for stdin); an
// error per unreadable file, unknown kind or missing name, each with its file and line.
std::vector<NamedObject> ReadObjectNames(const std::vector<std::string>& files,
                                         const std::string& default_ns,
                                         std::vector<std::string>* errors);
// --dry-run[=none|client|server] (kubectl's): a bare --dry-run means client.
void AddDryRunFlag(CLI::App* cmd, std::string* mode);
// "?dryRun=All" (with `sep` first) for server mode; empty otherwise.
std::string DryRunQuery(const std::string& mode, const char* sep);
// " (dry run)", " (server dry run)" or "" to end a command's report line.
std::string DryRunSuffix(const std::string& mode);

void RegisterApplyCommand(CLI::App& app);
void RegisterGetCommand(CLI::App& app);
void RegisterNodeCommands(CLI::App& app);  // cordon, uncordon, drain
void RegisterExplainCommand(CLI::App& app);
void RegisterSlurmCommands(CLI::App& app);  // cancel, hold, release, history
void RegisterCompletionCommand(CLI::App& app);
void RegisterDescribeCommands(CLI::App& app);
void RegisterTopCommands(CLI::App& app);
void RegisterLogsCommand(CLI::App& app);
void AddConnectionFlags(CLI::App* cmd, ConfigFlags* flags);
// Builds a client from flags; prints the error and throws CLI::RuntimeError.
ApiClient MakeClient(const ConfigFlags& flags);
// Prints `msg` to stderr and throws CLI::RuntimeError(1).
[[noreturn]] void Die(const std::string& msg);

}  // namespace tessera::cli
