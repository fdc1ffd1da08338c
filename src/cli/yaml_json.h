// YAML <-> JSON for manifests and `-o yaml`. Plain scalars are typed the way
// YAML 1.2's core schema reads them (null, true/false, integers, floats);
// quoted scalars stay strings. Pure functions; thread-safe.
//
// Manifests are user input, read with limits so that no file can exhaust memory or answer with
// a crash: at most kMaxManifestBytes of text, kMaxManifestValues values once aliases are
// expanded (a "billion laughs" document is refused, not expanded), kMaxManifestDepth levels of
// nesting; a mapping that repeats a key is refused (the API refuses such a JSON body too), and so
// is a string that is not valid UTF-8. Every error names the line.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace tessera::cli {

using Json = nlohmann::json;

inline constexpr size_t kMaxManifestBytes = 16 << 20;
inline constexpr size_t kMaxManifestValues = 500000;  // per text, all documents
inline constexpr int kMaxManifestDepth = 64;

// One object of a manifest and where its parts are in the text.
// clang-tidy cannot see that its implicit special members never throw (as cli::Response).
// NOLINTNEXTLINE(bugprone-exception-escape)
struct Manifest {
  Json object;
  int line = 0;  // 1-based line where the object starts
  // 1-based line of each value by its path ("spec.groups[0].count", a map entry `labels.k`).
  std::map<std::string, int> lines;

  // The line of `path` as the API names fields in errors (a map entry as `labels["k"]`), or
  // of its nearest ancestor in the text (a missing required field: the object that lacks it);
  // `line` for "".
  int LineOf(const std::string& path) const;
};

// Every document of `text` (YAML or JSON). A document that is a List
// (`items`) is returned as its items. InvalidArgument, naming the line, when
// the text breaks a rule above.
absl::StatusOr<std::vector<Manifest>> ParseManifestsWithLines(const std::string& text);
// The same, objects only.
absl::StatusOr<std::vector<Json>> ParseManifests(const std::string& text);

// `value` as block-style YAML.
std::string ToYaml(const Json& value);

}  // namespace tessera::cli
