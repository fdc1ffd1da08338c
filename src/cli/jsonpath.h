// kubectl's JSONPath templates and path expressions, for `get -o jsonpath=`,
// `-o custom-columns=` and `--sort-by` (the subset kubectl's documentation uses).
//
// A template is text with {expressions}: `{.items[*].metadata.name}`,
// `{range .items[*]}{.metadata.name}{"\t"}{.status.phase}{"\n"}{end}`. An
// expression is a path of `.field` steps (or `['field.with.dots']`), `[N]`
// (negative from the end), `[*]` and `..field` (recursive descent), or a
// quoted string literal with \n \t \" \\ escapes. A path may yield several
// values; they print separated by a space, strings bare and everything else
// as compact JSON. A missing field yields nothing (kubectl's
// --allow-missing-template-keys=true).
//
// Thread safety: a parsed template is immutable and may be shared.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cli/yaml_json.h"

namespace tessera::cli {

// One step of a path.
struct PathStep {
  enum class Kind { kField, kIndex, kAll, kDescend } kind = Kind::kField;
  std::string field;  // kField, kDescend
  int64_t index = 0;  // kIndex
};

// Parses a path expression (".a.b[0]", "{.a.b}" or "a.b"); InvalidArgument naming the position.
absl::StatusOr<std::vector<PathStep>> ParsePath(absl::string_view expr);
// The values `path` selects in `root` (pointers into it).
std::vector<const Json*> Select(const Json& root, const std::vector<PathStep>& path);
// A value as JSONPath prints it: strings bare, everything else compact JSON.
std::string PrintValue(const Json& v);

class JsonPathTemplate {
 public:
  // InvalidArgument with the position and what was expected on a malformed template (an
  // unclosed brace, a range without end, a bad path).
  static absl::StatusOr<JsonPathTemplate> Parse(absl::string_view text);
  // The template applied to `root`.
  std::string Execute(const Json& root) const;

  struct Node;  // literal text, a path, or a range block

 private:
  std::shared_ptr<const std::vector<Node>> nodes_;
};

}  // namespace tessera::cli
