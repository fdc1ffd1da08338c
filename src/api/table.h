// Server-side printing: the columns `tessera get` shows for each kind and each object's cells,
// defined once here and used by the server (a list asked for with kubectl's
// `Accept: application/json;as=Table;v=v1;g=meta.k8s.io` answers a meta.k8s.io/v1 Table of rows
// instead of whole objects) and by the CLI (the rows of a watch, and servers that answer whole
// objects). A Table of 50,000 jobs is ~1/6 of the objects' JSON and needs no parse of them on
// the client.
//
// Contract: pure functions of their arguments; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace tessera::api {

// One column of a kind's table. priority 0: always shown; 1: with -o wide only (the meaning of
// kube's TableColumnDefinition.priority).
struct TableColumn {
  std::string name;
  std::string description;
  int priority = 0;
};

// The columns of `kind` (TrainingJob, Node, Event...), default ones first.
const std::vector<TableColumn>& TableColumns(absl::string_view kind);

// The cells of `obj`, one per TableColumns(kind) column, as of `now` (ages).
std::vector<std::string> TableCells(absl::string_view kind, const nlohmann::json& obj,
                                    absl::Time now);

// One object's row, prepared once per revision of the object (a server keeps these so that
// listing again parses nothing): its cells as JSON text around the AGE cell, which is filled in
// when the row is written, and its PartialObjectMetadata (name, namespace, resourceVersion).
struct PreparedRow {
  std::string cells_before_age;  // the cells before AGE, comma-separated (with a comma after)
  std::string cells_after_age;   // the cells after AGE, each with a comma before
  bool has_age = false;
  std::optional<absl::Time> since;  // what AGE counts from; nullopt: "<unknown>"
  std::string object;               // JSON text of the PartialObjectMetadata
};
PreparedRow PrepareRow(absl::string_view kind, const nlohmann::json& obj);
// The row as a Table's JSON text, as of `now`; with the object's metadata when `with_metadata`
// (kube's includeObject=Metadata; None leaves it out).
std::string RowText(const PreparedRow& row, absl::Time now, bool with_metadata);

// A meta.k8s.io/v1 Table's JSON for a list of `kind`: columnDefinitions, and `rows` as JSON text
// (RowText's joined by commas), with `list_metadata` (resourceVersion, continue).
std::string TableText(absl::string_view kind, const std::string& rows,
                      const nlohmann::json& list_metadata);

// True when an Accept header asks for a Table (`as=Table`), as kubectl's does.
bool AcceptsTable(absl::string_view accept);
// The Accept header a client sends for a Table, with plain JSON as the fallback.
inline constexpr char kTableAccept[] =
    "application/json;as=Table;v=v1;g=meta.k8s.io, application/json";

// --- The values behind the cells, also used by describe and top ----------------------------

// "5s", "3m", "2h", "4d" since an RFC 3339 timestamp; "<unknown>" otherwise.
std::string Age(const std::string& timestamp, absl::Time now);
// status.phase, or "".
std::string Phase(const nlohmann::json& obj);
// Members' total GPUs requested by a job object (whole GPUs, shares as 1).
int64_t RequestedGpus(const nlohmann::json& job);
// GPUs bound to `job` (status.placement), whole or shared.
int64_t HeldGpus(const nlohmann::json& job);
// Who submitted a job (metadata.annotations["tessera.dev/submitted-by"], stamped by the server);
// "-" when unknown.
std::string SubmittedBy(const nlohmann::json& obj);

}  // namespace tessera::api
