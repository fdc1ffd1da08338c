#include "trace/csv.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace tessera::trace {

namespace csv_internal {
absl::Status MatchHeader(absl::string_view first_line, absl::string_view file,
                         const std::vector<std::string>& headers, size_t* columns,
                         CsvColumns* names) {
  if (first_line.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(file, ":1: empty file, expected a header"));
  }
  *columns = 0;
  for (const std::string& h : headers) {
    if (first_line == h) *columns = std::count(h.begin(), h.end(), ',') + 1;
  }
  if (*columns == 0) {
    return absl::InvalidArgumentError(absl::StrCat(file, ":1: unexpected header \"", first_line,
                                                   "\"; expected \"",
                                                   absl::StrJoin(headers, "\" or \""), "\""));
  }
  *names = absl::StrSplit(first_line, ',');
  return absl::OkStatus();
}
}  // namespace csv_internal

absl::Status CsvFieldError(absl::string_view file, size_t line, size_t col, const CsvColumns& names,
                           absl::string_view msg) {
  return absl::InvalidArgumentError(
      absl::StrCat(file, ":", line, ": column ", col + 1, " (", names[col], "): ", msg));
}

absl::Status CsvInt(absl::string_view file, size_t line, size_t col, const CsvColumns& names,
                    absl::string_view v, int64_t lo, int64_t hi, int64_t* out) {
  if (!absl::SimpleAtoi(v, out)) {
    return CsvFieldError(file, line, col, names,
                         absl::StrCat("expected an integer, got \"", v, "\""));
  }
  if (*out < lo || *out > hi) {
    return CsvFieldError(file, line, col, names,
                         absl::StrCat("must be in ", lo, "..", hi, ", got ", *out));
  }
  return absl::OkStatus();
}

absl::Status CsvDouble(absl::string_view file, size_t line, size_t col, const CsvColumns& names,
                       absl::string_view v, double lo, double hi, double* out) {
  if (!absl::SimpleAtod(v, out) || !std::isfinite(*out)) {
    return CsvFieldError(file, line, col, names,
                         absl::StrCat("expected a number, got \"", v, "\""));
  }
  if (*out < lo || *out > hi) {
    return CsvFieldError(file, line, col, names,
                         absl::StrCat("must be in ", lo, "..", hi, ", got ", *out));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace tessera::trace
