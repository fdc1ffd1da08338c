// CSV splitting shared by the trace loaders (openb, Philly): the traces are
// plain comma-separated files without quoting, one header line naming the
// columns. Errors read "file:line: column N (name): what is wrong".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace tessera::trace {

// Column names of a matched header, for error messages.
using CsvColumns = std::vector<std::string>;

// Calls `visit(line_no, fields, columns) -> absl::Status` for every non-empty
// data line of `text` (trailing whitespace, '\r' included, stripped). The
// first line must equal one of `headers`; `*columns` gets the number of
// columns of the one that matched and every row must have exactly that many.
// Stops at the first error (from the file's shape or from `visit`).
template <typename Visit>
absl::Status ForEachCsvRow(absl::string_view text, absl::string_view file,
                           const std::vector<std::string>& headers, size_t* columns, Visit&& visit);

// "file:line: column N (name): msg".
absl::Status CsvFieldError(absl::string_view file, size_t line, size_t col, const CsvColumns& names,
                           absl::string_view msg);
// Parses field `col` as an integer in [lo, hi] (error names the field).
absl::Status CsvInt(absl::string_view file, size_t line, size_t col, const CsvColumns& names,
                    absl::string_view v, int64_t lo, int64_t hi, int64_t* out);
// Parses field `col` as a finite number in [lo, hi].
absl::Status CsvDouble(absl::string_view file, size_t line, size_t col, const CsvColumns& names,
                       absl::string_view v, double lo, double hi, double* out);

// Reads a whole file; NotFound "path: cannot open" when it cannot be opened.
absl::StatusOr<std::string> ReadTextFile(const std::string& path);

namespace csv_internal {
// Splits the header check and line iteration out of the template.
absl::Status MatchHeader(absl::string_view first_line, absl::string_view file,
                         const std::vector<std::string>& headers, size_t* columns,
                         CsvColumns* names);
}  // namespace csv_internal

template <typename Visit>
absl::Status ForEachCsvRow(absl::string_view text, absl::string_view file,
                           const std::vector<std::string>& headers, size_t* columns,
                           Visit&& visit) {
  size_t pos = 0;
  size_t line_no = 0;
  CsvColumns names;
  std::vector<absl::string_view> fields;
  bool header = true;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == absl::string_view::npos) end = text.size();
    absl::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    line = absl::StripTrailingAsciiWhitespace(line);
    if (header) {
      header = false;
      absl::Status s = csv_internal::MatchHeader(line, file, headers, columns, &names);
      if (!s.ok()) return s;
      continue;
    }
    if (line.empty()) continue;
    fields.clear();
    for (size_t a = 0;;) {
      size_t comma = line.find(',', a);
      if (comma == absl::string_view::npos) {
        fields.push_back(line.substr(a));
        break;
      }
      fields.push_back(line.substr(a, comma - a));
      a = comma + 1;
    }
    if (fields.size() != *columns) {
      return absl::InvalidArgumentError(absl::StrCat(file, ":", line_no, ": expected ", *columns,
                                                     " columns, got ", fields.size()));
    }
    absl::Status s = visit(line_no, fields, names);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace tessera::trace
